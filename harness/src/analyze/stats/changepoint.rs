//! Where warm-up ends: a penalised search for the first turn from which the series is a straight
//! line (flat or sloped).
//!
//! The model: after every (re)load the engine may need a few turns to settle (a GPU context
//! allocated on the first inference, a pool filling up); from the settling offset `d` on, each
//! load epoch follows a straight line plus noise. Every sample before `d` is explained by a free
//! parameter of its own and costs a fixed penalty; every sample after it costs its squared residual
//! from the epoch's least-squares line, in units of the noise variance. The search picks the `d`
//! with the lowest total cost, preferring the earliest on ties:
//!
//! `cost(d) = sum over epochs of RSS(line through samples at offset >= d) / sigma^2
//!            + penalty * (samples dropped before d)`
//!
//! With `penalty = 2 ln(n)` a sample is only given up to warm-up when keeping it costs more than
//! about 2.5 sigma of misfit, so a clean series keeps its samples and a one-time step is cut off
//! exactly where it happened. This is a two-segment special case of penalised change-point search
//! (as in PELT) in which only the last segment needs a model. The caller removes spikes first and
//! bounds `d` so that the steady part keeps enough samples.

/// One load epoch: `(offset, value)` pairs in offset order, offset 0 being the (re)load sample.
pub(crate) type EpochPoints = Vec<(u64, f64)>;

/// The search's inputs besides the data.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct SettleBounds {
    /// Samples of the first epoch before this offset are warm-up by declaration.
    pub first_epoch_min: u64,
    /// The latest settling offset allowed.
    pub max_offset: u64,
    /// Noise scale of one sample (must be positive).
    pub sigma: f64,
}

/// The settling offset with the lowest penalised cost.
///
/// Only offsets at which some epoch has a sample can change the cost, so those (and 0) are the
/// candidates: the search costs `O(c * e * log n)` for `c` candidate offsets and `e` epochs,
/// which is `O(n log n)` for `n` samples however sparse the turn numbers are. Its memory is one
/// number per sample up to the latest offset allowed.
pub(crate) fn settle_offset(epochs: &[EpochPoints], bounds: SettleBounds) -> u64 {
    let total: usize = epochs.iter().map(Vec::len).sum();
    let penalty = 2.0 * (total.max(2) as f64).ln();
    let fits: Vec<SuffixFit> = epochs
        .iter()
        .map(|e| SuffixFit::new(e, bounds.max_offset.max(bounds.first_epoch_min)))
        .collect();
    let sigma2 = bounds.sigma * bounds.sigma;
    let cost_at = |d: u64| {
        let mut cost = 0.0;
        for (index, (epoch, fit)) in epochs.iter().zip(&fits).enumerate() {
            let floor = if index == 0 {
                bounds.first_epoch_min
            } else {
                0
            };
            let start = epoch.partition_point(|p| p.0 < d.max(floor));
            let free = epoch.partition_point(|p| p.0 < floor);
            cost += fit.rss_from(start) / sigma2 + penalty * (start - free) as f64;
        }
        cost
    };
    // The candidates in increasing order, each once: 0, the declared warm-up, and every
    // epoch's offsets up to the bound, merged from the epochs (already in offset order).
    let mut cursors = vec![0usize; epochs.len()];
    let mut fixed = [0, bounds.first_epoch_min.min(bounds.max_offset)];
    fixed.sort_unstable();
    let mut fixed = fixed.into_iter().peekable();
    let mut best = (f64::INFINITY, 0u64);
    let mut previous: Option<u64> = None;
    loop {
        let from_epochs = epochs
            .iter()
            .zip(&cursors)
            .filter_map(|(e, at)| e.get(*at).map(|p| p.0))
            .filter(|d| *d <= bounds.max_offset)
            .min();
        let d = match (fixed.peek().copied(), from_epochs) {
            (Some(f), Some(e)) => f.min(e),
            (Some(f), None) => f,
            (None, Some(e)) => e,
            (None, None) => break,
        };
        if fixed.peek() == Some(&d) {
            fixed.next();
        }
        for (epoch, at) in epochs.iter().zip(cursors.iter_mut()) {
            while epoch.get(*at).is_some_and(|p| p.0 == d) {
                *at += 1;
            }
        }
        if previous == Some(d) {
            continue;
        }
        previous = Some(d);
        let cost = cost_at(d);
        if cost < best.0 {
            best = (cost, d);
        }
    }
    best.1
}

/// The least-squares residual sum of squares of a line through the points from each index to
/// the end, for the indices a search can start at.
struct SuffixFit {
    /// The residual sum of squares of points `i..` at index `i`, for `i` up to the first point
    /// past the latest offset (later starts are never asked for).
    rss: Vec<f64>,
}

