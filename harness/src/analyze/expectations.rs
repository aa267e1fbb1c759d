//! Checks a scenario's expectations against the analysis: per metric the tolerance, the warm-up
//! budget, the growth limit and the maximum (amounts in the metric's unit: bytes or time), and create/delete balance from the call ledger.
//!
//! - `tolerance`: the fitted level at the last turn (robust to spikes and noise; the highest over
//!   load epochs) must stay within `baseline + warmup_budget + tolerance`.
//! - `warmup_budget`: the one-time rise (fitted steady level at the settling turn minus the
//!   baseline) must stay within the budget. Without a fit (too few samples) the highest sample is
//!   used instead.
//! - `max_growth_per_turn`: judged on the slope's confidence interval, not on the point estimate:
//!   held when its upper bound is within the limit, failed when its lower bound is beyond it,
//!   inconclusive when the limit lies inside it or the slope cannot be bounded (not shown clean,
//!   not shown leaking: a longer run decides).
//! - `max`: no sample of the series may exceed it (a ceiling such as a latency budget).
//! - `balanced`: every kind in the ledger has as many deletes as creates; each unbalanced kind is
//!   its own failed expectation naming the counts and the turn where it went off balance.
//! - `max_live`: a kind bounded by `max_live` is judged by its live count instead of its balance:
//!   the highest count of created-but-not-deleted objects at any turn boundary must stay within
//!   the bound. A bound that matches no kind the run counted fails: the gate cannot show it.

use crate::engine::Ledger;
use crate::scenario::MetricExpectation;

use super::checks::ExpectationKind;
use super::series::MetricSeries;
use super::units::{amount, confidence_percent, signed_amount};
use super::verdict::{ExpectationResult, MetricAnalysis};

/// Checks one metric's expectations.
pub(crate) fn check_metric(
    metric: &str,
    expectation: &MetricExpectation,
    analysis: Option<&MetricAnalysis>,
    series: &MetricSeries,
) -> Vec<ExpectationResult> {
    let mut results = Vec::new();
    let Some(analysis) = analysis.filter(|_| !series.is_empty()) else {
        for (kind, present) in [
            (ExpectationKind::Tolerance, expectation.tolerance.is_some()),
            (
                ExpectationKind::WarmupBudget,
                expectation.warmup_budget.is_some(),
            ),
            (
                ExpectationKind::MaxGrowthPerTurn,
                expectation.max_growth_per_turn.is_some(),
            ),
            (ExpectationKind::Max, expectation.max.is_some()),
        ] {
            if present {
                results.push(ExpectationResult {
                    name: kind.name_for(metric),
                    passed: false,
                    inconclusive: false,
                    expected: format!("samples of `{metric}`"),
                    measured: "no samples of this metric were taken".to_owned(),
                    turn: None,
                    defaulted: false,
                });
            }
        }
        return results;
    };
    let baseline = analysis.baseline as f64;
    let budget = expectation.warmup_budget.unwrap_or(0);
    if let Some(tolerance) = expectation.tolerance {
        let tolerance = tolerance.bytes_for(analysis.baseline);
        let limit = baseline + (budget + tolerance) as f64;
        let end = analysis.fitted_end_bytes.unwrap_or(analysis.last as f64);
        let passed = end <= limit;
        let budget_text = if budget > 0 {
            format!(" + warm-up budget {}", amount(metric, budget as f64))
        } else {
            String::new()
        };
        results.push(ExpectationResult {
            name: ExpectationKind::Tolerance.name_for(metric),
            passed,
            inconclusive: false,
            expected: format!(
                "at most baseline {} + tolerance {}{budget_text} = {}",
                amount(metric, baseline),
                amount(metric, tolerance as f64),
                amount(metric, limit)
            ),
            measured: format!(
                "level {} at the last turn ({} over the baseline)",
                amount(metric, end),
                signed_amount(metric, end - baseline)
            ),
            turn: (!passed).then(|| first_sustained_crossing(series, limit)),
            defaulted: false,
        });
    }
    if let Some(budget) = expectation.warmup_budget {
        let (rise, turn) = match analysis.rise_bytes {
            Some(rise) => (rise, analysis.steady_from_turn),
            None => series
                .points()
                .skip(1)
                .max_by_key(|p| p.1)
                .map_or((0.0, None), |p| (p.1 as f64 - baseline, Some(p.0))),
        };
        let passed = rise <= budget as f64;
        results.push(ExpectationResult {
            name: ExpectationKind::WarmupBudget.name_for(metric),
            passed,
            inconclusive: false,
            expected: format!("one-time rise of at most {}", amount(metric, budget as f64)),
            measured: format!(
                "rose {} by turn {}",
                signed_amount(metric, rise),
                turn.unwrap_or(0)
            ),
            turn: if passed { None } else { turn },
            defaulted: false,
        });
    }
    if let Some(limit) = expectation.max_growth_per_turn {
        let level = confidence_percent(analysis.confidence);
        let (judged, measured) = match analysis.slope_interval {
            Some((lo, hi)) => (
                growth_limit_outcome(lo, hi, limit as f64),
                format!(
                    "{} per turn ({level} CI {}..{})",
                    signed_amount(metric, analysis.slope_bytes_per_turn),
                    signed_amount(metric, lo),
                    signed_amount(metric, hi)
                ),
            ),
            None => (
                Judged::Undecided,
                format!(
                    "cannot be bounded from {} samples ({})",
                    analysis.points,
                    // The reason's sentence is the report layer's; it has no amounts here.
                    crate::report::render_reason(metric, &analysis.reason)
                ),
            ),
        };
        let passed = judged == Judged::Held;
        results.push(ExpectationResult {
            name: ExpectationKind::MaxGrowthPerTurn.name_for(metric),
            passed,
            inconclusive: judged == Judged::Undecided,
            expected: format!(
                "at most {} per turn (upper {level} bound)",
                amount(metric, limit as f64)
            ),
            measured,
            // A turn names where a limit broke (where the growth began); an undecided one broke
            // nowhere.
            turn: if judged == Judged::Broken {
                analysis.growth_from_turn()
            } else {
                None
            },
            defaulted: false,
        });
    }
    if let Some(max) = expectation.max {
        // Judged on every sample, not on a fit: a ceiling (a latency budget) is broken by the
        // one turn that went over it.
        let highest = series.points().max_by_key(|p| p.1);
        let over = series.points().find(|p| p.1 > max);
        results.push(ExpectationResult {
            name: ExpectationKind::Max.name_for(metric),
            passed: over.is_none(),
            inconclusive: false,
            expected: format!("at most {} in every turn", amount(metric, max as f64)),
            measured: match highest {
                Some((turn, value)) => {
                    format!("highest {} at turn {turn}", amount(metric, value as f64))
                }
                None => "no samples".to_owned(),
            },
            turn: over.map(|p| p.0),
            defaulted: false,
        });
    }
    results
}

