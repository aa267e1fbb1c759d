//! Replays recorded bytes through the marker reader, line by line, as a reader thread feeds a
//! live stream: the fuzzer's way into the parsing of turn markers and `LEDGER` lines.

use std::collections::BTreeMap;

use crate::engine::attach::board::{Board, Patterns};
use crate::engine::KindCounts;
use crate::process::lines::for_each_line;
use crate::scenario::{
    DEFAULT_LEDGER_PATTERN, DEFAULT_MARKER_PATTERN, DEFAULT_READY_PATTERN, MAX_MARKER_LINE,
};

/// What the marker board held after a replay.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MarkerReading {
    /// Lines read.
    pub lines: u64,
    /// Turn markers seen.
    pub markers: u64,
    /// Lines longer than the bound.
    pub too_long: u64,
    /// The latest turn marked closed.
    pub latest_turn: Option<u64>,
    /// Ledger kinds the board keeps.
    pub ledger_kinds: usize,
    /// The first break in the order of turn numbers, described.
    pub violation: Option<String>,
}

/// Feeds `bytes` to a board with the default marker patterns; after each turn marker, hands
/// the turn and the cumulative ledger counts so far to `on_turn`, as the runner's snapshot does.
pub(crate) fn feed_marker_bytes(
    bytes: &[u8],
    on_turn: &mut dyn FnMut(u64, &BTreeMap<String, KindCounts>),
) -> MarkerReading {
    let board = Board::default();
    let patterns = Patterns::new(
        DEFAULT_MARKER_PATTERN,
        DEFAULT_LEDGER_PATTERN,
        DEFAULT_READY_PATTERN,
    )
    .expect("the default marker patterns compile");
    let _ = for_each_line(bytes, MAX_MARKER_LINE, |line| {
        let before = board.lock().markers;
        patterns.feed(&board, "stdout", line);
        let state = board.lock();
        if state.markers != before {
            if let Some(latest) = state.latest {
                on_turn(latest.turn, &state.ledger);
            }
        }
        true
    });
    let state = board.lock();
    MarkerReading {
        lines: state.lines,
        markers: state.markers,
        too_long: state.too_long,
        latest_turn: state.latest.map(|m| m.turn),
        ledger_kinds: state.ledger.len(),
        violation: state.violation.clone(),
    }
}
