//! Memory that moves between flat levels in a few jumps: the level split.
//!
//! An allocator's level that switched once after the warm-up and stayed (glibc's mmap threshold
//! moving, an arena mapped for the first larger request), or switched up and down a few times,
//! has too few drops for the troughs and peaks (`classify/envelope.rs`, [`MIN_DROPS`]), yet the
//! tests on every sample see a trend in it: a level that switched up late reads as a rise to a
//! rank test. A leak differs from such a series inside its levels: it keeps rising between the
//! jumps, a step does not.
//!
//! So, for a series without reloads that shows at least one jump after its declared warm-up (as
//! `envelope::find_jumps` finds them) but fewer than [`MIN_DROPS`] drops, and whose jumps come
//! and go (at most one more jump up than drops: a staircase of jumps up only is memory taken in
//! chunks and is left as it was judged), and where every level between the jumps holds at least
//! [`MIN_LEVEL_SAMPLES`] samples, the samples are split at the jumps into levels, and one
//! common slope is fitted inside all of them (least squares with a level of its own for each
//! segment; the standard error from the scatter around the levels or, when larger, from the
//! noise of one sample). Then, for a series the tests called `growth` or left `inconclusive`
//! (never one they named a last-sample jump or a late step):
//!
//! - a slope inside the levels significant at the trend level (`p <` the trend alpha) leaves the
//!   tests' word as it is: a leak under a step;
//! - **clean** when every level, plus what the slope's upper bound could add by the last turn,
//!   stays within the tolerance;
//! - **plateau** when the last level is beyond the tolerance even at its lower bound and the
//!   slope's upper bound over the span stays within the drift a plateau is allowed (`max(T,`
//!   [`PLATEAU_DRIFT_FRACTION`] `* rise)`), for a series that came back down at least once (one
//!   jump up and nothing else is the late step below);
//! - a single jump up with the later level beyond the tolerance is the **late step** it is
//!   (inconclusive: a wider warm-up decides it), when the slope inside the levels is not even
//!   positive (`p >` [`JUMPS_STILL_P`]).
//!
//! A `growth` is overruled only when the slope inside the levels shows no rise at all (one-sided
//! `p >` [`ENVELOPES_STILL_P`]), the bar the envelopes' overruling uses; and clean and plateau
//! also need the slope's upper bound within a `max_growth_per_turn` cap. Whatever is left is
//! judged as before (`envelope::growth_in_jumps`).
//!
//! **Switching levels** ([`judge_switching`]): an allocator that switches back and forth
//! between two or three levels often enough leaves levels of one or two samples, which the split
//! above cannot judge, and when it happens to sit on its upper level more in the second half,
//! the tests on every sample read a trend. Such a series is told by its values: they fall into
//! [`MAX_SWITCH_LEVELS`] or fewer groups separated by gaps wider than a jump
//! ([`JUMP_SIGMAS`] standard deviations of a difference), every group holding at least
//! [`MIN_LEVEL_SAMPLES`] samples and seen in at least two separate stretches of turns (left and
//! come back to). Then one common slope is fitted inside the groups (a level of its own for
//! each), and a `growth` whose slope there shows no rise at all (`p >` [`ENVELOPES_STILL_P`]) is
//! clean or plateau by the same rules as above (plateau: the highest level beyond the tolerance,
//! not climbing). A leak moves every level, so its slope inside them stays; a steady leak has no
//! gaps in its values and is never grouped.

use std::f64::consts::SQRT_2;

use super::envelope::{
    slope_interval, slope_p_rising, Jumps, ENVELOPES_STILL_P, JUMPS_STILL_P, JUMP_SIGMAS, MIN_DROPS,
};
use super::{one_sided_t, Classification, MetricAnalysis, Prepared, PLATEAU_DRIFT_FRACTION};
use crate::analyze::reason::{Interval, LevelsOutcome, Reason};
use crate::analyze::verdict::PlateauInfo;

/// The fewest samples every level must hold for the split to judge a series.
pub(super) const MIN_LEVEL_SAMPLES: usize = 3;

