//! A ratchet across reloads: whether each load epoch settles a little higher than the one before.
//!
//! When a scenario reloads the engine every `K` turns, the within-epoch tests see a flat series if
//! every epoch is flat inside; memory that a reload fails to give back shows only as a rise of the
//! epoch *levels*. Each epoch's level is the median of its steady samples after removing the pooled
//! within-epoch slope (so epochs of different length are compared at the same offset), and the
//! levels are regressed on the turn each epoch began at: the least-squares slope is the rise per
//! turn, `slope * K` the rise per reload.
//!
//! The test is a one-sided t-test on that slope with `n - 2` degrees of freedom. The residual
//! scale of the regression carries both the sample noise and any scatter of the level from one
//! reload to the next (a reload that lands at a random level is not a leak); it is never taken
//! below the scale the sample noise alone gives a level (`sigma * sqrt(pi/2 / m)` for a median of
//! `m >= 3` samples, `sigma / sqrt(m)` below), so a few levels that line up by chance cannot make a
//! tiny slope significant. A one-time step between epochs (a cold first load, a cache kept from the
//! second load on) fits a line badly, its residuals stay large and its t-value stays near 1.7
//! however many epochs follow; a step in the middle is caught by the persistence check the caller
//! applies to [`RatchetTest::later_slope`].
//!
//! The levels have a warm-up of their own: an allocator that keeps some of what one load freed
//! for the next settles higher over the first few reloads and then stays (on the LiteRT-LM CPU
//! engine RSS settles 66.5, 69.8, 71.4, 72.4, 72.4, ... MiB). [`settled_from`] finds where the
//! levels settle with the same penalised search as the within-epoch warm-up
//! ([`changepoint`](super::changepoint)): the levels are one series, a leading level is dropped
//! when keeping it costs more misfit from the line through the later levels than the fixed
//! penalty; their scale is the residual scale of the line through the levels that are always
//! kept (the later half), never below the noise floor. The test then runs on the settled levels, and [`RatchetTest::mann_kendall_p`] (a
//! rank test of a monotone rise) tells a rise spread over the settled epochs from a single step.

use statrs::distribution::{ContinuousCDF, StudentsT};

use super::changepoint::{settle_offset, SettleBounds};
use super::mann_kendall::mann_kendall;
use super::robust;

/// One epoch's steady level.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct EpochLevel {
    /// The turn after which the engine was (re)loaded.
    pub start_turn: f64,
    /// The median steady level at the common offset, in bytes.
    pub level: f64,
    /// How many steady samples the level is the median of.
    pub samples: usize,
}

/// The regression of epoch levels on their start turns.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct RatchetTest {
    /// Epochs with a level.
    pub epochs: usize,
    /// Least-squares rise of the level per turn, in bytes.
    pub slope: f64,
    /// Two-sided confidence interval of the slope.
    pub interval: (f64, f64),
    /// One-sided p-value for a rising level.
    pub p_increasing: f64,
    /// The least-squares slope over the later half of the epochs (a ratchet keeps rising, a
    /// one-time step between epochs does not).
    pub later_slope: f64,
    /// The level of the last epoch minus that of the first, from the fitted line, in bytes.
    pub fitted_rise: f64,
    /// One-sided Mann-Kendall p-value for a monotone rise of the levels (a rise spread over the
    /// epochs gives a small value; a single step among flat levels does not).
    pub mann_kendall_p: f64,
}

/// Each epoch's steady level: the median of `value - within_slope * (offset - reference)` over
/// its steady `(turn, value)` samples, `offset` counted from the epoch's start turn.
pub(crate) fn epoch_levels(
    blocks: &[Vec<(f64, f64)>],
    epoch_starts: &[f64],
    within_slope: f64,
    reference: f64,
) -> Vec<EpochLevel> {
    blocks
        .iter()
        .zip(epoch_starts)
        .filter_map(|(block, start)| {
            let adjusted: Vec<f64> = block
                .iter()
                .map(|(turn, value)| value - within_slope * (turn - start - reference))
                .collect();
            Some(EpochLevel {
                start_turn: *start,
                level: robust::median(&adjusted)?,
                samples: block.len(),
            })
        })
        .collect()
}

