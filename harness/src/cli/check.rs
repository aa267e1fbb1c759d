//! `leakloop check`: validates scenario files without running them.

use std::path::PathBuf;

use crate::cli::output;
use crate::cli::{CliError, Exit, Outcome};
use crate::engine::litert_lm::inspect_library;
use crate::session::{check_scenario_file, render_checked};

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
pub(crate) fn run(args: CheckArgs) -> Result<Outcome, CliError> {
    // A library named on the command line is opened and read before any scenario is judged
    // against it: one that is missing or is no LiteRT-LM library fails as `run --lib` would.
    if let Some(lib) = &args.lib {
        inspect_library(lib).map_err(|e| CliError::from(e).context("--lib"))?;
    }
    let mut invalid = 0;
    for path in &args.scenarios {
        match check_scenario_file(path, args.lib.as_deref()) {
            Ok(scenario) => output::println(&render_checked(path, &scenario)),
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
