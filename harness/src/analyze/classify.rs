//! Classifies one metric's post-close series as clean, plateau, growth or inconclusive.
//!
//! # Method
//!
//! 1. **Noise.** `sigma` is the robust scale (`Qn`) of the first differences within each load
//!    epoch, scaled to a per-sample standard deviation (see `stats::robust::noise_sigma`).
//!    Differencing removes a steady slope; `Qn` ignores a one-time step and single spikes. Once
//!    the warm-up is found (step 3), `sigma` is re-estimated from the differences after it (when
//!    there are at least five) and the search repeated, because a curved warm-up inflates the
//!    first estimate.
//! 2. **Spikes.** An excursion of one or two samples beyond both neighbours by more than
//!    [`SPIKE_SIGMAS`] `* sigma` (the neighbours agreeing with each other) is replaced by the
//!    line between its neighbours. The baseline and the last sample are never replaced.
//! 3. **Warm-up.** The settling offset `d` after each (re)load is found by a penalised two-segment
//!    search (see [`stats::changepoint`]): samples before `d` are warm-up, from `d` on every epoch
//!    is a straight line. The declared `warmup_turns` are always warm-up; the steady part keeps at
//!    least half of the turns.
//! 4. **Trend.** On the steady part: the Theil-Sen slope pooled over within-epoch pairs, the
//!    Mann-Kendall test summed over epochs (with the ties correction), and Sen's rank-based
//!    interval at [`CONFIDENCE`]. With fewer than [`MIN_RANK_INTERVAL_POINTS`] steady samples, or
//!    when the rank interval cannot be formed, the interval is instead `slope +- t * 1.05 * sigma /
//!    sqrt(Sxx)` (a Student t quantile on the differences' degrees of freedom; 1.05 is the
//!    Theil-Sen standard-error inflation over least squares under Gaussian noise).
//! 5. **Level.** The steady level is the median of `value - slope * (turn - centre)`, taken at the
//!    centre of the steady part where a line is best determined; the rise is that level minus the
//!    baseline, bounded one-sided by `rise +- t * sigma * sqrt(1 + 1/m)` (`m` steady samples; the
//!    baseline is a single sample; `t` on the noise estimate's degrees of freedom).
//!
//! # Decision
//!
//! With `T` the tolerance in bytes, `[lo, hi]` the slope interval, `D` the span of the steady part
//! in turns, `D'` the turns from its centre to its end, `p` the Mann-Kendall p-value:
//!
//! - **growth** if `p <` [`TREND_ALPHA`] (or, where a rank test on so few samples cannot reach
//!   that level, every steady sample stands above the one before, the slope against the noise,
//!   `slope / (1.05 sigma / sqrt(Sxx))` on Student t, reaches it, and the steady part itself
//!   rises more than the tolerance, slope times its span: a noise estimate from so few
//!   differences cannot tell a warm-up still settling from a leak), `lo > 0`, and the rise
//!   persists: the later half of the steady part (of every epoch) does not rise significantly
//!   slower than [`PERSISTENCE_SLOPE_FRACTION`] of the whole part's slope (its Theil-Sen slope is
//!   at least that less `z(1 - `[`PERSISTENCE_ALPHA`]`)` standard errors, from the noise or, when
//!   larger, the later half's scatter around its own line); the least-squares slope is
//!   significant against the scatter around the line (`p <` [`LEAST_SQUARES_ALPHA`]: a sawtooth
//!   is not a leak); no sample set aside as warm-up stands above where the steady line starts
//!   unless the steady line ends clearly above it (a heap that ratchets past its earlier peaks);
//!   and, when the steps shrink from the (re)load on (`p <` [`DECELERATION_ALPHA`], and still
//!   halving after the largest early step: `classify/shapes.rs`), the rise is significant without
//!   the first third of the steady part and the later half's slope is at least
//!   [`PERSISTENCE_SLOPE_FRACTION`] of the whole part's (a point estimate: the shrinking steps
//!   inflate the noise estimate the persistence check's slack rests on). A saturating warm-up whose tail is
//!   still settling after the detected settle turn rises early and stops; a leak keeps rising. A
//!   rise that fails only these checks is inconclusive (a run twice as long would tell). Whether
//!   the growth *matters* (fails `leakloop analyze`) is judged apart: `growth_matters`;
//! - never growth when the slope is practically nil, `hi <= min(T / horizon_turns, cap)` (growth
//!   at that rate stays within the tolerance over the growth gate's horizon, and within a
//!   `max_growth_per_turn` cap), and the level decides clean or plateau (below): a significant
//!   trend of a few bytes per turn (an allocator's bookkeeping in a clean server) would
//!   otherwise make the class word of a clean process `growth` in one run and `clean` in the
//!   next; the reason shows the slope's interval. The same bound applies to the
//!   envelopes (`classify/envelope.rs`) and the level split (`classify/levels.rs`);
//! - a jump of the last sample above the fitted line beyond both [`SPIKE_SIGMAS`] noise deviations
//!   and the tolerance bars clean and plateau;
//! - **clean** if the worst case stays within tolerance: `rise_hi + max(hi, 0) * D' <= T`;
//! - **plateau** if the rise is beyond tolerance even at its lower bound (`rise_lo > T`) and the
//!   worst-case drift after settling is small: `max(hi, 0) * D <= max(T, `
//!   [`PLATEAU_DRIFT_FRACTION`] ` * rise)`;
//! - an undecided series whose slope interval lies below zero and whose fitted level at the last
//!   turn is within `T` is **clean** (memory given back); one whose steady part is a single step
//!   between two flat levels is **inconclusive**, named as that step (`classify/shapes.rs`);
//! - **inconclusive** otherwise, and always with fewer than [`MIN_STEADY_POINTS`] steady samples
//!   or no slope interval. `turns_needed` is the smallest run length at which, with the present
//!   slope, level and noise, one of the three decisions above would be reached with
//!   `PROJECTION_POWER`.
//!
//! With reloads, the epochs' steady levels are also compared (see `classify/reloads.rs`): with at
//! least [`MIN_RATCHET_EPOCHS`] epochs a persistent, significant rise of the levels is **growth**
//! ("each reload leaves X behind", reported per turn); with any number of epochs, a fitted rise of
//! the levels beyond the plateau drift allowance bars clean and plateau.
//!
//! A `max_growth_per_turn` in the options also bars clean and plateau while `hi` exceeds it, so
//! the classification never contradicts the expectation. Without a tolerance the default is
//! [`DEFAULT_TOLERANCE_PERCENT`] of the baseline, at least [`DEFAULT_TOLERANCE_FLOOR`] bytes.
//!
//! The tests assume independent noise between turns. Memory that random-walks (each turn's
//! noise persists) looks like a trend to any such test; the detection benchmark documents the
//! false-positive rate under independent noise only.

use statrs::distribution::{ContinuousCDF, StudentsT};

