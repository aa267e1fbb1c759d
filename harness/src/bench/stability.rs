//! `leakloop bench stability`: how steady a scenario's verdict is from run to run. Each scenario
//! runs N times through one [`Session`] per run (as `run --out` does, each run in its own folder),
//! optionally with K busy threads of the benchmark's own spinning beside it, and the table says
//! per scenario how the verdicts spread (runs per verdict word), how many of them were false FAILs
//! (failed where the scenario is expected to pass), and per metric how the class words spread and
//! how far the growth per turn and its upper bound moved (min, median, max).
//!
//! A verdict that flips on the load of the machine or on the size of the environment cannot gate a
//! build unattended; this benchmark makes that visible before a team relies on it. It prints
//! figures and asserts none.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Instant;

use crate::analyze::units::quantity;
use crate::analyze::{median, Classification, Verdict, VerdictStatus};
use crate::report::safe_path::unique_slugs;
use crate::scenario::Scenario;
use crate::session::{Session, SessionError, SessionObserver};

/// The most busy threads the benchmark starts (more only measures the scheduler).
pub const MAX_LOAD_THREADS: u32 = 64;

/// Why the benchmark stopped before its table.
#[derive(Debug, thiserror::Error)]
pub enum StabilityError {
    /// A run could not start (its engine missing, its folder held).
    #[error(transparent)]
    Session(#[from] SessionError),
    /// The busy threads could not be started.
    #[error("cannot start the benchmark's busy threads: {0}")]
    Load(std::io::Error),
}

/// The verdict a scenario is expected to reach.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExpectedVerdict {
    /// Every run should pass: a failing run is a false FAIL.
    Pass,
    /// Every run should fail: a passing run is a missed leak.
    Fail,
}

impl ExpectedVerdict {
    /// The verdict word this expectation names (`pass`, `fail`).
    pub fn as_str(self) -> &'static str {
        match self {
            ExpectedVerdict::Pass => VerdictStatus::Pass.as_str(),
            ExpectedVerdict::Fail => VerdictStatus::Fail.as_str(),
        }
    }

    /// The expectation a scenario file states in its header comment, the fixtures' convention: the
    /// first comment line before the YAML starts that holds `Expected:` followed by `PASS` or
    /// `FAIL` (e.g. `# Expected: PASS (exit 0) on the real CPU engine.`); `None` without one.
    pub fn from_header(text: &str) -> Option<Self> {
        text.lines()
            .map(str::trim)
            .take_while(|l| l.is_empty() || l.starts_with('#'))
            .filter_map(|l| l.split_once("Expected:").map(|(_, rest)| rest))
            .find_map(|rest| {
                match rest
                    .split_whitespace()
                    .next()?
                    .trim_end_matches([',', '.', ':'])
                {
                    "PASS" => Some(ExpectedVerdict::Pass),
                    "FAIL" => Some(ExpectedVerdict::Fail),
                    _ => None,
                }
            })
    }
}

/// One scenario to run again and again, with the verdict it is expected to reach.
#[derive(Debug, Clone)]
pub struct StabilityScenario {
    /// The scenario, loaded (with any overrides applied).
    pub scenario: Scenario,
    /// The verdict every run should reach.
    pub expected: ExpectedVerdict,
}

/// What one run of a metric measured.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MetricRun {
    /// The class word.
    pub class: Classification,
    /// Growth per turn after warm-up, in the metric's unit per turn.
    pub slope: f64,
    /// The upper bound of the slope's confidence interval, when the analyzer gave one.
    pub upper: Option<f64>,
}

/// What one run ended with.
#[derive(Debug, Clone, PartialEq)]
pub struct StabilityRun {
    /// The verdict word (`pass`, `fail`, ...), as report.json writes it.
    pub verdict: &'static str,
    /// Per watched metric, by name.
    pub metrics: BTreeMap<String, MetricRun>,
    /// Wall time of the run, start to reports written, in seconds.
    pub seconds: f64,
}

impl StabilityRun {
    /// The figures of `verdict`, from a run that took `seconds`.
    pub fn of(verdict: &Verdict, seconds: f64) -> Self {
        let metrics = verdict
            .metrics
            .iter()
            .map(|(name, m)| {
                let run = MetricRun {
                    class: m.classification,
                    slope: m.slope_bytes_per_turn,
                    upper: m.slope_interval.map(|(_, high)| high),
                };
                (name.clone(), run)
            })
            .collect();
        Self {
            verdict: verdict.status.as_str(),
            metrics,
            seconds,
        }
    }
}

