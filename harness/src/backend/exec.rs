//! `backend: exec`: an external program speaking the worker protocol (docs/protocol.md). It
//! always runs in its own process, on this machine, and gets the OpenCL call interposer when its
//! scenario sets `engine.opencl_interposer` (`scenario/validate/exec.rs` checks its keys).

use std::path::PathBuf;

use super::registry::{nothing_missing, EngineParts, WorkerEnv};
use super::starter::yaml_command;
use super::{Backend, Placement};
use super::{CommandUse, Starter};
use crate::engine::opencl::{find_interposer, opencl_name_shim, preload_env, OpenClNameShim};
use crate::engine::{EngineError, EngineErrorKind};
use crate::scenario::{fault_name, BackendKind, Concurrency, EngineSpec, FaultKind, Scenario};

/// The exec row.
pub(super) const BACKEND: Backend = Backend {
    kind: BackendKind::Exec,
    name: "exec",
    concurrency: Concurrency::Exclusive,
    isolate_by_default: true,
    // A driver may tokenize what it is sent.
    reads_prompt_text: true,
    placement: Placement::Driver,
    loads_library: false,
    builds: None,
    remote_refusal: Some(
        "an `exec` driver runs on this machine; a remote target starts leakloop's own worker \
         there (run the driver over ssh in its `command` instead)",
    ),
    check: |raw, input| {
        crate::scenario::validate_attach(raw, false, input.folder, input.cx)?;
        // A driver runs in its own folder (`cwd`, by default the scenario's): the paths it is
        // given (its program, model and library) must not stay relative to leakloop's folder.
        let folder = std::path::absolute(input.folder).unwrap_or_else(|_| input.folder.to_owned());
        let exec = crate::scenario::validate_exec(raw, &folder, input.cx)?;
        Ok(EngineParts {
            exec: Some(exec),
            folder: Some(folder),
            ..EngineParts::default()
        })
    },
    fault_refusal,
    missing: nothing_missing,
    build: |_, _| {
        Err(EngineError::new(
            EngineErrorKind::Unavailable,
            "an exec engine is an external program: it runs in its own process, never inside \
             leakloop",
        ))
    },
    worker_env,
    starter: Some(Starter {
        engine: |options| {
            format!(
                "  backend: exec\n\
                 \x20 # The driver, speaking docs/protocol.md; it runs in this file's folder.\n\
                 \x20 command: {}\n\
                 \x20 call_timeout: 20s\n",
                yaml_command(options.command)
            )
        },
        command: CommandUse::Required,
        takes_model: false,
        reports: None,
        driven: true,
        watch: &["rss", "anon_rss", "turn_time"],
    }),
};

/// leakloop does not run a driver's code, so only the harness-side fault can be injected.
fn fault_refusal(kind: FaultKind, _: &EngineSpec) -> Option<String> {
    match kind {
        FaultKind::SkipClose => None,
        FaultKind::Crash | FaultKind::Hang | FaultKind::GenerateError => Some(format!(
            "`{}` cannot be injected into an external driver (leakloop does not run its \
             code); make the driver fail on its own, or use `skip_close`",
            fault_name(kind)
        )),
    }
}

fn worker_env(scenario: &Scenario) -> Result<WorkerEnv, EngineError> {
    match &scenario.engine.exec {
        Some(exec) if exec.opencl_interposer => {
            exec_driver_env(find_interposer().and_then(|path| {
                let shim = opencl_name_shim(&path)?;
                Ok((path, shim))
            }))
        }
        _ => Ok((Vec::new(), None)),
    }
}

/// An exec driver's environment when its scenario asks for the interposer
/// (`opencl_interposer: true`): needed then, so a missing one stops the run.
fn exec_driver_env(
    interposer: Result<(PathBuf, OpenClNameShim), String>,
) -> Result<WorkerEnv, EngineError> {
    match interposer {
        Ok((path, shim)) => Ok((preload_env(&path, shim.path()), Some(shim))),
        Err(why) => Err(EngineError::new(
            EngineErrorKind::Unavailable,
            format!(
                "`engine.opencl_interposer` asks for the OpenCL call interposer: {why} \
                 (build it with `cargo build -p cl-interposer`)"
            ),
        )),
    }
}