use super::reason::{Doubt, Interval, IntervalKind, Outlook, Reason, Rise, Significance, TooSmall};
use super::series::MetricSeries;
use super::stats::changepoint::{self, SettleBounds};
use super::stats::mann_kendall::{mann_kendall, standard_normal};
use super::stats::{robust, theil_sen};
use super::verdict::{Classification, MetricAnalysis, PlateauInfo};
use crate::scenario::{Tolerance, MAX_TURNS};

/// One-sided significance level of the Mann-Kendall test for calling growth.
pub const TREND_ALPHA: f64 = 0.005;
/// One-sided significance level the trend must also reach on the later half of the steady part
/// for growth (persistence check).
pub const PERSISTENCE_ALPHA: f64 = 0.1;
/// For growth the later half of the steady part must rise at least this fraction of the slope of
/// the whole (a warm-up decelerates, a leak does not).
pub const PERSISTENCE_SLOPE_FRACTION: f64 = 0.5;
/// One-sided significance level the least-squares slope must also reach for growth, against the
/// scatter around the line: a rank test sees only the order of the samples, so a sawtooth or a
/// few large deviations can look like a trend to it, never to this test.
pub const LEAST_SQUARES_ALPHA: f64 = 0.01;
/// One-sided significance level at which shrinking steps make a series decelerating: growth is
/// then claimed only when the rise is significant without the first third of the steady part.
pub const DECELERATION_ALPHA: f64 = 0.05;
/// Two-sided confidence level of the slope interval (the one-sided bounds on the rise use the
/// same level one-sided).
pub const CONFIDENCE: f64 = 0.95;
/// A spike must leave both neighbours by more than this many noise standard deviations.
pub const SPIKE_SIGMAS: f64 = 4.0;
/// Fewer steady samples than this never give a decision.
pub const MIN_STEADY_POINTS: usize = 3;
/// Below this many steady samples the noise-based interval replaces the rank interval.
pub const MIN_RANK_INTERVAL_POINTS: usize = 8;
/// A plateau may keep drifting by this fraction of its rise over the steady span.
pub const PLATEAU_DRIFT_FRACTION: f64 = 0.1;
/// Default tolerance, in percent of the baseline.
pub const DEFAULT_TOLERANCE_PERCENT: f64 = 1.0;
/// Default tolerance floor, in bytes (1 MiB).
pub const DEFAULT_TOLERANCE_FLOOR: u64 = 1 << 20;
/// Default horizon of the growth gate, in turns.
pub const DEFAULT_HORIZON_TURNS: u64 = 1000;

/// Standard error of Theil-Sen relative to least squares under Gaussian noise (efficiency ~0.91).
const THEIL_SEN_SE_FACTOR: f64 = 1.05;
/// Epochs longer than this are reduced to medians of consecutive groups before the pairwise rank
/// statistics.
const MAX_POINTS_PER_EPOCH: usize = 2000;
/// The most within-epoch pairs the rank statistics see over all epochs together (those of one
/// epoch of [`MAX_POINTS_PER_EPOCH`] samples, about 2 million): with many long reload epochs
/// every epoch is reduced further, so the cost of an analysis stays linear in its samples.
const MAX_PAIRS: usize = MAX_POINTS_PER_EPOCH * (MAX_POINTS_PER_EPOCH - 1) / 2;
/// Mann-Kendall cannot reach [`TREND_ALPHA`] with fewer samples than this.
const MIN_GROWTH_POINTS: usize = 6;
/// The steady part re-estimates the noise only from at least this many differences.
const MIN_NOISE_DIFFS: usize = 5;
/// Noise below one byte is treated as one byte (memory is counted in bytes).
const MIN_SIGMA: f64 = 1.0;

/// What the classifier needs besides the series.
#[derive(Debug, Clone, PartialEq)]
pub struct ClassifyOptions {
    /// Allowed distance from the baseline; `None` uses the default.
    pub tolerance: Option<Tolerance>,
    /// Turns declared as warm-up (always excluded from the trend).
    pub warmup_turns: u64,
    /// The largest acceptable growth per turn, if the scenario states one.
    pub max_growth_per_turn: Option<u64>,
    /// Reload period in turns (0 = never); used to project `turns_needed`.
    pub reload_every: u32,
    /// Without `max_growth_per_turn`, growth matters when its lower bound over this many turns
    /// exceeds the tolerance (the growth gate; see [`MetricAnalysis::growth_matters`]).
    pub horizon_turns: u64,
    /// Two-sided confidence level of the slope interval.
    pub confidence: f64,
    /// One-sided level of the trend test for growth ([`TREND_ALPHA`] unless a sequential look
    /// spends less).
    pub trend_alpha: f64,
}

impl Default for ClassifyOptions {
    fn default() -> Self {
        Self {
            tolerance: None,
            warmup_turns: 0,
            max_growth_per_turn: None,
            reload_every: 0,
            horizon_turns: DEFAULT_HORIZON_TURNS,
            confidence: CONFIDENCE,
            trend_alpha: TREND_ALPHA,
        }
    }
}

impl ClassifyOptions {
    /// The tolerance in bytes for a baseline.
    pub fn tolerance_bytes(&self, baseline: u64) -> u64 {
        match self.tolerance {
            Some(t) => t.bytes_for(baseline),
            None => Tolerance::Percent(DEFAULT_TOLERANCE_PERCENT)
                .bytes_for(baseline)
                .max(DEFAULT_TOLERANCE_FLOOR),
        }
    }
}

/// Classifies a metric's post-close series.
pub fn classify(series: &MetricSeries, options: &ClassifyOptions) -> MetricAnalysis {
    if let Some(turn) = series.points().find(|p| p.1 == u64::MAX).map(|p| p.0) {
        // A counter stuck at the top of its range says nothing about the memory any more.
        return MetricAnalysis {
            baseline: series.points().next().map_or(0, |p| p.1),
            last: series.points().last().map_or(0, |p| p.1),
            points: series.len(),
            epochs: series.epochs.len() as u32,
            reason: Reason::Saturated { turn },
            ..MetricAnalysis::default()
        };
    }
    let prepared = Prepared::new(series, options);
    let mut analysis = prepared.base_analysis();
    let Some(steady) = prepared.steady() else {
        analysis.classification = Classification::Inconclusive;
        analysis.turns_needed = prepared.minimum_turns();
        analysis.reason = Reason::TooFewSamples {
            samples: series.len(),
            needed: MIN_STEADY_POINTS,
        };
        return analysis;
    };
    steady.decide(&prepared, &mut analysis);
    envelope::judge(series, &prepared, &mut analysis);
    analysis
}

/// The series after noise estimation, spike removal and the warm-up search.
struct Prepared<'a> {
    options: &'a ClassifyOptions,
    baseline: u64,
    last: u64,
    total_points: usize,
    /// How many samples the baseline is the median of.
    baseline_count: usize,
    last_turn: u64,
    sigma: f64,
    /// The least noise the metric's steps allow (see `robust::noise_floor`).
    noise_floor: f64,
    /// Degrees of freedom of the noise estimate.
    noise_df: usize,
    /// Per epoch: `(offset, cleaned value)`, the offset counted from the epoch's start turn (a
    /// point's turn is the start plus its offset: not kept, 8 bytes a point).
    epochs: Vec<Vec<(u64, f64)>>,
    /// The turn each epoch starts at.
    epoch_starts: Vec<u64>,
    spike_turns: Vec<u64>,
    /// Settling offset after every reload (the first epoch also honours the declared warm-up).
    settle: u64,
}

