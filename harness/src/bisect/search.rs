//! What `leakloop bisect` measures on each build and how it decides that a build changed: one
//! figure per run ([`Metric`]), several runs per build, and a change only where two builds'
//! figures differ by more than the larger of their own run-to-run spreads ([`changed`]). The
//! order in which builds run ([`search`]) is either every build in turn or a bisection.

use crate::analyze::Verdict;
use crate::runner::RunRecord;

/// The figure compared across builds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Metric {
    /// The slope of the watched metric per turn after warm-up (bytes per turn).
    Growth,
    /// The one-time rise of the watched metric that settled (bytes; 0 when none).
    Plateau,
    /// The largest sample of the watched metric over the run (bytes).
    Peak,
    /// How many expectations failed (0 = the scenario passed).
    Expectations,
}

impl Metric {
    /// The figure of one run, or `None` when the run did not measure it (an engine that failed
    /// before the metric was analysed, a metric not sampled).
    pub(crate) fn of(&self, watch: &str, record: &RunRecord, verdict: &Verdict) -> Option<f64> {
        match self {
            Metric::Growth => verdict.metrics.get(watch).map(|m| m.slope_bytes_per_turn),
            Metric::Plateau => verdict
                .metrics
                .get(watch)
                .map(|m| m.plateau.map_or(0.0, |p| p.size_bytes as f64)),
            Metric::Peak => record
                .samples
                .metric(watch)
                .and_then(|values| values.iter().flatten().max())
                .map(|v| v as f64),
            Metric::Expectations => {
                Some(verdict.expectations.iter().filter(|e| !e.passed).count() as f64)
            }
        }
    }

    /// The name in the table and the plot.
    pub(crate) fn describe(&self, watch: &str) -> String {
        match self {
            Metric::Growth => format!("{watch} growth per turn"),
            Metric::Plateau => format!("{watch} plateau (one-time rise)"),
            Metric::Peak => format!("{watch} peak"),
            Metric::Expectations => "failed expectations".to_owned(),
        }
    }

    /// Whether the figure is a byte count (else a plain count).
    pub(crate) fn is_bytes(&self) -> bool {
        !matches!(self, Metric::Expectations)
    }
}

/// One build's figures, one per run that measured it.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Figures(pub Vec<f64>);

impl Figures {
    /// The mean, or `None` without figures.
    pub(crate) fn mean(&self) -> Option<f64> {
        (!self.0.is_empty()).then(|| self.0.iter().sum::<f64>() / self.0.len() as f64)
    }

    /// The smallest and largest figure.
    pub(crate) fn range(&self) -> Option<(f64, f64)> {
        let min = self.0.iter().copied().reduce(f64::min)?;
        let max = self.0.iter().copied().reduce(f64::max)?;
        Some((min, max))
    }

    /// Largest minus smallest: the run-to-run spread (0 with one run).
    pub(crate) fn spread(&self) -> f64 {
        self.range().map_or(0.0, |(lo, hi)| hi - lo)
    }
}

/// Whether `b` changed from `a`: their ranges do not overlap and their means differ by more
/// than the larger spread (and by more than `min_change`). Builds without figures never count as
/// changed.
pub(crate) fn changed(a: &Figures, b: &Figures, min_change: f64) -> bool {
    let (Some((a_lo, a_hi)), Some((b_lo, b_hi)), Some(am), Some(bm)) =
        (a.range(), b.range(), a.mean(), b.mean())
    else {
        return false;
    };
    let allowed = a.spread().max(b.spread()).max(min_change);
    (bm - am).abs() > allowed && (b_lo > a_hi || b_hi < a_lo)
}

/// How builds are visited.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Order {
    /// Every build, oldest first; the first change between neighbours is reported.
    Sequential,
    /// The first and last build, then halving: assumes one step change and runs about log2(n)
    /// builds; the first build that differs from the first one is reported.
    Bisect,
}

/// What a search found.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Found {
    /// The figures of every build that ran (by index); `None` for builds not run.
    pub figures: Vec<Option<Figures>>,
    /// The first changed build and the build it is compared with.
    pub first_change: Option<(usize, usize)>,
}

