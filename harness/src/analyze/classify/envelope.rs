//! Step and sawtooth series: judged on what a leak must move.
//!
//! An allocator's moving thresholds and arenas (glibc's mmap threshold, per-request arenas) move a
//! process's memory in steps that come and go; a garbage collector lets garbage gather for a few
//! turns and drops it (a sawtooth). The slope of such a series, its rank interval, the scatter
//! around a line and even the warm-up search depend on where in the run the steps happened to
//! fall, so a clean series can stay `inconclusive` however long it runs, be called `growth`, or
//! flip between verdicts from run to run.
//!
//! A leak must lift everything: the troughs as well as the peaks. So when a series without
//! reloads shows the pattern after its declared warm-up, at least [`MIN_DROPS`] falls by more than
//! [`JUMP_SIGMAS`] noise deviations of a difference (the noise taken again from the differences
//! that are no jump), the troughs and peaks are picked out: in a sawtooth (fewer jumps up than
//! half the drops) the sample each drop lands on and the one it falls from; between steps, every
//! sample from a drop to the next jump up, and from a jump up to the next drop. A straight line
//! is fitted through each (least squares; the standard error from the scatter around the line
//! or, when larger, from the noise of one sample, which is what a single trough or peak
//! carries). The raw samples are used: spike removal and the warm-up search would take a step
//! that comes and goes for a spike or a warm-up. A leak moves both lines by its rate, so their
//! mean slope estimates it, with the interval reported as the slope's. Then:
//!
//! - **growth** when troughs and peaks both rise (one-sided t-test, `p <` the trend level each);
//! - **clean** when the peaks, plus what the slope's upper bound could add by the last turn,
//!   stay within the tolerance;
//! - **plateau** when the level is bounded above the tolerance: the slope's upper bound over the
//!   span stays within the drift a plateau is allowed (`max(T,` [`PLATEAU_DRIFT_FRACTION`]
//!   `* rise)`);
//! - **inconclusive** otherwise, named as the pattern it is.
//!
//! With fewer drops, flat levels between the jumps are judged by `classify/levels.rs`.
//!
//! This applies to a series the line-based decision left inconclusive, and to one it called
//! growth with more than [`MIN_DROPS`] drops whose envelopes show no rise at all (their mean
//! slope's one-sided `p >` [`ENVELOPES_STILL_P`]): steps that happened to fall late look like a trend to the tests on
//! every sample, not to the troughs and peaks. A growth resting on fewer drops, with jumps up
//! too, is inconclusive when the series without its jumps has no positive slope
//! (`growth_in_jumps`). A last sample far beyond every earlier step ([`LAST_JUMP_FACTOR`]) stays
//! a last-sample jump. Clean and plateau also need the slope's upper bound within a `max_growth_per_turn` cap, which
//! is then judged on what a leak must move, not on where the steps fell.

use std::f64::consts::SQRT_2;

use statrs::distribution::{ContinuousCDF, StudentsT};

use super::{
    one_sided_t, Classification, GrowthGate, MetricAnalysis, Prepared, MIN_SIGMA,
    PLATEAU_DRIFT_FRACTION,
};
use crate::analyze::reason::{EnvelopeOutcome, Envelopes, Interval, Pattern, PatternKind, Reason};
use crate::analyze::series::MetricSeries;
use crate::analyze::stats::robust;
use crate::analyze::verdict::PlateauInfo;

/// Fewer drops than this give no judgement on the envelopes (one drop is a one-time step down;
/// a line through the troughs needs three to have a scatter).
pub const MIN_DROPS: usize = 3;
/// A fall of more than this many standard deviations of a difference is a drop, and a rise by as
/// much beyond the median difference a jump up (independent Gaussian noise gives one drop in
/// 4,300 differences).
pub const JUMP_SIGMAS: f64 = 3.5;
/// A last sample that jumps more than this many times the largest jump before it is left to the
/// line-based decision (a step that has just begun or a spike), not taken for the pattern's next
/// step.
pub const LAST_JUMP_FACTOR: f64 = 2.0;
/// A growth resting on a few jumps (see `growth_in_jumps`) stands unless the series without
/// them has a one-sided p-value of rising above this: a slope of zero or less. A looser bar took
/// a slow leak with a few noisy jumps for a step too often.
pub const JUMPS_STILL_P: f64 = 0.5;
/// The lower quartile of the absolute value of a standard normal variable.
const LOWER_QUARTILE_OF_ABS_NORMAL: f64 = 0.3186;
/// A growth the tests on every sample found stands unless the envelopes' mean rise has a
/// one-sided p-value above this: troughs and peaks do not rise at all.
pub const ENVELOPES_STILL_P: f64 = 0.1;

