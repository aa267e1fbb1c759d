//! Robust location and scale: medians, the median absolute deviation, the noise scale of a
//! memory series from its first differences, and the removal of isolated spikes.
//!
//! Memory samples are noisy and now and then one sample is far off (a sample taken while a
//! deferred free had not landed yet, a garbage collection in flight). Everything here is built so
//! that a single such sample cannot move the result much.

/// Consistency factor that turns a median absolute deviation into a Gaussian standard deviation.
const MAD_TO_SIGMA: f64 = 1.482_602_218_505_602;

/// The median of `values` (NaN-free); `None` when empty.
pub(crate) fn median(values: &[f64]) -> Option<f64> {
    median_in_place(&mut values.to_vec())
}

/// The median of `values` (NaN-free), reordering them; `None` when empty. A selection, not a
/// sort: linear time, and the same value a sort gives (the middle order statistics of the same
/// total order).
pub(crate) fn median_in_place(values: &mut [f64]) -> Option<f64> {
    let n = values.len();
    if n == 0 {
        return None;
    }
    let (below, middle, _) = values.select_nth_unstable_by(n / 2, f64::total_cmp);
    let middle = *middle;
    if n % 2 == 1 {
        return Some(middle);
    }
    let lower = below
        .iter()
        .copied()
        .max_by(f64::total_cmp)
        .unwrap_or(middle);
    Some(0.5 * (lower + middle))
}

/// The key of `x` in `f64::total_cmp` order, as an unsigned integer (the same order).
fn order_key(x: f64) -> u64 {
    let bits = x.to_bits();
    if bits >> 63 == 1 {
        !bits
    } else {
        bits | 1 << 63
    }
}

/// The value of an [`order_key`].
fn from_order_key(key: u64) -> f64 {
    f64::from_bits(if key >> 63 == 1 {
        key & !(1 << 63)
    } else {
        !key
    })
}

/// The `k`-th smallest (from 0, in `f64::total_cmp` order) of the values each call of `values`
/// yields, without a copy of them: four counting passes over the values, each fixing 16 bits of
/// the answer's order key with 65,536 counters (a million values would be 8 MB a copy). `None`
/// when there are not more than `k` values.
pub(crate) fn order_statistic_streamed<I: Iterator<Item = f64>>(
    values: impl Fn() -> I,
    k: usize,
) -> Option<f64> {
    let mut counts = vec![0usize; 1 << 16];
    let (mut prefix, mut rank) = (0u64, k);
    for pass in 0..4 {
        let shift = 48 - 16 * pass;
        let fixed = if pass == 0 {
            0
        } else {
            u64::MAX << (shift + 16)
        };
        counts.fill(0);
        for key in values().map(order_key).filter(|key| key & fixed == prefix) {
            counts[((key >> shift) & 0xFFFF) as usize] += 1;
        }
        let mut digit = None;
        for (d, count) in counts.iter().enumerate() {
            if rank < *count {
                digit = Some(d as u64);
                break;
            }
            rank -= count;
        }
        prefix |= digit? << shift;
    }
    Some(from_order_key(prefix))
}

/// [`median`] of the values each call of `values` yields, without a copy of them (see
/// [`order_statistic_streamed`]).
pub(crate) fn median_streamed<I: Iterator<Item = f64>>(values: impl Fn() -> I) -> Option<f64> {
    let n = values().count();
    let middle = order_statistic_streamed(&values, n / 2)?;
    if n % 2 == 1 {
        return Some(middle);
    }
    Some(0.5 * (order_statistic_streamed(&values, n / 2 - 1)? + middle))
}

/// [`noise_sigma`] of the differences each call of `diffs` yields: streamed where the median
/// absolute deviation decides (more than [`QN_MAX`] of them, a scale above zero), else as
/// [`noise_sigma`] on a copy.
pub(crate) fn noise_sigma_streamed<I: Iterator<Item = f64>>(diffs: impl Fn() -> I) -> f64 {
    if diffs().count() > QN_MAX {
        if let Some(center) = median_streamed(&diffs) {
            let mad = median_streamed(|| diffs().map(move |d| (d - center).abs())).unwrap_or(0.0);
            let scale = MAD_TO_SIGMA * mad;
            if scale > 0.0 {
                return scale / std::f64::consts::SQRT_2;
            }
        }
    }
    noise_sigma_in_place(&mut diffs().collect::<Vec<f64>>())
}