/// Visits `n` builds in `order`, measuring each with `measure` (called once per build that
/// runs, in visiting order).
pub(crate) fn search(
    n: usize,
    order: Order,
    min_change: f64,
    mut measure: impl FnMut(usize) -> Figures,
) -> Found {
    let mut figures: Vec<Option<Figures>> = vec![None; n];
    let mut get = |i: usize, figures: &mut Vec<Option<Figures>>| -> Figures {
        if figures[i].is_none() {
            figures[i] = Some(measure(i));
        }
        figures[i].clone().unwrap_or_default()
    };
    if n == 0 {
        return Found {
            figures,
            first_change: None,
        };
    }
    let first_change = match order {
        Order::Sequential => {
            let mut found = None;
            let mut prev = get(0, &mut figures);
            for i in 1..n {
                let cur = get(i, &mut figures);
                if found.is_none() && changed(&prev, &cur, min_change) {
                    found = Some((i, i - 1));
                }
                prev = cur;
            }
            found
        }
        Order::Bisect => {
            let first = get(0, &mut figures);
            let last = get(n - 1, &mut figures);
            if n < 2 || !changed(&first, &last, min_change) {
                None
            } else {
                let (mut lo, mut hi) = (0, n - 1);
                while hi - lo > 1 {
                    let mid = lo + (hi - lo) / 2;
                    let m = get(mid, &mut figures);
                    if changed(&first, &m, min_change) {
                        hi = mid;
                    } else {
                        lo = mid;
                    }
                }
                Some((hi, lo))
            }
        }
    };
    Found {
        figures,
        first_change,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f(values: &[f64]) -> Figures {
        Figures(values.to_vec())
    }

    #[test]
    fn a_difference_inside_the_spread_is_no_change() {
        assert!(!changed(&f(&[10.0, 30.0]), &f(&[25.0, 40.0]), 0.0));
        assert!(changed(&f(&[10.0, 12.0]), &f(&[20.0, 21.0]), 0.0));
        // Disjoint ranges, but the means differ by less than the larger spread.
        assert!(!changed(&f(&[0.0, 10.0]), &f(&[11.0, 12.0]), 0.0));
        // A floor on top of the spread.
        assert!(!changed(&f(&[10.0]), &f(&[20.0]), 16.0));
        assert!(!changed(&f(&[]), &f(&[20.0]), 0.0));
    }

    /// Builds 0..n whose figure steps from 0 to 100 at `step`, with a run-to-run wobble of ±2.
    fn step_builds(step: usize) -> impl FnMut(usize) -> Figures {
        move |i| {
            let base = if i >= step { 100.0 } else { 0.0 };
            f(&[base - 2.0, base + 1.0, base + 2.0])
        }
    }

    #[test]
    fn sequential_search_finds_the_first_step_and_runs_every_build() {
        let mut runs = vec![];
        let mut measure = step_builds(5);
        let found = search(8, Order::Sequential, 0.0, |i| {
            runs.push(i);
            measure(i)
        });
        assert_eq!(found.first_change, Some((5, 4)));
        assert_eq!(runs, (0..8).collect::<Vec<_>>());
    }

    #[test]
    fn bisection_finds_the_same_step_in_fewer_builds() {
        for step in 1..16 {
            let mut runs = vec![];
            let mut measure = step_builds(step);
            let found = search(16, Order::Bisect, 0.0, |i| {
                runs.push(i);
                measure(i)
            });
            assert_eq!(
                found.first_change,
                Some((step, found.first_change.unwrap().1))
            );
            assert!(runs.len() <= 2 + 4, "step {step}: ran {runs:?}");
            assert!(found.figures[step].is_some());
        }
        // No step at all: two builds run, nothing found.
        let found = search(16, Order::Bisect, 0.0, |_| f(&[1.0, 2.0]));
        assert_eq!(found.first_change, None);
        assert_eq!(found.figures.iter().filter(|x| x.is_some()).count(), 2);
    }
}
