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

/// The most resource kinds one source may report: a driver's snapshot (more is a protocol
/// error) or an attached process's LEDGER markers (markers of further kinds are counted, not
/// kept), so that a process inventing kinds cannot grow leakloop's tables or the report.
pub(crate) const MAX_SOURCE_KINDS: usize = 256;

/// Created and deleted counts of one resource kind.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct KindCounts {
    /// How many were created.
    pub created: u64,
    /// How many were deleted.
    pub deleted: u64,
}

impl KindCounts {
    /// Live resources: created minus deleted (negative means more deletes than creates),
    /// clamped to the range of `i64` (counts come from other processes and may be huge).
    pub fn live(&self) -> i64 {
        let live = i128::from(self.created) - i128::from(self.deleted);
        i64::try_from(live).unwrap_or(if live < 0 { i64::MIN } else { i64::MAX })
    }

    /// What happened between `earlier` and these cumulative counts of `kind`, or why that is
    /// impossible (a count went down).
    fn delta_since(&self, earlier: &KindCounts, kind: &str) -> Result<KindCounts, CountError> {
        let went_down = |which, before, now| CountError::WentDown {
            kind: kind.to_owned(),
            which,
            before,
            now,
        };
        Ok(KindCounts {
            created: self
                .created
                .checked_sub(earlier.created)
                .ok_or_else(|| went_down("created", earlier.created, self.created))?,
            deleted: self
                .deleted
                .checked_sub(earlier.deleted)
                .ok_or_else(|| went_down("deleted", earlier.deleted, self.deleted))?,
        })
    }
}

/// Cumulative counts from a backend (a driver's snapshot, an attached process's LEDGER markers)
/// that cannot be true; the runner fails the run on them as a protocol error.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CountError {
    /// A cumulative count fell: a process restarted its counters, or lies.
    #[error(
        "the cumulative {which} count of `{kind}` went down from {before} to {now}; cumulative \
         counts never fall"
    )]
    WentDown {
        /// The kind as the backend named it.
        kind: String,
        /// `created` or `deleted`.
        which: &'static str,
        /// The count before.
        before: u64,
        /// The count now.
        now: u64,
    },
    /// A total passed 2^64-1.
    #[error("the total {which} count of `{kind}` passes 2^64-1 ({total} + {delta})")]
    Overflow {
        /// The ledger kind.
        kind: String,
        /// `created` or `deleted`.
        which: &'static str,
        /// The total so far.
        total: u64,
        /// What was to be added.
        delta: u64,
    },
}

/// Consecutive turns in which one kind saw the same creates and deletes: the ledger's per-turn
/// history, run-length encoded (a clean run of a million turns is one run per kind).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LedgerRun {
    /// The first turn of the run (0: the load before the first turn).
    pub first_turn: u32,
    /// The last turn of the run.
    pub last_turn: u32,
    /// Creates in each turn of the run.
    pub created: u64,
    /// Deletes in each turn of the run.
    pub deleted: u64,
}

impl LedgerRun {
    fn counts(&self) -> KindCounts {
        KindCounts {
            created: self.created,
            deleted: self.deleted,
        }
    }

    fn starting(turn: u32, counts: KindCounts) -> Self {
        LedgerRun {
            first_turn: turn,
            last_turn: turn,
            created: counts.created,
            deleted: counts.deleted,
        }
    }
}

/// The ledger's entries for one turn, as report.json `format_version` 1 wrote them; read and
/// folded into runs.
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
///
/// Recording allocates only when a kind is first seen or its per-turn counts change, so that
/// the ledger of a long run neither grows per turn inside the measured process nor costs a
/// string per call.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "RawLedger")]
pub struct Ledger {
    /// Totals over the whole run.
    pub totals: BTreeMap<String, KindCounts>,
    /// Per kind, its per-turn counts as runs of consecutive turns with the same counts, in turn
    /// order. Turns in which a kind saw nothing are not in its runs.
    pub runs: BTreeMap<String, Vec<LedgerRun>>,
    /// Last cumulative snapshot seen per source and backend kind, with the ledger kind it is
    /// recorded as, to turn cumulative counts into deltas without formatting a key per call.
    #[serde(skip)]
    last_cumulative: BTreeMap<String, BTreeMap<String, (String, KindCounts)>>,
}

