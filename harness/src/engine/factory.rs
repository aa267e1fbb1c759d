//! Builds the engine a scenario names: in this process, or in an isolated worker process when
//! the scenario asks for `engine.isolate`.
//!
//! The worker's environment is chosen here: an OpenCL engine in a worker gets the OpenCL call
//! interposer injected (`OPENCL_DYLIB_PATH`, `LD_PRELOAD`), so its create/release calls are
//! counted per live object.

use crate::engine::opencl::{find_interposer, interposer_env};
use crate::engine::{
    Engine, EngineError, EngineErrorKind, LitertLmEngine, OpenClEngine, SimEngine, WorkerEngine,
};
use crate::scenario::{BackendKind, Scenario};

/// Builds the engine for `scenario` (its backend, options, faults and seed): in a worker process
/// (`leakloop worker`) when `engine.isolate` is set, in this process otherwise.
pub fn build_engine(scenario: &Scenario) -> Result<Box<dyn Engine>, EngineError> {
    if scenario.engine.isolate {
        let env = worker_env(scenario)?;
        return Ok(Box::new(WorkerEngine::spawn(scenario, &env)?));
    }
    build_in_process(scenario)
}

/// Builds the engine for `scenario` in this process, whatever `engine.isolate` says (the worker
/// process calls this to build the engine it serves).
pub fn build_in_process(scenario: &Scenario) -> Result<Box<dyn Engine>, EngineError> {
    match scenario.engine.backend {
        BackendKind::Sim => Ok(Box::new(SimEngine::from_scenario(scenario)?)),
        BackendKind::LitertLm => Ok(Box::new(LitertLmEngine::from_scenario(scenario)?)),
        BackendKind::Opencl => Ok(Box::new(OpenClEngine::from_scenario(scenario)?)),
    }
}

/// Extra environment of the worker process for this scenario's backend.
fn worker_env(scenario: &Scenario) -> Result<Vec<(String, String)>, EngineError> {
    match scenario.engine.backend {
        BackendKind::Opencl => {
            let interposer = find_interposer().map_err(|why| {
                EngineError::new(
                    EngineErrorKind::Unavailable,
                    format!(
                        "the OpenCL call interposer is needed to count OpenCL objects: {why} \
                         (build it with `cargo build -p cl-interposer`)"
                    ),
                )
            })?;
            Ok(interposer_env(&interposer))
        }
        BackendKind::Sim | BackendKind::LitertLm => Ok(Vec::new()),
    }
}
