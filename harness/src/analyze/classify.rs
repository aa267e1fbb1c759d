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
//! - **growth** if `p <` [`TREND_ALPHA`], `lo > 0`, and the rise persists: the Mann-Kendall test
//!   on the later half of the steady part (of every epoch) also gives `p <`
//!   [`PERSISTENCE_ALPHA`] and that half's Theil-Sen slope is at least
//!   [`PERSISTENCE_SLOPE_FRACTION`] of the whole part's. A saturating warm-up whose tail is still settling after the detected
//!   settle turn rises early and stops; a leak keeps rising. A rise that fails only the
//!   persistence check is inconclusive (a run twice as long would tell);
//! - **clean** if the worst case stays within tolerance: `rise_hi + max(hi, 0) * D' <= T`;
//! - **plateau** if the rise is beyond tolerance even at its lower bound (`rise_lo > T`) and the
//!   worst-case drift after settling is small: `max(hi, 0) * D <= max(T, `
//!   [`PLATEAU_DRIFT_FRACTION`] ` * rise)`;
//! - **inconclusive** otherwise, and always with fewer than [`MIN_STEADY_POINTS`] steady samples
//!   or no slope interval. `turns_needed` is the smallest run length at which, with the present
//!   slope, level and noise, one of the three decisions above would be reached.
//!
//! With reloads, the epochs' steady levels are also compared (see `classify_reloads.rs`): with at
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

use super::series::MetricSeries;
use super::stats::changepoint::{self, SettleBounds};
use super::stats::mann_kendall::{mann_kendall, standard_normal};
use super::stats::{robust, theil_sen};
use super::units::{bytes, confidence_percent, probability, signed_bytes};
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

/// Standard error of Theil-Sen relative to least squares under Gaussian noise (efficiency ~0.91).
const THEIL_SEN_SE_FACTOR: f64 = 1.05;
/// Epochs longer than this are reduced to medians of consecutive groups before the O(n^2) rank
/// statistics (about 2 million pairs at most).
const MAX_POINTS_PER_EPOCH: usize = 2000;
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
    pub warmup_turns: u32,
    /// The largest acceptable growth per turn, if the scenario states one.
    pub max_growth_per_turn: Option<u64>,
    /// Reload period in turns (0 = never); used to project `turns_needed`.
    pub reload_every: u32,
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
    let prepared = Prepared::new(series, options);
    let mut analysis = prepared.base_analysis();
    let Some(steady) = prepared.steady() else {
        analysis.classification = Classification::Inconclusive;
        analysis.turns_needed = prepared.minimum_turns();
        analysis.reason = format!(
            "too few samples after warm-up ({} in all); at least {} steady turns are needed",
            series.len(),
            MIN_STEADY_POINTS
        );
        return analysis;
    };
    steady.decide(&prepared, &mut analysis);
    analysis
}

/// The series after noise estimation, spike removal and the warm-up search.
struct Prepared<'a> {
    options: &'a ClassifyOptions,
    baseline: u64,
    last: u64,
    total_points: usize,
    last_turn: u32,
    sigma: f64,
    /// Degrees of freedom of the noise estimate.
    noise_df: usize,
    /// Per epoch: `(offset, turn, cleaned value)`.
    epochs: Vec<Vec<(u32, u32, f64)>>,
    spike_turns: Vec<u32>,
    /// Settling offset after every reload (the first epoch also honours the declared warm-up).
    settle: u32,
}

