//! A run judged against a previous report of the same scenario (`leakloop run --baseline
//! OLD_DIR`: a run folder, or a suite folder holding one), so that a significant rise in growth
//! per turn or plateau size fails it even while its absolute expectations hold. The checks are
//! expectations of their own (`baseline.<metric>.growth_per_turn`, `baseline.<metric>.plateau`),
//! so the table, summary.md, junit.xml and report.json show them.

use std::path::{Path, PathBuf};

use crate::analyze::{baseline_expectations, derive_status, Verdict, ENGINE_ERRORS};
use crate::report::history::find_scenario_report;
use crate::runner::{RunOutcome, RunRecord};
use crate::scenario::Scenario;

/// Why a baseline cannot be used (all bad input: the messages name the flag).
#[derive(Debug, thiserror::Error)]
pub enum BaselineError {
    /// The smallest rise that counts is not a size.
    #[error("{0}")]
    MinChange(String),
    /// The folder holds no report of this scenario, or several.
    #[error("--baseline: {0}")]
    NotFound(String),
    /// The report found is of a run that did not complete.
    #[error(
        "--baseline: {} is of a run that did not complete: its figures cannot be compared",
        .0.display()
    )]
    Incomplete(PathBuf),
}

/// The previous run a new one is compared with.
#[derive(Debug)]
pub struct Baseline {
    /// The build id of the baseline, else its folder.
    label: String,
    /// Its verdict.
    verdict: Verdict,
    /// A rise must also exceed this many bytes (per turn for growth).
    min_change: f64,
    /// The baseline's report, when the scenario file changed since it ran.
    scenario_changed: Option<PathBuf>,
}

impl Baseline {
    /// Reads the baseline of `scenario` from `dir`: refused when `dir` holds no report of this
    /// scenario (a different scenario is named), or holds several, or `min_change` (the
    /// `--baseline-min-change` size, e.g. `4KiB`) is not a size.
    pub fn load(
        dir: &Path,
        scenario: &Scenario,
        min_change: Option<&str>,
    ) -> Result<Baseline, BaselineError> {
        let min_change = match min_change {
            Some(text) => leakloop_units::parse_size(text)
                .map_err(|e| BaselineError::MinChange(e.one_line("--baseline-min-change", text)))?
                as f64,
            None => 0.0,
        };
        let (path, report) = find_scenario_report(dir, &scenario.name)
            .map_err(|e| BaselineError::NotFound(e.to_string()))?;
        if !matches!(report.record.outcome, RunOutcome::Completed) {
            return Err(BaselineError::Incomplete(path));
        }
        let provenance = report.record.provenance.as_ref();
        let scenario_changed = match (
            provenance.and_then(|p| p.scenario.as_ref()?.sha256.clone()),
            scenario
                .source
                .as_deref()
                .and_then(|s| crate::report::provenance::digest_file(s).sha256),
        ) {
            (Some(old), Some(new)) if old != new => Some(path.clone()),
            _ => None,
        };
        let label = provenance
            .and_then(|p| p.build.id.clone())
            .unwrap_or_else(|| folder_label(&path));
        Ok(Baseline {
            label,
            verdict: report.verdict,
            min_change,
            scenario_changed,
        })
    }

    /// The note to show when the scenario file changed since the baseline ran (the figures are
    /// still compared).
    pub fn note(&self) -> Option<String> {
        self.scenario_changed.as_ref().map(|path| {
            format!(
                "note: the scenario file changed since the baseline {}",
                path.display()
            )
        })
    }

    /// Adds the baseline checks to `verdict` (before the closing `engine_errors` check) and
    /// derives its status again. A run that did not complete is not compared.
    pub fn apply(&self, record: &RunRecord, verdict: &mut Verdict) {
        if !matches!(record.outcome, RunOutcome::Completed) {
            return;
        }
        let checks = baseline_expectations(verdict, &self.verdict, &self.label, self.min_change);
        let at = match verdict.expectations.last() {
            Some(last) if last.name == ENGINE_ERRORS => verdict.expectations.len() - 1,
            _ => verdict.expectations.len(),
        };
        verdict.expectations.splice(at..at, checks);
        verdict.status = derive_status(&record.outcome, &verdict.expectations);
    }
}

/// The folder that holds a report: `OLD/report.json` -> `OLD`.
fn folder_label(path: &Path) -> String {
    path.parent()
        .and_then(Path::file_name)
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| PathBuf::from(path).display().to_string())
}