/// Judges a series on its troughs and peaks when it steps up and down or rises and falls in
/// teeth (see the module documentation). Leaves every other analysis as it is.
pub(super) fn judge(series: &MetricSeries, prepared: &Prepared<'_>, analysis: &mut MetricAnalysis) {
    let growth = analysis.classification == Classification::Growth;
    if !(growth || analysis.classification == Classification::Inconclusive)
        || series.epochs.len() != 1
    {
        return;
    }
    let last_jump = match analysis.reason {
        Reason::LastSampleJump { jump, .. } => Some(jump),
        _ => None,
    };
    let options = prepared.options;
    let epoch = &series.epochs[0];
    let kept = |p: &&(u64, u64)| p.0 > options.warmup_turns && p.0 > epoch.start_turn;
    // Reserved at its size: a million points grown by doubling hold up to twice their 16 MB.
    let mut points: Vec<(f64, f64)> = Vec::with_capacity(epoch.points.iter().filter(kept).count());
    points.extend(
        epoch
            .points
            .iter()
            .filter(kept)
            .map(|p| (p.0 as f64, p.1 as f64)),
    );
    // The jumps are found once (a sort of every difference) for every judgement below.
    let Some((jumps, sigma)) = find_jumps(&points, prepared.sigma, prepared.noise_floor) else {
        return;
    };
    let Some(pattern) = pattern_of(&points, &jumps) else {
        // Too few drops for troughs and peaks: flat levels between the jumps, when it is that.
        if super::levels::judge(&points, &jumps, sigma, prepared, analysis)
            || super::levels::judge_switching(&points, &jumps, sigma, prepared, analysis)
        {
            return;
        }
        if growth {
            growth_in_jumps(&points, &jumps, prepared, analysis);
        }
        return;
    };
    // A last sample far beyond every step before it is a step that has just begun or a spike:
    // one more turn tells. One like the others is the pattern's next step.
    let largest_before = jumps
        .drops
        .iter()
        .chain(&jumps.ups)
        .filter(|&&i| i + 1 < points.len())
        .map(|&i| (points[i].1 - points[i - 1].1).abs())
        .fold(0.0, f64::max);
    if last_jump.is_some_and(|jump| jump > LAST_JUMP_FACTOR * largest_before) {
        return;
    }
    let noise_df = points.len().saturating_sub(2).max(1);
    let (troughs, peaks) = envelope_points(&points, pattern.kind, &jumps);
    let (Some(troughs), Some(peaks)) = (
        fit_line(&troughs, sigma, noise_df),
        fit_line(&peaks, sigma, noise_df),
    ) else {
        return;
    };
    let both = troughs.mean_with(&peaks);
    // Overruling the tests on every sample takes more drops than judging what they left open.
    if growth && (pattern.drops <= MIN_DROPS || both.p_rising() <= ENVELOPES_STILL_P) {
        super::levels::judge_switching(&points, &jumps, sigma, prepared, analysis);
        return;
    }
    let (Some(&(first, _)), Some(&(last, _))) = (points.first(), points.last()) else {
        return;
    };
    let tolerance = prepared.tolerance();
    let interval = both.interval(0.5 + options.confidence / 2.0, options.confidence);
    let margin = one_sided_t(options.confidence, noise_df)
        * sigma
        * (prepared.baseline_variance() + 1.0 / pattern.drops as f64).sqrt();
    let peak_rise = peaks.level - prepared.baseline as f64;
    let worst_end = peak_rise + margin + interval.hi.max(0.0) * (last - both.centre);
    let within_cap = options
        .max_growth_per_turn
        .is_none_or(|cap| interval.hi <= cap as f64);
    let (trough_p, peak_p) = (troughs.p_rising(), peaks.p_rising());
    let clean = within_cap && worst_end <= tolerance;
    let bounded = within_cap
        && interval.hi.max(0.0) * (last - first)
            <= tolerance.max(PLATEAU_DRIFT_FRACTION * peak_rise);
    // A practically nil slope is no growth when the level decides (as in the parent module).
    let outcome = if trough_p < options.trend_alpha
        && peak_p < options.trend_alpha
        && !(prepared.negligible(interval.hi) && (clean || bounded))
    {
        analysis.classification = Classification::Growth;
        analysis.turns_needed = None;
        EnvelopeOutcome::Rising {
            trough_p,
            peak_p,
            too_small: GrowthGate::new(prepared).judge(interval.lo, interval.hi, analysis),
        }
    } else if clean {
        analysis.classification = Classification::Clean;
        analysis.turns_needed = None;
        EnvelopeOutcome::Clean
    } else if bounded {
        analysis.classification = Classification::Plateau;
        analysis.turns_needed = None;
        analysis.plateau = Some(PlateauInfo {
            size_bytes: peak_rise.round() as i64,
            settled_at_turn: first as u64,
        });
        EnvelopeOutcome::Bounded
    } else {
        if growth {
            analysis.classification = Classification::Inconclusive;
            analysis.growth_matters = None;
        }
        let turns_needed = analysis
            .turns_needed
            .unwrap_or_else(|| prepared.twice_as_long());
        analysis.turns_needed = Some(turns_needed);
        EnvelopeOutcome::Undecided {
            turns_needed: Some(turns_needed),
        }
    };
    if analysis.classification != Classification::Growth {
        analysis.growth_matters = None;
    }
    analysis.slope_bytes_per_turn = both.slope;
    analysis.slope_interval = Some((interval.lo, interval.hi));
    analysis.reason = Reason::Envelope {
        pattern,
        envelopes: Envelopes {
            troughs: interval,
            troughs_slope: troughs.slope,
            peaks_slope: peaks.slope,
            peak_rise,
            worst_end,
            tolerance,
        },
        outcome,
    };
}