impl<'a> Prepared<'a> {
    fn new(series: &MetricSeries, options: &'a ClassifyOptions) -> Self {
        let baseline = series.points().next().map_or(0, |p| p.1);
        let last = series.points().last().map_or(0, |p| p.1);
        let last_turn = series.points().last().map_or(0, |p| p.0);
        // Differences between repeated baseline samples are pure noise: they count too.
        let mut diffs: Vec<f64> = series
            .baseline_samples
            .windows(2)
            .map(|w| w[1] as f64 - w[0] as f64)
            .chain(
                series
                    .epochs
                    .iter()
                    .flat_map(|e| e.points.windows(2).map(|w| w[1].1 as f64 - w[0].1 as f64)),
            )
            .collect();
        let steps: Vec<u64> = series
            .baseline_samples
            .windows(2)
            .map(|w| w[1].abs_diff(w[0]))
            .chain(
                series
                    .epochs
                    .iter()
                    .flat_map(|e| e.points.windows(2).map(|w| w[1].1.abs_diff(w[0].1))),
            )
            .collect();
        let noise_floor = robust::noise_floor(&steps);
        drop(steps);
        let noise_df = diffs.len().saturating_sub(1).max(1);
        // The differences are not read again: the estimate may reorder them in place.
        let sigma = robust::noise_sigma_in_place(&mut diffs).max(noise_floor);
        drop(diffs);
        let threshold = SPIKE_SIGMAS * sigma.max(MIN_SIGMA);
        let mut spike_turns = Vec::new();
        let epoch_starts: Vec<u64> = series.epochs.iter().map(|e| e.start_turn).collect();
        let epochs: Vec<Vec<(u64, f64)>> = series
            .epochs
            .iter()
            .map(|epoch| {
                let has_start = epoch
                    .points
                    .first()
                    .is_some_and(|p| p.0 == epoch.start_turn);
                let skip = usize::from(has_start);
                let mut values: Vec<f64> = epoch.points.iter().map(|p| p.1 as f64).collect();
                if values.len() > skip {
                    let replaced = robust::despike_in_place(&mut values[skip..], threshold);
                    spike_turns.extend(replaced.iter().map(|i| epoch.points[i + skip].0));
                }
                epoch
                    .points
                    .iter()
                    .zip(values)
                    .map(|(p, v)| (p.0 - epoch.start_turn, v))
                    .collect()
            })
            .collect();
        let mut prepared = Self {
            options,
            baseline,
            last,
            total_points: series.len(),
            baseline_count: series.baseline_count(),
            last_turn,
            sigma,
            noise_floor,
            noise_df,
            epochs,
            epoch_starts,
            spike_turns,
            settle: options.warmup_turns,
        };
        // Warm-up differences inflate the first noise estimate; re-estimate it on the steady part
        // and search again until the settling turn stops moving.
        for _ in 0..3 {
            let settle = prepared.find_settle();
            let steady_sigma = prepared.steady_noise(settle);
            let moved = settle != prepared.settle;
            prepared.settle = settle;
            match steady_sigma {
                Some((sigma, df)) if sigma != prepared.sigma => {
                    prepared.sigma = sigma;
                    prepared.noise_df = df;
                }
                _ if !moved => break,
                _ => {}
            }
        }
        prepared
    }

    /// Whether the series slows down from its (re)loads on: the steps between consecutive samples
    /// of every epoch shrink (see `shapes::steps_shrink`). A saturating warm-up does; a leak,
    /// with or without a one-time step at its start, does not.
    fn decelerating(&self) -> bool {
        shapes::steps_shrink(&self.epochs, self.sigma)
    }

    /// The noise scale from the cleaned first differences at or after `settle` in every epoch,
    /// with its degrees of freedom, when there are at least [`MIN_NOISE_DIFFS`] of them.
    fn steady_noise(&self, settle: u64) -> Option<(f64, usize)> {
        let diffs: Vec<f64> = self
            .epochs
            .iter()
            .enumerate()
            .flat_map(|(index, epoch)| {
                let bound = if index == 0 {
                    settle.max(self.options.warmup_turns)
                } else {
                    settle
                };
                let steady: Vec<f64> = epoch.iter().filter(|p| p.0 >= bound).map(|p| p.1).collect();
                steady.windows(2).map(|w| w[1] - w[0]).collect::<Vec<f64>>()
            })
            .collect();
        (diffs.len() >= MIN_NOISE_DIFFS).then(|| {
            (
                robust::noise_sigma(&diffs).max(self.noise_floor),
                diffs.len() - 1,
            )
        })
    }

    fn find_settle(&self) -> u64 {
        // The steady part keeps at least half of the samples (and three) of the longest epoch:
        // the latest settling offset is that of its middle sample, counted in samples, not turns.
        let latest = self
            .epochs
            .iter()
            .max_by_key(|e| e.len())
            .and_then(|e| {
                let last = e.len().checked_sub(1)?;
                let middle = (last / 2).min(last.saturating_sub(2));
                e.get(middle).map(|p| p.0)
            })
            .unwrap_or(0);
        let bounds = SettleBounds {
            first_epoch_min: self.options.warmup_turns,
            max_offset: latest.max(self.options.warmup_turns),
            sigma: self.sigma.max(MIN_SIGMA),
        };
        changepoint::settle_offset(&self.epochs, bounds)
    }

    /// The first steady offset of epoch `index`.
    fn bound(&self, index: usize) -> u64 {
        if index == 0 {
            self.settle.max(self.options.warmup_turns)
        } else {
            self.settle
        }
    }

    fn steady_from_turn(&self) -> Option<u64> {
        let (first, start) = self.epochs.first().zip(self.epoch_starts.first())?;
        let bound = self.bound(0);
        first.iter().find(|p| p.0 >= bound).map(|p| start + p.0)
    }

    /// One-sided Student t quantile on the noise estimate's degrees of freedom.
    fn one_sided_t(&self) -> f64 {
        one_sided_t(self.options.confidence, self.noise_df)
    }

    fn tolerance(&self) -> f64 {
        self.options.tolerance_bytes(self.baseline) as f64
    }

    fn base_analysis(&self) -> MetricAnalysis {
        MetricAnalysis {
            classification: Classification::Inconclusive,
            baseline: self.baseline,
            after_warmup: None,
            last: self.last,
            slope_bytes_per_turn: 0.0,
            slope_interval: None,
            confidence: self.options.confidence,
            plateau: None,
            turns_needed: None,
            points: self.total_points,
            reason: Reason::default(),
            noise_bytes: self.sigma,
            trend_p_value: None,
            steady_from_turn: self.steady_from_turn(),
            rise_bytes: None,
            fitted_end_bytes: None,
            spike_turns: self.spike_turns.clone(),
            epochs: self.epochs.len() as u32,
            growth_matters: None,
            keyed_growth: None,
        }
    }