/// Regresses the levels on their start turns; `None` with fewer than three levels (no residual
/// degree of freedom) or when all epochs start at the same turn.
pub(crate) fn ratchet_test(
    levels: &[EpochLevel],
    sigma: f64,
    confidence: f64,
) -> Option<RatchetTest> {
    let n = levels.len();
    if n < 3 {
        return None;
    }
    let (slope, intercept, sxx) = least_squares(levels)?;
    let residual_ss: f64 = levels
        .iter()
        .map(|l| (l.level - intercept - slope * l.start_turn).powi(2))
        .sum();
    let df = (n - 2) as f64;
    let noise_floor = noise_floor_variance(levels, sigma);
    let scale = (residual_ss / df).max(noise_floor).sqrt();
    let t_dist = StudentsT::new(0.0, 1.0, df).ok()?;
    let se = scale / sxx.sqrt();
    let p_increasing = if se > 0.0 {
        1.0 - t_dist.cdf(slope / se)
    } else if slope > 0.0 {
        0.0
    } else {
        1.0
    };
    let half = t_dist.inverse_cdf(0.5 + confidence / 2.0) * se;
    let later_slope = least_squares(&levels[n / 2..]).map_or(0.0, |fit| fit.0);
    let first = levels.first().map_or(0.0, |l| l.start_turn);
    let last = levels.last().map_or(0.0, |l| l.start_turn);
    let values: Vec<f64> = levels.iter().map(|l| l.level).collect();
    Some(RatchetTest {
        epochs: n,
        slope,
        interval: (slope - half, slope + half),
        p_increasing,
        later_slope,
        fitted_rise: slope * (last - first),
        mann_kendall_p: mann_kendall(&[values]).p_increasing,
    })
}

/// The index of the first settled level: leading levels are dropped while they are still settling
/// (see the module docs), keeping at least `min_kept` levels and at least half of them. With no
/// more than `min_kept` levels nothing is dropped.
pub(crate) fn settled_from(levels: &[EpochLevel], sigma: f64, min_kept: usize) -> usize {
    let n = levels.len();
    if n <= min_kept.max(2) {
        return 0;
    }
    let max_dropped = (n - min_kept.max(2)).min(n / 2);
    // The scale: the residual scale of the line through the levels that are always kept (the
    // warm-up's own curvature would inflate one taken from all of them), never below the floor.
    let tail = &levels[max_dropped..];
    let tail_variance = match least_squares(tail) {
        Some((slope, intercept, _)) if tail.len() >= 3 => {
            tail.iter()
                .map(|l| (l.level - intercept - slope * l.start_turn).powi(2))
                .sum::<f64>()
                / (tail.len() - 2) as f64
        }
        _ => 0.0,
    };
    let scale = tail_variance
        .max(noise_floor_variance(levels, sigma))
        .sqrt()
        .max(f64::MIN_POSITIVE.sqrt());
    let points: Vec<(u64, f64)> = levels
        .iter()
        .enumerate()
        .map(|(i, l)| (i as u64, l.level))
        .collect();
    let bounds = SettleBounds {
        first_epoch_min: 0,
        max_offset: max_dropped as u64,
        sigma: scale,
    };
    settle_offset(&[points], bounds) as usize
}

/// The mean variance the sample noise alone gives a level: `sigma^2 * (pi/2) / m` for a median of
/// `m >= 3` samples, `sigma^2 / m` below.
fn noise_floor_variance(levels: &[EpochLevel], sigma: f64) -> f64 {
    let total: f64 = levels
        .iter()
        .map(|l| {
            let efficiency = if l.samples >= 3 {
                std::f64::consts::FRAC_PI_2
            } else {
                1.0
            };
            sigma * sigma * efficiency / l.samples.max(1) as f64
        })
        .sum();
    total / levels.len().max(1) as f64
}

/// The rise of the least-squares line through the levels from the first epoch to the last;
/// `None` with fewer than two levels.
pub(crate) fn fitted_rise(levels: &[EpochLevel]) -> Option<f64> {
    let (slope, _, _) = least_squares(levels)?;
    Some(slope * (levels.last()?.start_turn - levels.first()?.start_turn))
}

/// `(slope, intercept, Sxx)` of the least-squares line through the levels; `None` with fewer than
/// two levels or no spread in start turns.
fn least_squares(levels: &[EpochLevel]) -> Option<(f64, f64, f64)> {
    let n = levels.len() as f64;
    if levels.len() < 2 {
        return None;
    }
    let mx = levels.iter().map(|l| l.start_turn).sum::<f64>() / n;
    let my = levels.iter().map(|l| l.level).sum::<f64>() / n;
    let (mut sxy, mut sxx) = (0.0, 0.0);
    for l in levels {
        sxy += (l.start_turn - mx) * (l.level - my);
        sxx += (l.start_turn - mx).powi(2);
    }
    (sxx > 0.0).then(|| (sxy / sxx, my - sxy / sxx * mx, sxx))
}

#[cfg(test)]
mod tests {
    use rstest::rstest;

    use super::*;

    fn levels(values: &[f64], period: f64, samples: usize) -> Vec<EpochLevel> {
        values
            .iter()
            .enumerate()
            .map(|(i, v)| EpochLevel {
                start_turn: i as f64 * period,
                level: *v,
                samples,
            })
            .collect()
    }