/// The drops of `points`, falls by more than [`JUMP_SIGMAS`] noise deviations of a difference
/// (each as the index of the sample it lands on), and the jumps up by as much beyond the typical
/// difference. Falls, not differences below the typical one: a warm-up's shrinking steps are no
/// drops. Read from the first differences of the points (`diffs[i]` lands on point `i + 1`)
/// and their typical value (`centre`, at least 0).
fn jumps_from(
    diffs: impl Iterator<Item = f64> + Clone,
    centre: f64,
    sigma: f64,
) -> (Vec<usize>, Vec<usize>) {
    let threshold = JUMP_SIGMAS * SQRT_2 * sigma.max(MIN_SIGMA);
    // Jumps up are counted from the typical difference: garbage gathering turn by turn is none.
    let beyond = |up: bool| -> Vec<usize> {
        diffs
            .clone()
            .enumerate()
            .filter(|&(_, d)| {
                if up {
                    d - centre > threshold
                } else {
                    d < -threshold
                }
            })
            .map(|(i, _)| i + 1)
            .collect()
    };
    (beyond(false), beyond(true))
}

/// A growth that rests on a few jumps both ways (fewer than [`MIN_DROPS`] drops, at least one
/// jump up and no more than one more than drops: steps that have not all come back yet). When the series without its jumps (every jump's
/// difference taken out of it and the samples after) shows no rise at all (least squares
/// one-sided `p >` [`JUMPS_STILL_P`] against the scatter around the line: its slope is not
/// even positive), it is
/// inconclusive: a longer run tells a step from a leak. Steps up only (a staircase: memory
/// taken in chunks and never given back, or one late step) stay as they were judged.
fn growth_in_jumps(
    points: &[(f64, f64)],
    jumps: &Jumps,
    prepared: &Prepared<'_>,
    analysis: &mut MetricAnalysis,
) {
    let (ups, drops) = (jumps.ups.len(), jumps.drops.len());
    if !(drops >= 1 && ups >= 1 && ups <= drops + 1) {
        return;
    }
    let mut offset = 0.0;
    let stepless: Vec<(f64, f64)> = points
        .iter()
        .enumerate()
        .map(|(i, p)| {
            if i > 0 && (jumps.ups.contains(&i) || jumps.drops.contains(&i)) {
                offset += p.1 - points[i - 1].1;
            }
            (p.0, p.1 - offset)
        })
        .collect();
    let Some(line) = fit_line(&stepless, 0.0, 1) else {
        return;
    };
    let p = line.p_rising();
    if p <= JUMPS_STILL_P {
        return;
    }
    let (turn, size) = jumps
        .ups
        .iter()
        .chain(&jumps.drops)
        .map(|&i| (points[i].0, points[i].1 - points[i - 1].1))
        .max_by(|a, b| a.1.abs().total_cmp(&b.1.abs()))
        .unwrap_or((0.0, 0.0));
    analysis.classification = Classification::Inconclusive;
    analysis.growth_matters = None;
    analysis.turns_needed = Some(prepared.twice_as_long());
    analysis.reason = Reason::RoseInJumps {
        ups,
        drops,
        largest: size,
        at_turn: turn as u64,
        slope_without: line.slope,
        p,
    };
}

