//! `run --baseline`: a run judged against a previous run of the same scenario (an older build).
//! Per metric analysed in both, two checks that fail on a significant rise even when the
//! scenario's absolute expectations still hold:
//! - growth per turn: the new run's interval lies wholly above the baseline's (the lower bound of
//!   the new slope's interval exceeds the upper bound of the old one's: two 95% intervals that do
//!   not overlap);
//! - plateau: the one-time rise grew by more than [`PLATEAU_Z`] times the combined noise of the
//!   two runs (each run's robust per-sample noise scale).
//!
//! Both also need the rise to exceed `min_change`. A fall is never a failure.

use crate::analyze::units::{amount, signed_amount};
use crate::analyze::{ExpectationResult, MetricAnalysis, Verdict};

/// How many combined noise scales a plateau must grow by to count as a rise.
pub const PLATEAU_Z: f64 = 3.0;

/// The checks of `new` against `old` (`label` names the baseline: its build id or folder), one
/// pair per metric analysed in both, in metric order.
pub fn baseline_expectations(
    new: &Verdict,
    old: &Verdict,
    label: &str,
    min_change: f64,
) -> Vec<ExpectationResult> {
    let mut out = Vec::new();
    for (metric, n) in &new.metrics {
        let Some(o) = old.metrics.get(metric) else {
            continue;
        };
        out.push(growth_check(metric, n, o, label, min_change));
        out.push(plateau_check(metric, n, o, label, min_change));
    }
    out
}

/// A metric's slope and interval, in the metric's own unit (a time metric's in ms, not bytes).
fn interval_text(metric: &str, m: &MetricAnalysis) -> String {
    match m.slope_interval {
        Some((lo, hi)) => format!(
            "{}/turn (CI {}..{})",
            signed_amount(metric, m.slope_bytes_per_turn),
            signed_amount(metric, lo),
            signed_amount(metric, hi)
        ),
        None => format!(
            "{}/turn (no interval)",
            signed_amount(metric, m.slope_bytes_per_turn)
        ),
    }
}

fn growth_check(
    metric: &str,
    new: &MetricAnalysis,
    old: &MetricAnalysis,
    label: &str,
    min_change: f64,
) -> ExpectationResult {
    let rise = new.slope_bytes_per_turn - old.slope_bytes_per_turn;
    let separated = match (new.slope_interval, old.slope_interval) {
        (Some((new_lo, _)), Some((_, old_hi))) => new_lo > old_hi,
        // Without intervals (too few points) nothing is significant.
        _ => false,
    };
    let regressed = separated && rise > min_change;
    ExpectationResult {
        name: format!("baseline.{metric}.growth_per_turn"),
        passed: !regressed,
        inconclusive: false,
        expected: format!(
            "no significant rise over baseline {label}: {}{}",
            interval_text(metric, old),
            floor_text(metric, min_change, "/turn")
        ),
        measured: format!(
            "{} ({}/turn against the baseline{})",
            interval_text(metric, new),
            signed_amount(metric, rise),
            if regressed {
                ", the intervals do not overlap"
            } else {
                ""
            }
        ),
        turn: None,
        defaulted: false,
    }
}

fn plateau_of(m: &MetricAnalysis) -> f64 {
    m.plateau.map_or(0.0, |p| p.size_bytes as f64)
}

fn plateau_check(
    metric: &str,
    new: &MetricAnalysis,
    old: &MetricAnalysis,
    label: &str,
    min_change: f64,
) -> ExpectationResult {
    let rise = plateau_of(new) - plateau_of(old);
    let noise = new.noise_bytes.hypot(old.noise_bytes);
    let allowed = (PLATEAU_Z * noise).max(min_change);
    let regressed = rise > allowed;
    ExpectationResult {
        name: format!("baseline.{metric}.plateau"),
        passed: !regressed,
        inconclusive: false,
        expected: format!(
            "a one-time rise at most {} above baseline {label}'s {} ({PLATEAU_Z} x the runs' \
             combined noise {}{})",
            amount(metric, allowed),
            signed_amount(metric, plateau_of(old)),
            amount(metric, noise),
            floor_text(metric, min_change, "")
        ),
        measured: format!(
            "{} ({} against the baseline)",
            signed_amount(metric, plateau_of(new)),
            signed_amount(metric, rise)
        ),
        turn: None,
        defaulted: false,
    }
}

