//! A deterministic simulated LLM inference engine whose memory behaviour reproduces field
//! measurements (leaky and non-leaky profiles, plus faults).

use serde::{Deserialize, Serialize};

/// A simulator profile as written inline in a scenario.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ProfileSpec {}
