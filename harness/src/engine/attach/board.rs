//! The marker board: what the reader threads have seen, shared with the runner's wait.
//!
//! Reader threads never queue markers: each line updates a fixed-size state (the latest closed
//! turn, the ledger counts, a few recent lines), so a process that floods markers faster than
//! leakloop samples costs no memory and is never blocked on a full pipe. Turn numbers must
//! rise; a repeated or falling number is recorded once, as the clock's failure.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use regex::Regex;

use crate::engine::ledger::MAX_SOURCE_KINDS;
use crate::engine::KindCounts;
use crate::process::lines::Line;

/// How many recent non-marker lines of each stream are kept to explain a failure.
const TAIL_LINES: usize = 3;

/// The longest turn key kept from a marker: a session id or a shape name, not a payload.
pub(crate) const MAX_KEY_CHARS: usize = 64;

/// A turn marker as read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Mark {
    /// The turn number the process wrote.
    pub turn: u64,
    /// The marker's line number in its source (1-based).
    pub line: u64,
}

/// Everything the readers have seen so far.
#[derive(Debug, Default)]
pub(crate) struct BoardState {
    /// The latest turn marker.
    pub latest: Option<Mark>,
    /// The key the latest turn marker named (its pattern's `key` group), printable and cut to
    /// [`MAX_KEY_CHARS`] characters.
    pub latest_key: Option<String>,
    /// The first turn marker.
    pub first: Option<Mark>,
    /// The line number of the ready line, when one came before the first turn marker.
    pub ready: Option<u64>,
    /// When the latest turn marker was read.
    pub latest_at: Option<Instant>,
    /// Time per turn from the marker before the latest to the latest (divided by the turns
    /// between them, for a process that marks every Nth turn), in nanoseconds: the latest
    /// turn's `turn_time`. Read when the line reaches leakloop, so it includes the process's
    /// output buffering, which is the same for every turn.
    pub latest_turn_nanos: Option<u64>,
    /// Turn markers seen.
    pub markers: u64,
    /// The first reason the markers cannot be trusted, described: a repeated or out-of-order
    /// turn number, a count too large for 64 bits, a marker file that is not a regular file.
    pub violation: Option<String>,
    /// Cumulative counts per kind from ledger markers (the latest line for each kind), at most
    /// [`MAX_SOURCE_KINDS`] kinds.
    pub ledger: BTreeMap<String, KindCounts>,
    /// Ledger markers of kinds past the first [`MAX_SOURCE_KINDS`], counted and dropped.
    pub ledger_lines_dropped: u64,
    /// Lines longer than the bound, skipped.
    pub too_long: u64,
    /// Lines read from the marker source.
    pub lines: u64,
    /// The last few lines that were not markers, per stream (in the order streams first
    /// spoke), for error messages.
    pub tail: Vec<(String, VecDeque<String>)>,
    /// Why a marker source stopped delivering, when it did (its reader ended).
    pub source_ended: Option<String>,
}

/// The board shared between reader threads and the runner.
#[derive(Debug, Clone, Default)]
pub(crate) struct Board(Arc<(Mutex<BoardState>, Condvar)>);

impl Board {
    /// The state, locked. A reader that panicked leaves a usable state behind.
    pub fn lock(&self) -> MutexGuard<'_, BoardState> {
        self.0 .0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Changes the state and wakes the runner.
    pub fn update(&self, change: impl FnOnce(&mut BoardState)) {
        change(&mut self.lock());
        self.0 .1.notify_all();
    }

    /// Waits until `ready` holds or `slice` passes, whichever is first; returns the state.
    pub fn wait_for(
        &self,
        slice: Duration,
        ready: impl Fn(&BoardState) -> bool,
    ) -> MutexGuard<'_, BoardState> {
        let deadline = Instant::now() + slice;
        let mut state = self.lock();
        while !ready(&state) {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            state = self
                .0
                 .1
                .wait_timeout(state, left)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
        state
    }

