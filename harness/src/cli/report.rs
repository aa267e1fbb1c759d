//! `leakloop report DIR`: re-renders the terminal text (or summary.md) and rewrites summary.md and
//! plot.svg from a saved report.json. When only samples.jsonl is there (the run crashed or was
//! killed before it could write its report), it says so and shows what was measured.

use std::path::PathBuf;

use crate::cli::output;
use crate::cli::{CliError, Exit, Outcome};
use crate::report::{
    print_terminal, read_report, read_samples, render_partial, render_plot_svg, render_summary_md,
    write_atomic, ReportError, PLOT_SVG, REPORT_JSON, SAMPLES_JSONL, SUMMARY_MD,
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
/// not finish (only samples.jsonl is there); 2 when DIR holds no report.
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
    let report_path = args.dir.join(REPORT_JSON);
    if !report_path.exists() {
        return report_unfinished_run(&args);
    }
    let report = read_report(&report_path)?;
    let (record, verdict) = (&report.record, &report.verdict);
    if !args.no_write {
        // The verdict is known: a file that cannot be rewritten is a warning next to it.
        let summary = render_summary_md(record, verdict);
        let written = write_atomic(&args.dir.join(SUMMARY_MD), summary.as_bytes()).and_then(|()| {
            let plot = render_plot_svg(record, verdict)?;
            write_atomic(&args.dir.join(PLOT_SVG), plot.as_bytes())
        });
        if let Err(e) = written {
            output::warning(&e.to_string());
        }
    }
    match args.format {
        Format::Text => output::write_stdout(|| print_terminal(record, verdict)),
        Format::Md => output::print(&render_summary_md(record, verdict)),
    }
    Ok(Outcome::Verdict(Exit::of_verdict(verdict.status)))
}

fn report_unfinished_run(args: &ReportArgs) -> Result<Outcome, CliError> {
    let samples_path = args.dir.join(SAMPLES_JSONL);
    if !samples_path.exists() {
        return Err(ReportError::NothingToReport {
            dir: args.dir.clone(),
        }
        .into());
    }
    let streamed = read_samples(&samples_path)?;
    output::println(&format!(
        "{} has no {REPORT_JSON}: the run did not finish (it crashed or was killed).\n\
         What {SAMPLES_JSONL} recorded:\n",
        args.dir.display()
    ));
    output::print(&render_partial(&streamed));
    Ok(Outcome::Verdict(Exit::EngineFailed))
}
