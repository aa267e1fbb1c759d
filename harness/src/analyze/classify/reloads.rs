//! The classifier's judgement across reloads: memory that each reload leaves behind.
//!
//! The within-epoch tests pool pairs inside each load epoch, so a series whose every epoch is flat
//! but which settles higher after each reload looks flat to them. Here the epochs' steady levels
//! are compared (see [`stats::ratchet`](super::super::stats::ratchet)), after dropping the
//! leading levels that are still settling (an allocator warming up across reloads):
//!
//! - with at least [`MIN_RATCHET_EPOCHS`] settled epochs, a rise of the settled levels with the
//!   one-sided t-test `p <` the trend level ([`super::TREND_ALPHA`] unless a sequential look
//!   spends less) whose later half of the epochs still rises at no less
//!   than [`PERSISTENCE_SLOPE_FRACTION`] of the slope and that is monotone by the Mann-Kendall
//!   test (`p <` [`RATCHET_SPREAD_ALPHA`]: the rise is spread over the epochs, not one step) is
//!   **growth**, reported per turn (the rise per reload divided by the reload period); one that
//!   does not persist or is not spread is inconclusive;
//! - with fewer epochs no growth is claimed; but neither clean nor plateau stands while the fitted
//!   rise of the levels from the first to the last epoch exceeds `max(T,`
//!   [`PLATEAU_DRIFT_FRACTION`] `* rise)` (the same allowance a plateau gets for drift), whatever
//!   the number of epochs: the data then cannot show the memory stays put. This too is judged on
//!   the settled levels: levels that settle after a few reloads and then stay are a plateau.

use super::{
    one_sided_t, Classification, GrowthGate, MetricAnalysis, Prepared, Steady,
    PERSISTENCE_SLOPE_FRACTION, PLATEAU_DRIFT_FRACTION,
};
use crate::analyze::reason::{Interval, RatchetDoubt, Reason, Settled};
use crate::analyze::stats::ratchet::{
    epoch_levels, fitted_rise, ratchet_test, settled_from, EpochLevel,
};

/// Fewer (settled) load epochs than this never give growth across reloads.
pub const MIN_RATCHET_EPOCHS: usize = 4;

/// One-sided significance of the Mann-Kendall test on the settled levels that a ratchet must also
/// reach: a rise carried by one step among flat levels does not (with 4 levels only a strictly
/// rising sequence reaches it, p = 0.045).
pub const RATCHET_SPREAD_ALPHA: f64 = 0.05;

impl Steady {
    /// Every epoch's steady level, compared at the mean steady offset.
    fn epoch_levels(&self, within_slope: f64) -> Vec<EpochLevel> {
        let offsets: Vec<f64> = self
            .blocks
            .iter()
            .zip(&self.epoch_starts)
            .flat_map(|(b, start)| b.iter().map(move |p| p.0 - start))
            .collect();
        let reference = offsets.iter().sum::<f64>() / offsets.len().max(1) as f64;
        epoch_levels(&self.blocks, &self.epoch_starts, within_slope, reference)
    }

    /// The epoch levels from where they settle on, and how many leading levels were dropped.
    fn settled_levels(&self, within_slope: f64, sigma: f64) -> (Vec<EpochLevel>, usize) {
        let mut levels = self.epoch_levels(within_slope);
        let from = settled_from(&levels, sigma, MIN_RATCHET_EPOCHS);
        levels.drain(..from);
        (levels, from)
    }
}

