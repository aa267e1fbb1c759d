//! `leakloop worker` (hidden): serves one engine to a runner over stdin/stdout. The runner starts
//! it; people do not.

use std::path::{Path, PathBuf};

use crate::cli::{CliError, Outcome};
use crate::engine::transport::{exit_on_hangup, HANGUP_GRACE};
use crate::engine::{build_in_process, serve_stdio, Engine};
use crate::input::read_bounded;
use crate::probe::SelfReporting;
use crate::scenario::{load_scenario, Scenario, MAX_SCENARIO_BYTES};

/// Arguments of `leakloop worker`.
#[derive(Debug, clap::Args)]
pub(crate) struct WorkerArgs {
    /// Scenario to build the engine for (a scenario file, or a serialised scenario as `.json`)
    /// instead of the one in the runner's handshake.
    #[arg(long, value_name = "FILE")]
    scenario: Option<PathBuf>,
    /// Serve a runner on another machine (started over ssh or adb): report this process's own
    /// memory with each snapshot, and end when the runner hangs up even mid-call.
    #[arg(long)]
    remote: bool,
}

pub(crate) fn run(args: WorkerArgs) -> Result<Outcome, CliError> {
    let given = args.scenario.as_deref().map(read_scenario).transpose()?;
    if args.remote {
        exit_on_hangup(HANGUP_GRACE);
        serve_stdio(
            given,
            Box::new(|scenario: &Scenario| {
                let engine = build_in_process(scenario)?;
                Ok(Box::new(SelfReporting::new(engine, scenario)) as Box<dyn Engine>)
            }),
        )?;
    } else {
        serve_stdio(given, Box::new(build_in_process))?;
    }
    Ok(Outcome::Done)
}

fn read_scenario(path: &Path) -> Result<Scenario, CliError> {
    if path.extension().is_some_and(|e| e == "json") {
        let bytes = read_bounded(path, MAX_SCENARIO_BYTES, "a serialised scenario is small")?;
        let mut de = serde_json::Deserializer::from_slice(&bytes);
        serde_path_to_error::deserialize(&mut de).map_err(|e| {
            CliError::BadInput(
                anyhow::Error::new(e)
                    .context(format!("{}: not a serialised scenario", path.display())),
            )
        })
    } else {
        Ok(load_scenario(path)?)
    }
}