impl SuffixFit {
    fn new(points: &[(u64, f64)], max_offset: u64) -> Self {
        let Some(first) = points.first() else {
            return Self { rss: vec![0.0] };
        };
        // Centre the values on the first one to keep the sums small.
        let (x0, origin) = (first.0, first.1);
        let span = match points.last() {
            Some(last) if last.0 > x0 => (last.0 - x0) as f64,
            _ => 1.0,
        };
        // Starts past the first point beyond the bound are never asked for (a start is the
        // partition point of a candidate offset, at most `max_offset`).
        let kept = points.partition_point(|p| p.0 <= max_offset) + 1;
        let mut rss = vec![0.0; kept.min(points.len() + 1)];
        let mut sums = [0.0f64; 6];
        for (i, p) in points.iter().enumerate().rev() {
            // The residual sum of squares does not change when x is shifted and scaled: offsets
            // from the first point over the span keep the sums exact for huge turn numbers too.
            let (x, y) = ((p.0 - x0) as f64 / span, p.1 - origin);
            sums = [
                sums[0] + 1.0,
                sums[1] + x,
                sums[2] + y,
                sums[3] + x * x,
                sums[4] + x * y,
                sums[5] + y * y,
            ];
            if let Some(slot) = rss.get_mut(i) {
                *slot = residual(sums);
            }
        }
        Self { rss }
    }

    fn rss_from(&self, start: usize) -> f64 {
        self.rss[start.min(self.rss.len() - 1)]
    }
}

/// The residual sum of squares of the least-squares line from `[n, sx, sy, sxx, sxy, syy]`.
fn residual([n, sx, sy, sxx, sxy, syy]: [f64; 6]) -> f64 {
    if n < 3.0 {
        return 0.0;
    }
    let vxx = sxx - sx * sx / n;
    let vxy = sxy - sx * sy / n;
    let vyy = syy - sy * sy / n;
    let explained = if vxx > 0.0 { vxy * vxy / vxx } else { 0.0 };
    (vyy - explained).max(0.0)
}

#[cfg(test)]
mod tests {
    use rstest::rstest;

    use super::*;

    const NOISE: [f64; 8] = [0.4, -0.9, 0.2, 1.1, -0.3, -0.7, 0.8, -0.6];

    fn series(n: u32, shape: impl Fn(u32) -> f64) -> EpochPoints {
        (0..=n)
            .map(|t| (u64::from(t), shape(t) + NOISE[t as usize % NOISE.len()]))
            .collect()
    }

    fn bounds(max_offset: u64) -> SettleBounds {
        SettleBounds {
            first_epoch_min: 0,
            max_offset,
            sigma: 1.0,
        }
    }

    #[rstest]
    #[case::flat(|_| 0.0, 0)]
    #[case::leak_without_step(|t| 2.0 * f64::from(t), 0)]
    #[case::step_at_first_turn(|t| if t >= 1 { 50.0 } else { 0.0 }, 1)]
    #[case::step_then_leak(|t| if t >= 1 { 50.0 + 2.0 * f64::from(t) } else { 0.0 }, 1)]
    #[case::step_at_turn_four(|t| if t >= 4 { 30.0 } else { 0.0 }, 4)]
    #[case::linear_warmup_then_flat(|t: u32| 10.0 * f64::from(t.min(5)), 5)]
    fn finds_where_warmup_ends(#[case] shape: fn(u32) -> f64, #[case] expected: u64) {
        let points = series(20, shape);
        assert_eq!(settle_offset(&[points], bounds(10)), expected);
    }

    #[test]
    fn declared_warmup_is_never_charged() {
        let points = series(20, |t| if t >= 1 { 50.0 } else { 0.0 });
        let b = SettleBounds {
            first_epoch_min: 2,
            ..bounds(10)
        };
        assert!(settle_offset(&[points], b) <= 2);
    }

    #[test]
    fn every_epoch_settles_after_its_reload() {
        let epochs: Vec<EpochPoints> = (0..4)
            .map(|_| series(6, |k| if k >= 1 { 40.0 } else { 0.0 }))
            .collect();
        assert_eq!(settle_offset(&epochs, bounds(3)), 1);
    }

    #[test]
    fn sparse_turn_numbers_cost_what_their_samples_cost() {
        // Four samples far apart, and a bound beyond any turn: the candidates are the samples.
        let points: EpochPoints = [0u64, 1, 2, u64::from(u32::MAX), 1 << 53]
            .iter()
            .zip([0.0, 50.0, 50.0, 50.4, 49.7])
            .map(|(t, v)| (*t, v))
            .collect();
        assert_eq!(settle_offset(&[points], bounds(1 << 52)), 1);
        // The same shape at multiples of 1e8: the step is found at the first sample after it.
        let spread: EpochPoints = series(20, |t| if t >= 1 { 50.0 } else { 0.0 })
            .into_iter()
            .map(|(t, v)| (t * 100_000_000, v))
            .collect();
        assert_eq!(settle_offset(&[spread], bounds(1_000_000_000)), 100_000_000);
    }

    #[test]
    fn bound_caps_the_search() {
        let points = series(20, |t| 10.0 * f64::from(t.min(15)));
        assert_eq!(settle_offset(&[points], bounds(3)), 3);
    }
}