/// The `k`-th smallest of `values` (NaN-free, `k` < their number), reordering them.
#[cfg(test)]
pub(crate) fn order_statistic(values: &mut [f64], k: usize) -> f64 {
    *values.select_nth_unstable_by(k, f64::total_cmp).1
}

/// The median of an already sorted, non-empty slice.
#[cfg(test)]
pub(crate) fn median_sorted(sorted: &[f64]) -> f64 {
    let n = sorted.len();
    if n % 2 == 1 {
        sorted[n / 2]
    } else {
        0.5 * (sorted[n / 2 - 1] + sorted[n / 2])
    }
}

/// The noise scale (standard deviation of one sample) estimated from first differences.
///
/// Differencing removes the level; the scale of the differences is then taken with Rousseeuw and
/// Croux's `Qn` (a low order statistic of all pairwise distances), which needs no location, so a
/// steady per-turn slope drops out as well. `Qn` ignores up to half of the differences being wild
/// (a one-time step, spikes) and, unlike the median absolute deviation, stays reliable on the ten
/// or twenty differences of a short run (82 % Gaussian efficiency against 37 %). For independent
/// noise of scale `sigma` a difference has scale `sigma * sqrt(2)`, hence the division. Beyond
/// [`QN_MAX`] differences the MAD is used (it is accurate there and `Qn` here is quadratic).
///
/// Quantised series (many identical samples) can have a scale of zero while still moving; then the
/// mean absolute deviation of the closest 80 % of differences is used instead, so that a series is
/// only called noise-free when at least four in five differences equal the median difference.
pub(crate) fn noise_sigma(diffs: &[f64]) -> f64 {
    noise_sigma_in_place(&mut diffs.to_vec())
}

/// [`noise_sigma`] of `diffs`, which it reorders and overwrites (the caller's scratch buffer:
/// a million differences are 8 MB a copy).
pub(crate) fn noise_sigma_in_place(diffs: &mut [f64]) -> f64 {
    let Some(center) = median_in_place(diffs) else {
        return 0.0;
    };
    let to_deviations = |diffs: &mut [f64]| {
        for d in diffs.iter_mut() {
            *d = (*d - center).abs();
        }
    };
    let mut deviated = false;
    let scale = if diffs.len() < 2 {
        0.0
    } else if diffs.len() <= QN_MAX {
        // Pairwise distances: the order of the values does not matter.
        qn(diffs)
    } else {
        to_deviations(diffs);
        deviated = true;
        MAD_TO_SIGMA * median_in_place(diffs).unwrap_or(0.0)
    };
    if scale > 0.0 {
        return scale / std::f64::consts::SQRT_2;
    }
    if !deviated {
        to_deviations(diffs);
    }
    let deviations = diffs;
    deviations.sort_by(f64::total_cmp);
    let keep = ((deviations.len() as f64) * 0.8).ceil() as usize;
    let kept = &deviations[..keep.max(1)];
    let mean_abs = kept.iter().sum::<f64>() / kept.len() as f64;
    // Mean absolute deviation of a Gaussian is sigma * sqrt(2 / pi).
    mean_abs * (std::f64::consts::PI / 2.0).sqrt() / std::f64::consts::SQRT_2
}

/// The typical step times this is the least noise a metric is given (see [`noise_floor`]).
pub(crate) const STEP_NOISE_FRACTION: f64 = 0.01;

/// The least noise scale a metric whose samples move in whole steps can be said to have.
///
/// Quantized and nearly noiseless metrics (page counts, allocator segments, high-water marks, a
/// trace transcribed to two decimals) give a noise estimate of zero or near it, and a near-perfect
/// ramp whose last step is 1% larger then looks like a broken line. Two floors apply, the larger
/// wins: the metric's resolution `q` (the greatest common divisor of the steps between samples)
/// as the standard deviation of rounding to it, `q / sqrt(12)`; and [`STEP_NOISE_FRACTION`] of
/// the median absolute step, so a ramp is allowed steps that differ by about a percent.
/// `steps` are absolute differences between consecutive samples in bytes.
pub(crate) fn noise_floor(steps: &[u64]) -> f64 {
    let resolution = steps.iter().fold(0u64, |g, s| gcd(g, *s));
    let typical = {
        let mut as_f64: Vec<f64> = steps.iter().map(|s| *s as f64).collect();
        median_in_place(&mut as_f64).unwrap_or(0.0)
    };
    (resolution as f64 / 12f64.sqrt()).max(STEP_NOISE_FRACTION * typical)
}

