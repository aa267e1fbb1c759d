//! The turn clock: what marks a turn boundary. Either the runner's own loop (it executes the
//! scenario's steps, so it knows where each turn ends) or marker lines from a process that runs
//! its own loop (attach mode). Everything after the boundary (sampling, the ledger, the stop
//! rule, the analysis and reports) is one code path for both.

use crate::engine::{EngineError, Ready, TurnMarks};

/// What marks the end of a turn.
#[derive(Debug)]
pub(crate) enum Clock {
    /// The runner executes each turn's steps itself.
    Driven,
    /// The process marks each closed turn; the runner waits and samples.
    Marked(MarkerClock),
}

impl Clock {
    /// The clock for an engine: marked when it reports turn marks, driven otherwise.
    pub(crate) fn for_engine(has_marks: bool) -> Self {
        if has_marks {
            Clock::Marked(MarkerClock::default())
        } else {
            Clock::Driven
        }
    }

    /// Whether the runner itself loads, drives and unloads the engine (and so records its
    /// loads and sessions in the ledger).
    pub(crate) fn is_driven(&self) -> bool {
        matches!(self, Clock::Driven)
    }
}

/// Turns as the process numbers them, mapped onto the runner's 1-based turns: the first marker
/// seen is turn 1 (a process attached mid-life may be at its turn 500).
#[derive(Debug, Default)]
pub(crate) struct MarkerClock {
    /// The process's number for the runner's turn 0.
    offset: Option<u64>,
    /// The process's latest turn a sample stood for.
    last: Option<u64>,
}

impl MarkerClock {
    /// Waits until the process is ready to be measured: its ready line, or its first turn
    /// marker. True when it was a turn marker: the baseline then stands for that turn, and
    /// [`MarkerClock::start_after_baseline`] makes the turns the markers after it.
    pub(crate) fn ready(&mut self, marks: &mut dyn TurnMarks) -> Result<bool, EngineError> {
        Ok(matches!(marks.wait_ready()?, Ready::Turn(_)))
    }

    /// After the baseline was sampled (`at_marker`: at a turn marker, see
    /// [`MarkerClock::ready`]): when the baseline stands for a turn marker, because it was
    /// taken at one or because a marker came after the ready line before it was sampled (a
    /// process that went straight into its first turn), the turns are the markers after it;
    /// otherwise every marker is a turn.
    pub(crate) fn after_baseline(&mut self, marks: &mut dyn TurnMarks, at_marker: bool) {
        if at_marker || marks.marked_before_baseline().is_some() {
            self.start_after_baseline(marks);
        }
    }

    /// After a baseline taken at a turn marker: the latest marker now (the one waited for, or a
    /// later one that came while the baseline was sampled) is the runner's turn 0, so turn 1 is
    /// the first turn that closed wholly after the baseline.
    pub(crate) fn start_after_baseline(&mut self, marks: &mut dyn TurnMarks) {
        if let Some(latest) = marks.take_latest_turn() {
            self.offset = Some(latest);
            self.last = Some(latest);
        }
    }

    /// Waits for the next turn marker (an error ends the run: a timeout, the process gone, a
    /// turn number out of order).
    pub(crate) fn wait(&mut self, marks: &mut dyn TurnMarks) -> Result<(), EngineError> {
        let turn = marks.wait_turn_closed(self.last)?;
        let first = marks.first_turn().unwrap_or(turn);
        self.offset.get_or_insert(first.saturating_sub(1));
        Ok(())
    }