/// The drops and jumps up of a series, each as the index of the sample it lands on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Jumps {
    /// Falls.
    pub drops: Vec<usize>,
    /// Rises.
    pub ups: Vec<usize>,
}

/// A `(turn, value)` sample.
type Point = (f64, f64);

/// The troughs and the peaks of a pattern. In a sawtooth the trough is the sample a drop lands
/// on and the peak the one it falls from; between steps the level holds, so every sample from a
/// drop to the next jump up is a trough and every sample from a jump up to the next drop a peak
/// (samples before the first jump belong to neither).
fn envelope_points(
    points: &[(f64, f64)],
    kind: PatternKind,
    jumps: &Jumps,
) -> (Vec<Point>, Vec<Point>) {
    match kind {
        PatternKind::Sawtooth => (
            jumps.drops.iter().map(|&i| points[i]).collect(),
            jumps.drops.iter().map(|&i| points[i - 1]).collect(),
        ),
        PatternKind::Steps => {
            let (mut troughs, mut peaks) = (Vec::new(), Vec::new());
            let mut low = None;
            for (i, point) in points.iter().enumerate() {
                if jumps.drops.contains(&i) {
                    low = Some(true);
                } else if jumps.ups.contains(&i) {
                    low = Some(false);
                }
                match low {
                    Some(true) => troughs.push(*point),
                    Some(false) => peaks.push(*point),
                    None => {}
                }
            }
            (troughs, peaks)
        }
    }
}

/// The jumps of `points` and the noise of one sample. They are found against `sigma` (the
/// classifier's noise, which jumps inflate) or, when smaller, the scale of the quietest quarter
/// of the differences, then again against the noise of the differences that are no jump (at
/// least `floor`, the metric's resolution, in both).
pub(super) fn find_jumps(points: &[(f64, f64)], sigma: f64, floor: f64) -> Option<(Jumps, f64)> {
    // Where steps are frequent they inflate any scale of all the differences (a Gaussian's lower
    // quartile of absolute deviations is 0.3186 of its standard deviation).
    // The differences are read from the points for every statistic (counting passes, not
    // sorted copies: a million differences are 8 MB a copy).
    let diffs = || points.windows(2).map(|w| w[1].1 - w[0].1);
    let centre = robust::median_streamed(diffs)?;
    let at = points.len().saturating_sub(1) / 4;
    let quartile = robust::order_statistic_streamed(|| diffs().map(|d| (d - centre).abs()), at)?
        / LOWER_QUARTILE_OF_ABS_NORMAL
        / SQRT_2;
    let (drops, ups) = jumps_from(diffs(), centre.max(0.0), sigma.min(quartile).max(floor));
    if drops.is_empty() && ups.is_empty() {
        return None;
    }
    // The quiet differences, those between the jumps (both lists in increasing order).
    let quiet = || {
        let (mut d, mut u) = (drops.iter().peekable(), ups.iter().peekable());
        diffs().enumerate().filter_map(move |(i, diff)| {
            let lands = i + 1;
            while d.next_if(|&&x| x < lands).is_some() {}
            while u.next_if(|&&x| x < lands).is_some() {}
            (d.peek() != Some(&&lands) && u.peek() != Some(&&lands)).then_some(diff)
        })
    };
    let sigma = robust::noise_sigma_streamed(quiet).max(floor).min(sigma);
    let (drops, ups) = jumps_from(diffs(), centre.max(0.0), sigma);
    Some((Jumps { drops, ups }, sigma))
}

