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
    if values.is_empty() {
        return None;
    }
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    Some(median_sorted(&sorted))
}

/// The median of an already sorted, non-empty slice.
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
/// Differencing removes the level and, because the MAD is taken around the median difference, a
/// steady per-turn slope as well. A one-time step or a spike only contaminates one or two
/// differences, which the median ignores. For independent noise of scale `sigma` a difference has
/// scale `sigma * sqrt(2)`, hence the division.
///
/// Quantised series (many identical samples) can have a MAD of zero while still moving; then the
/// mean absolute deviation of the closest 80 % of differences is used instead, so that a series is
/// only called noise-free when at least four in five differences equal the median difference.
pub(crate) fn noise_sigma(diffs: &[f64]) -> f64 {
    let Some(center) = median(diffs) else {
        return 0.0;
    };
    let mut deviations: Vec<f64> = diffs.iter().map(|d| (d - center).abs()).collect();
    deviations.sort_by(f64::total_cmp);
    let raw = median_sorted(&deviations);
    if raw > 0.0 {
        return MAD_TO_SIGMA * raw / std::f64::consts::SQRT_2;
    }
    let keep = ((deviations.len() as f64) * 0.8).ceil() as usize;
    let kept = &deviations[..keep.max(1)];
    let mean_abs = kept.iter().sum::<f64>() / kept.len() as f64;
    // Mean absolute deviation of a Gaussian is sigma * sqrt(2 / pi).
    mean_abs * (std::f64::consts::PI / 2.0).sqrt() / std::f64::consts::SQRT_2
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
pub(crate) fn despike(values: &[f64], threshold: f64) -> (Vec<f64>, Vec<usize>) {
    let n = values.len();
    let mut cleaned = values.to_vec();
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
                for (k, slot) in cleaned[i..i + w].iter_mut().enumerate() {
                    let f = (k + 1) as f64 / (w + 1) as f64;
                    *slot = before + f * (after - before);
                    replaced.push(i + k);
                }
                i += w + 1;
            }
            None => i += 1,
        }
    }
    (cleaned, replaced)
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
        let noise = [0.4, -0.9, 0.2, 1.1, -0.3, -0.7, 0.8, -0.6, 1.3, 0.1, -1.2];
        let plain: Vec<f64> = (0..40).map(|t| noise[t % noise.len()]).collect();
        // The same noise on a slope of 10 per turn with a step of 500 at turn 20.
        let shaped: Vec<f64> = plain
            .iter()
            .enumerate()
            .map(|(t, v)| v + 10.0 * t as f64 + if t >= 20 { 500.0 } else { 0.0 })
            .collect();
        let diffs = |v: &[f64]| v.windows(2).map(|w| w[1] - w[0]).collect::<Vec<f64>>();
        let reference = noise_sigma(&diffs(&plain));
        let sigma = noise_sigma(&diffs(&shaped));
        assert!(reference > 0.5 && reference < 1.5, "{reference}");
        assert!(
            (sigma / reference - 1.0).abs() < 0.15,
            "{sigma} vs {reference}"
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