    /// Keeps `line` (escaped and shortened) among the recent lines of `stream`.
    pub fn remember(&self, stream: &str, line: &str) {
        let kept = crate::input::shorten(&crate::input::printable(line), 200).into_owned();
        let mut state = self.lock();
        let at = match state.tail.iter().position(|(name, _)| name == stream) {
            Some(at) => at,
            None => {
                state.tail.push((stream.to_owned(), VecDeque::new()));
                state.tail.len() - 1
            }
        };
        let lines = &mut state.tail[at].1;
        if lines.len() == TAIL_LINES {
            lines.pop_front();
        }
        lines.push_back(kept);
    }
}

/// Recognises turn and ledger markers.
#[derive(Debug, Clone)]
pub(crate) struct Patterns {
    turn: Regex,
    ledger: Regex,
    ready: Regex,
}

impl Patterns {
    /// Compiles the scenario's patterns (validated when the scenario was loaded): the turn
    /// marker's, the ledger marker's and the ready line's.
    pub fn new(turn: &str, ledger: &str, ready: &str) -> Result<Self, regex::Error> {
        Ok(Self {
            turn: Regex::new(turn)?,
            ledger: Regex::new(ledger)?,
            ready: Regex::new(ready)?,
        })
    }

    /// Reads one line of the marker source (named `stream` in messages) into the board.
    pub fn feed(&self, board: &Board, stream: &str, line: Line<'_>) {
        let text = match line {
            Line::TooLong => {
                board.update(|s| {
                    s.lines += 1;
                    s.too_long += 1;
                });
                return;
            }
            Line::Text(text) => text,
        };
        if let Some(caps) = self.turn.captures(text) {
            let number = caps.name("turn").map(|m| m.as_str().parse::<u64>());
            // Cut, not shortened with an ellipsis in the middle: keys are compared, and
            // two long ids must stay apart wherever a cut leaves them.
            let key = caps.name("key").map(|m| {
                crate::input::printable(m.as_str())
                    .chars()
                    .take(MAX_KEY_CHARS)
                    .collect::<String>()
            });
            board.update(|s| {
                s.lines += 1;
                let line = s.lines;
                match number {
                    Some(Ok(turn)) => mark(s, Mark { turn, line }, key),
                    _ => {
                        s.violation.get_or_insert_with(|| {
                            format!(
                                "line {line} matches the turn marker but its `turn` is not a \
                                 whole number: {}",
                                crate::input::shorten(&crate::input::printable(text), 120)
                            )
                        });
                    }
                }
            });
            return;
        }
        if let Some(caps) = self.ledger.captures(text) {
            let count = |name| caps.name(name).map(|m| m.as_str().parse::<u64>());
            if let (Some(kind), Some(created), Some(deleted)) =
                (caps.name("kind"), count("created"), count("deleted"))
            {
                let kind = kind.as_str();
                board.update(|s| {
                    s.lines += 1;
                    let line = s.lines;
                    let (Ok(created), Ok(deleted)) = (created, deleted) else {
                        s.violation.get_or_insert_with(|| {
                            format!(
                                "line {line} matches the ledger marker but a count is not a \
                                 whole number below 2^64: {}",
                                crate::input::shorten(&crate::input::printable(text), 120)
                            )
                        });
                        return;
                    };
                    let counts = KindCounts { created, deleted };
                    let full = s.ledger.len() >= MAX_SOURCE_KINDS;
                    match s.ledger.get_mut(kind) {
                        Some(kept) => *kept = counts,
                        // A process inventing kinds costs a counter, not a table entry each.
                        None if full => s.ledger_lines_dropped += 1,
                        None => {
                            s.ledger.insert(kind.to_owned(), counts);
                        }
                    }
                });
                return;
            }
        }
        // Only the first ready line before any turn marker means something: later ones are
        // ordinary output (a server restarting a worker, say) and change no baseline.
        let ready = self.ready.is_match(text);
        let mut kept = false;
        board.update(|s| {
            s.lines += 1;
            if ready && s.ready.is_none() && s.latest.is_none() {
                s.ready = Some(s.lines);
                kept = true;
            }
        });
        if !kept {
            board.remember(stream, text);
        }
    }
}

