//! `leakloop merge DIR... --out DIR`: joins the outputs of `leakloop run --partition K/N` (one
//! folder per CI machine) into the folder a single run of the whole suite would have written
//! (`crate::suite`'s merge does the checks and the copy), then prints the suite's table and
//! writes its report.json, summary.md and junit.xml. Everything is checked before `--out` is
//! claimed: a refusal (exit 2, naming the folder or entry) changes nothing.

use std::path::{Path, PathBuf};

use anyhow::anyhow;

use crate::cli::output;
use crate::cli::record::{RecordArgs, Recorder};
use crate::cli::run::claim_out;
use crate::cli::suite::run::write_index;
use crate::cli::{CliError, Exit, Outcome};
use crate::report::{read_report, render_suite_text, SuiteReport, REPORT_JSON};
use crate::results_db::RunSource;
use crate::suite::{copy_into, join, plan_copies, read_shares, MergeError};

/// Arguments of `leakloop merge`.
///
/// Exits with the worst code of the merged scenarios, like the whole run would have; 2 when the
/// folders are not every partition of one suite, each once.
#[derive(Debug, clap::Args)]
pub(crate) struct MergeArgs {
    /// The `--out` folders of `leakloop run --partition K/N`, one per partition.
    #[arg(required = true, value_name = "DIR")]
    dirs: Vec<PathBuf>,
    /// Where the merged suite goes (claimed like `run --out`).
    #[arg(long, value_name = "DIR")]
    out: PathBuf,
    /// Print only the counts line, not the table.
    #[arg(long, short)]
    quiet: bool,
    /// `--record DB`.
    #[command(flatten)]
    record: RecordArgs,
}

pub(crate) fn run(args: MergeArgs) -> Result<Outcome, CliError> {
    let parts = read_shares(&args.dirs)?;
    let merged = join(&parts)?;
    let exit = worst_exit(&merged)?;
    let copies = plan_copies(&parts, &args.out)?;
    let out = claim_out(&args.out)?;
    copy_into(copies, &out)?;
    if args.quiet {
        output::println(&merged.counts_line());
    } else {
        output::print(&render_suite_text(&merged));
    }
    output::println(&format!("reports: {}", out.dir().display()));
    let root = out.dir().to_owned();
    write_index(out, &merged);
    let Some(recorder) = args.record.recorder() else {
        return Ok(Outcome::Verdict(exit));
    };
    record_merged(&recorder, &root, &merged);
    Ok(Outcome::Verdict(recorder.finish(exit)))
}

/// Records every merged scenario that has a report, read back from its folder in the merged
/// suite (the shares ran elsewhere: when they ran is not known here).
fn record_merged(recorder: &Recorder, root: &Path, merged: &SuiteReport) {
    for entry in &merged.scenarios {
        let folder = root.join(&entry.folder);
        let path = folder.join(REPORT_JSON);
        if !path.is_file() {
            continue;
        }
        match read_report(&path) {
            Ok(report) => recorder.record(
                RunSource::Merge,
                &report.record,
                &report.verdict,
                Some(&folder),
                Exit::from_code(entry.exit_code).unwrap_or(Exit::BadInput),
                None,
            ),
            Err(e) => output::warning(&format!("not recorded: {e}")),
        }
    }
}

/// The merged suite's exit code, once every scenario's code is one leakloop gives.
fn worst_exit(merged: &SuiteReport) -> Result<Exit, CliError> {
    let mut exits = Vec::with_capacity(merged.scenarios.len());
    for e in &merged.scenarios {
        exits.push(Exit::from_code(e.exit_code).ok_or_else(|| {
            CliError::bad_input(format!(
                "scenario {} has exit code {}, which no leakloop gives",
                e.path, e.exit_code
            ))
        })?);
    }
    Ok(Exit::worst(exits))
}

/// A share that cannot be merged is bad input, and so is a report.json that does not read as a
/// suite's (its own error may say otherwise); a scenario folder that cannot be copied into the
/// claimed `--out` is an output failure.
impl From<MergeError> for CliError {
    fn from(e: MergeError) -> Self {
        match e {
            MergeError::Report(e) => (*e).into(),
            MergeError::Copy {
                scenario,
                out,
                error,
            } => CliError::Output(anyhow!(error).context(format!(
                "cannot copy the folder of {scenario} into {}",
                out.display()
            ))),
            e => CliError::bad_input(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::{EntryStatus, ReportError, SuiteEntry, SuiteIdentity};

    #[test]
    fn a_refused_share_is_bad_input_and_a_failed_copy_an_output_failure() {
        let refused = MergeError::WholeSuite { dir: "a".into() };
        assert_eq!(CliError::from(refused).exit(), Exit::BadInput);
        let copy = MergeError::Copy {
            scenario: "a.yaml".into(),
            out: "out".into(),
            error: Box::new(ReportError::Write {
                path: "out/a".into(),
                source: std::io::Error::from_raw_os_error(libc::ENOSPC),
            }),
        };
        let err = CliError::from(copy);
        assert_eq!(err.exit(), Exit::OutputFailed);
        assert!(
            format!("{err:#}").starts_with("cannot copy the folder of a.yaml into out: "),
            "{err:#}"
        );
    }

    #[test]
    fn an_exit_code_no_leakloop_gives_is_refused() {
        let entry = |exit_code| SuiteEntry {
            path: format!("s{exit_code}.yaml"),
            folder: format!("s{exit_code}"),
            name: None,
            status: EntryStatus::Pass,
            exit_code,
            error: None,
            worst_metric: None,
            expectations: 0,
            expectations_failed: 0,
            duration_s: 0.0,
        };
        let identity = SuiteIdentity {
            scenarios: 2,
            fingerprint: "f".into(),
        };
        let report = SuiteReport::new(identity.clone(), None, 3, vec![entry(1), entry(3)]);
        assert_eq!(worst_exit(&report).unwrap(), Exit::EngineFailed);
        let report = SuiteReport::new(identity, None, 6, vec![entry(1), entry(6)]);
        let err = worst_exit(&report).unwrap_err();
        assert_eq!(err.exit(), Exit::BadInput);
        assert!(err.to_string().contains("exit code 6, which no"), "{err}");
    }
}
