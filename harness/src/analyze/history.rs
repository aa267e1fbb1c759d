//! Changes across builds: given one figure (a growth per turn, a plateau size) per run of each of
//! a series of builds, oldest first, find where the figure changed beyond the builds' own
//! spread, and name the first build of the change.
//!
//! The method is the one browser memory dashboards use: at every build `s`, the window of the
//! next `window` builds (`s` included) is compared with the window of the `back_window` builds
//! before it by a two-sample rank test (Mann-Whitney U). A build is flagged when the test is
//! significant at `alpha` *and* the windows' medians differ by more than `spread_factor` times
//! the larger of the two windows' own spreads (robust scale, `Qn`) and by more than
//! `min_change`. Flagged builds less than a window apart are one change; its first build is the
//! flagged build that splits the builds those tests cover with the least absolute deviation from
//! each side's median (a least-absolute-deviations change point). The scan then resumes after
//! the change, so a second change at least a window further on is found too. docs/history.md
//! has the numbers (false alarms on noise-only builds, detection of steps).

use std::ops::Range;

use crate::analyze::stats::mann_whitney::mann_whitney;
use crate::analyze::stats::robust::{median, qn};

/// How changes are searched for.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ChangeOptions {
    /// Builds in the window after a candidate change (the candidate included).
    pub window: usize,
    /// Builds in the window before it.
    pub back_window: usize,
    /// The rank test's two-sided significance level.
    pub alpha: f64,
    /// How many of the windows' spreads the medians must differ by.
    pub spread_factor: f64,
    /// The smallest change that counts, in the figure's unit.
    pub min_change: f64,
}

/// Builds after a candidate change, by default.
pub const DEFAULT_WINDOW: usize = 5;
/// The rank test's level, by default.
pub const DEFAULT_ALPHA: f64 = 0.01;
/// Spreads the medians must differ by, by default.
pub const DEFAULT_SPREAD_FACTOR: f64 = 3.0;

impl Default for ChangeOptions {
    fn default() -> Self {
        ChangeOptions {
            window: DEFAULT_WINDOW,
            back_window: 2 * DEFAULT_WINDOW,
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
    /// The larger of the two windows' spreads (robust standard deviation of their figures).
    pub spread: f64,
    /// The rank test's two-sided p-value.
    pub p_value: f64,
    /// P(a figure after > a figure before): 1 or 0 when the windows do not overlap.
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

/// The figures of builds `range`, flattened.
fn pooled(builds: &[Vec<f64>], range: Range<usize>) -> Vec<f64> {
    builds[range].iter().flatten().copied().collect()
}

/// The test at build `s`, if both windows hold figures.
fn test_at(builds: &[Vec<f64>], s: usize, options: &ChangeOptions) -> Option<(Change, bool)> {
    let before = s.saturating_sub(options.back_window.max(1))..s;
    let after = s..(s + options.window.max(1)).min(builds.len());
    let (a, b) = (
        pooled(builds, before.clone()),
        pooled(builds, after.clone()),
    );
    let (before_median, after_median) = (median(&a)?, median(&b)?);
    let test = mann_whitney(&a, &b);
    let spread = qn(&a).max(qn(&b));
    let change = Change {
        build: s,
        before,
        after,
        before_median,
        after_median,
        spread,
        p_value: test.p_value,
        superiority: test.superiority,
    };
    let shift = change.shift().abs();
    let flagged = test.p_value < options.alpha
        && shift > options.spread_factor * spread
        && shift > options.min_change;
    Some((change, flagged))
}

/// Every change in the series `builds` (one list of figures per build, oldest first; a build
/// without figures is skipped by the windows), oldest first.
pub fn find_changes(builds: &[Vec<f64>], options: &ChangeOptions) -> Vec<Change> {
    let mut changes = Vec::new();
    let mut s = 1;
    while s < builds.len() {
        let Some((first, true)) = test_at(builds, s, options) else {
            s += 1;
            continue;
        };
        // Flagged builds less than a window apart are one change (a window that straddles the
        // change may miss the level).
        let mut flagged = vec![first];
        let mut next = s + 1;
        while next < builds.len()
            && next <= flagged[flagged.len() - 1].build + options.window.max(1)
        {
            if let Some((candidate, true)) = test_at(builds, next, options) {
                flagged.push(candidate);
            }
            next += 1;
        }
        let best = locate(builds, flagged);
        s = next;
        changes.push(best);
    }
    changes
}

/// The flagged build where the change most likely starts: the split of the builds the flagged
/// tests cover into a before and an after part with the least total absolute deviation from each
/// part's median (a least-absolute-deviations change point; several windows may separate
/// completely when a build next to the change happens to lie between the levels).
fn locate(builds: &[Vec<f64>], flagged: Vec<Change>) -> Change {
    let lo = flagged.iter().map(|c| c.before.start).min().unwrap_or(0);
    let hi = flagged
        .iter()
        .map(|c| c.after.end)
        .max()
        .unwrap_or(builds.len());
    let cost = |range: Range<usize>| {
        let values = pooled(builds, range);
        median(&values).map_or(0.0, |m| values.iter().map(|v| (v - m).abs()).sum())
    };
    flagged
        .into_iter()
        .map(|c| (cost(lo..c.build) + cost(c.build..hi), c))
        .min_by(|(a, _), (b, _)| a.total_cmp(b))
        .map(|(_, c)| c)
        .expect("at least one flagged build")
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

    #[test]
    fn few_builds_give_no_change() {
        assert!(find_changes(&[], &ChangeOptions::default()).is_empty());
        assert!(find_changes(&[vec![1.0], vec![100.0]], &ChangeOptions::default()).is_empty());
    }
}