/// Judges `points` (the raw samples after the warm-up) as flat levels between jumps when they
/// are that (see the module documentation); true when it changed the analysis.
pub(super) fn judge(
    points: &[(f64, f64)],
    jumps: &Jumps,
    sigma: f64,
    prepared: &Prepared<'_>,
    analysis: &mut MetricAnalysis,
) -> bool {
    let growth = analysis.classification == Classification::Growth;
    let undecided = analysis.classification == Classification::Inconclusive
        && !matches!(
            analysis.reason,
            Reason::LastSampleJump { .. } | Reason::LateStep { .. }
        );
    if !(growth || undecided) {
        return false;
    }
    let (ups, drops) = (jumps.ups.len(), jumps.drops.len());
    if drops >= MIN_DROPS || ups > drops + 1 || ups + drops == 0 {
        return false;
    }
    let segments = split(points, jumps);
    // A jump at the last sample is a step that has just begun (or a spike): one more turn tells.
    if segments.last().is_none_or(|s| s.len() < 2) {
        return false;
    }
    // A level is flat only if it is seen flat: with fewer samples in a level, the "jumps" of a
    // short, noisy series are its noise, and fitting a slope inside such levels would discard
    // the very rise a leak makes (a 1 MiB/turn leak under 4 MiB of noise over 6 turns read
    // "2 up, 1 down" and passed as a plateau).
    if segments.iter().any(|s| s.len() < MIN_LEVEL_SAMPLES) {
        return false;
    }
    let Some(fit) = Fit::new(&segments, sigma, points.len().saturating_sub(2).max(1)) else {
        return false;
    };
    let options = prepared.options;
    let p = fit.p_rising();
    let overrule_bar = if growth {
        ENVELOPES_STILL_P
    } else {
        options.trend_alpha
    };
    if p <= overrule_bar
        && !prepared.negligible(
            fit.interval(0.5 + options.confidence / 2.0, options.confidence)
                .hi,
        )
    {
        return false;
    }
    let Some(last_level) = fit.levels.last().copied() else {
        return false;
    };
    let interval = fit.interval(0.5 + options.confidence / 2.0, options.confidence);
    let bounds = bounds(&fit, last_level, interval, points, sigma, prepared);
    let (turn, size) = largest_jump(points, jumps);
    let outcome = match bounds {
        Some(outcome @ LevelsOutcome::Clean { .. }) => outcome,
        _ if ups == 1 && drops == 0 => {
            if !(growth && p > JUMPS_STILL_P) {
                return false;
            }
            analysis.classification = Classification::Inconclusive;
            analysis.growth_matters = None;
            analysis.turns_needed = None;
            analysis.reason = Reason::LateStep {
                turn: turn as u64,
                size,
                noise: sigma,
            };
            return true;
        }
        Some(outcome) => outcome,
        None => return false,
    };
    apply(analysis, outcome, &fit, interval, last_level);
    analysis.reason = Reason::FlatLevels {
        ups,
        drops,
        largest: size,
        at_turn: turn as u64,
        interval,
        p,
        tolerance: prepared.tolerance(),
        outcome,
    };
    true
}

/// The most value levels a series may switch between for [`judge_switching`] to judge it.
pub(super) const MAX_SWITCH_LEVELS: usize = 3;

/// Judges a `growth` of `points` (the raw samples after the warm-up) that switches back and
/// forth between a few value levels (see the module documentation); true when it changed the
/// analysis.
pub(super) fn judge_switching(
    points: &[(f64, f64)],
    jumps: &Jumps,
    sigma: f64,
    prepared: &Prepared<'_>,
    analysis: &mut MetricAnalysis,
) -> bool {
    if analysis.classification != Classification::Growth {
        return false;
    }
    let (ups, drops) = (jumps.ups.len(), jumps.drops.len());
    if drops == 0 || ups == 0 || ups > drops + 1 {
        return false;
    }
    let Some(groups) = switching_levels(points, JUMP_SIGMAS * SQRT_2 * sigma) else {
        return false;
    };
    let Some(fit) = Fit::new(&groups, sigma, points.len().saturating_sub(2).max(1)) else {
        return false;
    };
    let options = prepared.options;
    let p = fit.p_rising();
    let interval = fit.interval(0.5 + options.confidence / 2.0, options.confidence);
    if p <= ENVELOPES_STILL_P && !prepared.negligible(interval.hi) {
        return false;
    }
    let Some(top) = fit
        .levels
        .iter()
        .copied()
        .max_by(|a, b| a.level.total_cmp(&b.level))
    else {
        return false;
    };
    let Some(outcome) = bounds(&fit, top, interval, points, sigma, prepared) else {
        return false;
    };
    apply(analysis, outcome, &fit, interval, top);
    let lowest = fit
        .levels
        .iter()
        .map(|l| l.level)
        .fold(f64::INFINITY, f64::min);
    let step = top.level - lowest;
    analysis.reason = Reason::SwitchingLevels {
        levels: fit.levels.len(),
        switches: ups + drops,
        step,
        interval,
        p,
        tolerance: prepared.tolerance(),
        outcome,
    };
    true
}

