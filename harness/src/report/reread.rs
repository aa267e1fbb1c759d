//! Reading a saved output folder back for `leakloop report`: a run's report, a suite's index,
//! or what a run that left no report recorded (its sample store), with the words that say why it
//! has none. A suite's entries are checked against each scenario folder's own report, so that a
//! stored status is never trusted alone; what the exit code of each is stays the command line's
//! decision.

use std::path::Path;

use crate::analyze::Verdict;
use crate::input::printable;
use crate::runner::{RunRecord, Samples};

use super::{
    inspect_out_dir, read_folder_samples, read_report, read_suite_report, render_plot_svg,
    render_run_html, render_summary_md, write_atomic, EntryStatus, FolderView, ReportError,
    ReportFile, RunState, StreamedSamples, SuiteReport, PLOT_SVG, REPORT_HTML, REPORT_JSON,
    SAMPLES_STORE, SUMMARY_MD,
};

/// What an output folder holds.
#[derive(Debug)]
pub enum SavedFolder {
    /// A run's report.
    Run(Box<ReportFile>),
    /// A suite's index.
    Suite(Box<SuiteReport>),
    /// A run that left no report: the folder's state and what its sample store holds.
    Unfinished {
        /// What the folder's marker tells of its last run.
        state: RunState,
        /// The samples recorded (none when the file is absent).
        streamed: Box<StreamedSamples>,
    },
}

/// Reads the output folder `dir`. The view returned holds the folder: a new run cannot clear
/// it while it is read and re-rendered.
pub fn read_out_folder(dir: &Path) -> Result<(FolderView, SavedFolder), ReportError> {
    let view = inspect_out_dir(dir)?;
    let report_path = dir.join(REPORT_JSON);
    if view.state != RunState::InProgress && report_path.is_file() {
        if let Some(suite) = read_suite_report(&report_path)? {
            return Ok((view, SavedFolder::Suite(Box::new(suite))));
        }
    }
    if matches!(view.state, RunState::InProgress | RunState::Unfinished) || !report_path.exists() {
        let state = view.state;
        let streamed = if let Some(streamed) = read_folder_samples(dir)? {
            streamed
        } else if state == RunState::Unknown {
            return Err(ReportError::NothingToReport {
                dir: dir.to_path_buf(),
            });
        } else {
            StreamedSamples {
                samples: Samples::new(),
                torn_last_line: false,
            }
        };
        let streamed = Box::new(streamed);
        return Ok((view, SavedFolder::Unfinished { state, streamed }));
    }
    let report = read_report(&report_path)?;
    Ok((view, SavedFolder::Run(Box::new(report))))
}

/// Why `dir` has no report of its last run, as far as its state tells, ending with the heading
/// of what the sample store holds.
pub fn render_unfinished(dir: &Path, state: RunState) -> String {
    let dir = dir.display();
    match state {
        RunState::InProgress => format!(
            "a run is still writing {dir}: it has no {REPORT_JSON} yet.\n\
             What {SAMPLES_STORE} holds so far:\n"
        ),
        RunState::Unfinished => format!(
            "{dir}: the last run did not finish (it crashed or was killed), so it has no \
             {REPORT_JSON}.\nWhat {SAMPLES_STORE} recorded:\n"
        ),
        RunState::Ended => format!(
            "{dir} has no {REPORT_JSON}: the last run ended without writing it (it stopped before \
             its engine ran, or its reports could not be written; that run's output says \
             why).\n\
             What {SAMPLES_STORE} recorded:\n"
        ),
        RunState::Unknown => format!(
            "{dir} has no {REPORT_JSON}: the run did not finish (it crashed or was killed).\n\
             What {SAMPLES_STORE} recorded:\n"
        ),
    }
}

/// Rewrites summary.md, plot.svg and report.html in `dir` from a run's report.
pub fn rewrite_run_files(
    dir: &Path,
    record: &RunRecord,
    verdict: &Verdict,
) -> Result<(), ReportError> {
    let summary = render_summary_md(record, verdict);
    write_atomic(&dir.join(SUMMARY_MD), summary.as_bytes())?;
    let plot = render_plot_svg(record, verdict)?;
    write_atomic(&dir.join(PLOT_SVG), plot.as_bytes())?;
    let page = render_run_html(record, verdict)?;
    write_atomic(&dir.join(REPORT_HTML), page.as_bytes())
}

/// A suite entry as its scenario folder's own report tells it.
#[derive(Debug)]
pub struct EntryCheck {
    /// The status its report gives (the stored one when it has no report or failed).
    pub status: EntryStatus,
    /// Its report exists but could not be read.
    pub unreadable: bool,
    /// What in the index contradicts its report, if anything.
    pub contradiction: Option<String>,
}

/// Each entry of the suite index in `dir`, checked against its scenario folder's report.
pub fn check_suite_entries(dir: &Path, suite: &SuiteReport) -> Vec<EntryCheck> {
    let index = dir.join(REPORT_JSON);
    let mut checks = Vec::with_capacity(suite.scenarios.len());
    for (i, entry) in suite.scenarios.iter().enumerate() {
        // The folder name was checked when the index was read: a plain name inside `dir`.
        let report_path = dir.join(&entry.folder).join(REPORT_JSON);
        let mut check = EntryCheck {
            status: entry.status,
            unreadable: false,
            contradiction: None,
        };
        if entry.error.is_none() && report_path.is_file() {
            match read_report(&report_path) {
                Ok(run) => {
                    let status = EntryStatus::of_verdict(run.verdict.status);
                    if status != entry.status {
                        check.contradiction = Some(format!(
                            "{}: scenarios[{i}] ({}) says `{}`, but its report {} says `{}`",
                            index.display(),
                            printable(&entry.path),
                            entry.status.word(),
                            report_path.display(),
                            status.word()
                        ));
                    }
                    check.status = status;
                }
                Err(e) => {
                    check.unreadable = true;
                    check.contradiction = Some(format!("scenarios[{i}]: {e}"));
                }
            }
        }
        checks.push(check);
    }
    checks
}