    /// The runner's turn a sample taken now stands for: the latest marked turn, which may be
    /// past the one waited for when markers came faster than the settle time and sampling.
    pub(crate) fn sampled_turn(&mut self, marks: &mut dyn TurnMarks) -> u32 {
        let latest = marks.take_latest_turn().or(self.last).unwrap_or(0);
        self.last = Some(latest);
        let turn = latest.saturating_sub(self.offset.unwrap_or(0));
        u32::try_from(turn).unwrap_or(u32::MAX)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::EngineErrorKind;

    /// Marks handed out from a list: each wait returns the next one, as if it were the latest.
    struct Listed {
        waits: Vec<u64>,
        latest: Option<u64>,
    }

    impl TurnMarks for Listed {
        fn wait_turn_closed(&mut self, _after: Option<u64>) -> Result<u64, EngineError> {
            if self.waits.is_empty() {
                return Err(EngineError::new(
                    EngineErrorKind::Hung { waited_ms: 1 },
                    "no more",
                ));
            }
            let next = self.waits.remove(0);
            self.latest = Some(next);
            Ok(next)
        }
        fn take_latest_turn(&mut self) -> Option<u64> {
            self.latest
        }
        fn first_turn(&self) -> Option<u64> {
            Some(500)
        }
    }

    /// Marks whose process printed no ready line: its first marker (500) is the baseline's.
    struct NoReadyLine(Listed);

    impl TurnMarks for NoReadyLine {
        fn wait_ready(&mut self) -> Result<Ready, EngineError> {
            let turn = self.0.wait_turn_closed(None)?;
            Ok(Ready::Turn(turn))
        }
        fn wait_turn_closed(&mut self, after: Option<u64>) -> Result<u64, EngineError> {
            self.0.wait_turn_closed(after)
        }
        fn take_latest_turn(&mut self) -> Option<u64> {
            self.0.take_latest_turn()
        }
        fn first_turn(&self) -> Option<u64> {
            self.0.first_turn()
        }
    }

    #[test]
    fn without_a_ready_line_the_first_marker_is_the_baseline_and_turn_one_the_next() {
        let mut marks = NoReadyLine(Listed {
            waits: vec![500, 501, 502, 505],
            latest: None,
        });
        let mut clock = MarkerClock::default();
        assert!(clock.ready(&mut marks).unwrap());
        clock.start_after_baseline(&mut marks);
        let mut turns = Vec::new();
        for _ in 0..3 {
            clock.wait(&mut marks).unwrap();
            turns.push(clock.sampled_turn(&mut marks));
        }
        assert_eq!(turns, [1, 2, 5]);
    }

    #[test]
    fn after_a_ready_line_the_first_marker_is_turn_one() {
        let mut marks = Listed {
            waits: vec![500, 501],
            latest: None,
        };
        let mut clock = MarkerClock::default();
        assert!(!clock.ready(&mut marks).unwrap());
        clock.after_baseline(&mut marks, false);
        let mut turns = Vec::new();
        for _ in 0..2 {
            clock.wait(&mut marks).unwrap();
            turns.push(clock.sampled_turn(&mut marks));
        }
        assert_eq!(turns, [1, 2]);
    }

    /// A ready line, then marker 500 before the baseline was sampled: the race of a process
    /// that goes straight into its first turn.
    struct MarkedDuringSettle(Listed);

    impl TurnMarks for MarkedDuringSettle {
        fn wait_turn_closed(&mut self, after: Option<u64>) -> Result<u64, EngineError> {
            self.0.wait_turn_closed(after)
        }
        fn take_latest_turn(&mut self) -> Option<u64> {
            self.0.take_latest_turn()
        }
        fn first_turn(&self) -> Option<u64> {
            self.0.first_turn()
        }
        fn marked_before_baseline(&mut self) -> Option<u64> {
            self.0.latest = Some(500);
            self.0.latest
        }
    }

    #[test]
    fn a_marker_before_the_baseline_after_a_ready_line_is_the_baselines_turn() {
        let mut marks = MarkedDuringSettle(Listed {
            waits: vec![501, 502],
            latest: None,
        });
        let mut clock = MarkerClock::default();
        assert!(!clock.ready(&mut marks).unwrap());
        clock.after_baseline(&mut marks, false);
        let mut turns = Vec::new();
        for _ in 0..2 {
            clock.wait(&mut marks).unwrap();
            turns.push(clock.sampled_turn(&mut marks));
        }
        // Turn 500 is in the baseline: the runner's turn 1 is the marker after it.
        assert_eq!(turns, [1, 2]);
        assert_eq!(clock.offset, Some(500));
    }

    #[test]
    fn the_first_marker_is_turn_one_whatever_the_process_numbers_it() {
        let mut marks = Listed {
            waits: vec![500, 501, 504],
            latest: None,
        };
        let mut clock = MarkerClock::default();
        let mut turns = Vec::new();
        for _ in 0..3 {
            clock.wait(&mut marks).unwrap();
            turns.push(clock.sampled_turn(&mut marks));
        }
        // 502 and 503 came while 501 was sampled: no sample stands for them.
        assert_eq!(turns, [1, 2, 5]);
        assert!(clock.wait(&mut marks).is_err());
    }
}
