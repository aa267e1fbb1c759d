//! `sessions:`: the session ids a scenario's turns use, so that a run can tell growth that
//! follows distinct sessions (a cache filling) from growth that follows the request count
//! (missing eviction, a leak; context/003, `analyze/cache_or_leak.rs`).
//!
//! Each turn's open is given one of `distinct` ids (`sess-1` ... `sess-N`), in turn order or
//! drawn with the scenario's seed; the id is the turn's key in the run record. An engine that
//! caches per session (the simulator's prefix cache, a model server's slots) sees the same id
//! again when a session repeats.

use serde::{Deserialize, Serialize};

use crate::scenario::validate::Context;
use crate::scenario::ScenarioError;

/// How turns pick their session id.
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[cfg_attr(test, schemars(rename = "session_order"))]
pub enum SessionOrder {
    /// `sess-1`, `sess-2`, ..., `sess-N`, then `sess-1` again.
    #[default]
    Cycle,
    /// Drawn uniformly for each turn from the scenario's `seed`: new and repeated sessions mix
    /// through the whole run instead of all new ones coming first.
    Random,
}

/// The session ids of a scenario's turns.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Sessions {
    /// How many distinct session ids the turns use.
    pub distinct: u32,
    /// How each turn picks one.
    #[serde(default)]
    pub order: SessionOrder,
}

impl Sessions {
    /// The session id of 1-based `turn`, drawn with `seed` when the order is random.
    pub fn key_for_turn(&self, turn: u32, seed: u64) -> String {
        let n = u64::from(self.distinct.max(1));
        let index = match self.order {
            SessionOrder::Cycle => u64::from(turn.saturating_sub(1)) % n,
            SessionOrder::Random => {
                mix(seed ^ u64::from(turn).wrapping_mul(0x9e37_79b9_7f4a_7c15)) % n
            }
        };
        format!("sess-{}", index + 1)
    }
}

/// SplitMix64's finaliser: a well-spread hash of one word, so that consecutive turns draw
/// independent-looking ids without a random-number generator's state to carry.
fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The session ids the turns use: `{distinct: N, order: cycle|random}`; each turn's id is its
/// key, and the report says whether growth follows new sessions or every request.
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
#[cfg_attr(test, schemars(rename = "sessions"))]
pub(crate) struct RawSessions {
    /// How many distinct session ids (`sess-1` ... `sess-N`) the turns use; at least 1. Each
    /// turn's open is given its id, and the id is the turn's key: the report then says whether
    /// growth follows new sessions (a cache filling) or every request (docs/analyzer.md).
    #[cfg_attr(test, schemars(range(min = 1, max = 4_294_967_295_i64)))]
    pub distinct: i64,
    /// `cycle` (default): ids in turn order, 1 to N and again; `random`: drawn per turn with the
    /// scenario's `seed`.
    #[serde(default)]
    pub order: Option<SessionOrder>,
}

/// Validates `sessions:`.
pub(crate) fn validate_sessions(
    raw: Option<RawSessions>,
    cx: &Context<'_>,
) -> Result<Option<Sessions>, ScenarioError> {
    let Some(raw) = raw else {
        return Ok(None);
    };
    Ok(Some(Sessions {
        distinct: cx.count("sessions.distinct", raw.distinct, 1)?,
        order: raw.order.unwrap_or_default(),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cycled_ids_repeat_in_turn_order() {
        let s = Sessions {
            distinct: 3,
            order: SessionOrder::Cycle,
        };
        let keys: Vec<_> = (1..=5).map(|t| s.key_for_turn(t, 0)).collect();
        assert_eq!(keys, ["sess-1", "sess-2", "sess-3", "sess-1", "sess-2"]);
    }

    #[test]
    fn random_ids_are_seeded_and_use_every_id() {
        let s = Sessions {
            distinct: 4,
            order: SessionOrder::Random,
        };
        let draw = |seed| {
            (1..=40)
                .map(|t| s.key_for_turn(t, seed))
                .collect::<Vec<_>>()
        };
        assert_eq!(draw(7), draw(7));
        assert_ne!(draw(7), draw(8));
        let used: std::collections::BTreeSet<_> = draw(7).into_iter().collect();
        assert_eq!(used.len(), 4);
    }
}
