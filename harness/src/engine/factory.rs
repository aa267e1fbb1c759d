//! Builds the engine a scenario names.

use crate::engine::{Engine, EngineError, EngineErrorKind, OpenClEngine, SimEngine};
use crate::scenario::{BackendKind, Scenario};

/// Builds the engine for `scenario` (its backend, options, faults and seed).
pub fn build_engine(scenario: &Scenario) -> Result<Box<dyn Engine>, EngineError> {
    match scenario.engine.backend {
        BackendKind::Sim => {
            // Placeholder until the simulator adapter implements Engine.
            let _sim = SimEngine::from_scenario(scenario)?;
            Err(EngineError::new(
                EngineErrorKind::Unavailable,
                "simulator pending",
            ))
        }
        BackendKind::Opencl => Ok(Box::new(OpenClEngine::from_scenario(scenario)?)),
        other => Err(EngineError::new(
            EngineErrorKind::Unavailable,
            format!(
                "backend `{}` is not built into this leakloop yet",
                other.as_str()
            ),
        )),
    }
}
