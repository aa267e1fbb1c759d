//! The reports of one build, found in its folder: a `leakloop run --out` folder (its own
//! report.json), or a suite folder (a folder per scenario, each with its report.json, however
//! deep the suite puts them), or a folder of several runs of the same scenarios (`bisect`'s
//! `BUILD/run-R/`). Every report.json under the folder is read; those that are per-scenario
//! reports are the build's runs, keyed by scenario name; a suite's own index
//! (`"kind": "leakloop-suite"`) is passed over, and any other report.json that does not read is
//! passed over with a note. `leakloop history` and `leakloop run --baseline` both read builds
//! this way.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::analyze::VerdictStatus;
use crate::report::{read_report, read_suite_report, ReportError, ReportFile, REPORT_JSON};
use crate::runner::{Provenance, RunOutcome};
use crate::walk::{walk, Deep, Kind, Limits};

/// How deep under a build folder report.json files are looked for (a suite folder, a partition
/// folder inside a merged suite, a run folder inside a build).
pub const MAX_DEPTH: usize = 4;

/// How many files and folders a build folder may hold in all before it is refused (a bisect
/// build with many runs, a large suite: far below; `/` or a home folder given by mistake: above).
pub const MAX_ENTRIES: usize = 200_000;

/// One figure pair of one metric in one run.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MetricFigures {
    /// The Theil-Sen slope after warm-up, bytes per turn.
    pub growth_per_turn: f64,
    /// The one-time rise that settled, bytes (0 when none).
    pub plateau: f64,
}

/// What `history` keeps of one run: its figures, verdict and provenance (not its samples).
#[derive(Debug, Clone, PartialEq)]
pub struct RunFigures {
    /// Where the report was read from.
    pub path: PathBuf,
    /// The run's verdict.
    pub status: VerdictStatus,
    /// Whether every turn ran (an engine failure or an interruption leaves figures that are not
    /// comparable).
    pub completed: bool,
    /// Per analysed metric.
    pub metrics: BTreeMap<String, MetricFigures>,
    /// Where the run came from (reports from format 3 on).
    pub provenance: Option<Provenance>,
}

impl RunFigures {
    /// The figures of a report.
    pub fn of(path: &Path, report: &ReportFile) -> Self {
        RunFigures {
            path: path.to_owned(),
            status: report.verdict.status,
            completed: matches!(report.record.outcome, RunOutcome::Completed),
            metrics: report
                .verdict
                .metrics
                .iter()
                .map(|(name, m)| {
                    let figures = MetricFigures {
                        growth_per_turn: m.slope_bytes_per_turn,
                        plateau: m.plateau.map_or(0.0, |p| p.size_bytes as f64),
                    };
                    (name.clone(), figures)
                })
                .collect(),
            provenance: report.record.provenance.clone(),
        }
    }
}

/// One build: its folder, its runs by scenario name, and what was passed over.
#[derive(Debug, Clone, PartialEq)]
pub struct BuildReports {
    /// The folder given.
    pub dir: PathBuf,
    /// Runs per scenario name, in the order found (sorted paths).
    pub runs: BTreeMap<String, Vec<RunFigures>>,
    /// report.json files that were not per-scenario reports, with why.
    pub skipped: Vec<String>,
}

impl BuildReports {
    /// The build's name: the build id every run's provenance agrees on, else the folder's name.
    pub fn label(&self) -> String {
        let mut ids = self
            .runs
            .values()
            .flatten()
            .map(|r| r.provenance.as_ref().and_then(|p| p.build.id.clone()));
        match ids.next() {
            Some(Some(first)) if ids.all(|id| id.as_deref() == Some(first.as_str())) => first,
            _ => self.dir.file_name().map_or_else(
                || self.dir.display().to_string(),
                |n| n.to_string_lossy().into_owned(),
            ),
        }
    }

    /// The build date the runs' provenance gives (the earliest), if any.
    pub fn date(&self) -> Option<String> {
        self.runs
            .values()
            .flatten()
            .filter_map(|r| r.provenance.as_ref()?.build.date.clone())
            .min()
    }
}