fn gcd(mut a: u64, mut b: u64) -> u64 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

/// Above this many values the noise scale uses the MAD instead of the quadratic `Qn`.
const QN_MAX: usize = 2000;

/// Rousseeuw and Croux's `Qn` scale estimator with its Gaussian consistency constant and
/// small-sample correction (Rousseeuw & Croux 1993; Croux & Rousseeuw 1992).
pub(crate) fn qn(values: &[f64]) -> f64 {
    let n = values.len();
    if n < 2 {
        return 0.0;
    }
    let mut distances = Vec::with_capacity(n * (n - 1) / 2);
    for (i, a) in values.iter().enumerate() {
        for b in &values[i + 1..] {
            distances.push((a - b).abs());
        }
    }
    let h = n / 2 + 1;
    let k = h * (h - 1) / 2;
    let (_, kth, _) = distances.select_nth_unstable_by(k - 1, f64::total_cmp);
    let correction = match n {
        2 => 0.399,
        3 => 0.994,
        4 => 0.512,
        5 => 0.844,
        6 => 0.611,
        7 => 0.857,
        8 => 0.669,
        9 => 0.872,
        n if n % 2 == 1 => n as f64 / (n as f64 + 1.4),
        n => n as f64 / (n as f64 + 3.8),
    };
    2.2219 * correction * *kth
}

/// Replaces isolated spikes with the mean of their neighbours and returns the cleaned values and
/// the indices that were replaced.
///
/// A spike is an excursion of one or two samples that goes out and comes back: every sample in it
/// lies beyond both neighbours in the same direction by more than `threshold`. A ramp (the
/// neighbours straddle the sample), a step (one neighbour is level with it) and a saturating
/// warm-up are therefore never touched.
/// The first and the last sample have only one neighbour and are never replaced: a jump at the
/// last turn cannot be told from a step that has just started.
#[cfg(test)]
pub(crate) fn despike(values: &[f64], threshold: f64) -> (Vec<f64>, Vec<usize>) {
    let mut cleaned = values.to_vec();
    let replaced = despike_in_place(&mut cleaned, threshold);
    (cleaned, replaced)
}

/// [`despike`] in place: `values` become the cleaned values; returns the indices replaced.
/// The search reads only values it has not replaced (a replaced run is skipped past, and the
/// samples around it are not replaced), so cleaning in place sees the original series.
pub(crate) fn despike_in_place(values: &mut [f64], threshold: f64) -> Vec<usize> {
    let n = values.len();
    let mut replaced = Vec::new();
    let mut i = 1;
    while i + 1 < n {
        let width = [1usize, 2]
            .into_iter()
            .find(|w| i + w < n && is_excursion(values, i, *w, threshold));
        match width {
            Some(w) => {
                let before = values[i - 1];
                let after = values[i + w];
                for (k, slot) in values[i..i + w].iter_mut().enumerate() {
                    let f = (k + 1) as f64 / (w + 1) as f64;
                    *slot = before + f * (after - before);
                    replaced.push(i + k);
                }
                i += w + 1;
            }
            None => i += 1,
        }
    }
    replaced
}

/// Whether `values[i..i + width]` is an excursion away from `values[i - 1]` and `values[i + width]`.
fn is_excursion(values: &[f64], i: usize, width: usize, threshold: f64) -> bool {
    let before = values[i - 1];
    let after = values[i + width];
    let inner = &values[i..i + width];
    let up = inner
        .iter()
        .all(|v| v - before > threshold && v - after > threshold);
    let down = inner
        .iter()
        .all(|v| before - v > threshold && after - v > threshold);
    up || down
}

#[cfg(test)]
mod selection_tests {
    use super::*;