/// What the data show about one expectation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Judged {
    /// Shown to hold.
    Held,
    /// Shown broken.
    Broken,
    /// Not shown either way.
    Undecided,
}

/// A growth limit against the slope's confidence interval `lo..hi`: held when the whole interval
/// is within it, broken when the whole interval is beyond it, undecided when the limit lies
/// inside (a longer run narrows the interval until one side wins).
pub(crate) fn growth_limit_outcome(lo: f64, hi: f64, limit: f64) -> Judged {
    if hi <= limit {
        Judged::Held
    } else if lo > limit {
        Judged::Broken
    } else {
        Judged::Undecided
    }
}

/// The first turn from which every sample stays above `limit` (the last turn if none does).
fn first_sustained_crossing(series: &MetricSeries, limit: f64) -> u64 {
    let points: Vec<(u64, u64)> = series.points().collect();
    let mut first = points.last().map_or(0, |p| p.0);
    for (turn, value) in points.iter().rev() {
        if (*value as f64) <= limit {
            break;
        }
        first = *turn;
    }
    first
}

/// Whether the `max_live` key `bound` names the ledger kind `kind` (`<source>/<name>`): a key
/// with a `/` names one kind exactly, a bare name that kind from every source.
pub(crate) fn bounds_kind(bound: &str, kind: &str) -> bool {
    if bound.contains('/') {
        bound == kind
    } else {
        kind.rsplit_once('/').map_or(kind, |(_, name)| name) == bound
    }
}

/// The highest live count (created minus deleted, summed from the first turn) of `kind` at any
/// turn boundary, with the first turn that reached it; `None` for a kind the ledger never saw.
fn peak_live(ledger: &Ledger, kind: &str) -> Option<(i128, u32)> {
    let runs = ledger.runs.get(kind)?;
    let mut live = 0i128;
    let mut peak: Option<(i128, u32)> = None;
    for run in runs {
        let step = i128::from(run.created) - i128::from(run.deleted);
        let len = i128::from(run.last_turn.saturating_sub(run.first_turn)) + 1;
        // Within a run the count moves by the same step each turn: its highest point is after
        // the first turn of the run when it falls, after the last when it rises.
        let (at, turn) = if step > 0 {
            (live + step * len, run.last_turn)
        } else {
            (live + step, run.first_turn)
        };
        if peak.is_none_or(|(p, _)| at > p) {
            peak = Some((at, turn));
        }
        live += step * len;
    }
    peak
}