/// What flat levels show against the tolerance (the rules of the module documentation):
/// `Clean` when every level, plus what the slope's upper bound adds by the last turn, stays
/// within the tolerance; `Bounded` when `judged` (the level that decides: the last, or the
/// highest) stands beyond it even at its lower bound and the slope's upper bound over the
/// span stays within the drift a plateau is allowed; `None` otherwise, or when the slope's
/// upper bound breaks a `max_growth_per_turn` cap.
fn bounds(
    fit: &Fit,
    judged: Level,
    interval: Interval,
    points: &[(f64, f64)],
    sigma: f64,
    prepared: &Prepared<'_>,
) -> Option<LevelsOutcome> {
    let (&(first, _), &(last, _)) = (points.first()?, points.last()?);
    let options = prepared.options;
    let hi = interval.hi.max(0.0);
    let t1 = one_sided_t(options.confidence, fit.df as usize);
    let baseline = prepared.baseline as f64;
    let margin =
        |count: usize| t1 * sigma * (prepared.baseline_variance() + 1.0 / count as f64).sqrt();
    let worst_end = fit
        .levels
        .iter()
        .map(|l| l.level - baseline + margin(l.count) + hi * (last - l.centre))
        .fold(f64::NEG_INFINITY, f64::max);
    let rise = judged.level - baseline;
    let tolerance = prepared.tolerance();
    let within_cap = options
        .max_growth_per_turn
        .is_none_or(|cap| interval.hi <= cap as f64);
    if within_cap && worst_end <= tolerance {
        Some(LevelsOutcome::Clean { worst_end })
    } else if within_cap
        && rise - margin(judged.count) > tolerance
        && hi * (last - first) <= tolerance.max(PLATEAU_DRIFT_FRACTION * rise)
    {
        Some(LevelsOutcome::Bounded { rise })
    } else {
        None
    }
}

/// Sets `analysis` to what the levels show: its class word, the plateau (`judged` the level it
/// settled at) and the slope inside the levels.
fn apply(
    analysis: &mut MetricAnalysis,
    outcome: LevelsOutcome,
    fit: &Fit,
    interval: Interval,
    judged: Level,
) {
    match outcome {
        LevelsOutcome::Clean { .. } => analysis.classification = Classification::Clean,
        LevelsOutcome::Bounded { rise } => {
            analysis.classification = Classification::Plateau;
            analysis.plateau = Some(PlateauInfo {
                size_bytes: rise.round() as i64,
                settled_at_turn: judged.first_turn as u64,
            });
        }
    }
    analysis.growth_matters = None;
    analysis.turns_needed = None;
    analysis.slope_bytes_per_turn = fit.slope;
    analysis.slope_interval = Some((interval.lo, interval.hi));
}

/// The samples of `points` grouped by value: sorted, and cut wherever two neighbouring values
/// lie more than `gap` apart; each group in turn order, the groups from the lowest. `None`
/// unless there are 2 to [`MAX_SWITCH_LEVELS`] groups, each of at least [`MIN_LEVEL_SAMPLES`]
/// samples and seen in at least two separate stretches of turns.
fn switching_levels(points: &[(f64, f64)], gap: f64) -> Option<Vec<Vec<(f64, f64)>>> {
    if gap.is_nan() || gap <= 0.0 {
        return None;
    }
    let mut order: Vec<usize> = (0..points.len()).collect();
    order.sort_by(|&a, &b| points[a].1.total_cmp(&points[b].1));
    let mut group_of = vec![0usize; points.len()];
    let mut groups = 1;
    for pair in order.windows(2) {
        if points[pair[1]].1 - points[pair[0]].1 > gap {
            groups += 1;
        }
        group_of[pair[1]] = groups - 1;
    }
    if !(2..=MAX_SWITCH_LEVELS).contains(&groups) {
        return None;
    }
    let mut stretches = vec![0usize; groups];
    for (i, &g) in group_of.iter().enumerate() {
        if i == 0 || group_of[i - 1] != g {
            stretches[g] += 1;
        }
    }
    let mut members: Vec<Vec<(f64, f64)>> = vec![Vec::new(); groups];
    for (point, &g) in points.iter().zip(&group_of) {
        members[g].push(*point);
    }
    let switching = members
        .iter()
        .zip(&stretches)
        .all(|(m, &s)| m.len() >= MIN_LEVEL_SAMPLES && s >= 2);
    switching.then_some(members)
}

