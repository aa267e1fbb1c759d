//! `leakloop worker` (hidden): serves one engine to a runner over stdin/stdout. The runner starts
//! it; people do not.

use std::path::{Path, PathBuf};

use anyhow::Context;

use crate::cli::{CliError, Exit};
use crate::engine::{build_in_process, serve_stdio, WorkerError};
use crate::scenario::{load_scenario, Scenario};

/// Arguments of `leakloop worker`.
#[derive(Debug, clap::Args)]
pub(crate) struct WorkerArgs {
    /// Scenario to build the engine for (a scenario file, or a serialised scenario as `.json`)
    /// instead of the one in the runner's handshake.
    #[arg(long, value_name = "FILE")]
    scenario: Option<PathBuf>,
}

pub(crate) fn run(args: WorkerArgs) -> Result<Exit, CliError> {
    let given = args
        .scenario
        .as_deref()
        .map(read_scenario)
        .transpose()
        .map_err(CliError::BadInput)?;
    match serve_stdio(given, Box::new(build_in_process)) {
        Ok(()) => Ok(Exit::Pass),
        Err(err @ WorkerError::Build(_)) => Err(CliError::Engine(err.into())),
        Err(err) => Err(CliError::BadInput(err.into())),
    }
}

fn read_scenario(path: &Path) -> anyhow::Result<Scenario> {
    if path.extension().is_some_and(|e| e == "json") {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read {}", path.display()))?;
        let mut de = serde_json::Deserializer::from_str(&text);
        serde_path_to_error::deserialize(&mut de)
            .with_context(|| format!("{}: not a serialised scenario", path.display()))
    } else {
        Ok(load_scenario(path)?)
    }
}
