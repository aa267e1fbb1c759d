//! `leakloop report DIR`: re-renders the terminal text (or summary.md) from a saved report.json,
//! then rewrites summary.md and plot.svg (a failed write is a warning). When the folder's last run
//! has no report (it crashed, was killed, is still running, or could not write it), it says which
//! as far as the folder's marker tells (`report/out_dir.rs`) and shows what samples.jsonl holds;
//! it never shows an earlier run's verdict. A suite's folder (its report.json of kind
//! `leakloop-suite`) shows the suite's table and rewrites its summary.md.

use std::path::PathBuf;

use crate::analyze::Verdict;
use crate::cli::output;
use crate::cli::{CliError, Exit, Outcome};
use crate::report::{
    inspect_out_dir, print_terminal, read_report, read_samples, read_suite_report, render_partial,
    render_plot_svg, render_suite_summary_md, render_suite_text, render_summary_md, write_atomic,
    ReportError, RunState, StreamedSamples, SuiteReport, PLOT_SVG, REPORT_JSON, SAMPLES_JSONL,
    SUMMARY_MD,
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

/// A suite folder: its table (or summary.md), summary.md rewritten; exits with the suite's
/// worst code.
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
    Exit::from_code(suite.exit_code)
        .map(Outcome::Verdict)
        .ok_or_else(|| {
            CliError::bad_input(format!(
                "{}: exit_code {} is no code leakloop gives",
                args.dir.join(REPORT_JSON).display(),
                suite.exit_code
            ))
        })
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
