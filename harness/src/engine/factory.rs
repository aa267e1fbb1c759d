//! Builds the engine a scenario names: in this process, or in an isolated worker process when
//! the scenario asks for `engine.isolate`.
//!
//! What differs between backends (where the engine runs, the worker's environment, how the
//! engine is built in process) is each backend's row in `crate::backend`; this file only starts
//! what the row says. The worker's environment may name a `libOpenCL.so` shim folder (the OpenCL
//! call interposer for LiteRT-LM and exec drivers): it is private to that worker and removed
//! after it.

use crate::backend::{self, Placement};
use crate::engine::transport::{remote_parts, BuildError, RemoteEngine};
use crate::engine::{Engine, EngineError, WorkerCommand, WorkerEngine};
use crate::scenario::Scenario;

/// Builds the engine for `scenario` (its backend, options, faults and seed): in a worker process
/// (`leakloop worker`) when `engine.isolate` is set, in this process otherwise, and on the
/// scenario's target ([`build_on_target`]; a target failure becomes an `Unavailable` engine).
pub fn build_engine(scenario: &Scenario) -> Result<Box<dyn Engine>, EngineError> {
    build_engine_with(scenario, None)
}

/// [`build_engine`], with a local worker started as `worker` says instead of `leakloop worker`
/// (a test binary serving as its own worker) when the scenario runs isolated. An exec engine is
/// always its own driver program, whatever `worker` says, and a remote target starts its own.
pub fn build_engine_with(
    scenario: &Scenario,
    worker: Option<&WorkerCommand>,
) -> Result<Box<dyn Engine>, EngineError> {
    build_on_target_with(scenario, worker).map_err(EngineError::from)
}

/// Builds the engine for `scenario` where its `target` says: a worker started on an ssh host or
/// an Android device, or on this machine (also the driver of a device's app, which the runner
/// samples through `probe::target_for`); telling a target failure (bad input, or a transport
/// that failed) from an engine's.
pub fn build_on_target(scenario: &Scenario) -> Result<Box<dyn Engine>, BuildError> {
    build_on_target_with(scenario, None)
}

/// [`build_on_target`], with a local worker started as `worker` says (see [`build_engine_with`]).
pub fn build_on_target_with(
    scenario: &Scenario,
    worker: Option<&WorkerCommand>,
) -> Result<Box<dyn Engine>, BuildError> {
    build_on_target_in(scenario, worker, &[])
}

/// [`build_on_target_with`], with `extra_env` added to the environment of a process started on
/// this machine for the engine (a worker or a driver): how an attribution source is injected.
pub(crate) fn build_on_target_in(
    scenario: &Scenario,
    worker: Option<&WorkerCommand>,
    extra_env: &[(String, String)],
) -> Result<Box<dyn Engine>, BuildError> {
    if let Some((transport, worker)) = remote_parts(scenario) {
        return Ok(Box::new(RemoteEngine::launch(transport, worker, scenario)?));
    }
    // An app on a device is measured by its target's probe (`probe::target_for`); its driver
    // runs here.
    Ok(build_here(scenario, worker, extra_env)?)
}

/// The engine on this machine: in a worker process (`worker`, or `leakloop worker`), in its own
/// driver program, or in this one, as its backend's placement and `engine.isolate` say.
fn build_here(
    scenario: &Scenario,
    worker: Option<&WorkerCommand>,
    extra_env: &[(String, String)],
) -> Result<Box<dyn Engine>, EngineError> {
    let backend = backend::of(scenario.engine.backend);
    let apart = match backend.placement {
        Placement::Driver => true,
        Placement::InProcessOrWorker => scenario.engine.isolate,
        Placement::Attached => false,
    };
    if !apart {
        // An attached program leakloop starts gets the attribution source's environment.
        return (backend.build)(scenario, extra_env);
    }
    let (mut env, shim) = (backend.worker_env)(scenario)?;
    // A preload the attribution source needs goes first; one the backend sets (the OpenCL
    // interposer) stays after it.
    for (key, value) in extra_env {
        match env.iter_mut().find(|(k, _)| k == key) {
            Some((_, old)) if key == "LD_PRELOAD" => *old = format!("{value}:{old}"),
            Some((_, old)) => *old = value.clone(),
            None => env.push((key.clone(), value.clone())),
        }
    }
    let worker = match worker {
        _ if backend.placement == Placement::Driver => WorkerEngine::spawn_driver(scenario, &env)?,
        Some(command) => {
            let env: Vec<_> = command.env.iter().chain(&env).cloned().collect();
            WorkerEngine::launch(&command.program, &command.args, &env, scenario)?
        }
        None => WorkerEngine::spawn(scenario, &env)?,
    };
    Ok(Box::new(match shim {
        Some(shim) => worker.keeping_until_exit(shim),
        None => worker,
    }))
}

/// Builds the engine for `scenario` in this process, whatever `engine.isolate` says (the worker
/// process calls this to build the engine it serves).
pub fn build_in_process(scenario: &Scenario) -> Result<Box<dyn Engine>, EngineError> {
    (backend::of(scenario.engine.backend).build)(scenario, &[])
}