/// A scenario's runs.
#[derive(Debug, Clone, PartialEq)]
pub struct StabilityRow {
    /// The scenario's name.
    pub name: String,
    /// The verdict expected of every run.
    pub expected: ExpectedVerdict,
    /// Every run, in order.
    pub runs: Vec<StabilityRun>,
}

impl StabilityRow {
    /// Runs per verdict word.
    pub fn verdicts(&self) -> BTreeMap<&'static str, usize> {
        count(self.runs.iter().map(|r| r.verdict))
    }

    /// Runs whose verdict is not the expected one.
    pub fn wrong(&self) -> usize {
        let expected = self.expected.as_str();
        self.runs.iter().filter(|r| r.verdict != expected).count()
    }

    /// Runs that failed although the scenario is expected to pass (`None` when it is expected to
    /// fail).
    pub fn false_fails(&self) -> Option<usize> {
        let fail = VerdictStatus::Fail.as_str();
        (self.expected == ExpectedVerdict::Pass)
            .then(|| self.runs.iter().filter(|r| r.verdict == fail).count())
    }

    /// Every metric any run analysed, by name.
    pub fn metric_names(&self) -> BTreeSet<&str> {
        self.runs
            .iter()
            .flat_map(|r| r.metrics.keys().map(String::as_str))
            .collect()
    }

    /// Runs per class word of `metric` (runs without it are left out).
    pub fn classes(&self, metric: &str) -> BTreeMap<&'static str, usize> {
        count(self.metric_runs(metric).map(|m| m.class.as_str()))
    }

    /// The spread of `metric`'s growth per turn over the runs.
    pub fn slope_spread(&self, metric: &str) -> Option<Spread> {
        Spread::of(self.metric_runs(metric).map(|m| m.slope))
    }

    /// The spread of the upper bound of `metric`'s growth per turn over the runs that have one.
    pub fn upper_spread(&self, metric: &str) -> Option<Spread> {
        Spread::of(self.metric_runs(metric).filter_map(|m| m.upper))
    }

    fn metric_runs<'a>(&'a self, metric: &'a str) -> impl Iterator<Item = &'a MetricRun> + 'a {
        self.runs.iter().filter_map(move |r| r.metrics.get(metric))
    }
}

/// How many times each word occurs.
fn count(words: impl Iterator<Item = &'static str>) -> BTreeMap<&'static str, usize> {
    let mut counts = BTreeMap::new();
    for word in words {
        *counts.entry(word).or_insert(0) += 1;
    }
    counts
}

/// The smallest, the median and the largest of some figures.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Spread {
    /// The smallest.
    pub min: f64,
    /// The median.
    pub median: f64,
    /// The largest.
    pub max: f64,
}

impl Spread {
    /// The spread of the finite `values`; `None` when there is none.
    pub fn of(values: impl Iterator<Item = f64>) -> Option<Self> {
        let values: Vec<f64> = values.filter(|v| v.is_finite()).collect();
        Some(Self {
            min: values.iter().copied().reduce(f64::min)?,
            median: median(&values)?,
            max: values.iter().copied().reduce(f64::max)?,
        })
    }
}

/// K threads that keep K cores busy until dropped: the benchmark's own load, so that a run
/// competes for the CPU the way it does on a shared CI machine. They spin on arithmetic (no
/// memory of their own beyond their stacks) and look at a shared flag on every round, so that
/// dropping the load stops and joins them at once.
#[derive(Debug)]
pub struct BusyThreads {
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
}

impl BusyThreads {
    /// Starts `k` busy threads (at most [`MAX_LOAD_THREADS`]).
    pub fn start(k: u32) -> std::io::Result<Self> {
        let stop = Arc::new(AtomicBool::new(false));
        let mut load = Self {
            stop: Arc::clone(&stop),
            threads: Vec::new(),
        };
        for i in 0..k.min(MAX_LOAD_THREADS) {
            let stop = Arc::clone(&stop);
            let thread = std::thread::Builder::new()
                .name(format!("bench-load-{i}"))
                .spawn(move || spin(&stop))?;
            // Pushed one by one: if a later spawn fails, dropping `load` stops the earlier ones.
            load.threads.push(thread);
        }
        Ok(load)
    }

