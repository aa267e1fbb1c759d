//! Injected faults: the engine crashes, hangs or fails a generation at a given turn.
//!
//! Faults strike in `generate`, where the field's native work (and its crashes) happens: the
//! first generation of a session opened for turn K. Each fault strikes once.

use serde::{Deserialize, Serialize};

/// What an injected fault does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SimFaultKind {
    /// The engine dies as a native crash would; every later call fails.
    Crash,
    /// The engine stops answering; every later call fails.
    Hang,
    /// This generation returns an error; the session stays open and can be closed.
    GenerateError,
}

impl SimFaultKind {
    /// The name used in scenarios.
    pub fn as_str(&self) -> &'static str {
        match self {
            SimFaultKind::Crash => "crash",
            SimFaultKind::Hang => "hang",
            SimFaultKind::GenerateError => "generate_error",
        }
    }
}

/// A fault at a turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct SimFault {
    /// The 1-based turn whose first generation it strikes.
    pub at_turn: u32,
    /// What happens.
    pub kind: SimFaultKind,
}

/// The faults still to strike.
#[derive(Debug, Clone, Default)]
pub(crate) struct FaultSchedule {
    pending: Vec<SimFault>,
}

impl FaultSchedule {
    pub(crate) fn new(faults: &[SimFault]) -> Self {
        Self {
            pending: faults.to_vec(),
        }
    }

    /// The fault that strikes a generation in `turn`, removed from the schedule. When several
    /// are set for one turn, the first listed strikes first.
    pub(crate) fn take(&mut self, turn: u32) -> Option<SimFaultKind> {
        let index = self.pending.iter().position(|f| f.at_turn == turn)?;
        Some(self.pending.remove(index).kind)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fault_strikes_once_at_its_turn_in_listed_order() {
        let mut schedule = FaultSchedule::new(&[
            SimFault {
                at_turn: 3,
                kind: SimFaultKind::GenerateError,
            },
            SimFault {
                at_turn: 3,
                kind: SimFaultKind::Crash,
            },
        ]);
        assert_eq!(schedule.take(2), None);
        assert_eq!(schedule.take(3), Some(SimFaultKind::GenerateError));
        assert_eq!(schedule.take(3), Some(SimFaultKind::Crash));
        assert_eq!(schedule.take(3), None);
    }
}