/// The ledger as written: `runs` (format_version 2) or per-turn `turns` (format_version 1).
#[derive(Deserialize)]
struct RawLedger {
    totals: BTreeMap<String, KindCounts>,
    #[serde(default)]
    runs: BTreeMap<String, Vec<LedgerRun>>,
    #[serde(default)]
    turns: Vec<TurnLedger>,
}

impl TryFrom<RawLedger> for Ledger {
    type Error = String;

    /// A ledger read from report.json, refused when its numbers break what the folding below
    /// and [`KindCounts::live`] rely on (see [`RawLedger::check`]).
    fn try_from(raw: RawLedger) -> Result<Self, String> {
        raw.check()?;
        let mut ledger = Ledger {
            totals: raw.totals,
            runs: raw.runs,
            last_cumulative: BTreeMap::new(),
        };
        for turn in raw.turns {
            for (kind, counts) in turn.kinds {
                ledger.add_run(turn.turn, &kind, counts);
            }
        }
        Ok(ledger)
    }
}

impl RawLedger {
    /// The numbers of an edited or corrupt report that would overflow: runs out of order,
    /// overlapping or ending before they start, a run whose counts times its length pass
    /// 2^64-1, and per-turn entries (format 1) whose turns do not strictly increase (a turn
    /// listed twice would be added up twice). Any count itself is possible: a driver may report
    /// cumulative counts up to 2^64-1, and live counts saturate ([`KindCounts::live`]).
    fn check(&self) -> Result<(), String> {
        if !self.runs.is_empty() && !self.turns.is_empty() {
            return Err("`runs` (format 2) and `turns` (format 1) in one ledger".to_owned());
        }
        for (kind, runs) in &self.runs {
            // The first turn the next run may start at; none after a run ending at u32::MAX.
            let mut next = Some(0u32);
            for (i, run) in runs.iter().enumerate() {
                let len =
                    u64::from(run.last_turn.checked_sub(run.first_turn).ok_or_else(|| {
                        format!("`runs.{kind}[{i}]`: last_turn is before first_turn")
                    })?) + 1;
                if next.is_none_or(|next| run.first_turn < next) {
                    return Err(format!("`runs.{kind}[{i}]`: overlaps the run before it"));
                }
                let total = |n: u64| n.checked_mul(len);
                if total(run.created).is_none() || total(run.deleted).is_none() {
                    return Err(format!(
                        "`runs.{kind}[{i}]`: its counts over its {len} turns pass {}",
                        u64::MAX
                    ));
                }
                next = run.last_turn.checked_add(1);
            }
        }
        let mut previous: Option<u32> = None;
        for (i, turn) in self.turns.iter().enumerate() {
            if previous.is_some_and(|p| turn.turn <= p) {
                return Err(format!(
                    "`turns[{i}]`: turn {} does not follow turn {}",
                    turn.turn,
                    previous.unwrap_or_default()
                ));
            }
            previous = Some(turn.turn);
        }
        Ok(())
    }
}

impl Ledger {
    /// An empty ledger.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds `delta` to `kind`'s totals and to `turn`. A total that would pass 2^64-1 is left as
    /// it was and nothing is recorded; a turn's counts never exceed the total, so the runs
    /// cannot overflow once the totals did not.
    fn add(&mut self, turn: u32, kind: &str, delta: KindCounts) -> Result<(), CountError> {
        match self.totals.get_mut(kind) {
            Some(_) if delta == KindCounts::default() => return Ok(()),
            Some(total) => {
                let overflow = |which, total, delta| CountError::Overflow {
                    kind: kind.to_owned(),
                    which,
                    total,
                    delta,
                };
                let created = total
                    .created
                    .checked_add(delta.created)
                    .ok_or_else(|| overflow("created", total.created, delta.created))?;
                let deleted = total
                    .deleted
                    .checked_add(delta.deleted)
                    .ok_or_else(|| overflow("deleted", total.deleted, delta.deleted))?;
                *total = KindCounts { created, deleted };
            }
            None => {
                self.totals.insert(kind.to_owned(), delta);
            }
        }
        self.add_run(turn, kind, delta);
        Ok(())
    }

