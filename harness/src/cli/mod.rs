//! The `leakloop` command line: one file per subcommand, one error enum mapped to exit codes.

mod analyze;
mod bench;
mod bisect;
mod check;
mod compare;
mod driver_check;
mod error;
// Only the generated docs/exit-codes.md reads these (the generation test, `reference`).
#[cfg(test)]
mod exit_table;
mod history;
mod init;
mod interrupt;
mod output;
mod overrides;
mod record;
#[cfg(test)]
mod reference;
mod report;
mod run;
pub(crate) mod suite;
mod worker;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

pub use compare::compare_exit;
use error::EXIT_CODES_HELP;
pub use error::{decide, CliError, Decision, Exit, OnInconclusive, Outcome};

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
    /// Classify a memory trace recorded elsewhere: a CSV, a leakloop report.json, or an Android
    /// `dumpsys meminfo` capture (a folder of per-turn dumps, or one file of dumps in order).
    Analyze(analyze::AnalyzeArgs),
    /// Re-render the text summary, summary.md and plot from a saved report.json.
    Report(report::ReportArgs),
    // The list of benchmarks is generated from their enum.
    #[command(about = bench::about())]
    Bench(bench::BenchArgs),
    /// Serve an engine to a runner over stdin/stdout (started by the runner itself).
    #[command(hide = true)]
    Worker(worker::WorkerArgs),
    /// Run one scenario on two engine libraries (`--lib A --lib B`) or two engine specs
    /// (`--engine [A.yaml] B.yaml`) and show the results side by side.
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
        Ok(cli) => {
            // A worker hosts the engine under test: its allocator keeps glibc's defaults, as
            // the engine's own application would have them.
            if !matches!(cli.command, Command::Worker(_)) {
                return_large_blocks_when_freed();
            }
            run_command(cli.command)
        }
        Err(e) if e.use_stderr() => Err(CliError::Usage(e.render().to_string())),
        // --help and --version: their text is the output.
        Err(e) => {
            output::print_styled(&e.render().ansi().to_string());
            Ok(Outcome::Done)
        }
    };
    ExitCode::from(conclude(result) as u8)
}

/// Has glibc's allocator map every block of 128 KiB or more on its own and unmap it when freed.
/// By default the threshold rises to the largest block freed so far, after which large blocks
/// come from the heap and stay resident when freed: a long run's turn loop, analysis and reports
/// each allocate and free buffers of megabytes, and the peak resident memory then stacked one
/// phase's freed buffers under the next one's (`bench scale`, 1,000,000 turns: 113.8 MiB against
/// 101.3 with a fixed threshold, the same figures otherwise). Not in `leakloop worker`, whose
/// engine is the one measured; an engine in leakloop's own process (`isolate: false`) shares it.
fn return_large_blocks_when_freed() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only sets an allocator parameter; it is called before any other thread
    // starts (parsing the command line starts none).
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 128 * 1024);
    }
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

#[cfg(test)]
mod help_tests {
    use clap::CommandFactory;

    use super::Cli;

    /// What each subcommand reads, which its line in `leakloop --help` and its own `--help` must
    /// name (issue 23: `analyze` left out dumpsys captures, `bench` named 2 of its benchmarks,
    /// `compare` left out `--engine`). A new subcommand needs a row here.
    const INPUTS: &[(&str, &[&str])] = &[
        ("check", &["scenario"]),
        ("run", &["scenario", "suite"]),
        ("merge", &["--out", "partition"]),
        ("analyze", &["CSV", "report.json", "dumpsys"]),
        ("report", &["report.json"]),
        ("compare", &["--lib", "--engine"]),
        ("bisect", &["scenario", "builds"]),
        ("driver-check", &["driver", "docs/protocol.md"]),
        ("history", &["reports", "builds"]),
        ("init", &["backend", "scenario"]),
    ];

    #[test]
    fn every_subcommand_names_its_inputs_in_its_help() {
        let mut cli = Cli::command();
        let top = cli.render_help().to_string();
        let subcommands = cli
            .get_subcommands_mut()
            .filter(|s| !s.is_hide_set() && s.get_name() != "help");
        for sub in subcommands {
            let name = sub.get_name().to_owned();
            let about = sub.get_about().map(|a| a.to_string()).unwrap_or_default();
            let own = sub.render_help().to_string();
            let words: Vec<String> = match INPUTS.iter().find(|(n, _)| *n == name) {
                Some((_, words)) => words.iter().map(|w| (*w).to_owned()).collect(),
                // `bench` reads no input: its help names every benchmark instead.
                None if name == "bench" => sub
                    .get_subcommands()
                    .filter(|b| !b.is_hide_set() && b.get_name() != "help")
                    .map(|b| b.get_name().to_owned())
                    .collect(),
                None => panic!("`{name}` has no row in INPUTS"),
            };
            assert!(!words.is_empty(), "{name}");
            for word in &words {
                assert!(
                    about.contains(word.as_str()),
                    "`{name}`'s help line lacks `{word}`: {about}"
                );
                assert!(
                    own.contains(word.as_str()),
                    "`{name} --help` lacks `{word}`:\n{own}"
                );
            }
            assert!(
                top.contains(about.lines().next().unwrap_or_default()),
                "{top}"
            );
        }
    }

    #[test]
    fn every_benchmark_has_its_own_help_line() {
        let mut cli = Cli::command();
        let bench = cli.find_subcommand_mut("bench").unwrap();
        let benchmarks = bench.get_subcommands().filter(|b| b.get_name() != "help");
        for b in benchmarks.filter(|b| !b.is_hide_set()) {
            assert!(
                b.get_about().is_some(),
                "`bench {}` has no help",
                b.get_name()
            );
        }
    }
}
