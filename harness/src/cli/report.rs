//! `leakloop report DIR`: re-renders the terminal text (or summary.md) from a saved report.json,
//! then rewrites summary.md and plot.svg (a failed write is a warning). When the folder's last run
//! has no report (it crashed, was killed, is still running, or could not write it), it says which
//! as far as the folder's marker tells (`report/out_dir.rs`) and shows what samples.jsonl holds;
//! it never shows an earlier run's verdict. A suite's folder (its report.json of kind
//! `leakloop-suite`) shows the suite's table and rewrites its summary.md; its exit code is
//! derived from the scenarios' own verdicts (each scenario folder's report.json, else the
//! entry's status), never taken from the stored suite `exit_code` alone, and a stored code or
//! entry that contradicts them is reported and exits at least 2.

use std::path::{Path, PathBuf};

use crate::analyze::Verdict;
use crate::cli::output;
use crate::cli::{CliError, Exit, Outcome};
use crate::input::printable;
use crate::report::{
    inspect_out_dir, print_terminal, read_report, read_samples, read_suite_report, render_partial,
    render_plot_svg, render_suite_summary_md, render_suite_text, render_summary_md, write_atomic,
    EntryStatus, ReportError, RunState, StreamedSamples, SuiteReport, PLOT_SVG, REPORT_JSON,
    SAMPLES_JSONL, SUMMARY_MD,
};
use crate::runner::RunRecord;

/// What to print.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Format {
    /// The terminal table (coloured on a terminal unless NO_COLOR is set).
    Text,
    /// summary.md, for a pull-request comment.
    Md,
}

/// Arguments of `leakloop report`.
///
/// Exits like the run did: 0 pass, 1 an expectation failed, 3 the engine failed or the run did
/// not finish (it crashed, was killed or interrupted, or is still running); 2 when DIR holds no
/// report or one whose verdict does not follow from its expectations.
#[derive(Debug, clap::Args)]
pub(crate) struct ReportArgs {
    /// A `leakloop run --out` folder.
    dir: PathBuf,
    /// What to print on stdout.
    #[arg(long, value_enum, default_value = "text")]
    format: Format,
    /// Print only; do not rewrite summary.md and plot.svg in DIR.
    #[arg(long)]
    no_write: bool,
}

pub(crate) fn run(args: ReportArgs) -> Result<Outcome, CliError> {
    // Held to the end: a new run cannot clear the folder while it is read and re-rendered.
    let view = inspect_out_dir(&args.dir)?;
    let report_path = args.dir.join(REPORT_JSON);
    if view.state != RunState::InProgress && report_path.is_file() {
        if let Some(suite) = read_suite_report(&report_path)? {
            return report_suite(&args, &suite);
        }
    }
    if matches!(view.state, RunState::InProgress | RunState::Unfinished) || !report_path.exists() {
        return report_unfinished_run(&args, view.state);
    }
    let report = read_report(&report_path)?;
    let (record, verdict) = (&report.record, &report.verdict);
    // Print first, write second: a folder that cannot be written still shows its verdict.
    match args.format {
        Format::Text => output::write_stdout(|| print_terminal(record, verdict)),
        Format::Md => output::print(&render_summary_md(record, verdict)),
    }
    if !args.no_write {
        // The verdict is known: a file that cannot be rewritten is a warning next to it.
        if let Err(e) = rewrite(&args, record, verdict) {
            output::warning(&format!("the verdict above stands, but {e}"));
        }
    }
    Ok(Outcome::Verdict(Exit::of_verdict(verdict.status)))
}

/// A suite folder: its table (or summary.md), summary.md rewritten; exits with the worst code
/// of the scenarios' verdicts ([`suite_exit`]).
fn report_suite(args: &ReportArgs, suite: &SuiteReport) -> Result<Outcome, CliError> {
    let summary = render_suite_summary_md(suite);
    match args.format {
        Format::Text => output::print(&render_suite_text(suite)),
        Format::Md => output::print(&summary),
    }
    if !args.no_write {
        if let Err(e) = write_atomic(&args.dir.join(SUMMARY_MD), summary.as_bytes()) {
            output::warning(&format!("the verdicts above stand, but {e}"));
        }
    }
    let (exit, contradictions) = suite_exit(&args.dir, suite);
    for c in &contradictions {
        output::warning(c);
    }
    Ok(Outcome::Verdict(exit))
}

