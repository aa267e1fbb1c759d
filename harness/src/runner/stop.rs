//! The runner's hook for `stop: decided`: after a turn, a [`StopRule`] may look at everything
//! measured so far and end the run before its last turn. The rule itself (when to look, what
//! counts as decided) belongs to the analyzer; the runner only asks and records the answer.

use serde::{Deserialize, Serialize};

use crate::runner::RunRecord;

/// Decides, while a scenario runs, whether it may end before its last turn.
pub trait StopRule {
    /// Whether to look at the run after `turn` (1-based, warm-up included) has completed. Called
    /// after every turn, so it must be cheap.
    fn wants_look(&self, turn: u32) -> bool;
    /// Looks at the run so far (`so_far.turns_completed` turns; its ledger holds the engine's
    /// own counts up to the turn before); `Some(reason)` ends the run after this turn, `reason`
    /// saying in a few words why.
    fn look(&mut self, so_far: &RunRecord) -> Option<String>;
}

/// The rule of `stop: turns`: never stop early.
#[derive(Debug, Default, Clone, Copy)]
pub struct RunAllTurns;

impl StopRule for RunAllTurns {
    fn wants_look(&self, _turn: u32) -> bool {
        false
    }

    fn look(&mut self, _so_far: &RunRecord) -> Option<String> {
        None
    }
}

/// A run that a [`StopRule`] ended before its last turn.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EarlyStop {
    /// The last turn that ran (warm-up included).
    pub turn: u32,
    /// The turns the scenario allowed (`warmup_turns + turns`).
    pub max_turns: u32,
    /// Why the rule stopped the run.
    pub reason: String,
}