    /// The smallest run that could give a steady part of [`MIN_STEADY_POINTS`] samples.
    fn minimum_turns(&self) -> Option<u64> {
        // Assume the usual one-time step at the first turn when nothing tells otherwise.
        let needed = self.bound(0).max(1) + MIN_STEADY_POINTS as u64 - 1;
        Some(needed.max(self.last_turn.saturating_add(1)))
    }

    /// The mean spacing of the sampled turns (1 for a run that sampled every turn).
    fn turn_spacing(&self) -> f64 {
        let turns: Vec<u64> = self
            .epochs
            .iter()
            .zip(&self.epoch_starts)
            .flat_map(|(epoch, &start)| epoch.iter().map(move |p| start + p.0))
            .collect();
        let distinct = 1 + turns.windows(2).filter(|w| w[1] != w[0]).count();
        match (turns.first(), turns.last()) {
            (Some(first), Some(last)) if distinct > 1 => {
                ((last - first) as f64 / (distinct - 1) as f64).max(1.0)
            }
            _ => 1.0,
        }
    }

    /// The variance of the baseline in units of the noise variance: 1 for a single sample, the
    /// variance of a median of `k` samples (`pi/2 / k` for `k >= 3`, `1/k` below) for several.
    fn baseline_variance(&self) -> f64 {
        let k = self.baseline_count.max(1) as f64;
        if self.baseline_count >= 3 {
            std::f64::consts::FRAC_PI_2 / k
        } else {
            1.0 / k
        }
    }

    /// The practical-significance bound on growth per turn: the tolerance spread over the
    /// horizon (growth at that rate leaves the tolerance only after `horizon_turns` turns), or
    /// the `max_growth_per_turn` cap where that is smaller.
    fn negligible_rate(&self) -> f64 {
        let options = self.options;
        let spread = self.tolerance() / options.horizon_turns.max(1) as f64;
        options
            .max_growth_per_turn
            .map_or(spread, |cap| spread.min(cap as f64))
    }

    /// Whether a slope whose interval reaches up to `hi` is practically nil: `hi` is within
    /// [`Prepared::negligible_rate`]. Such a series is never `growth`; it is judged clean or
    /// plateau on its level (see the module documentation).
    fn negligible(&self, hi: f64) -> bool {
        hi <= self.negligible_rate()
    }

    /// A run twice as long as this one (at least one turn longer).
    fn twice_as_long(&self) -> u64 {
        self.last_turn
            .saturating_mul(2)
            .max(self.last_turn.saturating_add(1))
    }

    /// The steady part, or `None` when it is too short to judge.
    fn steady(&self) -> Option<Steady> {
        let mut blocks = Vec::new();
        let mut starts = Vec::new();
        let mut epoch_starts = Vec::new();
        let lengths: Vec<usize> = self
            .epochs
            .iter()
            .enumerate()
            .map(|(index, e)| {
                let bound = self.bound(index);
                e.iter().filter(|p| p.0 >= bound).count()
            })
            .collect();
        let cap = points_cap(&lengths);
        for (index, (epoch, &start)) in self.epochs.iter().zip(&self.epoch_starts).enumerate() {
            let bound = self.bound(index);
            let epoch_start = start as f64;
            let points: Vec<(f64, f64)> = epoch
                .iter()
                .filter(|p| p.0 >= bound)
                .map(|p| ((start + p.0) as f64, p.1))
                .collect();
            if let Some(first) = points.first() {
                starts.push(first.0);
                epoch_starts.push(epoch_start);
                blocks.push(thin(points, cap));
            }
        }
        let count: usize = blocks.iter().map(Vec::len).sum();
        if count < MIN_STEADY_POINTS {
            return None;
        }
        Some(Steady {
            blocks,
            starts,
            epoch_starts,
            count,
        })
    }
}

/// The most samples per epoch that keeps the within-epoch pairs of all epochs within
/// [`MAX_PAIRS`] (never below 4, so that every epoch keeps pairs).
fn points_cap(lengths: &[usize]) -> usize {
    let pairs = |cap: usize| -> usize {
        lengths
            .iter()
            .map(|n| {
                let m = (*n).min(cap);
                m * m.saturating_sub(1) / 2
            })
            .sum()
    };
    let (mut lo, mut hi) = (4usize, MAX_POINTS_PER_EPOCH);
    if pairs(hi) <= MAX_PAIRS {
        return hi;
    }
    while lo < hi {
        let mid = (lo + hi).div_ceil(2);
        if pairs(mid) <= MAX_PAIRS {
            lo = mid;
        } else {
            hi = mid - 1;
        }
    }
    lo
}

/// Reduces an epoch longer than `cap` to medians of consecutive groups (about `cap / 2` of them)
/// for the pairwise statistics: a documented sampled estimate that keeps their cost bounded.
fn thin(points: Vec<(f64, f64)>, cap: usize) -> Vec<(f64, f64)> {
    if points.len() <= cap {
        return points;
    }
    let group = points.len().div_ceil((cap / 2).max(2));
    points
        .chunks(group)
        .map(|chunk| {
            let xs: Vec<f64> = chunk.iter().map(|p| p.0).collect();
            let ys: Vec<f64> = chunk.iter().map(|p| p.1).collect();
            (
                robust::median(&xs).unwrap_or(0.0),
                robust::median(&ys).unwrap_or(0.0),
            )
        })
        .collect()
}

/// The steady part: one block of `(turn, value)` per epoch that has steady samples.
struct Steady {
    blocks: Vec<Vec<(f64, f64)>>,
    /// The first steady turn of each block.
    starts: Vec<f64>,
    /// The turn each block's load epoch began at.
    epoch_starts: Vec<f64>,
    count: usize,
}

impl Steady {
    fn sxx(&self) -> f64 {
        self.blocks
            .iter()
            .map(|b| {
                let mean = b.iter().map(|p| p.0).sum::<f64>() / b.len() as f64;
                b.iter().map(|p| (p.0 - mean).powi(2)).sum::<f64>()
            })
            .sum()
    }

    fn span(&self) -> f64 {
        self.blocks
            .iter()
            .zip(&self.starts)
            .filter_map(|(b, start)| b.last().map(|p| p.0 - start))
            .fold(0.0, f64::max)
    }

    /// The mean steady offset (turns after each block's first steady turn).
    fn centre(&self) -> f64 {
        let offsets: Vec<f64> = self
            .blocks
            .iter()
            .zip(&self.starts)
            .flat_map(|(b, start)| b.iter().map(move |p| p.0 - start))
            .collect();
        offsets.iter().sum::<f64>() / offsets.len().max(1) as f64
    }

