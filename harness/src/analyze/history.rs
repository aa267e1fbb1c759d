//! Changes across builds: given one figure (a growth per turn, a plateau size) per run of each of
//! a series of builds, oldest first, find where the figure changed beyond the builds' own
//! spread, and name the first build of the change.
//!
//! Each build counts once, by the median of its runs' figures (repeated runs make that median
//! quieter, which the test sees as a smaller spread). At every build `s` with `window` builds
//! from it on (the *after* window, `s` included) and at least `window` builds before it, the
//! after window is compared with the up to `back_window` builds before `s` by a two-sample
//! Student t statistic with the two windows' pooled standard deviation. One statistic per split
//! would flag some split of a long noise-only history by chance, so each direction is judged
//! against the whole scan: a rise is flagged when its `t` exceeds the `1 - alpha` quantile of the
//! scan's largest `t` over Gaussian noise-only histories of the same length (simulated once per
//! length, [`scan_null`]), a fall likewise with `-t`, *and* the windows' medians differ by more
//! than `spread_factor` pooled standard deviations and by more than `min_change`. `alpha` is
//! thus the chance that a noise-only history raises a regression alarm (a rise) at all; one
//! direction is judged at a time because only a rise fails `history` (a fall is reported as an
//! improvement, with the same chance `alpha` of being noise). Flagged builds less than a window
//! apart are one change; its first build is the flagged build that splits the builds those tests
//! cover with the least absolute deviation from each side's median (a least-absolute-deviations
//! change point). The scan then resumes after the change, so a second change at least a window
//! further on is found too. docs/history.md has the numbers (false alarms on noise-only builds,
//! detection of steps, and a test told where the step is).

use std::collections::HashMap;
use std::ops::Range;
use std::sync::{Arc, Mutex};

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, StandardNormal};

use crate::analyze::stats::mann_whitney::mann_whitney;
use crate::analyze::stats::robust::median;

/// How changes are searched for.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ChangeOptions {
    /// Builds in the window after a candidate change (the candidate included); a change is only
    /// judged once this many builds follow it.
    pub window: usize,
    /// The most builds in the window before it.
    pub back_window: usize,
    /// The chance that a history of noise-only builds shows a rise anywhere (the scan's
    /// family-wise false-alarm rate per direction).
    pub alpha: f64,
    /// How many of the windows' pooled standard deviations the medians must differ by.
    pub spread_factor: f64,
    /// The smallest change that counts, in the figure's unit.
    pub min_change: f64,
}

/// Builds after a candidate change, by default.
pub const DEFAULT_WINDOW: usize = 5;
/// Builds before a candidate change, per build after it, by default.
pub const BACK_WINDOW_FACTOR: usize = 3;
/// The scan's family-wise false-alarm rate, by default.
pub const DEFAULT_ALPHA: f64 = 0.01;
/// Spreads the medians must differ by, by default: a floor under the statistical test, which
/// on its own needs about 2.3 spreads at the default window.
pub const DEFAULT_SPREAD_FACTOR: f64 = 1.0;

impl Default for ChangeOptions {
    fn default() -> Self {
        ChangeOptions {
            window: DEFAULT_WINDOW,
            back_window: BACK_WINDOW_FACTOR * DEFAULT_WINDOW,
            alpha: DEFAULT_ALPHA,
            spread_factor: DEFAULT_SPREAD_FACTOR,
            min_change: 0.0,
        }
    }
}

/// A change found between two windows of builds.
#[derive(Debug, Clone, PartialEq)]
pub struct Change {
    /// The first build of the change (index into the series).
    pub build: usize,
    /// The builds compared before it.
    pub before: Range<usize>,
    /// The builds compared from it on.
    pub after: Range<usize>,
    /// The median figure before and after.
    pub before_median: f64,
    /// See `before_median`.
    pub after_median: f64,
    /// The two windows' pooled standard deviation (of the builds' median figures).
    pub spread: f64,
    /// The scan's p-value: the share of Gaussian noise-only histories of the same length whose
    /// largest rise (for a fall: largest fall) reaches this split's `t`.
    pub p_value: f64,
    /// P(a build's figure after > one before): 1 or 0 when the windows do not overlap.
    pub superiority: f64,
}

impl Change {
    /// After minus before: positive is more growth or a larger plateau.
    pub fn shift(&self) -> f64 {
        self.after_median - self.before_median
    }