impl<'a> Prepared<'a> {
    fn new(series: &MetricSeries, options: &'a ClassifyOptions) -> Self {
        let baseline = series.points().next().map_or(0, |p| p.1);
        let last = series.points().last().map_or(0, |p| p.1);
        let last_turn = series.points().last().map_or(0, |p| p.0);
        let diffs: Vec<f64> = series
            .epochs
            .iter()
            .flat_map(|e| e.points.windows(2).map(|w| w[1].1 as f64 - w[0].1 as f64))
            .collect();
        let sigma = robust::noise_sigma(&diffs);
        let threshold = SPIKE_SIGMAS * sigma.max(MIN_SIGMA);
        let mut spike_turns = Vec::new();
        let epochs: Vec<Vec<(u32, u32, f64)>> = series
            .epochs
            .iter()
            .map(|epoch| {
                let has_start = epoch
                    .points
                    .first()
                    .is_some_and(|p| p.0 == epoch.start_turn);
                let skip = usize::from(has_start);
                let raw: Vec<f64> = epoch.points.iter().map(|p| p.1 as f64).collect();
                let mut values = raw.clone();
                if raw.len() > skip {
                    let (cleaned, replaced) = robust::despike(&raw[skip..], threshold);
                    values[skip..].copy_from_slice(&cleaned);
                    spike_turns.extend(replaced.iter().map(|i| epoch.points[i + skip].0));
                }
                epoch
                    .points
                    .iter()
                    .zip(values)
                    .map(|(p, v)| (p.0 - epoch.start_turn, p.0, v))
                    .collect()
            })
            .collect();
        let mut prepared = Self {
            options,
            baseline,
            last,
            total_points: series.len(),
            last_turn,
            sigma,
            noise_df: diffs.len().saturating_sub(1).max(1),
            epochs,
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

    /// The noise scale from the cleaned first differences at or after `settle` in every epoch,
    /// with its degrees of freedom, when there are at least [`MIN_NOISE_DIFFS`] of them.
    fn steady_noise(&self, settle: u32) -> Option<(f64, usize)> {
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
                let steady: Vec<f64> = epoch.iter().filter(|p| p.0 >= bound).map(|p| p.2).collect();
                steady.windows(2).map(|w| w[1] - w[0]).collect::<Vec<f64>>()
            })
            .collect();
        (diffs.len() >= MIN_NOISE_DIFFS).then(|| (robust::noise_sigma(&diffs), diffs.len() - 1))
    }

    fn find_settle(&self) -> u32 {
        let span = self
            .epochs
            .iter()
            .filter_map(|e| e.last().map(|p| p.0))
            .max()
            .unwrap_or(0);
        let latest = (span / 2).min(span.saturating_sub(2));
        let bounds = SettleBounds {
            first_epoch_min: self.options.warmup_turns,
            max_offset: latest.max(self.options.warmup_turns),
            sigma: self.sigma.max(MIN_SIGMA),
        };
        let epochs: Vec<changepoint::EpochPoints> = self
            .epochs
            .iter()
            .map(|e| e.iter().map(|p| (p.0, p.2)).collect())
            .collect();
        changepoint::settle_offset(&epochs, bounds)
    }

    /// The first steady offset of epoch `index`.
    fn bound(&self, index: usize) -> u32 {
        if index == 0 {
            self.settle.max(self.options.warmup_turns)
        } else {
            self.settle
        }
    }