fn floor_text(metric: &str, min_change: f64, unit: &str) -> String {
    if min_change > 0.0 {
        format!(", and a rise over {}{unit}", amount(metric, min_change))
    } else {
        String::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analyze::{Classification, PlateauInfo, VerdictStatus};

    fn verdict(slope: f64, interval: (f64, f64), plateau: Option<i64>) -> Verdict {
        verdict_of("native_heap", slope, interval, plateau)
    }

    fn verdict_of(metric: &str, slope: f64, interval: (f64, f64), plateau: Option<i64>) -> Verdict {
        let analysis = MetricAnalysis {
            classification: Classification::Clean,
            baseline: 100 << 20,
            after_warmup: None,
            last: 100 << 20,
            slope_bytes_per_turn: slope,
            slope_interval: Some(interval),
            confidence: 0.95,
            plateau: plateau.map(|size_bytes| PlateauInfo {
                size_bytes,
                settled_at_turn: 1,
            }),
            turns_needed: None,
            points: 17,
            reason: Default::default(),
            noise_bytes: 10_000.0,
            trend_p_value: None,
            steady_from_turn: None,
            rise_bytes: None,
            fitted_end_bytes: None,
            spike_turns: Vec::new(),
            epochs: 1,
            growth_matters: None,
            keyed_growth: None,
        };
        Verdict {
            attribution: None,
            driver_attribution: None,
            cl_objects: None,
            status: VerdictStatus::Pass,
            metrics: [(metric.to_owned(), analysis)].into(),
            expectations: Vec::new(),
        }
    }

    #[test]
    fn growth_fails_only_when_the_intervals_separate() {
        let old = verdict(100.0, (-800.0, 900.0), None);
        let worse = verdict(6000.0, (5000.0, 7000.0), None);
        let noisy = verdict(600.0, (-200.0, 1400.0), None);
        let checks = baseline_expectations(&worse, &old, "b07", 0.0);
        assert_eq!(checks[0].name, "baseline.native_heap.growth_per_turn");
        assert!(!checks[0].passed, "{checks:#?}");
        assert!(checks[0].expected.contains("b07"));
        assert!(baseline_expectations(&noisy, &old, "b07", 0.0)[0].passed);
        // A fall is no regression.
        assert!(baseline_expectations(&old, &worse, "b07", 0.0)[0].passed);
        // Nor a rise under --baseline-min-change.
        assert!(baseline_expectations(&worse, &old, "b07", 8192.0)[0].passed);
    }

    #[test]
    fn a_plateau_fails_beyond_three_combined_noise_scales() {
        let old = verdict(0.0, (-1.0, 1.0), Some(1 << 20));
        let slightly = verdict(0.0, (-1.0, 1.0), Some((1 << 20) + 30_000));
        let much = verdict(0.0, (-1.0, 1.0), Some((1 << 20) + 60_000));
        assert!(baseline_expectations(&slightly, &old, "b", 0.0)[1].passed);
        let checks = baseline_expectations(&much, &old, "b", 0.0);
        assert_eq!(checks[1].name, "baseline.native_heap.plateau");
        assert!(!checks[1].passed, "{checks:#?}");
    }

    #[test]
    fn metrics_missing_from_the_baseline_are_not_compared() {
        let mut old = verdict(0.0, (-1.0, 1.0), None);
        old.metrics.clear();
        assert!(baseline_expectations(&verdict(0.0, (-1.0, 1.0), None), &old, "b", 0.0).is_empty());
    }

    /// Regression: a time metric's baseline checks were worded in bytes.
    #[test]
    fn a_time_metric_is_compared_in_its_own_unit() {
        let old = verdict_of("turn_time", 1e6, (0.5e6, 1.5e6), None);
        let worse = verdict_of("turn_time", 6e6, (5e6, 7e6), None);
        let checks = baseline_expectations(&worse, &old, "b07", 0.0);
        assert_eq!(
            checks[0].measured,
            "+6.00 ms/turn (CI +5.00 ms..+7.00 ms) (+5.00 ms/turn against the baseline, the \
             intervals do not overlap)"
        );
        assert!(!checks[1].expected.contains('B'), "{}", checks[1].expected);
    }
}