    /// Adds `delta` to `kind`'s counts in `turn` (turns arrive in order).
    fn add_run(&mut self, turn: u32, kind: &str, delta: KindCounts) {
        let runs = match self.runs.get_mut(kind) {
            Some(runs) => runs,
            None => self.runs.entry(kind.to_owned()).or_default(),
        };
        let Some(last) = runs.last_mut() else {
            runs.push(LedgerRun::starting(turn, delta));
            return;
        };
        if last.last_turn == turn {
            let mut counts = last.counts();
            counts.created += delta.created;
            counts.deleted += delta.deleted;
            if last.first_turn < turn {
                // This turn no longer matches the run it extended: split it off.
                last.last_turn = turn - 1;
                runs.push(LedgerRun::starting(turn, counts));
            } else {
                last.created = counts.created;
                last.deleted = counts.deleted;
                let n = runs.len();
                if n >= 2 && runs[n - 2].last_turn + 1 == turn && runs[n - 2].counts() == counts {
                    runs.pop();
                    runs[n - 2].last_turn = turn;
                }
            }
        } else if last.last_turn + 1 == turn && last.counts() == delta {
            last.last_turn = turn;
        } else {
            runs.push(LedgerRun::starting(turn, delta));
        }
    }

    /// Records one creation of `kind` during `turn`. (The runner's own calls: one at a time,
    /// they cannot reach 2^64, so a total that would is left as it was.)
    pub fn record_create(&mut self, turn: u32, kind: &str) {
        let _ = self.add(
            turn,
            kind,
            KindCounts {
                created: 1,
                deleted: 0,
            },
        );
    }

