//! The Theil-Sen slope and Sen's rank-based confidence interval, over independent blocks.
//!
//! The slope is the median of the slopes between every pair of samples in the same block; with a
//! single block this is the classic Theil-Sen estimator, with several blocks (load epochs) it is
//! the pooled within-block estimator, so a reload that drops memory back does not hide growth
//! inside each epoch. One wild sample moves at most `n - 1` of the `n(n-1)/2` pairwise slopes, so
//! the median barely moves.
//!
//! The interval inverts Kendall's test: with `N` ordered pairwise slopes and
//! `C = z * sqrt(Var S)`, the limits are the `(N - C) / 2`-th and the `(N + C) / 2 + 1`-th ordered
//! slopes (Sen 1968; Gilbert 1987, ch. 16), interpolated between neighbours. When `C` is so large
//! that the lower rank falls below 1 the data cannot bound the slope at that confidence, and no
//! interval is returned.

use super::mann_kendall::{kendall_variance, two_sided_z};

/// A pooled slope with its rank-based interval.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct SenSlope {
    /// The median pairwise slope (units of y per unit of x).
    pub slope: f64,
    /// The confidence interval, when the data are enough to bound it.
    pub interval: Option<(f64, f64)>,
    /// How many pairwise slopes were used.
    pub pairs: usize,
}

/// The Theil-Sen slope over blocks of `(x, y)` points (x strictly increasing within a block),
/// with Sen's interval at `confidence` (e.g. 0.95). `None` when no block has two points.
pub(crate) fn sen_slope<B: AsRef<[(f64, f64)]>>(blocks: &[B], confidence: f64) -> Option<SenSlope> {
    let mut slopes = Vec::new();
    let mut var_s = 0.0;
    for block in blocks {
        let block = block.as_ref();
        for (i, (xa, ya)) in block.iter().enumerate() {
            for (xb, yb) in &block[i + 1..] {
                if xb != xa {
                    slopes.push((yb - ya) / (xb - xa));
                }
            }
        }
        let ys: Vec<f64> = block.iter().map(|p| p.1).collect();
        var_s += kendall_variance(&ys);
    }
    if slopes.is_empty() {
        return None;
    }
    // Linear-time selection of the few order statistics needed, not a full sort.
    let n = slopes.len() as f64;
    let c = two_sided_z(confidence) * var_s.max(0.0).sqrt();
    let lower_rank = (n - c) / 2.0;
    let upper_rank = (n + c) / 2.0 + 1.0;
    let interval = (lower_rank >= 1.0 && upper_rank <= n).then(|| {
        (
            order_statistic(&mut slopes, lower_rank),
            order_statistic(&mut slopes, upper_rank),
        )
    });
    let half = slopes.len() / 2;
    let slope = if slopes.len() % 2 == 1 {
        kth(&mut slopes, half)
    } else {
        0.5 * (kth(&mut slopes, half - 1) + kth(&mut slopes, half))
    };
    Some(SenSlope {
        slope,
        interval,
        pairs: slopes.len(),
    })
}

/// The value at a 1-based fractional rank, interpolating linearly between neighbours.
fn order_statistic(values: &mut [f64], rank: f64) -> f64 {
    let lo = (rank.floor() as usize).clamp(1, values.len());
    let hi = (rank.ceil() as usize).clamp(1, values.len());
    let frac = rank - rank.floor();
    let (a, b) = (kth(values, lo - 1), kth(values, hi - 1));
    a + frac * (b - a)
}

/// The `k`-th smallest value (0-based) in expected linear time; reorders `values`.
fn kth(values: &mut [f64], k: usize) -> f64 {
    *values.select_nth_unstable_by(k, f64::total_cmp).1
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(n: usize, slope: f64, wiggle: &[f64]) -> Vec<(f64, f64)> {
        (0..n)
            .map(|i| {
                (
                    i as f64,
                    100.0 + slope * i as f64 + wiggle[i % wiggle.len()],
                )
            })
            .collect()
    }

    #[test]
    fn exact_line_gives_its_slope_and_a_tight_interval() {
        let points = line(12, 3.0, &[0.0]);
        let sen = sen_slope(&[points], 0.95).unwrap();
        assert_eq!(sen.slope, 3.0);
        assert_eq!(sen.interval, Some((3.0, 3.0)));
        assert_eq!(sen.pairs, 66);
    }

    #[test]
    fn one_wild_point_barely_moves_the_slope() {
        let mut points = line(15, 2.0, &[0.3, -0.2, 0.1, -0.4]);
        points[7].1 += 1.0e6;
        let sen = sen_slope(&[points], 0.95).unwrap();
        assert!((sen.slope - 2.0).abs() < 0.3, "{sen:?}");
        let (lo, hi) = sen.interval.unwrap();
        assert!(lo < 2.0 && hi > 2.0 && hi < 3.0, "{lo} {hi}");
    }

    #[test]
    fn interval_covers_the_true_slope_and_narrows_with_more_points() {
        let wiggle = [1.0, -2.0, 0.5, 1.5, -1.0, -0.5, 2.0, -1.5];
        let short = sen_slope(&[line(10, 1.0, &wiggle)], 0.95).unwrap();
        let long = sen_slope(&[line(40, 1.0, &wiggle)], 0.95).unwrap();
        let (a, b) = short.interval.unwrap();
        let (c, d) = long.interval.unwrap();
        assert!(a < 1.0 && b > 1.0 && c < 1.0 && d > 1.0);
        assert!(d - c < b - a);
    }

    #[test]
    fn too_few_points_cannot_bound_the_slope() {
        let sen = sen_slope(&[line(4, 1.0, &[0.0, 0.5])], 0.95).unwrap();
        assert_eq!(sen.interval, None);
        assert!(sen_slope(&[vec![(0.0, 1.0)]], 0.95).is_none());
    }

    #[test]
    fn pooled_blocks_see_growth_inside_a_sawtooth() {
        // Three epochs, each rising by 5 per turn and dropping back at the reload.
        let blocks: Vec<Vec<(f64, f64)>> = (0..3)
            .map(|e| {
                (0..6)
                    .map(|k| ((e * 6 + k) as f64, 10.0 + 5.0 * k as f64))
                    .collect()
            })
            .collect();
        let sen = sen_slope(&blocks, 0.95).unwrap();
        assert_eq!(sen.slope, 5.0);
        assert_eq!(sen.pairs, 45);
    }
}
