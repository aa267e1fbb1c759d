//! The call ledger: how many resources of each kind were created and deleted, per turn and in
//! total, so that `expect: balanced` can name the kind, the counts and the turn where an imbalance
//! appeared.
//!
//! Kinds are strings with a source prefix: `runner/session` and `runner/engine` are the calls the
//! runner made; `<backend>/<kind>` (e.g. `sim/conversation`, `litert-lm/conversation`, `cl/cl_mem`)
//! are what the backend itself counted underneath. A binding layer that forgets a delete shows up
//! as balanced runner kinds over an unbalanced backend kind.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// Created and deleted counts of one resource kind.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct KindCounts {
    /// How many were created.
    pub created: u64,
    /// How many were deleted.
    pub deleted: u64,
}

impl KindCounts {
    /// Live resources: created minus deleted (negative means more deletes than creates).
    pub fn live(&self) -> i64 {
        self.created as i64 - self.deleted as i64
    }

    fn saturating_delta(&self, earlier: &KindCounts) -> KindCounts {
        KindCounts {
            created: self.created.saturating_sub(earlier.created),
            deleted: self.deleted.saturating_sub(earlier.deleted),
        }
    }
}

/// The ledger's entries for one turn (turn 0: the load before the first turn).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TurnLedger {
    /// The turn these counts belong to.
    pub turn: u32,
    /// Creates and deletes that happened during this turn, per kind.
    pub kinds: BTreeMap<String, KindCounts>,
}

/// A kind whose creates and deletes differ at the end of a run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LedgerImbalance {
    /// The resource kind, e.g. `sim/conversation`.
    pub kind: String,
    /// Total creates.
    pub created: u64,
    /// Total deletes.
    pub deleted: u64,
    /// The first turn after which more were live than before it (where the imbalance appeared).
    pub first_turn: Option<u32>,
}

/// Per-turn and total create/delete counts of every resource kind seen in a run.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Ledger {
    /// Totals over the whole run.
    pub totals: BTreeMap<String, KindCounts>,
    /// Per-turn entries in turn order.
    pub turns: Vec<TurnLedger>,
    /// Last cumulative snapshot seen per backend kind, to turn cumulative counts into deltas.
    #[serde(skip)]
    last_cumulative: BTreeMap<String, KindCounts>,
}

impl Ledger {
    /// An empty ledger.
    pub fn new() -> Self {
        Self::default()
    }

    fn turn_entry(&mut self, turn: u32) -> &mut TurnLedger {
        if self.turns.last().is_none_or(|t| t.turn != turn) {
            self.turns.push(TurnLedger {
                turn,
                kinds: BTreeMap::new(),
            });
        }
        self.turns.last_mut().expect("just pushed")
    }

    fn add(&mut self, turn: u32, kind: &str, delta: KindCounts) {
        if delta == KindCounts::default() && self.totals.contains_key(kind) {
            return;
        }
        let total = self.totals.entry(kind.to_owned()).or_default();
        total.created += delta.created;
        total.deleted += delta.deleted;
        let entry = self
            .turn_entry(turn)
            .kinds
            .entry(kind.to_owned())
            .or_default();
        entry.created += delta.created;
        entry.deleted += delta.deleted;
    }

    /// Records one creation of `kind` during `turn`.
    pub fn record_create(&mut self, turn: u32, kind: &str) {
        self.add(
            turn,
            kind,
            KindCounts {
                created: 1,
                deleted: 0,
            },
        );
    }

    /// Records one deletion of `kind` during `turn`.
    pub fn record_delete(&mut self, turn: u32, kind: &str) {
        self.add(
            turn,
            kind,
            KindCounts {
                created: 0,
                deleted: 1,
            },
        );
    }

    /// Folds in a backend's cumulative counts (as reported by `Engine::snapshot`), attributing what
    /// changed since the previous snapshot to `turn`. Kinds are stored as `<source>/<kind>`.
    pub fn absorb_cumulative(
        &mut self,
        turn: u32,
        source: &str,
        cumulative: &BTreeMap<String, KindCounts>,
    ) {
        for (kind, counts) in cumulative {
            let key = format!("{source}/{kind}");
            let previous = self.last_cumulative.get(&key).copied().unwrap_or_default();
            let delta = counts.saturating_delta(&previous);
            self.last_cumulative.insert(key.clone(), *counts);
            self.add(turn, &key, delta);
        }
    }

