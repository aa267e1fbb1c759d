//! The `leakloop` command line: one file per subcommand, one error enum mapped to exit codes.

mod analyze;
mod baseline;
mod bench;
mod bisect;
mod check;
mod compare;
mod driver_check;
mod error;
mod history;
mod init;
mod interrupt;
mod output;
mod report;
mod run;
pub(crate) mod suite;
mod table;
mod worker;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

pub use compare::{compare_exit, compare_runs};
use error::EXIT_CODES_HELP;
pub use error::{decide, CliError, Decision, Exit, Outcome};

/// Catches memory-leak regressions in on-device LLM inference engines.
#[derive(Debug, Parser)]
#[command(name = "leakloop", version, about, long_about = None)]
#[command(after_help = EXIT_CODES_HELP)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Validate scenario files without running them.
    Check(check::CheckArgs),
    /// Run a scenario, or a suite of them, and judge their expectations.
    Run(run::RunArgs),
    /// Join the --out folders of `run --partition K/N` into the report of the whole suite.
    Merge(suite::MergeArgs),
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
    /// Run one scenario across a series of engine builds and find where a figure changed.
    Bisect(bisect::BisectArgs),
    /// Check an engine driver against the protocol of docs/protocol.md with a short scripted
    /// session: `leakloop driver-check -- python3 my_driver.py`.
    DriverCheck(driver_check::DriverCheckArgs),
    /// Compare the reports of successive builds and flag growth or plateaus that changed.
    History(history::HistoryArgs),
    /// Write a commented starter scenario for a backend, ready to `check` and `run`.
    Init(init::InitArgs),
}

/// Entry point of the `leakloop` binary.
pub fn main() -> ExitCode {
    let result = match Cli::try_parse() {
        Ok(cli) => run_command(cli.command),
        Err(e) if e.use_stderr() => Err(CliError::Usage(e.render().to_string())),
        // --help and --version: their text is the output.
        Err(e) => {
            output::print_styled(&e.render().ansi().to_string());
            Ok(Outcome::Done)
        }
    };
    ExitCode::from(conclude(result) as u8)
}

/// Decides the exit code of a command's `result` (with what happened to standard output, in
/// [`decide`]) and says on stderr what the decision says. `main` and an interrupted run's signal
/// thread both end here.
pub(crate) fn conclude(result: Result<Outcome, CliError>) -> Exit {
    let decision = decide(result, output::take_stdout_failure().as_ref());
    if let Some(text) = &decision.stderr {
        output::note(text.trim_end());
    }
    decision.exit
}

fn run_command(command: Command) -> Result<Outcome, CliError> {
    match command {
        Command::Check(args) => check::run(args),
        Command::Run(args) => run::run(args),
        Command::Merge(args) => suite::merge(args),
        Command::Analyze(args) => analyze::run(args),
        Command::Report(args) => report::run(args),
        Command::Bench(args) => bench::run(args),
        Command::Worker(args) => worker::run(args),
        Command::Compare(args) => compare::run(args),
        Command::Bisect(args) => bisect::run(args),
        Command::DriverCheck(args) => driver_check::run(args),
        Command::History(args) => history::run(args),
        Command::Init(args) => init::run(args),
    }
}