/// Records a turn marker, or the first break in the order of turn numbers.
fn mark(state: &mut BoardState, mark: Mark, key: Option<String>) {
    state.markers += 1;
    match state.latest {
        Some(prev) if mark.turn == prev.turn => {
            state.violation.get_or_insert_with(|| {
                format!(
                    "turn {} was marked closed twice (lines {} and {}); each turn must be marked once",
                    mark.turn, prev.line, mark.line
                )
            });
        }
        Some(prev) if mark.turn < prev.turn => {
            state.violation.get_or_insert_with(|| {
                format!(
                    "turn {} was marked closed after turn {} (lines {} and {}); turn numbers must rise",
                    mark.turn, prev.turn, prev.line, mark.line
                )
            });
        }
        _ => {
            let now = Instant::now();
            state.latest_turn_nanos = match (state.latest, state.latest_at) {
                (Some(prev), Some(at)) => {
                    let turns = u128::from(mark.turn - prev.turn);
                    let nanos = now.duration_since(at).as_nanos() / turns;
                    Some(u64::try_from(nanos).unwrap_or(u64::MAX))
                }
                _ => None,
            };
            state.latest_at = Some(now);
            state.first.get_or_insert(mark);
            state.latest = Some(mark);
            state.latest_key = key;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::{DEFAULT_LEDGER_PATTERN, DEFAULT_MARKER_PATTERN, DEFAULT_READY_PATTERN};

    fn fed(lines: &[&str]) -> BoardState {
        let board = Board::default();
        let patterns = Patterns::new(
            DEFAULT_MARKER_PATTERN,
            DEFAULT_LEDGER_PATTERN,
            DEFAULT_READY_PATTERN,
        )
        .unwrap();
        for line in lines {
            patterns.feed(&board, "stdout", Line::Text(line));
        }
        patterns.feed(&board, "stdout", Line::TooLong);
        let state = std::mem::take(&mut *board.lock());
        state
    }

    #[test]
    fn keeps_the_latest_turn_and_the_ledger_counts() {
        let s = fed(&[
            "loading model",
            "TURN 1 CLOSED",
            "LEDGER conversation created=1 deleted=1",
            "TURN 2 CLOSED",
            "LEDGER conversation created=2 deleted=1",
        ]);
        assert_eq!(s.latest, Some(Mark { turn: 2, line: 4 }));
        assert_eq!(s.markers, 2);
        assert_eq!(
            s.ledger["conversation"],
            KindCounts {
                created: 2,
                deleted: 1
            }
        );
        assert_eq!(s.lines, 6);
        assert_eq!(s.too_long, 1);
        assert_eq!(
            s.tail,
            [("stdout".to_owned(), ["loading model".to_owned()].into())]
        );
        assert!(s.violation.is_none());
    }

    #[test]
    fn turn_time_is_marker_to_marker_per_turn_and_unknown_for_the_first() {
        let board = Board::default();
        let patterns =
            Patterns::new(r"^turn (?P<turn>\d+) closed$", r"^never$", r"^never$").unwrap();
        patterns.feed(&board, "stdout", Line::Text("turn 7 closed"));
        assert_eq!(board.lock().latest_turn_nanos, None);
        // Not a timed test: the interval is whatever passed, only its existence and its share
        // per turn are checked.
        let before = board.lock().latest_at.unwrap();
        patterns.feed(&board, "stdout", Line::Text("turn 9 closed"));
        let state = board.lock();
        let whole = state.latest_at.unwrap().duration_since(before).as_nanos() as u64;
        assert_eq!(state.latest_turn_nanos, Some(whole / 2));
    }

    #[test]
    fn a_repeated_turn_number_is_a_violation_naming_both_lines() {
        let s = fed(&["TURN 3 CLOSED", "TURN 3 CLOSED"]);
        let v = s.violation.unwrap();
        assert!(
            v.contains("turn 3 was marked closed twice (lines 1 and 2)"),
            "{v}"
        );
    }

    #[test]
    fn a_falling_turn_number_is_a_violation_and_the_first_one_is_kept() {
        let s = fed(&["TURN 7 CLOSED", "TURN 3 CLOSED", "TURN 3 CLOSED"]);
        let v = s.violation.unwrap();
        assert!(v.contains("turn 3 was marked closed after turn 7"), "{v}");
        assert_eq!(s.latest.unwrap().turn, 7);
    }

    #[test]
    fn a_turn_number_too_large_for_a_count_is_a_violation() {
        let s = fed(&["TURN 99999999999999999999999 CLOSED"]);
        assert!(s.violation.unwrap().contains("not a whole number"));
    }

    #[test]
    fn ledger_kinds_past_the_cap_are_counted_not_kept() {
        let lines: Vec<String> = (0..MAX_SOURCE_KINDS + 100)
            .map(|i| format!("LEDGER kind{i} created=1 deleted=0"))
            .chain(["LEDGER kind0 created=2 deleted=1".to_owned()])
            .collect();
        let s = fed(&lines.iter().map(String::as_str).collect::<Vec<_>>());
        assert_eq!(s.ledger.len(), MAX_SOURCE_KINDS);
        assert_eq!(s.ledger_lines_dropped, 100);
        assert_eq!(s.ledger["kind0"].created, 2, "a kept kind is still updated");
        assert!(!s.ledger.contains_key(&format!("kind{MAX_SOURCE_KINDS}")));
    }

    #[test]
    fn a_ledger_count_too_large_for_64_bits_is_a_violation() {
        let s = fed(&[
            "LEDGER conversation created=18446744073709551615 deleted=0",
            "LEDGER conversation created=18446744073709551616 deleted=0",
        ]);
        let v = s.violation.unwrap();
        assert!(v.contains("line 2 matches the ledger marker"), "{v}");
        assert_eq!(s.ledger["conversation"].created, u64::MAX);
    }

    #[test]
    fn a_ready_line_counts_only_before_the_first_turn_marker() {
        let s = fed(&["loading", "READY port=8080", "READY again", "TURN 1 CLOSED"]);
        assert_eq!(s.ready, Some(2));
        assert_eq!(s.tail[0].1, ["loading", "READY again"]);
        let s = fed(&["TURN 1 CLOSED", "READY"]);
        assert_eq!(
            s.ready, None,
            "a ready line after a turn marker is ordinary output"
        );
        let s = fed(&["NOT READY", "READYING"]);
        assert_eq!(
            s.ready, None,
            "the default pattern wants the word at the line's start"
        );
    }

    #[test]
    fn the_default_marker_takes_an_optional_key() {
        let s = fed(&["TURN 1 CLOSED key=sess-3", "TURN 2 CLOSED"]);
        assert_eq!(s.latest, Some(Mark { turn: 2, line: 2 }));
        assert_eq!(s.latest_key, None, "a marker without a key clears it");
        let s = fed(&["TURN 1 CLOSED", "TURN 2 CLOSED key=sess-3"]);
        assert_eq!(s.latest_key.as_deref(), Some("sess-3"));
        let long = format!("TURN 1 CLOSED key={}", "k".repeat(500));
        assert_eq!(fed(&[&long]).latest_key.unwrap().len(), MAX_KEY_CHARS);
    }

    #[test]
    fn control_characters_in_remembered_lines_are_escaped() {
        let s = fed(&["\u{1b}[31mred"]);
        assert_eq!(s.tail[0].1, ["\\u{1b}[31mred"]);
    }
}