    /// The selection gives exactly the sorted middle, for odd and even counts, ties and signs.
    #[test]
    fn the_median_by_selection_is_the_sorted_median() {
        let mut seed = 12345u64;
        for n in 1..200usize {
            let values: Vec<f64> = (0..n)
                .map(|_| {
                    seed = seed
                        .wrapping_mul(6364136223846793005)
                        .wrapping_add(1442695040888963407);
                    ((seed >> 33) % 17) as f64 - 8.0
                        + if seed.is_multiple_of(3) { 0.5 } else { 0.0 }
                })
                .collect();
            let mut sorted = values.clone();
            sorted.sort_by(f64::total_cmp);
            assert_eq!(median(&values), Some(median_sorted(&sorted)), "{values:?}");
            assert_eq!(
                median_streamed(|| values.iter().copied()),
                Some(median_sorted(&sorted))
            );
            for k in [0, n / 4, n - 1] {
                assert_eq!(order_statistic(&mut values.clone(), k), sorted[k]);
                assert_eq!(
                    order_statistic_streamed(|| values.iter().copied(), k),
                    Some(sorted[k])
                );
            }
            assert_eq!(order_statistic_streamed(|| values.iter().copied(), n), None);
        }
        assert_eq!(median(&[]), None);
        assert_eq!(median_streamed(std::iter::empty), None);
    }

    /// Values close together (a leak's differences share their high bits), extremes, zeros of
    /// both signs: the streamed statistics are those of the sorted copy, and so is the noise.
    #[test]
    fn streamed_statistics_match_the_sorted_ones_on_awkward_values() {
        let mut seed = 7u64;
        let mut next = || {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            seed >> 11
        };
        let mut values: Vec<f64> = (0..5000)
            .map(|_| 115_343_360.0 + (next() % 4096) as f64 - 2048.0)
            .collect();
        values.extend([
            0.0,
            -0.0,
            f64::MAX,
            f64::MIN,
            1e-300,
            -1e-300,
            3.5,
            3.5,
            3.5,
        ]);
        let mut sorted = values.clone();
        sorted.sort_by(f64::total_cmp);
        for k in [0, 1, 2500, values.len() / 4, values.len() - 1] {
            assert_eq!(
                order_statistic_streamed(|| values.iter().copied(), k).map(f64::to_bits),
                Some(sorted[k].to_bits()),
                "k {k}"
            );
        }
        let noise: Vec<f64> = values[..5000].to_vec();
        assert_eq!(
            noise_sigma_streamed(|| noise.iter().copied()),
            noise_sigma(&noise)
        );
        // Quantised: the scale falls back to the mean deviation, the same either way.
        let flat: Vec<f64> = (0..3000)
            .map(|i| if i % 10 == 0 { 4.0 } else { 0.0 })
            .collect();
        assert_eq!(
            noise_sigma_streamed(|| flat.iter().copied()),
            noise_sigma(&flat)
        );
    }
}

#[cfg(test)]
mod tests {
    use rstest::rstest;

    use super::*;

    #[rstest]
    #[case::odd(&[3.0, 1.0, 2.0], 2.0)]
    #[case::even(&[4.0, 1.0, 3.0, 2.0], 2.5)]
    #[case::single(&[7.0], 7.0)]
    fn median_of_small_slices(#[case] values: &[f64], #[case] expected: f64) {
        assert_eq!(median(values), Some(expected));
    }

    #[test]
    fn median_of_nothing_is_none() {
        assert_eq!(median(&[]), None);
    }

    #[test]
    fn noise_from_differences_ignores_slope_and_one_step() {
        use rand::SeedableRng;
        use rand_distr::{Distribution, Normal};
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(1);
        let normal = Normal::new(0.0, 1.0).unwrap();
        let plain: Vec<f64> = (0..40).map(|_| normal.sample(&mut rng)).collect();
        // The same noise on a slope of 10 per turn with a step of 500 at turn 20.
        let shaped: Vec<f64> = plain
            .iter()
            .enumerate()
            .map(|(t, v)| v + 10.0 * t as f64 + if t >= 20 { 500.0 } else { 0.0 })
            .collect();
        let diffs = |v: &[f64]| v.windows(2).map(|w| w[1] - w[0]).collect::<Vec<f64>>();
        let reference = noise_sigma(&diffs(&plain));
        let sigma = noise_sigma(&diffs(&shaped));
        assert!(reference > 0.75 && reference < 1.25, "{reference}");
        assert!(
            (sigma / reference - 1.0).abs() < 0.15,
            "{sigma} vs {reference}"
        );
    }