    /// The pooled median level at the centre of the steady part (where it is best determined),
    /// and the highest fitted level at the end of an epoch.
    fn levels(&self, slope: f64) -> (f64, f64) {
        let centre = self.centre();
        let residuals: Vec<f64> = self
            .blocks
            .iter()
            .zip(&self.starts)
            .flat_map(|(b, start)| b.iter().map(move |(x, y)| y - slope * (x - start - centre)))
            .collect();
        let level = robust::median(&residuals).unwrap_or(0.0);
        let end = self
            .blocks
            .iter()
            .zip(&self.starts)
            .filter_map(|(b, start)| {
                let r: Vec<f64> = b.iter().map(|(x, y)| y - slope * (x - start)).collect();
                let level = robust::median(&r)?;
                b.last().map(|p| level + slope * (p.0 - start))
            })
            .fold(f64::NEG_INFINITY, f64::max);
        (level, end)
    }

    /// How far the very last sample of the series stands above the line through its epoch's
    /// steady samples, when that is a jump: the jump itself, measured from the fitted trend, is
    /// more than [`SPIKE_SIGMAS`] noise deviations and beyond the tolerance. (Its level above the
    /// baseline says nothing about a jump: a steady leak is far above the baseline at every turn.)
    /// Spike removal never touches the last sample (it cannot tell a spike from a step that has
    /// just begun), so neither can clean or plateau.
    fn last_jump(&self, prepared: &Prepared<'_>, slope: f64) -> Option<f64> {
        let block = self.blocks.last()?;
        let start = *self.starts.last()?;
        let (last_x, last_y) = *block.last()?;
        let others: Vec<f64> = block[..block.len() - 1]
            .iter()
            .map(|(x, y)| y - slope * (x - start))
            .collect();
        let fitted = robust::median(&others)? + slope * (last_x - start);
        let jump = last_y - fitted;
        let threshold = (SPIKE_SIGMAS * prepared.sigma.max(MIN_SIGMA)).max(prepared.tolerance());
        (jump > threshold).then_some(jump)
    }

    /// Whether a sample the warm-up search set aside lies above where the line through its epoch's
    /// steady samples starts by more than [`SPIKE_SIGMAS`] noise deviations, and the line does not
    /// end clearly (by as much) above it. A warm-up rises to the steady level; memory that was
    /// higher before and fell (a garbage collection, a pool trimmed) is not one, and the rise
    /// after it may be the next tooth of a sawtooth, unless it climbs past where memory fell from.
    fn fell_during_warmup(&self, prepared: &Prepared<'_>, slope: f64) -> bool {
        let threshold = SPIKE_SIGMAS * prepared.sigma.max(MIN_SIGMA);
        let mut blocks = self.blocks.iter();
        prepared.epochs.iter().enumerate().any(|(index, epoch)| {
            let bound = prepared.bound(index);
            if !epoch.iter().any(|p| p.0 >= bound) {
                return false;
            }
            let Some(block) = blocks.next() else {
                return false;
            };
            let residuals: Vec<f64> = block.iter().map(|(x, y)| y - slope * x).collect();
            let (Some(intercept), Some(first)) = (robust::median(&residuals), block.first()) else {
                return false;
            };
            // Where the steady line starts: a warm-up stays below it, and so does a leak whose
            // first samples the search set aside. Where it ends: a sawtooth's steady part climbs
            // back to where memory fell from, no higher; a heap that ratchets up (a leak under a
            // garbage collector) climbs clearly beyond it.
            let start_level = intercept + slope * first.0;
            let end_level = block
                .last()
                .map_or(start_level, |last| intercept + slope * last.0);
            epoch
                .iter()
                .filter(|p| p.0 < bound)
                .any(|p| p.1 - start_level > threshold && end_level - p.1 <= threshold)
        })
    }

    /// The one-sided p-value of the least-squares slope of the steady part (pooled within blocks),
    /// judged against the scatter of the samples around the fitted lines (Student t on `n - 2k`
    /// degrees of freedom for `n` samples in `k` blocks).
    fn least_squares_p(&self) -> f64 {
        let (mut sxy, mut sxx, mut n) = (0.0, 0.0, 0usize);
        let mut fits = Vec::with_capacity(self.blocks.len());
        for block in &self.blocks {
            let m = block.len() as f64;
            let mx = block.iter().map(|p| p.0).sum::<f64>() / m;
            let my = block.iter().map(|p| p.1).sum::<f64>() / m;
            for (x, y) in block {
                sxy += (x - mx) * (y - my);
                sxx += (x - mx).powi(2);
            }
            n += block.len();
            fits.push((mx, my));
        }
        let df = n as f64 - 2.0 * self.blocks.len() as f64 + 1.0 - 1.0;
        if sxx <= 0.0 || df < 1.0 {
            return 1.0;
        }
        let slope = sxy / sxx;
        let rss: f64 = self
            .blocks
            .iter()
            .zip(&fits)
            .flat_map(|(b, (mx, my))| {
                b.iter()
                    .map(move |(x, y)| (y - my - slope * (x - mx)).powi(2))
            })
            .sum();
        let se = (rss / df / sxx).sqrt();
        if se <= 0.0 {
            return if slope > 0.0 { 0.0 } else { 1.0 };
        }
        StudentsT::new(0.0, 1.0, df).map_or(1.0, |t| 1.0 - t.cdf(slope / se))
    }

    /// Whether every steady sample stands above the one before it in its block.
    fn strictly_rising(&self) -> bool {
        self.blocks
            .iter()
            .all(|b| b.windows(2).all(|w| w[1].1 > w[0].1))
    }

    /// The one-sided p-value of `slope` against the noise estimate (not the scatter around the
    /// line, which a few samples barely measure): Student t of `slope / (1.05 sigma / sqrt(Sxx))`
    /// on the noise estimate's degrees of freedom.
    fn effect_size_p(&self, prepared: &Prepared<'_>, slope: f64, sxx: f64) -> f64 {
        if sxx <= 0.0 {
            return 1.0;
        }
        let se = THEIL_SEN_SE_FACTOR * prepared.sigma.max(MIN_SIGMA) / sxx.sqrt();
        StudentsT::new(0.0, 1.0, prepared.noise_df as f64).map_or(1.0, |t| 1.0 - t.cdf(slope / se))
    }

    /// Whether the steady part still rises significantly (Mann-Kendall `p <` [`TREND_ALPHA`])
    /// without the first third of every block: growth claimed on a decelerating series must not
    /// rest on the samples right after the warm-up.
    fn rises_without_first_third(&self) -> bool {
        let values: Vec<Vec<f64>> = self
            .blocks
            .iter()
            .map(|b| b[b.len() / 3..].iter().map(|p| p.1).collect())
            .collect();
        mann_kendall(&values).p_increasing < TREND_ALPHA
    }

