//! `leakloop report DIR`: re-renders the terminal text (or summary.md) from a saved report.json,
//! then rewrites summary.md and plot.svg (a failed write is a warning). When the folder's last run
//! has no report (it crashed, was killed, is still running, or could not write it), it says which
//! as far as the folder's marker tells (`report/out_dir.rs`) and shows what its sample store holds;
//! it never shows an earlier run's verdict. A suite's folder (its report.json of kind
//! `leakloop-suite`) shows the suite's table and rewrites its summary.md; its exit code is
//! derived from the scenarios' own verdicts (each scenario folder's report.json, else the
//! entry's status), never taken from the stored suite `exit_code` alone, and a stored code or
//! entry that contradicts them is reported and exits at least 2.

use std::path::{Path, PathBuf};

use crate::cli::output;
use crate::cli::{CliError, Exit, Outcome};
use crate::input::printable;
use crate::report::{
    check_suite_entries, print_terminal, read_out_folder, render_partial, render_suite_summary_md,
    render_suite_text, render_summary_md, render_unfinished, rewrite_run_files, write_atomic,
    EntryStatus, SavedFolder, SuiteReport, REPORT_JSON, SUMMARY_MD,
};

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
    /// Print only; do not rewrite summary.md, plot.svg and report.html in DIR.
    #[arg(long)]
    no_write: bool,
}

pub(crate) fn run(args: ReportArgs) -> Result<Outcome, CliError> {
    // Held to the end: a new run cannot clear the folder while it is read and re-rendered.
    let (_view, saved) = read_out_folder(&args.dir)?;
    let report = match saved {
        SavedFolder::Suite(suite) => return report_suite(&args, &suite),
        SavedFolder::Unfinished { state, streamed } => {
            output::println(&render_unfinished(&args.dir, state));
            output::print(&render_partial(&streamed));
            return Ok(Outcome::Verdict(Exit::EngineFailed));
        }
        SavedFolder::Run(report) => report,
    };
    let (record, verdict) = (&report.record, &report.verdict);
    // Print first, write second: a folder that cannot be written still shows its verdict.
    match args.format {
        Format::Text => output::write_stdout(|| print_terminal(record, verdict)),
        Format::Md => output::print(&render_summary_md(record, verdict)),
    }
    if !args.no_write {
        // The verdict is known: a file that cannot be rewritten is a warning next to it.
        if let Err(e) = rewrite_run_files(&args.dir, record, verdict) {
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
    let checks = check_suite_entries(dir, suite);
    for (i, (entry, check)) in suite.scenarios.iter().zip(checks).enumerate() {
        contradictions.extend(check.contradiction);
        if check.unreadable {
            codes.push(Exit::BadInput);
        }
        let status = check.status;
        let stored = Exit::from_code(entry.exit_code);
        let run_code = match status {
            EntryStatus::Pass => Exit::Pass,
            EntryStatus::Fail => Exit::ExpectationFailed,
            // Which of the two the run exited with is its `--on-inconclusive` policy's choice.
            EntryStatus::Inconclusive => stored
                .filter(|e| matches!(e, Exit::Pass | Exit::Inconclusive))
                .unwrap_or(Exit::Inconclusive),
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
