//! The turn loop itself.

use crate::engine::Engine;
use crate::runner::{RunRecord, Sample};
use crate::scenario::Scenario;

/// Watches a run as it happens: samples are streamed to disk and progress is shown through this.
pub trait RunObserver {
    /// A sample was taken.
    fn on_sample(&mut self, _sample: &Sample) {}
    /// A turn ended (`turn` of `total`).
    fn on_turn_end(&mut self, _turn: u32, _total: u32) {}
}

/// An observer that does nothing.
#[derive(Debug, Default, Clone, Copy)]
pub struct NoObserver;

impl RunObserver for NoObserver {}

/// Runs `scenario` against `engine`.
pub fn run_scenario(
    _scenario: &Scenario,
    _engine: &mut dyn Engine,
    _observer: &mut dyn RunObserver,
) -> RunRecord {
    todo!("the runner is being written")
}