    fn steady_from_turn(&self) -> Option<u32> {
        let first = self.epochs.first()?;
        let bound = self.bound(0);
        first.iter().find(|p| p.0 >= bound).map(|p| p.1)
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
            reason: String::new(),
            noise_bytes: self.sigma,
            trend_p_value: None,
            steady_from_turn: self.steady_from_turn(),
            rise_bytes: None,
            fitted_end_bytes: None,
            spike_turns: self.spike_turns.clone(),
            epochs: self.epochs.len() as u32,
        }
    }

    /// The smallest run that could give a steady part of [`MIN_STEADY_POINTS`] samples.
    fn minimum_turns(&self) -> Option<u32> {
        // Assume the usual one-time step at the first turn when nothing tells otherwise.
        let needed = self.bound(0).max(1) + MIN_STEADY_POINTS as u32 - 1;
        Some(needed.max(self.last_turn + 1).min(MAX_TURNS))
    }

    /// The steady part, or `None` when it is too short to judge.
    fn steady(&self) -> Option<Steady> {
        let mut blocks = Vec::new();
        let mut starts = Vec::new();
        let mut epoch_starts = Vec::new();
        for (index, epoch) in self.epochs.iter().enumerate() {
            let bound = self.bound(index);
            let epoch_start = epoch.first().map_or(0.0, |p| f64::from(p.1 - p.0));
            let points: Vec<(f64, f64)> = epoch
                .iter()
                .filter(|p| p.0 >= bound)
                .map(|p| (f64::from(p.1), p.2))
                .collect();
            if let Some(first) = points.first() {
                starts.push(first.0);
                epoch_starts.push(epoch_start);
                blocks.push(thin(points));
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

/// Reduces an epoch to medians of consecutive groups when it is too long for pairwise statistics.
fn thin(points: Vec<(f64, f64)>) -> Vec<(f64, f64)> {
    if points.len() <= MAX_POINTS_PER_EPOCH {
        return points;
    }
    let group = points.len().div_ceil(MAX_POINTS_PER_EPOCH / 2);
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

/// How the slope interval was obtained.
#[derive(Debug, Clone, Copy, PartialEq)]
enum IntervalKind {
    Rank,
    Noise,
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

    /// On the later half of every block: the one-sided Mann-Kendall p-value and the pooled
    /// Theil-Sen slope.
    fn later_half_trend(&self) -> (f64, f64) {
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
        (mann_kendall(&values).p_increasing, slope)
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
            analysis.reason = "no two steady samples in the same load epoch".to_owned();
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
                    IntervalKind::Noise,
                )
            }
            _ => (None, IntervalKind::Noise),
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
            analysis.reason = "the slope cannot be bounded from these samples".to_owned();
            return;
        };
        let settle = analysis.steady_from_turn.unwrap_or(0);
        let interval_text = format!(
            "{} CI {}..{} per turn, {} interval",
            confidence_percent(options.confidence),
            signed_bytes(lo),
            signed_bytes(hi),
            if kind == IntervalKind::Rank {
                "rank"
            } else {
                "noise-based"
            }
        );
        let rising = trend.p_increasing < options.trend_alpha && lo > 0.0;
        let (late, late_slope) = self.later_half_trend();
        if rising && late < PERSISTENCE_ALPHA && late_slope >= PERSISTENCE_SLOPE_FRACTION * slope {
            analysis.classification = Classification::Growth;
            analysis.reason = format!(
                "keeps rising {} per turn from turn {settle} ({interval_text}; Mann-Kendall p = {:.2e})",
                signed_bytes(slope),
                trend.p_increasing
            );
            return;
        }

        if reloads::judge_ratchet(self, prepared, slope, analysis) {
            return;
        }

        if rising {
            analysis.classification = Classification::Inconclusive;
            analysis.turns_needed =
                Some((prepared.last_turn * 2).clamp(prepared.last_turn + 1, MAX_TURNS));
            analysis.reason = format!(
                "rose {} per turn from turn {settle} ({interval_text}; Mann-Kendall p = {:.2e}) but \
                 the later half of those turns rises {} per turn (p = {late:.2}): a warm-up still \
                 settling or a leak too small to show yet; a run twice as long would tell",
                signed_bytes(slope),
                trend.p_increasing,
                signed_bytes(late_slope)
            );
            return;
        }

        let span = self.span();
        let evidence = Evidence {
            slope,
            hi,
            rise,
            rise_margin: prepared.one_sided_t() * sigma * (1.0 + 1.0 / self.count as f64).sqrt(),
            span,
            tail: span - self.centre(),
            tolerance: prepared.tolerance(),
            cap: options.max_growth_per_turn.map(|g| g as f64),
        };
        let decision = evidence.decision();
        if decision.is_some() && !reloads::levels_stay_put(self, prepared, slope, rise, analysis) {
            return;
        }
        match decision {
            Some(Classification::Clean) => {
                analysis.classification = Classification::Clean;
                analysis.reason = format!(
                    "stays within {} of the baseline (rise {}, at most {} by the last turn; {interval_text})",
                    bytes(evidence.tolerance),
                    signed_bytes(rise),
                    signed_bytes(evidence.worst_end()),
                );
            }
            Some(Classification::Plateau) => {
                analysis.classification = Classification::Plateau;
                analysis.plateau = Some(PlateauInfo {
                    size_bytes: rise.round() as i64,
                    settled_at_turn: settle,
                });
                analysis.reason = format!(
                    "one-time rise of {} that settled at turn {settle}; afterwards {interval_text}",
                    signed_bytes(rise),
                );
            }
            _ => {
                analysis.classification = Classification::Inconclusive;
                analysis.turns_needed = project_turns(prepared, &evidence);
                let outlook = match analysis.turns_needed {
                    Some(n) => format!("about {n} turns would decide"),
                    None => "no run length decides: the baseline is one sample and its noise \
                             alone straddles the tolerance"
                        .to_owned(),
                };
                analysis.reason = if lo > 0.0 {
                    format!(
                        "rises about {} per turn ({interval_text}) but the trend test is not \
                         significant with {} steady samples (Mann-Kendall p = {:.3}, needs < {}); {outlook}",
                        signed_bytes(slope),
                        self.count,
                        trend.p_increasing,
                        probability(options.trend_alpha),
                    )
                } else {
                    format!(
                        "cannot tell a leak from noise: rise {} (+-{}), slope {} ({interval_text}), noise {}; {outlook}",
                        signed_bytes(rise),
                        bytes(evidence.rise_margin),
                        signed_bytes(slope),
                        bytes(sigma),
                    )
                };
            }
        }
    }
}

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
/// decision, assuming the same warm-up and reload period.
fn project_turns(prepared: &Prepared<'_>, evidence: &Evidence) -> Option<u32> {
    let options = prepared.options;
    let sigma = prepared.sigma;
    let z2 = standard_normal().inverse_cdf(0.5 + options.confidence / 2.0);
    let z_alpha = standard_normal().inverse_cdf(1.0 - TREND_ALPHA);
    let t1 = prepared.one_sided_t();
    let decides = |turns: u32| -> bool {
        let shape = projected_shape(prepared, turns);
        if shape.count < MIN_STEADY_POINTS || shape.sxx <= 0.0 {
            return false;
        }
        let se = THEIL_SEN_SE_FACTOR * sigma / shape.sxx.sqrt();
        if shape.count >= MIN_GROWTH_POINTS && evidence.slope - z_alpha * se > 0.0 {
            return true;
        }
        let projected = Evidence {
            hi: evidence.slope + z2 * se,
            rise_margin: t1 * sigma * (1.0 + 1.0 / shape.count as f64).sqrt(),
            span: shape.span,
            tail: shape.span / 2.0,
            ..*evidence
        };
        projected.decision().is_some()
    };
    let current = prepared.last_turn;
    let mut turns = current + 1;
    while turns <= MAX_TURNS {
        if decides(turns) {
            return Some(turns);
        }
        turns = if turns < current + 200 {
            turns + 1
        } else {
            turns + (turns / 20).max(1)
        };
    }
    None
}

/// The steady part a run of `turns` turns would have.
struct Shape {
    count: usize,
    sxx: f64,
    span: f64,
}

fn projected_shape(prepared: &Prepared<'_>, turns: u32) -> Shape {
    let period = prepared.options.reload_every;
    let mut shape = Shape {
        count: 0,
        sxx: 0.0,
        span: 0.0,
    };
    let mut start = 0u32;
    let mut index = 0usize;
    loop {
        let end = if period == 0 {
            turns
        } else {
            (start + period).min(turns)
        };
        let first = start + prepared.bound(index);
        if first <= end {
            let c = f64::from(end - first + 1);
            shape.count += c as usize;
            shape.sxx += c * (c * c - 1.0) / 12.0;
            shape.span = shape.span.max(c - 1.0);
        }
        if period == 0 || end >= turns {
            break;
        }
        start = end;
        index += 1;
    }
    shape
}

#[path = "classify_reloads.rs"]
mod reloads;

pub use reloads::MIN_RATCHET_EPOCHS;

#[cfg(test)]
#[path = "classify_tests.rs"]
mod tests;