    /// On the later half of every block: the one-sided Mann-Kendall p-value, the pooled
    /// Theil-Sen slope, `Sxx` and the standard deviation of the samples around their
    /// least-squares lines (0 without degrees of freedom).
    fn later_half_trend(&self) -> (f64, f64, f64, f64) {
        let halves: Vec<Vec<(f64, f64)>> = self
            .blocks
            .iter()
            .map(|b| b[b.len() / 2..].to_vec())
            .collect();
        let values: Vec<Vec<f64>> = halves
            .iter()
            .map(|b| b.iter().map(|p| p.1).collect())
            .collect();
        let slope = theil_sen::sen_slope(&halves, CONFIDENCE).map_or(0.0, |s| s.slope);
        let sxx: f64 = halves
            .iter()
            .map(|b| {
                let mean = b.iter().map(|p| p.0).sum::<f64>() / b.len().max(1) as f64;
                b.iter().map(|p| (p.0 - mean).powi(2)).sum::<f64>()
            })
            .sum();
        (
            mann_kendall(&values).p_increasing,
            slope,
            sxx,
            scatter_around_lines(&halves),
        )
    }

    /// Makes an undecided series inconclusive for a one-off step after the warm-up, when it shows
    /// one (see `shapes::late_step`): no run length decides it, a wider warm-up does.
    fn name_late_step(&self, prepared: &Prepared<'_>, analysis: &mut MetricAnalysis) -> bool {
        let Some(step) = shapes::late_step(prepared, self) else {
            return false;
        };
        analysis.classification = Classification::Inconclusive;
        analysis.turns_needed = None;
        analysis.reason = Reason::LateStep {
            turn: step.turn,
            size: step.size,
            noise: prepared.sigma,
        };
        true
    }

    fn decide(&self, prepared: &Prepared<'_>, analysis: &mut MetricAnalysis) {
        let options = prepared.options;
        let values: Vec<Vec<f64>> = self
            .blocks
            .iter()
            .map(|b| b.iter().map(|p| p.1).collect())
            .collect();
        let trend = mann_kendall(&values);
        let Some(sen) = theil_sen::sen_slope(&self.blocks, options.confidence) else {
            analysis.classification = Classification::Inconclusive;
            analysis.turns_needed = prepared.minimum_turns();
            analysis.reason = Reason::NoSteadyPair;
            return;
        };
        let sigma = prepared.sigma;
        let sxx = self.sxx();
        let (interval, kind) = match sen.interval {
            Some(interval) if self.count >= MIN_RANK_INTERVAL_POINTS => {
                (Some(interval), IntervalKind::Rank)
            }
            _ if sxx > 0.0 => {
                let t = StudentsT::new(0.0, 1.0, prepared.noise_df as f64)
                    .map(|d| d.inverse_cdf(0.5 + options.confidence / 2.0))
                    .unwrap_or(f64::INFINITY);
                let half = t * THEIL_SEN_SE_FACTOR * sigma / sxx.sqrt();
                (
                    Some((sen.slope - half, sen.slope + half)),
                    IntervalKind::NoiseBased,
                )
            }
            _ => (None, IntervalKind::NoiseBased),
        };
        let slope = sen.slope;
        let (level, end) = self.levels(slope);
        let rise = level - prepared.baseline as f64;
        analysis.slope_bytes_per_turn = slope;
        analysis.slope_interval = interval;
        analysis.trend_p_value = Some(trend.p_increasing);
        // Reported at the settling turn; decisions use the better-determined centre.
        let settled_level = level - slope * self.centre();
        analysis.after_warmup = Some(settled_level.max(0.0).round() as u64);
        analysis.rise_bytes = Some(settled_level - prepared.baseline as f64);
        analysis.fitted_end_bytes = Some(end);

        let Some((lo, hi)) = interval else {
            analysis.classification = Classification::Inconclusive;
            analysis.turns_needed = prepared.minimum_turns();
            analysis.reason = Reason::Unbounded;
            return;
        };
        let settle = analysis.steady_from_turn.unwrap_or(0);
        let interval_text = Interval {
            confidence: options.confidence,
            lo,
            hi,
            kind: Some(kind),
        };
        // With few samples a rank test cannot reach the level however clear the rise (five
        // samples: p >= 1/120); a strictly rising steady part whose slope dwarfs the noise floor
        // reaches it from the effect size instead.
        let effect_p = self.effect_size_p(prepared, slope, sxx);
        let by_effect = trend.p_increasing >= options.trend_alpha
            && self.strictly_rising()
            && effect_p < options.trend_alpha;
        let span = self.span();
        let evidence = Evidence {
            slope,
            hi,
            rise,
            rise_margin: prepared.one_sided_t()
                * sigma
                * (prepared.baseline_variance() + 1.0 / self.count as f64).sqrt(),
            span,
            tail: span - self.centre(),
            tolerance: prepared.tolerance(),
            cap: options.max_growth_per_turn.map(|g| g as f64),
        };
        // A slope whose upper bound is practically nil is no growth, however significant, when
        // the level decides the series: the class word of a clean process must not hang on a
        // trend of a few bytes per turn.
        let rising = (trend.p_increasing < options.trend_alpha || by_effect)
            && lo > 0.0
            && !(prepared.negligible(hi) && evidence.decision().is_some());
        let significance = if by_effect {
            Significance::EffectSize { p: effect_p }
        } else {
            Significance::MannKendall {
                p: trend.p_increasing,
            }
        };
        let rise_text = Rise {
            slope,
            from_turn: settle,
            interval: interval_text,
            significance,
        };
        let (late, late_slope, late_sxx, late_scatter) = self.later_half_trend();
        // The later half must not rise significantly slower than half the overall slope (a
        // saturating warm-up's tail flattens out; a leak keeps its slope), judged against its own
        // standard error so that a short or noisy run does not need a significant rise in each
        // half. The least-squares slope must be significant against the scatter around the line
        // too, and no set-aside warm-up sample may stand above the line (a sawtooth). The noise
        // comes from consecutive differences, which a garbage collection's rare drops barely move;
        // where the later half scatters more around its own line than that, its slope is only
        // known to that scatter.
        let late_se = THEIL_SEN_SE_FACTOR * prepared.sigma.max(late_scatter)
            / late_sxx.max(f64::MIN_POSITIVE).sqrt();
        let late_z = standard_normal().inverse_cdf(1.0 - PERSISTENCE_ALPHA);
        let least_squares_p = self.least_squares_p();
        // A rise claimed from its effect size rests on a noise estimate from a few differences,
        // which a warm-up still settling shrinks as much as a leak does: so few samples claim
        // growth only when their own rise goes beyond the tolerance. Their own: a one-time step
        // before them (the warm-up) says nothing of a leak (a 3-turn LiteRT-LM run stepped +1.1
        // MiB at its first turn, then rose 3.5 KiB a turn, and failed a clean build).
        let rose = slope * span;
        let doubt = if by_effect && rose <= prepared.tolerance() {
            Some(Doubt::TooFewToTell {
                samples: self.count,
                rose,
                tolerance: prepared.tolerance(),
            })
        } else if late_slope < PERSISTENCE_SLOPE_FRACTION * slope - late_z * late_se {
            Some(Doubt::LaterHalfSlower {
                slope: late_slope,
                p: late,
            })
        } else if least_squares_p >= LEAST_SQUARES_ALPHA {
            Some(Doubt::LeastSquares { p: least_squares_p })
        } else if self.fell_during_warmup(prepared, slope) {
            Some(Doubt::Sawtooth)
        } else {
            None
        };
        let persists = doubt.is_none();
        // A saturating warm-up with a time constant of a few turns still rises through the first
        // third after its settle turn; what it cannot do is keep its slope: on a decelerating
        // series the later half must also rise at least the persistence fraction of the whole
        // part's slope, as a point estimate (the standard-error slack above rests on a noise
        // estimate that the curve's shrinking steps inflate).
        let keeps_slope = late_slope >= PERSISTENCE_SLOPE_FRACTION * slope;
        if rising
            && persists
            && prepared.decelerating()
            && !(self.rises_without_first_third() && keeps_slope)
        {
            analysis.classification = Classification::Inconclusive;
            analysis.turns_needed = Some(prepared.twice_as_long());
            analysis.reason = Reason::Decelerating {
                rise: rise_text,
                alpha: DECELERATION_ALPHA,
            };
            return;
        }
        if rising && persists {
            analysis.classification = Classification::Growth;
            let too_small = GrowthGate::new(prepared).judge(lo, hi, analysis);
            // Named from where the samples join the rising line, not where its fit starts.
            let from_turn =
                shapes::onset(prepared, self, slope, shapes::growth_band(prepared, slope))
                    .unwrap_or(settle);
            analysis.reason = Reason::Growth {
                rise: Rise {
                    from_turn,
                    ..rise_text
                },
                too_small,
                early: shapes::early_growth(prepared, self),
            };
            return;
        }

        if reloads::judge_ratchet(self, prepared, slope, analysis) {
            return;
        }

        // Rising without persisting: the doubt is what stands in the way, unless it is one step.
        if let Some(doubt) = doubt.filter(|_| rising) {
            if self.name_late_step(prepared, analysis) {
                return;
            }
            analysis.classification = Classification::Inconclusive;
            analysis.turns_needed = Some(prepared.twice_as_long());
            analysis.reason = Reason::RoseInDoubt {
                rise: rise_text,
                doubt,
            };
            return;
        }

        if let Some(jump) = self.last_jump(prepared, slope) {
            analysis.classification = Classification::Inconclusive;
            analysis.turns_needed = Some(
                prepared
                    .last_turn
                    .saturating_add((prepared.turn_spacing().round() as u64).max(1)),
            );
            analysis.reason = Reason::LastSampleJump {
                turn: prepared.last_turn,
                jump,
                tolerance: prepared.tolerance(),
            };
            return;
        }

        let decision = evidence.decision();
        if decision.is_some() && !reloads::levels_stay_put(self, prepared, slope, rise, analysis) {
            return;
        }
        match decision {
            Some(Classification::Clean) => {
                analysis.classification = Classification::Clean;
                analysis.reason = Reason::Clean {
                    tolerance: evidence.tolerance,
                    rise,
                    worst_end: evidence.worst_end(),
                    interval: interval_text,
                };
            }
            Some(Classification::Plateau) => {
                analysis.classification = Classification::Plateau;
                let settled_at =
                    shapes::onset(prepared, self, slope, shapes::plateau_band(prepared))
                        .unwrap_or(settle);
                analysis.plateau = Some(PlateauInfo {
                    size_bytes: rise.round() as i64,
                    settled_at_turn: settled_at,
                });
                analysis.reason = Reason::Plateau {
                    rise,
                    settled_at,
                    interval: interval_text,
                };
            }
            // With reloads the epoch levels are judged apart (`levels_stay_put`); a fall within
            // epochs says nothing about them.
            _ if prepared.epochs.len() == 1 && shapes::falling(&evidence).is_some() => {
                analysis.classification = Classification::Clean;
                analysis.reason = Reason::Falling {
                    slope,
                    interval: interval_text,
                    end: shapes::falling(&evidence).unwrap_or(0.0),
                    tolerance: evidence.tolerance,
                };
            }
            _ if self.name_late_step(prepared, analysis) => {}
            _ => {
                analysis.classification = Classification::Inconclusive;
                analysis.turns_needed = project_turns(prepared, &evidence);
                let outlook = match analysis.turns_needed {
                    Some(n) => Outlook::Turns(n),
                    None => what_would_decide(prepared, &evidence),
                };
                analysis.reason = if lo > 0.0 {
                    Reason::TrendNotSignificant {
                        slope,
                        interval: interval_text,
                        samples: self.count,
                        p: trend.p_increasing,
                        alpha: options.trend_alpha,
                        outlook,
                    }
                } else {
                    Reason::NoiseStraddles {
                        rise,
                        margin: evidence.rise_margin,
                        slope,
                        interval: interval_text,
                        noise: sigma,
                        outlook,
                    }
                };
            }
        }
    }
}

