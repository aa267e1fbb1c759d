//! Builds the engine a scenario names: in this process, or in an isolated worker process when
//! the scenario asks for `engine.isolate`.

use crate::engine::{
    Engine, EngineError, EngineErrorKind, LitertLmEngine, SimEngine, WorkerEngine,
};
use crate::scenario::{BackendKind, Scenario};

/// Builds the engine for `scenario` (its backend, options, faults and seed): in a worker process
/// (`leakloop worker`) when `engine.isolate` is set, in this process otherwise.
pub fn build_engine(scenario: &Scenario) -> Result<Box<dyn Engine>, EngineError> {
    if scenario.engine.isolate {
        return Ok(Box::new(WorkerEngine::spawn(scenario, &[])?));
    }
    build_in_process(scenario)
}

/// Builds the engine for `scenario` in this process, whatever `engine.isolate` says (the worker
/// process calls this to build the engine it serves).
pub fn build_in_process(scenario: &Scenario) -> Result<Box<dyn Engine>, EngineError> {
    match scenario.engine.backend {
        BackendKind::Sim => Ok(Box::new(SimEngine::from_scenario(scenario)?)),
        BackendKind::LitertLm => Ok(Box::new(LitertLmEngine::from_scenario(scenario)?)),
        other => Err(EngineError::new(
            EngineErrorKind::Unavailable,
            format!(
                "backend `{}` is not built into this leakloop yet",
                other.as_str()
            ),
        )),
    }
}
