//! `leakloop check`: validates scenario files without running them.

use std::path::PathBuf;

use crate::cli::output;
use crate::cli::{CliError, Exit, Outcome};
use crate::scenario::load_scenario;

/// Arguments of `leakloop check`.
#[derive(Debug, clap::Args)]
pub(crate) struct CheckArgs {
    /// Scenario files to validate.
    #[arg(required = true, value_name = "SCENARIO")]
    scenarios: Vec<PathBuf>,
}

/// Prints `ok <file>: ...` for each valid file and the full error for each invalid one; fails
/// with bad input (exit 2) if any file is invalid.
pub(crate) fn run(args: CheckArgs) -> Result<Outcome, CliError> {
    let mut invalid = 0;
    for path in &args.scenarios {
        match load_scenario(path) {
            Ok(scenario) => output::println(&format!(
                "ok {}: {} ({}, {} turns)",
                path.display(),
                scenario.name,
                scenario.engine.backend.as_str(),
                scenario.turns
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
