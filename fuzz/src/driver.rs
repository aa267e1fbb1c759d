//! Runs a target on mutated inputs for a while and collects what broke a rule.

use std::collections::BTreeSet;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use crate::{Mutator, Outcome, Target};

/// The longest one input may take (an unoptimized build on a busy CI machine); the readers take
/// microseconds to milliseconds, so past this one is stuck.
pub const TIME_LIMIT: Duration = Duration::from_secs(5);

/// The most distinct findings kept from one run.
const MAX_FINDINGS: usize = 20;

/// An input that broke a rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Finding {
    /// The reader panicked.
    Panic(String),
    /// The reader took longer than [`TIME_LIMIT`] (or never answered).
    Slow(Duration),
    /// The reader refused the input without saying where.
    Unlocated(String),
}

impl Finding {
    /// A short word for file names.
    pub fn kind(&self) -> &'static str {
        match self {
            Finding::Panic(_) => "panic",
            Finding::Slow(_) => "slow",
            Finding::Unlocated(_) => "unlocated",
        }
    }

    /// What happened, in one line.
    pub fn describe(&self) -> String {
        match self {
            Finding::Panic(m) => format!("panicked: {m}"),
            Finding::Slow(t) => format!("took {t:?} (limit {TIME_LIMIT:?})"),
            Finding::Unlocated(m) => format!("error names no place: {m}"),
        }
    }
}

/// What one fuzzing run does.
#[derive(Debug, Clone)]
pub struct FuzzSettings {
    /// The reader.
    pub target: Target,
    /// The mutator's seed.
    pub seed: u64,
    /// How long to run.
    pub duration: Duration,
    /// Stop after this many inputs (for tests), whatever the time.
    pub max_inputs: Option<u64>,
    /// Where to write findings (`<dir>/<target>/<kind>-<hash>.<ext>`), if anywhere.
    pub findings_dir: Option<PathBuf>,
}

/// What a run did.
#[derive(Debug, Clone, Default)]
pub struct FuzzReport {
    /// Inputs tried (seeds first, then mutations).
    pub inputs: u64,
    /// Inputs the reader accepted.
    pub accepted: u64,
    /// Inputs it refused with a located error.
    pub refused: u64,
    /// Distinct findings with their inputs.
    pub findings: Vec<(Finding, Vec<u8>)>,
    /// How long the run took.
    pub elapsed: Duration,
}

/// Runs `target` on one input in this thread: its outcome, or the rule it broke.
pub fn check_input(target: Target, bytes: &[u8]) -> Result<Outcome, Finding> {
    let start = Instant::now();
    let outcome = catch_unwind(AssertUnwindSafe(|| target.run(bytes)))
        .map_err(|payload| Finding::Panic(panic_message(payload.as_ref())))?;
    let elapsed = start.elapsed();
    if elapsed > TIME_LIMIT {
        return Err(Finding::Slow(elapsed));
    }
    match outcome {
        Outcome::Unlocated(message) => Err(Finding::Unlocated(message)),
        outcome => Ok(outcome),
    }
}

fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic without a message".to_owned())
}

/// Runs the seeds, then mutations of them, through the target until the time or the input
/// budget is spent. Each input runs on a worker thread so that one that never returns is
/// reported (and ends the run) instead of hanging it.
pub fn fuzz(settings: &FuzzSettings, seeds: &[Vec<u8>]) -> FuzzReport {
    let start = Instant::now();
    let target = settings.target;
    let (to_worker, inputs) = mpsc::channel::<Vec<u8>>();
    let (to_driver, results) = mpsc::channel::<Result<Outcome, Finding>>();
    let worker = std::thread::Builder::new()
        .name(format!("fuzz-{}", target.name()))
        .spawn(move || {
            for input in inputs {
                if to_driver.send(check_input(target, &input)).is_err() {
                    break;
                }
            }
        })
        .expect("a thread starts");

    let mut report = FuzzReport::default();
    let mut seen = BTreeSet::new();
    let mut mutator = Mutator::new(target, settings.seed);
    let mut next_seed = seeds.iter();
    loop {
        let out_of_time = start.elapsed() >= settings.duration;
        let out_of_inputs = settings.max_inputs.is_some_and(|n| report.inputs >= n);
        if out_of_time || out_of_inputs || report.findings.len() >= MAX_FINDINGS {
            break;
        }
        let input = match next_seed.next() {
            Some(seed) => seed.clone(),
            None if seeds.is_empty() => break,
            None => mutator.mutate(seeds),
        };
        report.inputs += 1;
        if to_worker.send(input.clone()).is_err() {
            break;
        }
        let result = match results.recv_timeout(TIME_LIMIT) {
            Ok(result) => result,
            Err(_) => {
                // The worker is stuck on this input: report it and stop, leaving the thread.
                record(&mut report, &mut seen, Finding::Slow(TIME_LIMIT), input);
                report.elapsed = start.elapsed();
                save(settings, &report);
                return report;
            }
        };
        match result {
            Ok(Outcome::Accepted) => report.accepted += 1,
            Ok(_) => report.refused += 1,
            Err(finding) => record(&mut report, &mut seen, finding, input),
        }
    }
    drop(to_worker);
    let _ = worker.join();
    report.elapsed = start.elapsed();
    save(settings, &report);
    report
}

/// Keeps a finding unless one with the same first message line was kept already.
fn record(report: &mut FuzzReport, seen: &mut BTreeSet<String>, finding: Finding, input: Vec<u8>) {
    let key = match &finding {
        Finding::Slow(_) => "slow".to_owned(),
        other => other
            .describe()
            .lines()
            .next()
            .unwrap_or_default()
            .to_owned(),
    };
    if seen.insert(key) {
        report.findings.push((finding, input));
    }
}

fn save(settings: &FuzzSettings, report: &FuzzReport) {
    let Some(dir) = &settings.findings_dir else {
        return;
    };
    let dir = dir.join(settings.target.name());
    for (finding, input) in &report.findings {
        let name = format!("{}-{:016x}", finding.kind(), fnv1a(input));
        let _ = std::fs::create_dir_all(&dir);
        let path = dir.join(format!("{name}.{}", settings.target.extension()));
        let _ = std::fs::write(&path, input);
        let _ = std::fs::write(note_path(&path), finding.describe() + "\n");
    }
}

fn note_path(input: &Path) -> PathBuf {
    input.with_extension("txt")
}

/// A stable hash of an input, for its file name.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3)
    })
}
