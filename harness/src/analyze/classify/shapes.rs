//! Shapes the trend tests alone would misname, and the turns where things happened.
//!
//! The trend tests (the parent module) answer whether the steady part rises. This module answers
//! the questions around that answer, so that a reason says what the series did:
//!
//! - **Onset** ([`onset`]): the first turn from which the samples lie on the steady line. The
//!   warm-up search may set aside more samples than it must (it may keep as little as half the run
//!   and gives a sample up whenever it costs misfit against a small noise estimate); samples
//!   before the steady part that already lie on its line, within [`ONSET_SIGMAS`] noise
//!   deviations (or, for a plateau, half the tolerance; for a growth, one turn's growth, where
//!   that is wider), were settled or rising already. A plateau reports that turn as where it settled, a growth as where it began.
//! - **Shrinking steps** ([`steps_shrink`]): a warm-up still settling shows steps that get
//!   smaller (Mann-Kendall on the steps, one-sided `p <` [`SHRINK_ALPHA`]). One large step at the
//!   (re)load makes that test significant by itself, though it says nothing about the steps after
//!   it (a runtime that maps its arena at the first inference and then leaks a fixed amount per
//!   turn); so the steps after each epoch's largest step in its first half must also shrink to
//!   [`SHRINK_FRACTION`] of their size, median of the later half against median of the earlier,
//!   or to within [`SETTLED_STEP_SIGMAS`] noise deviations of a step of zero.
//! - **Late step** ([`late_step`]): one step up inside the steady part, flat before and after (a
//!   runtime's arena growing once when a request larger than any before arrives). The trend tests
//!   see a slope with a wide interval; the reason names the step, its turn and its size.
//! - **Falling** ([`falling`]): a steady part whose slope interval lies entirely below zero gives
//!   memory back; when its fitted level at the last turn is within the tolerance it is clean,
//!   whatever the noise of a single baseline sample says about the margin.
//! - **Soon after the warm-up** ([`early_growth`]): growth decided over no more turns than twice
//!   the warm-up. A cache that fills more slowly than the warm-up rises the same way until it is
//!   full, which such a run cannot tell; the reason says so.

use super::{Evidence, Prepared, Steady, SPIKE_SIGMAS};
use crate::analyze::reason::EarlyGrowth;
use crate::analyze::stats::mann_kendall::mann_kendall_in_place;
use crate::analyze::stats::{robust, theil_sen};

/// A sample before the steady part lies on its line when it is within this many noise deviations
/// of it (as a spike must leave its neighbours by more).
pub const ONSET_SIGMAS: f64 = SPIKE_SIGMAS;
/// One-sided significance level of the test that the steps shrink.
pub const SHRINK_ALPHA: f64 = super::DECELERATION_ALPHA;
/// The steps after the largest early one must shrink to this fraction of their size...
pub const SHRINK_FRACTION: f64 = 0.5;
/// ...or to within this many noise deviations of a step (`sqrt(2) sigma`) of zero.
pub const SETTLED_STEP_SIGMAS: f64 = 2.0;
/// Each side of a late step keeps at least this many samples.
const MIN_STEP_SIDE: usize = 3;

/// The first turn from which the samples of the first epoch lie on the steady line through
/// `slope` (within `band` of it), never before the declared warm-up nor at the baseline; `None`
/// when the first epoch has no steady part.
pub(super) fn onset(
    prepared: &Prepared<'_>,
    steady: &Steady,
    slope: f64,
    band: f64,
) -> Option<u64> {
    let epoch = prepared.epochs.first().filter(|e| !e.is_empty())?;
    let start_turn = *prepared.epoch_starts.first()?;
    let first_epoch_start = start_turn as f64;
    if steady.epoch_starts.first() != Some(&first_epoch_start) {
        return None;
    }
    let block = steady.blocks.first()?;
    let start = *steady.starts.first()?;
    let residuals: Vec<f64> = block.iter().map(|(x, y)| y - slope * (x - start)).collect();
    let level = robust::median(&residuals)?;
    let floor = prepared.options.warmup_turns.max(1);
    let mut onset = start as u64;
    for &(offset, value) in epoch
        .iter()
        .rev()
        .filter(|p| ((start_turn + p.0) as f64) < start)
    {
        let turn = start_turn + offset;
        let line = level + slope * (turn as f64 - start);
        if offset < floor || (value - line).abs() > band {
            break;
        }
        onset = turn;
    }
    Some(onset)
}

/// The band within which a sample lies on a plateau's level: [`ONSET_SIGMAS`] noise deviations or
/// half the tolerance, whichever is wider (a level within half the tolerance of where it stays has
/// settled for any purpose the tolerance serves).
pub(super) fn plateau_band(prepared: &Prepared<'_>) -> f64 {
    (ONSET_SIGMAS * prepared.sigma).max(prepared.tolerance() / 2.0)
}

/// The band within which a sample lies on a growing line: [`ONSET_SIGMAS`] noise deviations or
/// one turn's growth, whichever is wider (the turn where growth began is named to within a turn).
pub(super) fn growth_band(prepared: &Prepared<'_>, slope: f64) -> f64 {
    (ONSET_SIGMAS * prepared.sigma.max(super::MIN_SIGMA)).max(slope.abs())
}