/// Whether `path` is a suite's index (`"kind": "leakloop-suite"`), which holds no runs.
fn is_suite_index(path: &Path) -> bool {
    matches!(read_suite_report(path), Ok(Some(_)))
}

/// Every report.json at most [`MAX_DEPTH`] folders under `dir` (`dir/report.json` included),
/// sorted by path, found by the one bounded walk (`crate::walk`): symbolic links are not
/// followed, and a folder with more than [`MAX_ENTRIES`] entries is refused.
pub fn find_report_files(dir: &Path) -> Result<Vec<PathBuf>, ReportError> {
    let limits = Limits {
        max_depth: MAX_DEPTH + 1,
        max_entries: MAX_ENTRIES,
        deep: Deep::Stop,
    };
    let mut found: Vec<PathBuf> = walk(dir, limits, |_| false)?
        .into_iter()
        .filter(|f| f.kind == Kind::File && f.path.file_name() == Some(REPORT_JSON.as_ref()))
        .map(|f| f.path)
        .collect();
    found.sort();
    Ok(found)
}

/// Reads the build in `dir`: every per-scenario report under it. A report.json that does not
/// read as one is skipped with a note when the folder has other reports, and is the error when
/// it has none; a folder without any report.json is [`ReportError::NothingToReport`].
pub fn read_build(dir: &Path) -> Result<BuildReports, ReportError> {
    let files = find_report_files(dir)?;
    let mut build = BuildReports {
        dir: dir.to_owned(),
        runs: BTreeMap::new(),
        skipped: Vec::new(),
    };
    let mut first_error = None;
    for path in files {
        match read_report(&path) {
            Ok(report) => build
                .runs
                .entry(report.record.scenario.name.clone())
                .or_default()
                .push(RunFigures::of(&path, &report)),
            // A suite's own index is expected in a suite folder: passed over without a word.
            Err(_) if is_suite_index(&path) => {}
            Err(e) => {
                build
                    .skipped
                    .push(crate::input::shorten(&e.to_string(), 300).into_owned());
                first_error.get_or_insert(e);
            }
        }
    }
    match (build.runs.is_empty(), first_error) {
        (true, Some(e)) => Err(e),
        (true, None) => Err(ReportError::NothingToReport {
            dir: dir.to_owned(),
        }),
        _ => Ok(build),
    }
}

/// The report of scenario `name` in the build folder `dir` (for `run --baseline`): the one
/// report of that scenario, or the error that says why there is none or which are several.
pub fn find_scenario_report(dir: &Path, name: &str) -> Result<(PathBuf, ReportFile), String> {
    let files = find_report_files(dir).map_err(|e| e.to_string())?;
    let mut others = Vec::new();
    let mut matching = Vec::new();
    let mut errors = Vec::new();
    for path in files {
        match read_report(&path) {
            Ok(report) if report.record.scenario.name == name => matching.push((path, report)),
            Ok(report) => others.push(report.record.scenario.name.clone()),
            Err(_) if is_suite_index(&path) => {}
            Err(e) => errors.push(e.to_string()),
        }
    }
    match matching.len() {
        1 => Ok(matching.remove(0)),
        0 if !others.is_empty() => {
            others.sort();
            others.dedup();
            let shown: Vec<String> = others.iter().take(5).map(|n| format!("`{n}`")).collect();
            Err(format!(
                "{} holds no report of scenario `{name}`, only of {}{}: a baseline must be a run of the same scenario",
                dir.display(),
                shown.join(", "),
                if others.len() > 5 { ", ..." } else { "" }
            ))
        }
        0 => Err(match errors.first() {
            Some(e) => e.clone(),
            None => ReportError::NothingToReport {
                dir: dir.to_owned(),
            }
            .to_string(),
        }),
        n => Err(format!(
            "{} holds {n} reports of scenario `{name}` ({}, ...): name the run's own folder",
            dir.display(),
            matching[0].0.display()
        )),
    }
}