/// The exit code of a suite folder, as `report` on each scenario's folder would give it (a run
/// that did not finish exits 3), and what in the stored index contradicts the verdicts. A
/// contradiction makes the code at least 2: the index was altered or is corrupt.
fn suite_exit(dir: &Path, suite: &SuiteReport) -> (Exit, Vec<String>) {
    let index = dir.join(REPORT_JSON);
    let mut codes = Vec::new();
    let mut run_codes = Vec::new();
    let mut contradictions = Vec::new();
    for (i, entry) in suite.scenarios.iter().enumerate() {
        // The folder name was checked when the index was read: a plain name inside `dir`.
        let report_path = dir.join(&entry.folder).join(REPORT_JSON);
        let status = if entry.error.is_none() && report_path.is_file() {
            match read_report(&report_path) {
                Ok(run) => {
                    let status = EntryStatus::of_verdict(run.verdict.status);
                    if status != entry.status {
                        contradictions.push(format!(
                            "{}: scenarios[{i}] ({}) says `{}`, but its report {} says `{}`",
                            index.display(),
                            printable(&entry.path),
                            entry.status.word(),
                            report_path.display(),
                            status.word()
                        ));
                    }
                    status
                }
                Err(e) => {
                    contradictions.push(format!("scenarios[{i}]: {e}"));
                    codes.push(Exit::BadInput);
                    entry.status
                }
            }
        } else {
            entry.status
        };
        let stored = Exit::from_code(entry.exit_code);
        let run_code = match status {
            EntryStatus::Pass => Exit::Pass,
            EntryStatus::Fail => Exit::ExpectationFailed,
            EntryStatus::EngineFailed => Exit::EngineFailed,
            EntryStatus::Interrupted => stored
                .filter(|e| *e >= Exit::InterruptedBySigint)
                .unwrap_or(Exit::InterruptedBySigterm),
            EntryStatus::Error => stored
                .filter(|e| *e >= Exit::BadInput)
                .unwrap_or(Exit::BadInput),
        };
        if stored != Some(run_code) {
            contradictions.push(format!(
                "{}: scenarios[{i}] ({}) stores exit code {}, but its verdict `{}` gives {}",
                index.display(),
                printable(&entry.path),
                entry.exit_code,
                status.word(),
                run_code as u8
            ));
        }
        run_codes.push(run_code);
        codes.push(match status {
            // As `report` on the scenario's own folder: a run that did not finish exits 3.
            EntryStatus::Interrupted => Exit::EngineFailed,
            _ => run_code,
        });
    }
    let worst_run = Exit::worst(run_codes);
    if suite.exit_code != worst_run as u8 {
        contradictions.push(format!(
            "{}: the stored exit_code {} contradicts the scenarios' verdicts, which give {}: the \
             file was altered or is corrupt",
            index.display(),
            suite.exit_code,
            worst_run as u8
        ));
    }
    if !contradictions.is_empty() {
        codes.push(Exit::BadInput);
    }
    (Exit::worst(codes), contradictions)
}

/// Rewrites summary.md and plot.svg from the report.
fn rewrite(args: &ReportArgs, record: &RunRecord, verdict: &Verdict) -> Result<(), ReportError> {
    let summary = render_summary_md(record, verdict);
    write_atomic(&args.dir.join(SUMMARY_MD), summary.as_bytes())?;
    let plot = render_plot_svg(record, verdict)?;
    write_atomic(&args.dir.join(PLOT_SVG), plot.as_bytes())
}

/// A folder without a report of its last run: says why, as far as the folder tells, and shows
/// what samples.jsonl holds.
fn report_unfinished_run(args: &ReportArgs, state: RunState) -> Result<Outcome, CliError> {
    let dir = args.dir.display();
    let why = match state {
        RunState::InProgress => format!(
            "a run is still writing {dir}: it has no {REPORT_JSON} yet.\n\
             What {SAMPLES_JSONL} holds so far:\n"
        ),
        RunState::Unfinished => format!(
            "{dir}: the last run did not finish (it crashed or was killed), so it has no \
             {REPORT_JSON}.\nWhat {SAMPLES_JSONL} recorded:\n"
        ),
        RunState::Ended => format!(
            "{dir} has no {REPORT_JSON}: the last run ended without writing it (it stopped before \
             its engine ran, or its reports could not be written; that run's output says \
             why).\n\
             What {SAMPLES_JSONL} recorded:\n"
        ),
        RunState::Unknown => format!(
            "{dir} has no {REPORT_JSON}: the run did not finish (it crashed or was killed).\n\
             What {SAMPLES_JSONL} recorded:\n"
        ),
    };
    let samples_path = args.dir.join(SAMPLES_JSONL);
    let streamed = if samples_path.exists() {
        read_samples(&samples_path)?
    } else if state == RunState::Unknown {
        return Err(ReportError::NothingToReport {
            dir: args.dir.clone(),
        }
        .into());
    } else {
        StreamedSamples {
            samples: Vec::new(),
            torn_last_line: false,
        }
    };
    output::println(&why);
    output::print(&render_partial(&streamed));
    Ok(Outcome::Verdict(Exit::EngineFailed))
}