    #[test]
    fn levels_are_medians_at_a_common_offset() {
        // Two epochs rising 2 per turn inside; the second starts 10 higher.
        let blocks = vec![
            vec![(1.0, 102.0), (2.0, 104.0), (3.0, 106.0)],
            vec![(5.0, 112.0), (6.0, 114.0)],
        ];
        let got = epoch_levels(&blocks, &[0.0, 4.0], 2.0, 1.0);
        assert_eq!(got[0].level, 102.0);
        assert_eq!(got[1].level, 112.0);
        assert_eq!((got[0].samples, got[1].samples), (3, 2));
    }

    #[test]
    fn a_steady_ratchet_is_significant_with_its_slope_per_turn() {
        let wiggle = [0.3, -0.2, 0.1, -0.4, 0.2, 0.0];
        let values: Vec<f64> = (0..6)
            .map(|e| 100.0 + 10.0 * e as f64 + wiggle[e])
            .collect();
        let test = ratchet_test(&levels(&values, 5.0, 5), 0.5, 0.95).unwrap();
        assert!((test.slope - 2.0).abs() < 0.05, "{test:?}");
        assert!(test.p_increasing < 0.001, "{test:?}");
        assert!(test.interval.0 < 2.0 && 2.0 < test.interval.1, "{test:?}");
        assert!(test.later_slope > 1.5, "{test:?}");
    }

    #[rstest]
    #[case::cold_first_load(&[0.0, 50.0, 50.0, 50.0, 50.0, 50.0, 50.0, 50.0])]
    #[case::one_high_reload_at_the_end(&[0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 50.0])]
    #[case::scattered_reloads(&[3.0, -4.0, 5.0, -2.0, 1.0, -5.0, 2.0, 0.0])]
    fn what_is_not_a_ratchet_is_not_significant(#[case] values: &[f64]) {
        let test = ratchet_test(&levels(values, 5.0, 5), 1.0, 0.95).unwrap();
        assert!(test.p_increasing > 0.01, "{test:?}");
    }

    #[test]
    fn the_noise_floor_keeps_levels_that_line_up_by_chance_from_deciding() {
        // Exactly collinear levels rising 0.1 per epoch with sample noise 10: no residual at all,
        // but the noise alone makes each level uncertain by about 5.
        let values: Vec<f64> = (0..5).map(|e| 0.1 * e as f64).collect();
        let test = ratchet_test(&levels(&values, 4.0, 5), 10.0, 0.95).unwrap();
        assert!(test.p_increasing > 0.3, "{test:?}");
    }

    #[test]
    fn a_step_in_the_middle_does_not_persist_in_the_later_half() {
        let values = [0.0, 0.0, 0.0, 0.0, 50.0, 50.0, 50.0, 50.0];
        let test = ratchet_test(&levels(&values, 5.0, 5), 1.0, 0.95).unwrap();
        assert!(test.slope > 0.0);
        assert!(test.later_slope.abs() < 1e-9, "{test:?}");
    }

    #[test]
    fn too_few_levels_give_no_test() {
        assert!(ratchet_test(&levels(&[0.0, 10.0], 5.0, 5), 1.0, 0.95).is_none());
        let same_start = vec![
            EpochLevel {
                start_turn: 3.0,
                level: 1.0,
                samples: 2
            };
            3
        ];
        assert!(ratchet_test(&same_start, 1.0, 0.95).is_none());
    }

    #[rstest]
    #[case::allocator_warmup(&[70.75, 71.37, 72.57, 72.57, 72.57, 72.57, 72.57, 72.57], 2)]
    #[case::straight_ratchet(&[0.0, 1.0, 2.1, 2.9, 4.0, 5.0, 6.1, 6.9], 0)]
    #[case::flat(&[0.1, -0.1, 0.0, 0.1, -0.1, 0.0, 0.1, -0.1], 0)]
    fn levels_settle_where_the_warmup_ends(#[case] values: &[f64], #[case] expected: usize) {
        let got = settled_from(&levels(values, 5.0, 5), 0.01, 4);
        assert_eq!(got, expected);
    }

    #[test]
    fn settling_keeps_at_least_half_and_the_minimum() {
        let climbing = [0.0, 10.0, 15.0, 17.0, 18.0, 18.5];
        assert!(settled_from(&levels(&climbing, 5.0, 5), 0.01, 4) <= 2);
        assert_eq!(settled_from(&levels(&climbing[..4], 5.0, 5), 0.01, 4), 0);
    }

    #[rstest]
    #[case::one_step_among_settled_levels(&[72.55, 72.57, 73.16, 73.16], false)]
    #[case::strictly_rising(&[1.0, 2.0, 3.0, 4.0], true)]
    fn mann_kendall_tells_a_spread_rise_from_one_step(
        #[case] values: &[f64],
        #[case] spread: bool,
    ) {
        let test = ratchet_test(&levels(values, 5.0, 5), 0.01, 0.95).unwrap();
        assert_eq!(test.mann_kendall_p < 0.05, spread, "{test:?}");
    }
}