    /// Whether the figure rose (a regression for growth and plateau sizes).
    pub fn is_rise(&self) -> bool {
        self.shift() > 0.0
    }
}

/// Noise-only histories simulated per history length to calibrate the scan.
const NULL_HISTORIES: usize = 4000;

/// The windows of the split at `s` of `n` builds, if the split is judged at all: `window` builds
/// from `s` on and at least `window` builds before it.
fn windows(n: usize, s: usize, options: &ChangeOptions) -> Option<(Range<usize>, Range<usize>)> {
    let k = options.window.max(2);
    let back = options.back_window.max(k);
    (s >= k && s + k <= n).then(|| (s.saturating_sub(back)..s, s..s + k))
}

/// Student's two-sample t of `after` against `before` with their pooled standard deviation (that
/// deviation too). Identical windows give 0; a shift between two noiseless windows is infinite.
fn pooled_t(before: &[f64], after: &[f64]) -> (f64, f64) {
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
    let (mb, ma) = (mean(before), mean(after));
    let squares = |v: &[f64], m: f64| v.iter().map(|x| (x - m).powi(2)).sum::<f64>();
    let dof = (before.len() + after.len()).saturating_sub(2).max(1) as f64;
    let sd = ((squares(before, mb) + squares(after, ma)) / dof).sqrt();
    let diff = ma - mb;
    let scale = sd * (1.0 / before.len() as f64 + 1.0 / after.len() as f64).sqrt();
    let t = if diff == 0.0 {
        0.0
    } else if scale > 0.0 {
        diff / scale
    } else {
        diff.signum() * f64::INFINITY
    };
    (t, sd)
}

/// The largest `t` of the scan over `values` (one figure per build): its biggest rise.
fn largest_t(values: &[f64], options: &ChangeOptions) -> f64 {
    (0..values.len())
        .filter_map(|s| windows(values.len(), s, options))
        .map(|(b, a)| pooled_t(&values[b], &values[a]).0)
        .fold(f64::NEG_INFINITY, f64::max)
}

/// The sorted largest `t` of the scan over [`NULL_HISTORIES`] Gaussian noise-only histories of
/// `n` builds (by symmetry also the distribution of the largest fall's `-t`) (fixed seed, so a history is always judged alike), kept per length and windows:
/// a nightly history of hundreds of series of the same length pays for it once. The pooled
/// t statistic does not depend on the noise's level, and for heavy-tailed noise it is if anything
/// quieter, so one calibration serves every figure (docs/history.md has the t(3) row).
fn scan_null(n: usize, options: &ChangeOptions) -> Arc<Vec<f64>> {
    type Key = (usize, usize, usize);
    static CACHE: Mutex<Option<HashMap<Key, Arc<Vec<f64>>>>> = Mutex::new(None);
    let key = (n, options.window, options.back_window);
    if let Some(found) = CACHE
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .get_or_insert_with(HashMap::new)
        .get(&key)
    {
        return Arc::clone(found);
    }
    let mut rng = ChaCha8Rng::seed_from_u64(0x6c65_616b);
    let mut values = vec![0.0; n];
    let mut maxima: Vec<f64> = (0..NULL_HISTORIES)
        .map(|_| {
            for v in &mut values {
                *v = StandardNormal.sample(&mut rng);
            }
            largest_t(&values, options)
        })
        .collect();
    maxima.sort_by(f64::total_cmp);
    let maxima = Arc::new(maxima);
    CACHE
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .get_or_insert_with(HashMap::new)
        .insert(key, Arc::clone(&maxima));
    maxima
}

/// The share of the simulated maxima at or above `|t|`: for a rise, the chance that a
/// noise-only history rises that far somewhere; for a fall, likewise (never 0: one more history
/// is counted as reaching it).
fn scan_p_value(null: &[f64], t: f64) -> f64 {
    let below = null.partition_point(|m| *m < t.abs());
    (null.len() - below + 1) as f64 / (null.len() + 1) as f64
}