/// Checks `max_live`: one result per ledger kind a bound names (each bound that names no kind
/// the run counted fails).
pub(crate) fn check_max_live(
    ledger: &Ledger,
    max_live: &std::collections::BTreeMap<String, u64>,
) -> Vec<ExpectationResult> {
    let mut results = Vec::new();
    for (bound, &most) in max_live {
        let kinds: Vec<&String> = ledger
            .totals
            .keys()
            .filter(|kind| bounds_kind(bound, kind))
            .collect();
        if kinds.is_empty() {
            results.push(ExpectationResult {
                name: ExpectationKind::MaxLive.name_for(bound),
                passed: false,
                inconclusive: false,
                expected: format!("at most {most} `{bound}` alive at once"),
                measured: format!(
                    "no ledger kind `{bound}` was counted (kinds: {})",
                    ledger
                        .totals
                        .keys()
                        .map(String::as_str)
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
                turn: None,
                defaulted: false,
            });
            continue;
        }
        for kind in kinds {
            let (peak, turn) = peak_live(ledger, kind).unwrap_or((0, 0));
            let passed = peak <= i128::from(most);
            results.push(ExpectationResult {
                name: ExpectationKind::MaxLive.name_for(kind),
                passed,
                inconclusive: false,
                expected: format!("at most {most} `{kind}` alive at once"),
                measured: format!("at most {peak} alive (first reached at turn {turn})"),
                turn: (!passed).then_some(u64::from(turn)),
                defaulted: false,
            });
        }
    }
    results
}

/// Checks create/delete balance of every kind that no `max_live` key bounds: one result per
/// unbalanced kind, or one passing result.
pub(crate) fn check_balanced(
    ledger: &Ledger,
    max_live: &std::collections::BTreeMap<String, u64>,
) -> Vec<ExpectationResult> {
    let bounded = |kind: &str| max_live.keys().any(|b| bounds_kind(b, kind));
    let imbalances: Vec<_> = ledger
        .imbalances()
        .into_iter()
        .filter(|i| !bounded(&i.kind))
        .collect();
    if imbalances.is_empty() {
        return vec![ExpectationResult {
            name: ExpectationKind::Balanced.name_for(""),
            passed: true,
            inconclusive: false,
            expected: "every create has its delete".to_owned(),
            measured: format!("{} kinds balanced", ledger.totals.len()),
            turn: None,
            defaulted: false,
        }];
    }
    imbalances
        .into_iter()
        .map(|i| ExpectationResult {
            name: ExpectationKind::Balanced.name_for(&i.kind),
            passed: false,
            inconclusive: false,
            expected: format!("as many deletes of `{}` as creates", i.kind),
            measured: format!(
                "{} created, {} deleted ({:+} live){}",
                i.created,
                i.deleted,
                i128::from(i.created) - i128::from(i.deleted),
                i.first_turn
                    .map_or_else(String::new, |t| format!(", off balance from turn {t}"))
            ),
            turn: i.first_turn.map(u64::from),
            defaulted: false,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::engine::KindCounts;

    /// A ledger of one `app/conversation` kind from its cumulative counts after each turn.
    fn ledger(cumulative: &[(u64, u64)]) -> Ledger {
        let mut ledger = Ledger::new();
        for (turn, &(created, deleted)) in cumulative.iter().enumerate() {
            let counts =
                BTreeMap::from([("conversation".to_owned(), KindCounts { created, deleted })]);
            ledger
                .absorb_cumulative(turn as u32, "app", &counts)
                .expect("rising counts");
        }
        ledger
    }

    #[test]
    fn a_growth_limit_is_held_broken_or_undecided_by_where_it_lies_in_the_interval() {
        assert_eq!(growth_limit_outcome(-10.0, 90.0, 100.0), Judged::Held);
        assert_eq!(growth_limit_outcome(-10.0, 100.0, 100.0), Judged::Held);
        assert_eq!(growth_limit_outcome(110.0, 190.0, 100.0), Judged::Broken);
        assert_eq!(growth_limit_outcome(50.0, 150.0, 100.0), Judged::Undecided);
        assert_eq!(growth_limit_outcome(100.0, 150.0, 100.0), Judged::Undecided);
    }

    #[test]
    fn the_peak_is_the_highest_live_count_at_a_turn_boundary() {
        // Rises by one a turn to 3, stays, falls to 1, rises to 2.
        let rising = ledger(&[(1, 0), (2, 0), (3, 0), (4, 1), (5, 2), (5, 4), (6, 4)]);
        assert_eq!(peak_live(&rising, "app/conversation"), Some((3, 2)));
        // Opened and closed within every turn: never alive at a boundary.
        let closed = ledger(&[(1, 1), (2, 2), (3, 3)]);
        assert_eq!(peak_live(&closed, "app/conversation"), Some((0, 0)));
        assert_eq!(peak_live(&closed, "app/interpreter"), None);
    }

    #[test]
    fn a_bound_names_a_kind_from_every_source_or_from_one() {
        assert!(bounds_kind("conversation", "sim/conversation"));
        assert!(bounds_kind("conversation", "attach/conversation"));
        assert!(bounds_kind("conversation", "conversation"));
        assert!(!bounds_kind("conversation", "sim/conversations"));
        assert!(bounds_kind("sim/conversation", "sim/conversation"));
        assert!(!bounds_kind("sim/conversation", "attach/conversation"));
    }

    #[test]
    fn a_kind_over_its_bound_fails_at_the_turn_it_first_got_there() {
        let results = check_max_live(
            &ledger(&[(1, 0), (2, 0), (3, 0), (4, 1)]),
            &BTreeMap::from([("conversation".to_owned(), 2)]),
        );
        assert_eq!(results.len(), 1);
        assert!(!results[0].passed);
        assert_eq!(results[0].name, "max_live.app/conversation");
        assert_eq!(
            results[0].measured,
            "at most 3 alive (first reached at turn 2)"
        );
        assert_eq!(results[0].turn, Some(2));
    }
}