/// The standard deviation of the samples around each block's least-squares line, pooled over
/// the blocks on `n - 2k` degrees of freedom (`n` samples in `k` blocks); 0 without any.
fn scatter_around_lines(blocks: &[Vec<(f64, f64)>]) -> f64 {
    let (mut rss, mut df) = (0.0, 0usize);
    for block in blocks.iter().filter(|b| b.len() > 2) {
        let m = block.len() as f64;
        let mx = block.iter().map(|p| p.0).sum::<f64>() / m;
        let my = block.iter().map(|p| p.1).sum::<f64>() / m;
        let sxx: f64 = block.iter().map(|p| (p.0 - mx).powi(2)).sum();
        let sxy: f64 = block.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
        let slope = if sxx > 0.0 { sxy / sxx } else { 0.0 };
        rss += block
            .iter()
            .map(|(x, y)| (y - my - slope * (x - mx)).powi(2))
            .sum::<f64>();
        df += block.len() - 2;
    }
    if df == 0 {
        0.0
    } else {
        (rss / df as f64).sqrt()
    }
}

/// Whether a growth matters: the classification stays `growth` (the slope is reported as
/// measured), but only growth that matters fails `leakloop analyze`.
///
/// With a `max_growth_per_turn` cap, growth matters when the upper bound of its slope exceeds
/// the cap (as the scenario expectation judges it). Without one, it matters when its lower bound,
/// projected over [`ClassifyOptions::horizon_turns`] turns, exceeds the tolerance. (A slope whose
/// upper bound is within the tolerance over the horizon is not growth at all: `Prepared::negligible`.)
struct GrowthGate {
    cap: Option<f64>,
    horizon: f64,
    tolerance: f64,
}

impl GrowthGate {
    fn new(prepared: &Prepared<'_>) -> Self {
        Self {
            cap: prepared.options.max_growth_per_turn.map(|c| c as f64),
            horizon: prepared.options.horizon_turns as f64,
            tolerance: prepared.tolerance(),
        }
    }

