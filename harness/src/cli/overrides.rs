//! The flags that replace a scenario's own values, read alike by `run` and `compare`: both hand
//! them to [`Overrides`], the one place that applies them (before validation), so an overridden
//! scenario means the same under either command.

use std::path::PathBuf;

use crate::scenario::{Device, Overrides, StopMode};

/// The scenario overrides every command that runs a scenario takes (`run` adds `--backend` and
/// `--lib`, which `compare` uses to choose its two sides).
#[derive(Debug, Clone, Default, clap::Args)]
pub(crate) struct OverrideArgs {
    /// Override the engine profile (simulator or OpenCL engine).
    #[arg(long)]
    pub profile: Option<String>,
    /// Override the model file of a real engine.
    #[arg(long)]
    pub model: Option<PathBuf>,
    /// Override the compute device of a real engine.
    #[arg(long, value_enum)]
    pub device: Option<Device>,
    /// Override the context size (KV cache) in tokens.
    #[arg(long)]
    pub max_tokens: Option<u32>,
    /// Override the number of measured turns (with `--stop decided`, the most that run).
    #[arg(long)]
    pub turns: Option<u32>,
    /// Override the warm-up turns run before the measured ones (a cache that fills more slowly
    /// than the scenario's warm-up looks like a leak).
    #[arg(long)]
    pub warmup_turns: Option<u32>,
    /// `turns`: run every turn; `decided`: look at the verdict every few turns and stop once
    /// every watched metric is decided (overrides the scenario's `stop`).
    #[arg(long, value_enum)]
    pub stop: Option<StopMode>,
    /// Override the seed.
    #[arg(long)]
    pub seed: Option<u64>,
    /// The most measured turns a run still undecided after `--turns` may extend to (overrides
    /// the scenario's `max_turns`; without either: 2 x the turns; equal to the turns: no
    /// extension).
    #[arg(long, value_name = "N")]
    pub max_turns: Option<u32>,
}

impl OverrideArgs {
    /// The scenario values these flags replace.
    pub(crate) fn overrides(&self) -> Overrides {
        Overrides {
            profile: self.profile.clone(),
            model: self.model.clone(),
            device: self.device,
            max_tokens: self.max_tokens,
            turns: self.turns,
            warmup_turns: self.warmup_turns,
            seed: self.seed,
            stop: self.stop,
            max_turns: self.max_turns,
            ..Overrides::default()
        }
    }
}