    /// Records one deletion of `kind` during `turn` (see [`Ledger::record_create`]).
    pub fn record_delete(&mut self, turn: u32, kind: &str) {
        let _ = self.add(
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
    ///
    /// Counts from another process are checked, never trusted: one that went down, or a total
    /// past 2^64-1, is a [`CountError`], and the kind's earlier counts are kept as they were.
    pub fn absorb_cumulative(
        &mut self,
        turn: u32,
        source: &str,
        cumulative: &BTreeMap<String, KindCounts>,
    ) -> Result<(), CountError> {
        for (kind, counts) in cumulative {
            let seen = match self.last_cumulative.get_mut(source) {
                Some(seen) => seen,
                None => self.last_cumulative.entry(source.to_owned()).or_default(),
            };
            let (key, previous) = match seen.get_mut(kind.as_str()) {
                Some(entry) => entry,
                None => seen
                    .entry(kind.clone())
                    .or_insert_with(|| (format!("{source}/{kind}"), KindCounts::default())),
            };
            let delta = counts.delta_since(previous, kind)?;
            let before = std::mem::replace(previous, *counts);
            if delta == KindCounts::default() && self.totals.contains_key(key.as_str()) {
                continue;
            }
            let key = key.clone();
            if let Err(e) = self.add(turn, &key, delta) {
                if let Some((_, previous)) = self
                    .last_cumulative
                    .get_mut(source)
                    .and_then(|seen| seen.get_mut(kind.as_str()))
                {
                    *previous = before;
                }
                return Err(e);
            }
        }
        Ok(())
    }

    /// The creates and deletes of `kind` during `turn` (zero when it saw none).
    pub fn counts_in_turn(&self, kind: &str, turn: u32) -> KindCounts {
        self.runs
            .get(kind)
            .and_then(|runs| {
                let i = runs.partition_point(|run| run.last_turn < turn);
                runs.get(i).filter(|run| run.first_turn <= turn)
            })
            .map_or_else(KindCounts::default, LedgerRun::counts)
    }

    /// Forgets every turn from `turn` on (as if the run had stopped before it), totals included.
    pub fn truncate_before(&mut self, turn: u32) {
        self.totals.clear();
        for (kind, runs) in &mut self.runs {
            runs.retain(|run| run.first_turn < turn);
            let mut total = KindCounts::default();
            for run in runs.iter_mut() {
                run.last_turn = run.last_turn.min(turn - 1);
                let len = u64::from(run.last_turn - run.first_turn) + 1;
                // Each run's product fits (checked when read); their sum saturates.
                total.created = total
                    .created
                    .saturating_add(run.created.saturating_mul(len));
                total.deleted = total
                    .deleted
                    .saturating_add(run.deleted.saturating_mul(len));
            }
            self.totals.insert(kind.clone(), total);
        }
        self.runs.retain(|_, runs| !runs.is_empty());
        self.totals.retain(|kind, _| self.runs.contains_key(kind));
        self.last_cumulative.clear();
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
        let runs = self.runs.get(kind).map_or(&[][..], Vec::as_slice);
        let after_load = runs
            .first()
            .filter(|run| run.first_turn == 0)
            .map_or(0, |run| i128::from(run.created) - i128::from(run.deleted));
        first_staying_above(runs, after_load).or_else(|| first_staying_above(runs, 0))
    }
}

/// The first turn from which the running live count of `runs` stays above `above` to the end.
/// Within a run the count moves by the same step every turn, so each run is settled in O(1).
fn first_staying_above(runs: &[LedgerRun], above: i128) -> Option<u32> {
    let mut live = 0i128;
    let mut first = None;
    for run in runs {
        let step = i128::from(run.created) - i128::from(run.deleted);
        let len = i128::from(run.last_turn - run.first_turn) + 1;
        // The 1-based index within the run of the first turn whose count is on the other side
        // of `above` from where the run started, if any.
        let at_turn = |k: i128| run.first_turn + u32::try_from(k - 1).unwrap_or(0);
        if step == 0 {
            if live > above {
                first = first.or(Some(run.first_turn));
            } else {
                first = None;
            }
        } else if step > 0 {
            // Smallest k >= 1 with live + k * step > above.
            let k = if live + step > above {
                1
            } else {
                (above - live) / step + 1
            };
            if k > 1 {
                first = None;
            }
            if k <= len {
                first = first.or(Some(at_turn(k)));
            }
        } else {
            // Smallest k >= 1 with live + k * step <= above.
            let k = if live + step <= above {
                1
            } else {
                (live - above + (-step) - 1) / (-step)
            };
            if k > 1 {
                first = first.or(Some(run.first_turn));
            }
            if k <= len {
                first = None;
            }
        }
        live += step * len;
    }
    first
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
        ledger.absorb_cumulative(0, "sim", &cumulative).unwrap();
        for turn in 1..=4u64 {
            let deleted = if turn < 3 { turn } else { 2 };
            cumulative.insert(
                "conversation".to_owned(),
                KindCounts {
                    created: turn,
                    deleted,
                },
            );
            ledger
                .absorb_cumulative(turn as u32, "sim", &cumulative)
                .unwrap();
        }
        let imbalances = ledger.imbalances();
        assert_eq!(imbalances.len(), 1);
        assert_eq!(imbalances[0].kind, "sim/conversation");
        assert_eq!((imbalances[0].created, imbalances[0].deleted), (4, 2));
        assert_eq!(imbalances[0].first_turn, Some(3));
        assert_eq!(
            ledger.runs["sim/conversation"],
            [
                LedgerRun {
                    first_turn: 0,
                    last_turn: 0,
                    created: 0,
                    deleted: 0
                },
                LedgerRun {
                    first_turn: 1,
                    last_turn: 2,
                    created: 1,
                    deleted: 1
                },
                LedgerRun {
                    first_turn: 3,
                    last_turn: 4,
                    created: 1,
                    deleted: 0
                },
            ]
        );
    }

    /// Issue 20: counts of 2^64-1, then 0, then 2^64-1 neither panic nor wrap: the fall is a
    /// `CountError`, and so is a total past 2^64-1.
    #[test]
    fn impossible_cumulative_counts_are_errors_not_panics_or_wraps() {
        let counts = |created| {
            BTreeMap::from([(
                "k".to_owned(),
                KindCounts {
                    created,
                    deleted: 0,
                },
            )])
        };
        let mut ledger = Ledger::new();
        ledger
            .absorb_cumulative(1, "driver", &counts(u64::MAX))
            .unwrap();
        let err = ledger
            .absorb_cumulative(2, "driver", &counts(0))
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            format!(
                "the cumulative created count of `k` went down from {} to 0; cumulative counts \
                 never fall",
                u64::MAX
            )
        );
        // The earlier counts stand: the same maximum again is no change.
        ledger
            .absorb_cumulative(3, "driver", &counts(u64::MAX))
            .unwrap();
        assert_eq!(ledger.totals["driver/k"].created, u64::MAX);
        assert_eq!(ledger.totals["driver/k"].live(), i64::MAX);

        // Two sources of one kind name are one total: their sum can pass 2^64-1.
        let mut ledger = Ledger::new();
        ledger.record_create(0, "a/k");
        let err = ledger
            .absorb_cumulative(1, "a", &counts(u64::MAX))
            .unwrap_err();
        assert!(matches!(err, CountError::Overflow { .. }), "{err}");
        assert_eq!(ledger.totals["a/k"].created, 1);
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

    /// The per-turn algorithm the runs replaced: the running live count at every turn.
    fn first_unbalanced_turn_per_turn(per_turn: &[(u32, i64)]) -> Option<u32> {
        let mut live = 0;
        let running: Vec<(u32, i64)> = per_turn
            .iter()
            .map(|(turn, l)| {
                live += l;
                (*turn, live)
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

    /// Issue 15: a million identical turns are one run, and the turn a leak began is still found
    /// exactly as per-turn entries found it.
    #[test]
    fn runs_find_the_same_first_unbalanced_turn_as_per_turn_entries() {
        use rand::{RngExt, SeedableRng};
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(15);
        for case in 0..400 {
            let mut ledger = Ledger::new();
            let mut per_turn = Vec::new();
            let mut turn = 0u32;
            for _ in 0..rng.random_range(1..12) {
                let (created, deleted) = (rng.random_range(0..3u64), rng.random_range(0..3u64));
                for _ in 0..rng.random_range(1..6) {
                    for _ in 0..created {
                        ledger.record_create(turn, "k");
                    }
                    for _ in 0..deleted {
                        ledger.record_delete(turn, "k");
                    }
                    if created + deleted > 0 {
                        per_turn.push((turn, created as i64 - deleted as i64));
                    }
                    turn += rng.random_range(1..3);
                }
            }
            if per_turn.is_empty() {
                continue;
            }
            assert_eq!(
                ledger.first_unbalanced_turn("k"),
                first_unbalanced_turn_per_turn(&per_turn),
                "case {case}: {:?}",
                ledger.runs["k"]
            );
        }
        let mut ledger = Ledger::new();
        for turn in 1..=1_000_000 {
            ledger.record_create(turn, "runner/session");
            ledger.record_delete(turn, "runner/session");
        }
        assert_eq!(ledger.runs["runner/session"].len(), 1);
    }

    #[test]
    fn a_format_version_1_ledger_reads_as_runs() {
        let text = r#"{"totals": {"sim/conversation": {"created": 3, "deleted": 2}},
            "turns": [
              {"turn": 1, "kinds": {"sim/conversation": {"created": 1, "deleted": 1}}},
              {"turn": 2, "kinds": {"sim/conversation": {"created": 1, "deleted": 1}}},
              {"turn": 3, "kinds": {"sim/conversation": {"created": 1, "deleted": 0}}}
            ]}"#;
        let ledger: Ledger = serde_json::from_str(text).unwrap();
        assert_eq!(ledger.runs["sim/conversation"].len(), 2);
        assert_eq!(ledger.counts_in_turn("sim/conversation", 2).live(), 0);
        assert_eq!(ledger.counts_in_turn("sim/conversation", 3).live(), 1);
        assert_eq!(ledger.counts_in_turn("sim/conversation", 4).created, 0);
        assert_eq!(ledger.imbalances()[0].first_turn, Some(3));
        let back: Ledger = serde_json::from_str(&serde_json::to_string(&ledger).unwrap()).unwrap();
        assert_eq!(back, ledger);
    }
}