/// The pattern `jumps` make in `points`, when there are at least [`MIN_DROPS`] drops.
pub(super) fn pattern_of(points: &[(f64, f64)], jumps: &Jumps) -> Option<Pattern> {
    let Jumps { drops, ups } = jumps;
    if drops.len() < MIN_DROPS {
        return None;
    }
    let sizes: Vec<f64> = drops
        .iter()
        .map(|&i| points[i - 1].1 - points[i].1)
        .collect();
    // Garbage gathers turn by turn and drops at once; an allocator's level jumps both ways.
    let kind = if 2 * ups.len() < drops.len() {
        PatternKind::Sawtooth
    } else {
        PatternKind::Steps
    };
    Some(Pattern {
        kind,
        drops: drops.len(),
        typical_drop: robust::median(&sizes).unwrap_or(0.0),
    })
}

/// A straight line through one envelope.
#[derive(Debug, Clone, Copy)]
struct Line {
    slope: f64,
    /// The fitted level at the mean turn of its points.
    level: f64,
    /// The mean turn of its points.
    centre: f64,
    se: f64,
    df: f64,
}

impl Line {
    /// The one-sided p-value of "not rising".
    fn p_rising(&self) -> f64 {
        slope_p_rising(self.slope, self.se, self.df)
    }

    /// The mean of two lines' slopes and levels (independent errors).
    fn mean_with(&self, other: &Line) -> Line {
        Line {
            slope: (self.slope + other.slope) / 2.0,
            level: (self.level + other.level) / 2.0,
            centre: (self.centre + other.centre) / 2.0,
            se: (self.se.powi(2) + other.se.powi(2)).sqrt() / 2.0,
            df: self.df.min(other.df),
        }
    }

    /// The slope's two-sided interval at `quantile` (`0.5 + confidence / 2`).
    fn interval(&self, quantile: f64, confidence: f64) -> Interval {
        slope_interval(self.slope, self.se, self.df, quantile, confidence)
    }
}

/// The one-sided p-value of "not rising" for a least-squares `slope` with standard error `se`
/// on Student t with `df` degrees of freedom (a zero `se`: the slope's sign decides).
pub(super) fn slope_p_rising(slope: f64, se: f64, df: f64) -> f64 {
    if se <= 0.0 {
        return if slope > 0.0 { 0.0 } else { 1.0 };
    }
    StudentsT::new(0.0, 1.0, df).map_or(1.0, |t| 1.0 - t.cdf(slope / se))
}

/// The two-sided interval of such a slope at `quantile` (`0.5 + confidence / 2`).
pub(super) fn slope_interval(
    slope: f64,
    se: f64,
    df: f64,
    quantile: f64,
    confidence: f64,
) -> Interval {
    let t = StudentsT::new(0.0, 1.0, df)
        .map(|d| d.inverse_cdf(quantile))
        .unwrap_or(f64::INFINITY);
    Interval {
        confidence,
        lo: slope - t * se,
        hi: slope + t * se,
        kind: None,
    }
}

/// Least squares through `points`; the standard error from the scatter around the line (Student
/// t on `n - 2` degrees of freedom) or, when larger, from `sigma`, the noise of one sample (on
/// the noise estimate's degrees of freedom).
fn fit_line(points: &[(f64, f64)], sigma: f64, noise_df: usize) -> Option<Line> {
    let n = points.len() as f64;
    let mx = points.iter().map(|p| p.0).sum::<f64>() / n;
    let my = points.iter().map(|p| p.1).sum::<f64>() / n;
    let sxx: f64 = points.iter().map(|p| (p.0 - mx).powi(2)).sum();
    if sxx <= 0.0 || points.len() < 3 {
        return None;
    }
    let slope = points.iter().map(|(x, y)| (x - mx) * (y - my)).sum::<f64>() / sxx;
    let rss: f64 = points
        .iter()
        .map(|(x, y)| (y - my - slope * (x - mx)).powi(2))
        .sum();
    let scatter = (rss / (n - 2.0)).sqrt();
    let (spread, df) = if scatter > sigma {
        (scatter, n - 2.0)
    } else {
        (sigma, noise_df.max(1) as f64)
    };
    Some(Line {
        slope,
        level: my,
        centre: mx,
        se: spread / sxx.sqrt(),
        df,
    })
}

#[cfg(test)]
mod tests;
