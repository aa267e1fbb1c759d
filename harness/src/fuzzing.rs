//! Entry points for `leakloop-fuzz` into readers of text that other processes write: an
//! attached process's marker lines (turn markers and `LEDGER` lines) and an engine driver's
//! reply lines. These readers have no file of their own (their text arrives on pipes), so the
//! fuzzer hands them bytes here, through the same functions the running harness uses.
//!
//! Not part of the library's API: hidden from its documentation and subject to change.

use std::collections::BTreeMap;

pub use crate::engine::attach::MarkerReading;

use crate::engine::attach::feed_marker_bytes;
use crate::engine::worker::{decode_line, Reply, Response};
use crate::engine::{KindCounts, Ledger};

/// The most ledger kinds leakloop keeps from one source (a driver or an attached process).
pub const MAX_LEDGER_KINDS: usize = crate::engine::ledger::MAX_SOURCE_KINDS;

/// What the marker reader made of a stream of bytes, after folding each turn's `LEDGER` counts
/// into a ledger as attach mode does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MarkersRead {
    /// The board's summary.
    pub reading: MarkerReading,
    /// Ledger kinds kept by the ledger the counts were folded into.
    pub ledger_kinds: usize,
    /// The first impossible count the ledger refused (a count that went down, a total past
    /// 2^64-1), as attach mode reports it.
    pub count_error: Option<String>,
}

/// Reads `bytes` as the output of an attached process with the default marker patterns,
/// folding the `LEDGER` counts seen so far into a ledger at every turn marker.
pub fn read_markers(bytes: &[u8]) -> MarkersRead {
    let mut ledger = Ledger::new();
    let mut count_error = None;
    let mut fold = |turn: u64, counts: &BTreeMap<String, KindCounts>| {
        let turn = u32::try_from(turn).unwrap_or(u32::MAX);
        if let Err(e) = ledger.absorb_cumulative(turn, "app", counts) {
            count_error.get_or_insert(e.to_string());
        }
    };
    let reading = feed_marker_bytes(bytes, &mut fold);
    MarkersRead {
        reading,
        ledger_kinds: ledger.totals.len(),
        count_error,
    }
}

/// Reads `bytes` as the lines an engine driver writes on stdout: for each line, whether it is a
/// reply the harness accepts, or why not. The ledger counts of every `snapshot` reply are folded
/// into one ledger, a turn each, as the runner folds a driver's snapshots.
pub fn read_driver_replies(bytes: &[u8]) -> Vec<Result<(), String>> {
    let mut ledger = Ledger::new();
    let mut turn = 0u32;
    String::from_utf8_lossy(bytes)
        .lines()
        .map(|line| {
            let reply = decode_line::<Reply>(line).map_err(|e| e.to_string())?;
            if let Response::Snapshot { snapshot, .. } = reply.body {
                turn = turn.saturating_add(1);
                ledger
                    .absorb_cumulative(turn, "driver", &snapshot.ledger)
                    .map_err(|e| e.to_string())?;
            }
            Ok(())
        })
        .collect()
}
