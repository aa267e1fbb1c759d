//! The `leakloop` command line: one file per subcommand, one error enum mapped to exit codes.

mod analyze;
mod bench;
mod check;
mod compare;
mod error;
mod interrupt;
mod report;
mod run;
mod worker;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

pub use compare::{compare_exit, compare_runs};
pub use error::{CliError, Exit};

/// Catches memory-leak regressions in on-device LLM inference engines.
///
/// Exit codes: 0 every expectation held; 1 an expectation failed (a leak, an unbalanced
/// create/delete); 2 bad input or usage; 3 the engine failed (crash, hang, load error); 130 and
/// 143 a run interrupted by SIGINT or SIGTERM (its partial report written).
#[derive(Debug, Parser)]
#[command(name = "leakloop", version, about, long_about = None)]
#[command(
    after_help = "Exit codes:\n  0  every expectation held\n  1  an expectation failed (a leak, an unbalanced create/delete)\n  2  bad input or usage\n  3  the engine failed (crash, hang, load error)\n  130, 143  a run interrupted by SIGINT, SIGTERM (partial report written)"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Validate scenario files without running them.
    Check(check::CheckArgs),
    /// Run a scenario and judge its expectations.
    Run(run::RunArgs),
    /// Classify a memory trace recorded elsewhere (CSV or a leakloop report.json).
    Analyze(analyze::AnalyzeArgs),
    /// Re-render the text summary, summary.md and plot from a saved report.json.
    Report(report::ReportArgs),
    /// Run benchmarks that print figures (detection power, runner overhead).
    Bench(bench::BenchArgs),
    /// Serve an engine to a runner over stdin/stdout (started by the runner itself).
    #[command(hide = true)]
    Worker(worker::WorkerArgs),
    /// Run one scenario against two engine libraries and show the results side by side.
    Compare(compare::CompareArgs),
}

/// Entry point of the `leakloop` binary.
pub fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            return if e.use_stderr() {
                ExitCode::from(Exit::BadInput as u8)
            } else {
                ExitCode::SUCCESS
            };
        }
    };
    let result = match cli.command {
        Command::Check(args) => check::run(args),
        Command::Run(args) => run::run(args),
        Command::Analyze(args) => analyze::run(args),
        Command::Report(args) => report::run(args),
        Command::Bench(args) => bench::run(args),
        Command::Worker(args) => worker::run(args),
        Command::Compare(args) => compare::run(args),
    };
    match result {
        Ok(exit) => ExitCode::from(exit as u8),
        Err(err) => {
            eprintln!("error: {err:#}");
            ExitCode::from(err.exit() as u8)
        }
    }
}