/// The segments of `points` between its jumps (each jump starts a new one).
fn split(points: &[(f64, f64)], jumps: &Jumps) -> Vec<Vec<(f64, f64)>> {
    let mut cuts: Vec<usize> = jumps.ups.iter().chain(&jumps.drops).copied().collect();
    cuts.sort_unstable();
    let mut segments = Vec::new();
    let mut start = 0;
    for cut in cuts.into_iter().chain(std::iter::once(points.len())) {
        if cut > start {
            segments.push(points[start..cut].to_vec());
        }
        start = cut;
    }
    segments
}

/// The largest jump (its turn and signed size).
fn largest_jump(points: &[(f64, f64)], jumps: &Jumps) -> (f64, f64) {
    jumps
        .ups
        .iter()
        .chain(&jumps.drops)
        .map(|&i| (points[i].0, points[i].1 - points[i - 1].1))
        .max_by(|a, b| a.1.abs().total_cmp(&b.1.abs()))
        .unwrap_or((0.0, 0.0))
}

/// One level: its fitted value at its mean turn.
#[derive(Debug, Clone, Copy)]
struct Level {
    level: f64,
    centre: f64,
    count: usize,
    first_turn: f64,
}

/// One slope common to every segment, each with a level of its own.
#[derive(Debug, Clone)]
struct Fit {
    slope: f64,
    se: f64,
    df: f64,
    levels: Vec<Level>,
}

impl Fit {
    /// Least squares with a level per segment; the standard error from the scatter around the
    /// fitted levels (on `n - k - 1` degrees of freedom for `n` samples in `k` segments) or,
    /// when larger, from `sigma` (on `noise_df`).
    fn new(segments: &[Vec<(f64, f64)>], sigma: f64, noise_df: usize) -> Option<Self> {
        let (mut sxx, mut sxy, mut n) = (0.0, 0.0, 0usize);
        let mut levels = Vec::with_capacity(segments.len());
        for segment in segments {
            let m = segment.len() as f64;
            let mx = segment.iter().map(|p| p.0).sum::<f64>() / m;
            let my = segment.iter().map(|p| p.1).sum::<f64>() / m;
            for (x, y) in segment {
                sxx += (x - mx).powi(2);
                sxy += (x - mx) * (y - my);
            }
            n += segment.len();
            levels.push(Level {
                level: my,
                centre: mx,
                count: segment.len(),
                first_turn: segment.first()?.0,
            });
        }
        let df = n as f64 - segments.len() as f64 - 1.0;
        if sxx <= 0.0 || df < 1.0 {
            return None;
        }
        let slope = sxy / sxx;
        let rss: f64 = segments
            .iter()
            .zip(&levels)
            .flat_map(|(s, l)| {
                s.iter()
                    .map(move |(x, y)| (y - l.level - slope * (x - l.centre)).powi(2))
            })
            .sum();
        let scatter = (rss / df).sqrt();
        let (spread, df) = if scatter > sigma {
            (scatter, df)
        } else {
            (sigma, noise_df.max(1) as f64)
        };
        Some(Self {
            slope,
            se: spread / sxx.sqrt(),
            df,
            levels,
        })
    }

    /// The one-sided p-value of "not rising".
    fn p_rising(&self) -> f64 {
        slope_p_rising(self.slope, self.se, self.df)
    }

    /// The slope's two-sided interval at `quantile` (`0.5 + confidence / 2`).
    fn interval(&self, quantile: f64, confidence: f64) -> Interval {
        slope_interval(self.slope, self.se, self.df, quantile, confidence)
    }
}

#[cfg(test)]
mod tests;