/// Whether the steps between consecutive samples shrink: a warm-up still settling (see the module
/// documentation). `epochs` are `(offset, value)` per load epoch.
pub(super) fn steps_shrink(epochs: &[Vec<(u64, f64)>], sigma: f64) -> bool {
    let mut steps: Vec<Vec<f64>> = epochs
        .iter()
        .map(|e| e.windows(2).map(|w| w[1].1 - w[0].1).collect())
        .collect();
    // The steps after each epoch's largest early step (a jump at the load, which alone makes the
    // test below significant however equal the steps after it are) must still halve (the median
    // of their later half at most half the median of their earlier half), or have come down to
    // the noise (a warm-up that has all but settled: nothing of a step is left to compare).
    // Their medians are taken first, so that the trend test may then sort the steps in place (a
    // million steps are 8 MB a copy).
    let (mut earlier, mut later) = (Vec::new(), Vec::new());
    for s in &steps {
        let half = s.len().div_ceil(2);
        let largest = s[..half]
            .iter()
            .enumerate()
            .max_by(|a, b| a.1.total_cmp(b.1))
            .map_or(0, |(i, _)| i + 1);
        let rest = &s[largest..];
        let middle = rest.len() / 2;
        earlier.extend_from_slice(&rest[..middle]);
        later.extend_from_slice(&rest[rest.len() - middle..]);
    }
    let halves = (
        robust::median_in_place(&mut earlier),
        robust::median_in_place(&mut later),
    );
    drop((earlier, later));
    let test = mann_kendall_in_place(&mut steps);
    if !(test.z < 0.0 && 1.0 - test.p_increasing < SHRINK_ALPHA) {
        return false;
    }
    match halves {
        (Some(earlier), Some(later)) => {
            let step_noise = std::f64::consts::SQRT_2 * sigma;
            later <= SETTLED_STEP_SIGMAS * step_noise
                || (earlier > 0.0 && later <= SHRINK_FRACTION * earlier)
        }
        _ => false,
    }
}

/// A one-off step up inside the steady part of a single-epoch series.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct LateStep {
    /// The first turn on the higher level.
    pub turn: u64,
    /// The step, between the two levels.
    pub size: f64,
}

/// A single step up inside the steady part, flat before and after (see the module
/// documentation): the split with the smallest misfit of two levels, when the step stands beyond
/// [`SPIKE_SIGMAS`] noise deviations, every sample before it lies below every sample after it by a
/// margin, and neither side drifts by more than a quarter of the step.
pub(super) fn late_step(prepared: &Prepared<'_>, steady: &Steady) -> Option<LateStep> {
    let [block] = steady.blocks.as_slice() else {
        return None;
    };
    let n = block.len();
    if n < 2 * MIN_STEP_SIDE {
        return None;
    }
    let values: Vec<f64> = block.iter().map(|p| p.1).collect();
    let misfit = |side: &[f64]| {
        let mean = side.iter().sum::<f64>() / side.len() as f64;
        side.iter().map(|v| (v - mean).powi(2)).sum::<f64>()
    };
    let split = (MIN_STEP_SIDE..=n - MIN_STEP_SIDE).min_by(|a, b| {
        let cost = |k: usize| misfit(&values[..k]) + misfit(&values[k..]);
        cost(*a).total_cmp(&cost(*b))
    })?;
    let (before, after) = block.split_at(split);
    let level = |side: &[(f64, f64)]| robust::median(&side.iter().map(|p| p.1).collect::<Vec<_>>());
    let size = level(after)? - level(before)?;
    if size <= SPIKE_SIGMAS * prepared.sigma.max(super::MIN_SIGMA) {
        return None;
    }
    let highest_before = before.iter().map(|p| p.1).fold(f64::NEG_INFINITY, f64::max);
    let lowest_after = after.iter().map(|p| p.1).fold(f64::INFINITY, f64::min);
    if lowest_after - highest_before < size / 2.0 {
        return None;
    }
    let flat = |side: &[(f64, f64)]| {
        let span = side.last().map_or(0.0, |p| p.0) - side.first().map_or(0.0, |p| p.0);
        theil_sen::sen_slope(&[side], super::CONFIDENCE)
            .is_some_and(|s| s.slope.abs() * span <= size / 4.0)
    };
    if !(flat(before) && flat(after)) {
        return None;
    }
    Some(LateStep {
        turn: after.first()?.0.round() as u64,
        size,
    })
}

/// Whether an undecided steady part falls: its slope interval lies entirely below zero and its
/// fitted level at the last turn is within the tolerance. Such a series gives memory back; a
/// margin that straddles the tolerance comes from the baseline's noise, not from a leak.
pub(super) fn falling(evidence: &Evidence) -> Option<f64> {
    let end = evidence.rise + evidence.slope * evidence.tail;
    (evidence.hi < 0.0 && end <= evidence.tolerance).then_some(end)
}

/// Growth seen over no more turns than twice the warm-up before it (see the module
/// documentation), for a single-epoch series with a warm-up of at least one turn.
pub(super) fn early_growth(prepared: &Prepared<'_>, steady: &Steady) -> Option<EarlyGrowth> {
    if prepared.epochs.len() != 1 {
        return None;
    }
    let warmup = prepared.steady_from_turn()?;
    let steady_turns = prepared.last_turn.checked_sub(warmup)?;
    (warmup >= 1 && steady.count > 0 && steady_turns <= 2 * warmup).then_some(EarlyGrowth {
        warmup_turns: warmup,
        steady_turns,
    })
}

#[cfg(test)]
mod tests;