/// The test at split `s` of the builds' figures `values` (one per build); `at` maps a position
/// in `values` back to the build's index in the series.
fn test_at(
    values: &[f64],
    at: &[usize],
    s: usize,
    null: &[f64],
    options: &ChangeOptions,
) -> Option<(Change, bool)> {
    let (before, after) = windows(values.len(), s, options)?;
    let (a, b) = (&values[before.clone()], &values[after.clone()]);
    let (t, spread) = pooled_t(a, b);
    let change = Change {
        build: at[s],
        before: at[before.start]..at[before.end - 1] + 1,
        after: at[after.start]..at[after.end - 1] + 1,
        before_median: median(a)?,
        after_median: median(b)?,
        spread,
        p_value: scan_p_value(null, t),
        superiority: mann_whitney(a, b).superiority,
    };
    let shift = change.shift().abs();
    let flagged = change.p_value <= options.alpha
        && shift > options.spread_factor * spread
        && shift > options.min_change;
    Some((change, flagged))
}

/// Every change in the series `builds` (one list of figures per build, oldest first; a build
/// without figures is skipped by the windows), oldest first.
pub fn find_changes(builds: &[Vec<f64>], options: &ChangeOptions) -> Vec<Change> {
    let (at, values): (Vec<usize>, Vec<f64>) = builds
        .iter()
        .enumerate()
        .filter_map(|(i, figures)| median(figures).map(|m| (i, m)))
        .unzip();
    let mut changes = Vec::new();
    if values.len() < 2 * options.window.max(2) {
        return changes;
    }
    let null = scan_null(values.len(), options);
    let mut s = 1;
    while s < values.len() {
        let Some((first, true)) = test_at(&values, &at, s, &null, options) else {
            s += 1;
            continue;
        };
        // Flagged builds less than a window apart are one change (a window that straddles the
        // change may miss the level).
        let mut flagged = vec![(s, first)];
        let mut next = s + 1;
        while next < values.len() && next <= flagged[flagged.len() - 1].0 + options.window.max(1) {
            if let Some((candidate, true)) = test_at(&values, &at, next, &null, options) {
                flagged.push((next, candidate));
            }
            next += 1;
        }
        changes.push(locate(&values, flagged, options));
        s = next;
    }
    changes
}

/// The flagged build where the change most likely starts: the split of the builds the flagged
/// tests cover into a before and an after part with the least total absolute deviation from each
/// part's median (a least-absolute-deviations change point; several windows may separate
/// completely when a build next to the change happens to lie between the levels). `flagged`
/// holds each split's position in `values` with its test.
fn locate(values: &[f64], flagged: Vec<(usize, Change)>, options: &ChangeOptions) -> Change {
    let covered: Vec<Range<usize>> = flagged
        .iter()
        .filter_map(|(s, _)| windows(values.len(), *s, options))
        .map(|(before, after)| before.start..after.end)
        .collect();
    let lo = covered.iter().map(|r| r.start).min().unwrap_or(0);
    let hi = covered.iter().map(|r| r.end).max().unwrap_or(values.len());
    let cost = |range: Range<usize>| {
        let part = &values[range];
        median(part).map_or(0.0, |m| part.iter().map(|v| (v - m).abs()).sum())
    };
    flagged
        .into_iter()
        .map(|(s, c)| (cost(lo..s) + cost(s..hi), c))
        .min_by(|(a, _), (b, _)| a.total_cmp(b))
        .map(|(_, c)| c)
        .expect("at least one flagged build")
}

