//! The Mann-Kendall trend test, with the correction for tied values, summed over independent
//! blocks (the blocked or "seasonal" form: each block is one load epoch of the engine).
//!
//! The statistic `S` counts, over every pair of samples in the same block, +1 when the later one
//! is larger and -1 when it is smaller. Under "no trend" with independent noise `S` has mean 0 and
//! a variance known in closed form (reduced by groups of tied values); for more than a handful of
//! samples `S` is close to normal. It is rank-based, so a single wild sample changes `S` by at
//! most the number of samples in its block, whatever its size.

use statrs::distribution::{ContinuousCDF, Normal};

/// The result of the test on one series (or one set of blocks).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct TrendTest {
    /// Kendall's `S` summed over blocks.
    pub s: i64,
    /// Its variance under "no trend", corrected for ties.
    pub var_s: f64,
    /// The continuity-corrected normal score.
    pub z: f64,
    /// One-sided p-value for an increasing trend.
    pub p_increasing: f64,
}

/// Kendall's `S` for values in time order, in `O(n log n)`.
///
/// `S = P - T - 2 I` over the `P = n(n-1)/2` pairs, with `T` the tied pairs and `I` the strict
/// inversions (a later value smaller than an earlier one), counted while merge-sorting.
#[cfg(test)]
pub(crate) fn kendall_s(values: &[f64]) -> i64 {
    kendall_s_and_variance(values).0
}

/// [`mann_kendall`] of blocks the test may reorder (it sorts each in place): one buffer of a
/// block's size instead of two.
pub(crate) fn mann_kendall_in_place(blocks: &mut [Vec<f64>]) -> TrendTest {
    let (s, var_s) = blocks.iter_mut().fold((0i64, 0.0f64), |(s, v), block| {
        let (block_s, block_v) = kendall_sorting(block);
        (s + block_s, v + block_v)
    });
    trend_test(s, var_s)
}

/// [`kendall_s`] and [`kendall_variance`] of `values` from one sorted copy (the count of
/// inversions sorts it in the order the variance's ties are counted in): a million values cost
/// two buffers of 8 MB, not three, and one sort.
pub(crate) fn kendall_s_and_variance(values: &[f64]) -> (i64, f64) {
    kendall_sorting(&mut values.to_vec())
}

/// [`kendall_s_and_variance`] of `values`, which it sorts.
fn kendall_sorting(sorted: &mut [f64]) -> (i64, f64) {
    let n = sorted.len() as i64;
    let mut buffer = vec![0.0; sorted.len()];
    let inversions = count_inversions(sorted, &mut buffer) as i64;
    drop(buffer);
    let mut ties = 0i64;
    let mut run = 1i64;
    for i in 1..=sorted.len() {
        if i < sorted.len() && sorted[i].total_cmp(&sorted[i - 1]).is_eq() {
            run += 1;
        } else {
            ties += run * (run - 1) / 2;
            run = 1;
        }
    }
    let s = n * (n - 1) / 2 - ties - 2 * inversions;
    (s, variance_of_sorted(sorted))
}

/// Sorts `values` and returns how many pairs were strictly out of order.
fn count_inversions(values: &mut [f64], buffer: &mut [f64]) -> u64 {
    let n = values.len();
    if n < 2 {
        return 0;
    }
    let mid = n / 2;
    let (left_buffer, right_buffer) = buffer.split_at_mut(mid);
    let mut count = count_inversions(&mut values[..mid], left_buffer)
        + count_inversions(&mut values[mid..], right_buffer);
    let (mut i, mut j) = (0, mid);
    for slot in buffer[..n].iter_mut() {
        // Equal values are taken from the left first, so ties are never counted.
        let take_left = j >= n || (i < mid && values[i].total_cmp(&values[j]).is_le());
        if take_left {
            *slot = values[i];
            i += 1;
        } else {
            *slot = values[j];
            count += (mid - i) as u64;
            j += 1;
        }
    }
    values.copy_from_slice(&buffer[..n]);
    count
}

/// The variance of `S` under "no trend" for these values, with the ties correction
/// `n(n-1)(2n+5)/18 - sum over tie groups of t(t-1)(2t+5)/18`.
pub(crate) fn kendall_variance(values: &[f64]) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    variance_of_sorted(&sorted)
}

/// [`kendall_variance`] of values already sorted by `f64::total_cmp`.
fn variance_of_sorted(sorted: &[f64]) -> f64 {
    let n = sorted.len() as f64;
    let mut ties = 0.0;
    let mut run = 1usize;
    for i in 1..=sorted.len() {
        if i < sorted.len() && sorted[i] == sorted[i - 1] {
            run += 1;
        } else {
            let t = run as f64;
            ties += t * (t - 1.0) * (2.0 * t + 5.0);
            run = 1;
        }
    }
    (n * (n - 1.0) * (2.0 * n + 5.0) - ties) / 18.0
}