    /// Every kind whose totals differ, with the turn where its live count first rose for good.
    pub fn imbalances(&self) -> Vec<LedgerImbalance> {
        self.totals
            .iter()
            .filter(|(_, c)| c.created != c.deleted)
            .map(|(kind, c)| LedgerImbalance {
                kind: kind.clone(),
                created: c.created,
                deleted: c.deleted,
                first_turn: self.first_unbalanced_turn(kind),
            })
            .collect()
    }

    /// The turn from which the leak accumulated: the first turn after which the live count of
    /// `kind` stayed above its level after load (turn 0) until the end. Resources that a load
    /// legitimately holds (weights, contexts) are not blamed on turn 0 that way. When the count
    /// never rose above that level (a load-time resource that was never released), the first
    /// turn from which it stayed non-zero.
    fn first_unbalanced_turn(&self, kind: &str) -> Option<u32> {
        let mut live = 0i64;
        let running: Vec<(u32, i64)> = self
            .turns
            .iter()
            .map(|turn| {
                live += turn.kinds.get(kind).map_or(0, KindCounts::live);
                (turn.turn, live)
            })
            .collect();
        let after_load = running
            .first()
            .filter(|(turn, _)| *turn == 0)
            .map_or(0, |(_, live)| *live);
        let first_staying = |above: i64| {
            let mut first = None;
            for (turn, live) in &running {
                match (*live > above, first) {
                    (true, None) => first = Some(*turn),
                    (false, Some(_)) => first = None,
                    _ => {}
                }
            }
            first
        };
        first_staying(after_load).or_else(|| first_staying(0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn balanced_runner_calls_have_no_imbalance() {
        let mut ledger = Ledger::new();
        for turn in 1..=3 {
            ledger.record_create(turn, "runner/session");
            ledger.record_delete(turn, "runner/session");
        }
        assert!(ledger.imbalances().is_empty());
        assert_eq!(ledger.totals["runner/session"].created, 3);
    }

    #[test]
    fn cumulative_snapshots_become_per_turn_deltas_and_name_the_first_turn() {
        let mut ledger = Ledger::new();
        let mut cumulative = BTreeMap::new();
        cumulative.insert(
            "conversation".to_owned(),
            KindCounts {
                created: 0,
                deleted: 0,
            },
        );
        ledger.absorb_cumulative(0, "sim", &cumulative);
        for turn in 1..=4u64 {
            let deleted = if turn < 3 { turn } else { 2 };
            cumulative.insert(
                "conversation".to_owned(),
                KindCounts {
                    created: turn,
                    deleted,
                },
            );
            ledger.absorb_cumulative(turn as u32, "sim", &cumulative);
        }
        let imbalances = ledger.imbalances();
        assert_eq!(imbalances.len(), 1);
        assert_eq!(imbalances[0].kind, "sim/conversation");
        assert_eq!((imbalances[0].created, imbalances[0].deleted), (4, 2));
        assert_eq!(imbalances[0].first_turn, Some(3));
        assert_eq!(ledger.turns[3].kinds["sim/conversation"].created, 1);
    }

    #[test]
    fn a_resource_held_since_load_does_not_hide_the_turn_the_leak_began() {
        let mut ledger = Ledger::new();
        ledger.record_create(0, "cl/cl_mem"); // weights, released at unload
        ledger.record_create(1, "cl/cl_mem"); // per-turn scratch, never released
        ledger.record_create(2, "cl/cl_mem");
        ledger.record_delete(2, "cl/cl_mem"); // the weights, at unload
        assert_eq!(ledger.imbalances()[0].first_turn, Some(1));
    }

    #[test]
    fn a_load_time_resource_never_released_points_at_the_load() {
        let mut ledger = Ledger::new();
        ledger.record_create(0, "lib/engine");
        ledger.record_create(1, "lib/session");
        ledger.record_delete(1, "lib/session");
        assert_eq!(ledger.imbalances()[0].first_turn, Some(0));
    }

    #[test]
    fn temporary_imbalance_that_recovers_points_at_the_last_lasting_rise() {
        let mut ledger = Ledger::new();
        ledger.record_create(1, "runner/session");
        ledger.record_delete(2, "runner/session");
        ledger.record_create(3, "runner/session");
        let imbalances = ledger.imbalances();
        assert_eq!(imbalances[0].first_turn, Some(3));
    }
}