    /// How many threads are spinning.
    pub fn threads(&self) -> usize {
        self.threads.len()
    }
}

/// Spins until `stop` is set.
fn spin(stop: &AtomicBool) {
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    while !stop.load(Ordering::Relaxed) {
        for _ in 0..1024 {
            // xorshift: work the optimizer cannot remove (black_box) and that touches no memory.
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
        }
        std::hint::black_box(x);
    }
}

impl Drop for BusyThreads {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for thread in self.threads.drain(..) {
            let _ = thread.join();
        }
    }
}

/// Runs every scenario `runs` times, one after the other, each run through its own [`Session`]
/// into `root/<scenario>/run-NN` (a folder the caller owns: claimed, or a temporary one), with
/// `load` busy threads spinning for the whole benchmark; `on_run` sees each run as it ends.
/// A run that cannot start (its engine missing, its folder held) ends the benchmark with its
/// error.
pub fn run_stability(
    scenarios: &[StabilityScenario],
    runs: u32,
    load: u32,
    root: &Path,
    observer: &mut dyn SessionObserver,
    mut on_run: impl FnMut(&str, u32, &StabilityRun),
) -> Result<Vec<StabilityRow>, StabilityError> {
    let folders = unique_slugs(scenarios.iter().map(|s| s.scenario.name.as_str()), &[]);
    let _load = BusyThreads::start(load).map_err(StabilityError::Load)?;
    let mut rows = Vec::new();
    for (item, folder) in scenarios.iter().zip(folders) {
        let mut row = StabilityRow {
            name: item.scenario.name.clone(),
            expected: item.expected,
            runs: Vec::new(),
        };
        for n in 1..=runs {
            let out: PathBuf = root.join(&folder).join(format!("run-{n:02}"));
            let start = Instant::now();
            let outcome = Session::new(item.scenario.clone()).out(out).run(observer)?;
            let run = StabilityRun::of(&outcome.verdict, start.elapsed().as_secs_f64());
            on_run(&row.name, n, &run);
            row.runs.push(run);
        }
        rows.push(row);
    }
    Ok(rows)
}

/// The rows as two Markdown tables: verdicts per scenario, then the class words and the spread
/// of the growth per turn per scenario and metric.
pub fn render_stability(rows: &[StabilityRow], load: u32) -> String {
    let mut out = format!(
        "Busy threads: {load}.\n\n\
         | scenario | runs | expected | verdicts | wrong verdicts | false FAILs |\n\
         | --- | ---: | --- | --- | ---: | ---: |\n"
    );
    for row in rows {
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {} |",
            cell(&row.name),
            row.runs.len(),
            row.expected.as_str(),
            counts(&row.verdicts()),
            row.wrong(),
            row.false_fails()
                .map_or_else(|| "n/a".to_owned(), |n| n.to_string()),
        );
    }
    out.push_str(
        "\n| scenario | metric | classes | growth/turn min | median | max | upper bound min | median | max |\n\
         | --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |\n",
    );
    for row in rows {
        for metric in row.metric_names() {
            let q = quantity(metric);
            let slope = row.slope_spread(metric);
            let upper = row.upper_spread(metric);
            let figures = |spread: Option<Spread>| match spread {
                Some(s) => [s.min, s.median, s.max].map(|v| q.format_per_turn(v)),
                None => ["n/a", "n/a", "n/a"].map(str::to_owned),
            };
            let [s_min, s_median, s_max] = figures(slope);
            let [u_min, u_median, u_max] = figures(upper);
            let _ = writeln!(
                out,
                "| {} | {} | {} | {s_min} | {s_median} | {s_max} | {u_min} | {u_median} | {u_max} |",
                cell(&row.name),
                cell(metric),
                counts(&row.classes(metric)),
            );
        }
    }
    out
}

/// `pass 19, fail 1`: the words most frequent first (then by name).
fn counts(counts: &BTreeMap<&str, usize>) -> String {
    let mut sorted: Vec<(&&str, &usize)> = counts.iter().collect();
    sorted.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
    sorted
        .iter()
        .map(|(word, n)| format!("{word} {n}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// A scenario's or a metric's name as a table cell: validation keeps both to lowercase letters,
/// digits, `-` and `_`, so neither can break a Markdown table.
fn cell(name: &str) -> &str {
    name
}

#[cfg(test)]
mod tests;
