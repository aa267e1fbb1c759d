//! `leakloop check`: validates scenario files without running them.

use std::path::PathBuf;

use crate::cli::output;
use crate::cli::{CliError, Exit, Outcome};
use crate::engine::litert_lm::{check_library, inspect_library};
use crate::scenario::{load_scenario, Scenario, StopMode};

/// Arguments of `leakloop check`.
#[derive(Debug, clap::Args)]
pub(crate) struct CheckArgs {
    /// Scenario files to validate.
    #[arg(required = true, value_name = "SCENARIO")]
    scenarios: Vec<PathBuf>,
    /// Also check that this LiteRT-LM library (a `liblitert-lm.so` or a folder holding one) can
    /// run every step of the `litert-lm` scenarios (without it: `engine.lib`, `LITERT_LM_LIB` or
    /// the newest fetched library, when one is found).
    #[arg(long, value_name = "PATH")]
    lib: Option<PathBuf>,
}

/// Prints `ok <file>: ...` for each valid file and the full error for each invalid one; fails
/// with bad input (exit 2) if any file is invalid.
/// How many turns a scenario runs: `12 turns`, or `at most 100 turns` when it stops once decided.
fn turns_label(scenario: &Scenario) -> String {
    match scenario.stop {
        StopMode::Turns => format!("{} turns", scenario.turns),
        StopMode::Decided => format!("at most {} turns, stops once decided", scenario.turns),
    }
}

pub(crate) fn run(args: CheckArgs) -> Result<Outcome, CliError> {
    // A library named on the command line is opened and read before any scenario is judged
    // against it: one that is missing or is no LiteRT-LM library fails as `run --lib` would.
    if let Some(lib) = &args.lib {
        inspect_library(lib).map_err(|e| CliError::from(e).context("--lib"))?;
    }
    let mut invalid = 0;
    for path in &args.scenarios {
        let loaded = load_scenario(path)
            .map_err(|e| e.to_string())
            .and_then(|s| {
                check_library(&s, args.lib.as_deref())
                    .map(|_| s)
                    .map_err(|why| format!("{}: {why}", path.display()))
            });
        match loaded {
            Ok(scenario) => output::println(&format!(
                "ok {}: {} ({}, {})",
                path.display(),
                scenario.name,
                scenario.engine.backend.as_str(),
                turns_label(&scenario)
            )),
            Err(err) => {
                invalid += 1;
                output::error(&format!("{err}\n"));
            }
        }
    }
    if invalid > 0 {
        return Err(CliError::bad_input(format!(
            "{invalid} of {} scenario files are invalid",
            args.scenarios.len()
        )));
    }
    Ok(Outcome::Verdict(Exit::Pass))
}
