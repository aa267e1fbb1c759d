//! A test's own engine ([`ScenarioTest::engine`](super::ScenarioTest::engine)): how it is built
//! in the test binary started again as its worker, where the runner samples it from outside.

use std::fmt;
use std::sync::Arc;

use crate::engine::{Engine, EngineError, EngineErrorKind};
use crate::scenario::Scenario;

/// Builds the test's own engine; shared, so that the [`ScenarioTest`](super::ScenarioTest)
/// holding it stays `Clone`.
#[derive(Clone)]
pub(crate) struct OwnEngine {
    build: Arc<dyn Fn() -> Box<dyn Engine> + Send + Sync>,
}

impl OwnEngine {
    pub(crate) fn new<E: Engine + 'static>(build: impl Fn() -> E + Send + Sync + 'static) -> Self {
        Self {
            build: Arc::new(move || Box::new(build())),
        }
    }

    /// The engine for the scenario the runner's handshake sent, which must be `mine` (the one
    /// this test runs): a test that runs several scenarios with their own engines would otherwise
    /// serve the first one's engine to every run.
    pub(crate) fn build_for(
        &self,
        asked: &Scenario,
        mine: &Scenario,
    ) -> Result<Box<dyn Engine>, EngineError> {
        if asked.name != mine.name {
            return Err(EngineError::new(
                EngineErrorKind::Unavailable,
                format!(
                    "this test's worker serves the engine of the first scenario the test runs \
                     (`{}`), but the runner asked for `{}`: run one scenario with its own engine \
                     per test",
                    mine.name, asked.name
                ),
            ));
        }
        Ok((self.build)())
    }
}

impl fmt::Debug for OwnEngine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("OwnEngine")
    }
}

#[cfg(test)]
mod tests;