    /// Sets `growth_matters`; when the growth does not matter, returns why (for the reason).
    fn judge(&self, lo: f64, hi: f64, analysis: &mut MetricAnalysis) -> Option<TooSmall> {
        let (matters, why) = match self.cap {
            Some(cap) => (hi > cap, TooSmall::WithinCap { hi, cap }),
            None => (
                lo * self.horizon > self.tolerance,
                TooSmall::WithinTolerance {
                    lo,
                    horizon: self.horizon,
                    tolerance: self.tolerance,
                },
            ),
        };
        analysis.growth_matters = Some(matters);
        (!matters).then_some(why)
    }
}

/// What would decide a series that no run length decides: more baseline samples, or a larger
/// tolerance (the worst case with a perfectly known level).
fn what_would_decide(prepared: &Prepared<'_>, evidence: &Evidence) -> Outlook {
    let t1 = prepared.one_sided_t();
    let sigma = prepared.sigma;
    // With a long run the steady level is known; what is left is the baseline's own noise.
    let margin_for = |k: usize| {
        let var = if k >= 3 {
            std::f64::consts::FRAC_PI_2 / k as f64
        } else {
            1.0 / k as f64
        };
        t1 * sigma * var.sqrt()
    };
    let needed = (1..=MAX_BASELINE_SAMPLES_SUGGESTED)
        .find(|k| evidence.rise.abs() + margin_for(*k) <= evidence.tolerance);
    let tolerance = evidence.rise.abs() + margin_for(prepared.baseline_count.max(1));
    Outlook::NoRunLength {
        baseline_samples: prepared.baseline_count,
        samples_needed: needed.filter(|&k| k > prepared.baseline_count),
        tolerance,
    }
}

/// The most baseline samples [`what_would_decide`] suggests taking.
const MAX_BASELINE_SAMPLES_SUGGESTED: usize = 64;

/// The quantities the clean/plateau decision compares.
#[derive(Debug, Clone, Copy)]
struct Evidence {
    slope: f64,
    hi: f64,
    rise: f64,
    rise_margin: f64,
    /// Turns from the first to the last steady sample of an epoch.
    span: f64,
    /// Turns from the centre (where `rise` is measured) to the last steady sample.
    tail: f64,
    tolerance: f64,
    cap: Option<f64>,
}

impl Evidence {
    /// Worst-case movement over the whole steady span.
    fn drift(&self) -> f64 {
        self.hi.max(0.0) * self.span
    }

    /// Upper bound of the level at the last turn, above the baseline.
    fn worst_end(&self) -> f64 {
        self.rise + self.rise_margin + self.hi.max(0.0) * self.tail
    }

    fn within_cap(&self) -> bool {
        self.cap.is_none_or(|cap| self.hi <= cap)
    }

    /// Clean, plateau, or `None` (undecided).
    fn decision(&self) -> Option<Classification> {
        if !self.within_cap() {
            return None;
        }
        if self.worst_end() <= self.tolerance {
            return Some(Classification::Clean);
        }
        let settled = self.drift() <= self.tolerance.max(PLATEAU_DRIFT_FRACTION * self.rise);
        if self.rise - self.rise_margin > self.tolerance && settled {
            return Some(Classification::Plateau);
        }
        None
    }
}

fn one_sided_t(confidence: f64, df: usize) -> f64 {
    StudentsT::new(0.0, 1.0, df as f64)
        .map(|d| d.inverse_cdf(confidence))
        .unwrap_or(f64::INFINITY)
}

/// The smallest run length (in turns) at which the present slope, level and noise would give a
/// decision, assuming the same warm-up, reload period and spacing of samples.
///
/// The projection counts samples, not turns: a trace that sampled every `s`-th turn is projected
/// to go on doing so (`s` is the mean spacing of its turns, 1 for a run), so the search costs
/// the same whatever the turn numbers are. It looks at runs of up to [`MAX_TURNS`] samples.
fn project_turns(prepared: &Prepared<'_>, evidence: &Evidence) -> Option<u64> {
    let options = prepared.options;
    let sigma = prepared.sigma;
    let z2 = standard_normal().inverse_cdf(0.5 + options.confidence / 2.0);
    let z_alpha = standard_normal().inverse_cdf(1.0 - TREND_ALPHA);
    // Planned for power: with a run just long enough for the present estimate to cross its
    // threshold, half of all runs would fall short and ask for one turn more each time.
    let z_power = standard_normal().inverse_cdf(PROJECTION_POWER);
    let t1 = prepared.one_sided_t() + z_power;
    let spacing = prepared.turn_spacing();
    let decides = |samples: u64| -> bool {
        let shape = projected_shape(prepared, samples, spacing);
        if shape.count < MIN_STEADY_POINTS || shape.sxx <= 0.0 {
            return false;
        }
        let se = THEIL_SEN_SE_FACTOR * sigma / shape.sxx.sqrt();
        if shape.count >= MIN_GROWTH_POINTS && evidence.slope - (z_alpha + z_power) * se > 0.0 {
            return true;
        }
        let projected = Evidence {
            hi: evidence.slope + (z2 + z_power) * se,
            rise_margin: t1
                * sigma
                * (prepared.baseline_variance() + 1.0 / shape.count as f64).sqrt(),
            span: shape.span,
            tail: shape.span / 2.0,
            ..*evidence
        };
        projected.decision().is_some()
    };
    let current = (prepared.last_turn as f64 / spacing).round() as u64;
    let mut samples = current + 1;
    while samples <= u64::from(MAX_TURNS) {
        if decides(samples) {
            return Some(((samples as f64 * spacing).round() as u64).max(prepared.last_turn + 1));
        }
        samples = if samples < current + 200 {
            samples + 1
        } else {
            samples + (samples / 20).max(1)
        };
    }
    None
}

/// The chance a run of the projected length decides, if the slope, level and noise are what they
/// are now: `turns_needed` is a sample size planned for this power, so that it does not recede
/// by a turn with every turn added.
const PROJECTION_POWER: f64 = 0.8;

/// The steady part a run would have, in turns.
struct Shape {
    count: usize,
    sxx: f64,
    span: f64,
}

/// The steady part of a run of `samples` samples after the baseline, `spacing` turns apart.
fn projected_shape(prepared: &Prepared<'_>, samples: u64, spacing: f64) -> Shape {
    let in_samples = |turns: u64| (turns as f64 / spacing).ceil() as u64;
    let period = in_samples(u64::from(prepared.options.reload_every));
    let mut shape = Shape {
        count: 0,
        sxx: 0.0,
        span: 0.0,
    };
    let mut start = 0u64;
    let mut index = 0usize;
    loop {
        let end = if period == 0 {
            samples
        } else {
            (start + period).min(samples)
        };
        let first = start + in_samples(prepared.bound(index));
        if first <= end {
            let c = (end - first + 1) as f64;
            shape.count += c as usize;
            shape.sxx += c * (c * c - 1.0) / 12.0 * spacing * spacing;
            shape.span = shape.span.max((c - 1.0) * spacing);
        }
        if period == 0 || end >= samples {
            break;
        }
        start = end;
        index += 1;
    }
    shape
}

mod envelope;
mod levels;
mod reloads;
mod shapes;

pub use reloads::MIN_RATCHET_EPOCHS;

#[cfg(test)]
mod tests;