/// Runs the test over independent blocks (each in time order) and sums `S` and its variance.
pub(crate) fn mann_kendall<B: AsRef<[f64]>>(blocks: &[B]) -> TrendTest {
    let (s, var_s) = blocks.iter().fold((0i64, 0.0f64), |(s, v), block| {
        let (block_s, block_v) = kendall_s_and_variance(block.as_ref());
        (s + block_s, v + block_v)
    });
    trend_test(s, var_s)
}

/// The test of `S` summed over blocks with its variance.
fn trend_test(s: i64, var_s: f64) -> TrendTest {
    let z = if var_s <= 0.0 {
        0.0
    } else {
        // Continuity correction: S moves in steps of 2.
        let corrected = s as f64 - (s.signum() as f64);
        corrected / var_s.sqrt()
    };
    TrendTest {
        s,
        var_s,
        z,
        p_increasing: 1.0 - standard_normal().cdf(z),
    }
}

/// The standard normal distribution.
pub(crate) fn standard_normal() -> Normal {
    Normal::standard()
}

/// The two-sided normal quantile for a confidence level (e.g. 1.96 for 0.95).
pub(crate) fn two_sided_z(confidence: f64) -> f64 {
    standard_normal().inverse_cdf(0.5 + confidence / 2.0)
}

#[cfg(test)]
mod tests {
    use rstest::rstest;

    use super::*;

    #[rstest]
    #[case::rising(&[1.0, 2.0, 3.0, 4.0], 6)]
    #[case::falling(&[4.0, 3.0, 2.0, 1.0], -6)]
    #[case::ties_count_zero(&[1.0, 1.0, 1.0], 0)]
    #[case::mixed(&[1.0, 3.0, 2.0], 1)]
    fn s_counts_pairs(#[case] values: &[f64], #[case] expected: i64) {
        assert_eq!(kendall_s(values), expected);
    }

    #[test]
    fn s_matches_the_pairwise_count() {
        use rand::{RngExt, SeedableRng};
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(4);
        for n in [0usize, 1, 2, 3, 7, 50, 201] {
            // Few distinct values, so that ties are common.
            let values: Vec<f64> = (0..n)
                .map(|_| f64::from(rng.random_range(0..6u8)))
                .collect();
            let mut pairwise = 0i64;
            for (i, a) in values.iter().enumerate() {
                for b in &values[i + 1..] {
                    pairwise += b.total_cmp(a) as i64;
                }
            }
            assert_eq!(kendall_s(&values), pairwise, "{values:?}");
        }
    }

    #[test]
    fn variance_without_and_with_ties() {
        // n = 10: 10 * 9 * 25 / 18 = 125.
        let distinct: Vec<f64> = (0..10).map(f64::from).collect();
        assert!((kendall_variance(&distinct) - 125.0).abs() < 1e-9);
        // One pair tied removes 2 * 1 * 9 / 18 = 1.
        let mut tied = distinct.clone();
        tied[3] = tied[2];
        assert!((kendall_variance(&tied) - 124.0).abs() < 1e-9);
        assert_eq!(kendall_variance(&[5.0, 5.0, 5.0]), 0.0);
    }

    #[test]
    fn a_clear_rise_is_significant_and_noise_is_not() {
        let rising: Vec<f64> = (0..20)
            .map(|t| t as f64 + if t % 3 == 0 { 2.5 } else { 0.0 })
            .collect();
        assert!(mann_kendall(&[rising]).p_increasing < 0.001);
        let flat = [
            3.0, 1.0, 4.0, 1.0, 5.0, 9.0, 2.0, 6.0, 5.0, 3.0, 5.0, 8.0, 9.0, 7.0, 9.0, 3.0,
        ];
        let test = mann_kendall(&[flat]);
        assert!(test.p_increasing > 0.01, "{test:?}");
    }

    #[test]
    fn blocks_sum_their_statistics() {
        let a = [1.0, 2.0, 3.0];
        let b = [0.0, 1.0, 2.0];
        let joint = mann_kendall(&[a, b]);
        assert_eq!(joint.s, 6);
        assert!((joint.var_s - 2.0 * kendall_variance(&a)).abs() < 1e-12);
        // The sawtooth rises within blocks though hardly over the whole series.
        let whole = mann_kendall(&[[1.0, 2.0, 3.0, 0.0, 1.0, 2.0]]);
        assert_eq!(whole.s, 1);
    }

    #[test]
    fn constant_series_has_no_trend() {
        let test = mann_kendall(&[[7.0; 6]]);
        assert_eq!((test.s, test.z), (0, 0.0));
        assert!((test.p_increasing - 0.5).abs() < 1e-12);
    }

    #[test]
    fn two_sided_quantile_matches_tables() {
        assert!((two_sided_z(0.95) - 1.959_964).abs() < 1e-5);
    }
}
