//! Adapter from the simulator crate (`sim-backend`) to the [`Engine`] trait.

use crate::engine::{EngineError, EngineErrorKind};
use crate::scenario::Scenario;

/// The simulated engine.
#[derive(Debug)]
pub struct SimEngine {}

impl SimEngine {
    /// Builds the simulator for a scenario (profile, max_tokens, faults, seed).
    pub fn from_scenario(_scenario: &Scenario) -> Result<Self, EngineError> {
        Err(EngineError::new(
            EngineErrorKind::Unavailable,
            "the simulator is being written",
        ))
    }
}
