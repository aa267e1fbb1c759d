//! Run settings of one simulated engine: context size, seed, faults and the real-allocation
//! mode.

use crate::faults::SimFault;

/// Settings of one simulated engine (the profile says what memory it holds; this says how the
/// run is set up).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SimConfig {
    /// Context size (KV cache) in tokens; scaled sizes of the profile scale with it.
    pub max_tokens: u32,
    /// Seed of the measurement noise.
    pub seed: u64,
    /// Faults to inject.
    pub faults: Vec<SimFault>,
    /// Really allocate and touch the simulated native-heap bytes, divided by this factor (e.g.
    /// 64), so that process probes can be checked against a known truth. `None`: simulate only.
    pub really_allocate: Option<u32>,
}

impl Default for SimConfig {
    fn default() -> Self {
        Self {
            max_tokens: 4096,
            seed: 0,
            faults: Vec::new(),
            really_allocate: None,
        }
    }
}