/// The test a reader who knows where the step is would run: the `window` builds from `step_at`
/// on against up to `back_window` builds before it, Student's t at the two-sided level `alpha`
/// with no allowance for a scan; the benchmark's yardstick for [`find_changes`]. Whether it
/// finds a rise.
pub fn known_step_rise(builds: &[Vec<f64>], step_at: usize, options: &ChangeOptions) -> bool {
    use statrs::distribution::{ContinuousCDF, StudentsT};
    let values: Vec<f64> = builds.iter().filter_map(|f| median(f)).collect();
    let Some((before, after)) = windows(values.len(), step_at, options) else {
        return false;
    };
    let (t, _) = pooled_t(&values[before.clone()], &values[after.clone()]);
    let dof = (before.len() + after.len() - 2) as f64;
    StudentsT::new(0.0, 1.0, dof)
        .map(|d| t > d.inverse_cdf(1.0 - options.alpha / 2.0))
        .unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use rand::SeedableRng;
    use rand_chacha::ChaCha8Rng;
    use rand_distr::{Distribution, Normal};

    use super::*;

    fn noise(n: usize, step_at: Option<usize>, step: f64, seed: u64) -> Vec<Vec<f64>> {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let normal = Normal::new(0.0, 1.0).unwrap();
        (0..n)
            .map(|i| {
                let level = if step_at.is_some_and(|k| i >= k) {
                    step
                } else {
                    0.0
                };
                vec![level + normal.sample(&mut rng)]
            })
            .collect()
    }

    #[test]
    fn a_step_is_found_at_its_first_build() {
        for seed in 0..20 {
            let builds = noise(20, Some(12), 10.0, seed);
            let changes = find_changes(&builds, &ChangeOptions::default());
            assert_eq!(changes.len(), 1, "seed {seed}: {changes:#?}");
            assert_eq!(changes[0].build, 12, "seed {seed}: {changes:#?} {builds:?}");
            assert!(changes[0].is_rise());
        }
    }

    #[test]
    fn a_step_down_is_a_change_but_not_a_rise() {
        let builds = noise(16, Some(8), -10.0, 3);
        let changes = find_changes(&builds, &ChangeOptions::default());
        assert_eq!(changes.len(), 1, "{changes:#?}");
        assert_eq!(changes[0].build, 8);
        assert!(!changes[0].is_rise());
    }

    #[test]
    fn two_steps_are_two_changes() {
        let mut builds = noise(30, Some(10), 10.0, 5);
        for b in &mut builds[20..] {
            b[0] += 10.0;
        }
        let found: Vec<usize> = find_changes(&builds, &ChangeOptions::default())
            .iter()
            .map(|c| c.build)
            .collect();
        assert_eq!(found, vec![10, 20]);
    }

    #[test]
    fn a_single_wild_build_is_not_a_change() {
        let mut builds = noise(20, None, 0.0, 9);
        builds[10][0] += 50.0;
        assert!(find_changes(&builds, &ChangeOptions::default()).is_empty());
    }

    #[test]
    fn a_change_smaller_than_min_change_is_ignored_and_empty_builds_are_skipped() {
        let mut builds = noise(20, Some(10), 6.0, 1);
        builds[4].clear();
        let options = ChangeOptions {
            min_change: 10.0,
            ..ChangeOptions::default()
        };
        assert!(find_changes(&builds, &options).is_empty());
        assert_eq!(find_changes(&builds, &ChangeOptions::default()).len(), 1);
    }

    /// Issue 25's target: a step of three times the build-to-build noise is found (at or next to
    /// its first build) in nine histories of ten once five builds follow it, and noise-only
    /// histories raise a regression in about `alpha` of them (the scan's calibration). Seeded,
    /// so the shares are fixed; the bounds leave room for the seeds' luck, not for a method
    /// that misses the targets (the old windowed rank test found 37% of these steps).
    #[test]
    fn a_three_sigma_step_is_found_within_five_builds_and_noise_rarely_rises() {
        let options = ChangeOptions::default();
        let found = (0..300)
            .filter(|&seed| {
                let builds = noise(17, Some(12), 3.0, 1000 + seed);
                find_changes(&builds, &options)
                    .iter()
                    .any(|c| c.is_rise() && c.build.abs_diff(12) <= 1)
            })
            .count();
        assert!(found >= 264, "{found} of 300 steps found");
        let alarms = (0..600)
            .filter(|&seed| {
                let builds = noise(20, None, 0.0, 5000 + seed);
                find_changes(&builds, &options).iter().any(Change::is_rise)
            })
            .count();
        assert!(alarms <= 12, "{alarms} of 600 noise-only histories rose");
    }

    #[test]
    fn the_test_told_where_the_step_is_finds_it_and_not_noise() {
        let options = ChangeOptions::default();
        assert!(known_step_rise(&noise(17, Some(12), 6.0, 2), 12, &options));
        assert!(!known_step_rise(&noise(17, None, 0.0, 2), 12, &options));
        // Too few builds after it: nothing to judge.
        assert!(!known_step_rise(&noise(14, Some(12), 6.0, 2), 12, &options));
    }

    #[test]
    fn few_builds_give_no_change() {
        assert!(find_changes(&[], &ChangeOptions::default()).is_empty());
        assert!(find_changes(&[vec![1.0], vec![100.0]], &ChangeOptions::default()).is_empty());
    }
}