/// Growth (or inconclusive) when the epoch levels ratchet up; `true` when it decided.
pub(super) fn judge_ratchet(
    steady: &Steady,
    prepared: &Prepared<'_>,
    within_slope: f64,
    analysis: &mut MetricAnalysis,
) -> bool {
    let options = prepared.options;
    let (levels, dropped) = steady.settled_levels(within_slope, prepared.sigma);
    if levels.len() < MIN_RATCHET_EPOCHS {
        return false;
    }
    let Some(test) = ratchet_test(&levels, prepared.sigma, options.confidence) else {
        return false;
    };
    let (lo, hi) = test.interval;
    if !(test.p_increasing < options.trend_alpha && lo > 0.0) {
        return false;
    }
    let period = period(options.reload_every, &levels);
    let interval = Interval {
        confidence: options.confidence,
        lo,
        hi,
        kind: None,
    };
    let settled = settled(dropped, &levels);
    let persists = test.later_slope >= PERSISTENCE_SLOPE_FRACTION * test.slope;
    let spread = test.mann_kendall_p < RATCHET_SPREAD_ALPHA;
    if persists && spread {
        analysis.classification = Classification::Growth;
        analysis.slope_bytes_per_turn = test.slope;
        analysis.slope_interval = Some(test.interval);
        analysis.trend_p_value = Some(test.p_increasing);
        analysis.turns_needed = None;
        let too_small = GrowthGate::new(prepared).judge(lo, hi, analysis);
        analysis.reason = Reason::Ratchet {
            step: test.slope * period,
            epochs: test.epochs,
            settled,
            slope: test.slope,
            interval,
            period,
            p: test.p_increasing,
            mann_kendall_p: test.mann_kendall_p,
            within_slope,
            too_small,
        };
    } else {
        analysis.classification = Classification::Inconclusive;
        analysis.turns_needed = Some(prepared.twice_as_long());
        let doubt = if persists {
            RatchetDoubt::NotSpread {
                p: test.mann_kendall_p,
            }
        } else {
            RatchetDoubt::LaterHalfSlower {
                slope: test.later_slope,
            }
        };
        analysis.reason = Reason::RatchetInDoubt {
            epochs: test.epochs,
            settled,
            slope: test.slope,
            interval,
            p: test.p_increasing,
            doubt,
        };
    }
    true
}

/// Whether clean or plateau may stand given the epoch levels; when not, sets the analysis to
/// inconclusive and returns `false`.
pub(super) fn levels_stay_put(
    steady: &Steady,
    prepared: &Prepared<'_>,
    within_slope: f64,
    rise: f64,
    analysis: &mut MetricAnalysis,
) -> bool {
    let (levels, dropped) = steady.settled_levels(within_slope, prepared.sigma);
    let Some(level_rise) = fitted_rise(&levels) else {
        return true;
    };
    let tolerance = prepared.tolerance();
    let allowance = tolerance.max(PLATEAU_DRIFT_FRACTION * rise);
    // The fitted rise of two levels is a difference of two noisy medians.
    let margin = one_sided_t(prepared.options.confidence, prepared.noise_df)
        * prepared.sigma
        * (std::f64::consts::PI
            / levels.iter().map(|l| l.samples.max(1)).min().unwrap_or(1) as f64)
            .sqrt();
    if level_rise - margin <= allowance {
        return true;
    }
    analysis.classification = Classification::Inconclusive;
    analysis.plateau = None;
    let period = period(prepared.options.reload_every, &levels);
    if levels.len() < MIN_RATCHET_EPOCHS {
        let needed =
            (MIN_RATCHET_EPOCHS as f64 - 1.0) * period + prepared.settle.max(1) as f64 + 1.0;
        analysis.turns_needed = Some((needed.ceil() as u64).max(prepared.last_turn + 1));
        analysis.reason = Reason::LevelRoseOverFewEpochs {
            rise: level_rise,
            epochs: levels.len(),
            allowance,
            needed: MIN_RATCHET_EPOCHS,
        };
    } else {
        analysis.turns_needed = Some(prepared.twice_as_long());
        analysis.reason = Reason::LevelRoseNotSignificantly {
            rise: level_rise,
            epochs: levels.len(),
            settled: settled(dropped, &levels),
            allowance,
        };
    }
    false
}

/// Where the levels settled when leading epochs were dropped.
fn settled(dropped: usize, levels: &[EpochLevel]) -> Option<Settled> {
    match levels.first() {
        Some(first) if dropped > 0 => Some(Settled {
            after_turn: first.start_turn,
            dropped,
        }),
        _ => None,
    }
}

/// Turns per reload: the scenario's period, else the mean spacing of the epochs.
fn period(reload_every: u32, levels: &[EpochLevel]) -> f64 {
    if reload_every > 0 {
        return f64::from(reload_every);
    }
    match (levels.first(), levels.last()) {
        (Some(first), Some(last)) if levels.len() > 1 => {
            (last.start_turn - first.start_turn) / (levels.len() - 1) as f64
        }
        _ => 1.0,
    }
}