    #[test]
    fn qn_of_gaussian_like_values_is_near_their_spread() {
        // Quantiles of N(0, 1) at (i - 0.5) / 40: a sample with standard deviation ~1.
        use statrs::distribution::{ContinuousCDF, Normal};
        let normal = Normal::standard();
        let values: Vec<f64> = (1..=40)
            .map(|i| normal.inverse_cdf((i as f64 - 0.5) / 40.0))
            .collect();
        let scale = qn(&values);
        assert!((scale - 1.0).abs() < 0.1, "{scale}");
        // Half of the values made wild leaves it bounded.
        let mut wild = values.clone();
        for v in wild.iter_mut().step_by(3) {
            *v *= 1000.0;
        }
        assert!(qn(&wild) < 3.0, "{}", qn(&wild));
    }

    #[rstest]
    #[case::pages(&[4096, 0, 8192, 4096, 0], 4096.0 / 12f64.sqrt())]
    #[case::ramp_of_one_point_six_mb(&[1_600_000, 1_600_000, 1_600_000, 1_616_000], 16_000.0)]
    #[case::still(&[0, 0, 0], 0.0)]
    #[case::odd_bytes(&[3, 5, 7], 1.0 / 12f64.sqrt())]
    fn the_noise_floor_is_the_resolution_or_a_percent_of_the_step(
        #[case] steps: &[u64],
        #[case] expected: f64,
    ) {
        assert!(
            (noise_floor(steps) - expected).abs() < 1e-6,
            "{}",
            noise_floor(steps)
        );
    }

    #[test]
    fn noise_of_a_quantised_series_is_not_zero_when_it_moves() {
        let diffs = [0.0, 0.0, 4.0, 0.0, -4.0, 0.0, 0.0, 4.0, -4.0, 0.0];
        assert!(noise_sigma(&diffs) > 0.0);
        assert_eq!(noise_sigma(&[0.0, 0.0, 0.0, 0.0]), 0.0);
    }

    #[rstest]
    #[case::middle(&[10.0, 10.0, 10.0, 90.0, 10.0, 10.0, 10.0], &[3])]
    #[case::second(&[10.0, 90.0, 10.0, 12.0, 10.0, 10.0], &[1])]
    #[case::second_to_last(&[10.0, 10.0, 10.0, 10.0, 90.0, 10.0], &[4])]
    #[case::downward(&[10.0, 10.0, -70.0, 10.0, 10.0], &[2])]
    #[case::first_is_never_replaced(&[90.0, 10.0, 10.0, 10.0, 10.0, 10.0], &[])]
    #[case::last_jump_could_be_a_step(&[10.0, 10.0, 10.0, 10.0, 10.0, -70.0], &[])]
    #[case::three_wide_is_a_plateau_not_a_spike(&[10.0, 10.0, 90.0, 90.0, 90.0, 10.0], &[])]
    #[case::on_a_ramp(&[0.0, 5.0, 10.0, 95.0, 20.0, 25.0, 30.0], &[3])]
    #[case::two_adjacent(&[10.0, 10.0, 10.0, 90.0, 90.0, 10.0, 10.0, 10.0], &[3, 4])]
    #[case::step_is_not_a_spike(&[10.0, 10.0, 10.0, 90.0, 90.0, 90.0, 90.0], &[])]
    #[case::ramp_is_not_a_spike(&[0.0, 50.0, 100.0, 150.0, 200.0, 250.0], &[])]
    #[case::saturating_rise(&[0.0, 63.0, 86.0, 95.0, 98.0, 99.0, 100.0], &[])]
    #[case::short(&[10.0, 90.0, 10.0], &[1])]
    fn despike_cases(#[case] values: &[f64], #[case] expected: &[usize]) {
        let (cleaned, replaced) = despike(values, 20.0);
        assert_eq!(replaced, expected);
        for i in expected {
            assert!((cleaned[*i] - values[*i]).abs() > 20.0);
        }
    }
}
