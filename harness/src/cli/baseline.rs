//! `leakloop run --baseline OLD_DIR`: the run is also judged against a previous report of the
//! same scenario (a run folder, or a suite folder holding one), so that a significant rise in
//! growth per turn or plateau size fails it even while its absolute expectations hold. The
//! checks are expectations of their own (`baseline.<metric>.growth_per_turn`,
//! `baseline.<metric>.plateau`), so the table, summary.md, junit.xml and report.json show them.

use std::path::{Path, PathBuf};

use crate::analyze::{baseline_expectations, derive_status, Verdict, ENGINE_ERRORS};
use crate::cli::history::min_change_flag;
use crate::cli::output;
use crate::cli::CliError;
use crate::report::history::find_scenario_report;
use crate::runner::{RunOutcome, RunRecord};
use crate::scenario::Scenario;

/// The previous run a new one is compared with.
#[derive(Debug)]
pub(crate) struct Baseline {
    /// The build id of the baseline, else its folder.
    label: String,
    /// Its verdict.
    verdict: Verdict,
    /// A rise must also exceed this many bytes (per turn for growth).
    min_change: f64,
}

impl Baseline {
    /// Reads the baseline of `scenario` from `dir`: refused (bad input) when `dir` holds no
    /// report of this scenario (a different scenario is named), or holds several.
    pub(crate) fn load(
        dir: &Path,
        scenario: &Scenario,
        min_change: Option<&str>,
    ) -> Result<Baseline, CliError> {
        let min_change = min_change_flag("--baseline-min-change", min_change)?;
        let (path, report) = find_scenario_report(dir, &scenario.name)
            .map_err(|e| CliError::bad_input(format!("--baseline: {e}")))?;
        if !matches!(report.record.outcome, RunOutcome::Completed) {
            return Err(CliError::bad_input(format!(
                "--baseline: {} is of a run that did not complete: its figures cannot be compared",
                path.display()
            )));
        }
        let provenance = report.record.provenance.as_ref();
        if let (Some(old), Some(new)) = (
            provenance.and_then(|p| p.scenario.as_ref()?.sha256.clone()),
            scenario
                .source
                .as_deref()
                .and_then(|s| crate::report::provenance::digest_file(s).sha256),
        ) {
            if old != new {
                output::note(&format!(
                    "note: the scenario file changed since the baseline {}",
                    path.display()
                ));
            }
        }
        let label = provenance
            .and_then(|p| p.build.id.clone())
            .unwrap_or_else(|| folder_label(&path));
        Ok(Baseline {
            label,
            verdict: report.verdict,
            min_change,
        })
    }

    /// Adds the baseline checks to `verdict` (before the closing `engine_errors` check) and
    /// derives its status again. A run that did not complete is not compared.
    pub(crate) fn apply(&self, record: &RunRecord, verdict: &mut Verdict) {
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
