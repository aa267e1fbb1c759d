//! The validated scenario: what the runner executes, with every unit resolved (sizes in bytes,
//! durations as [`Duration`]) and every reference checked.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::scenario::attach::AttachSpec;
use crate::scenario::target::Target;
use crate::scenario::{Concurrency, Sessions};

/// The most turns (warm-up plus measured) one scenario may ask for.
pub const MAX_TURNS: u32 = 100_000;

/// A `stop: turns` run without `max_turns` may extend to this many times `turns` while its
/// verdict is inconclusive.
pub const DEFAULT_EXTENSION: u32 = 2;

/// The most baseline samples (`sample.baseline`) taken after each (re)load.
pub const MAX_BASELINE_SAMPLES: u32 = 100;

/// A validated scenario: one engine, an identical turn loop, sampling points and expectations.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Scenario {
    /// Short identifier, used in report file names and JUnit suite names.
    pub name: String,
    /// What the scenario reproduces.
    pub description: Option<String>,
    /// The file it came from, if any.
    pub source: Option<PathBuf>,
    /// Which engine runs and how it is configured.
    pub engine: EngineSpec,
    /// Turns run before the measured turns; their growth counts against warm-up budgets.
    pub warmup_turns: u32,
    /// Measured turns.
    pub turns: u32,
    /// The steps of one turn, in order.
    pub turn: Vec<Step>,
    /// Unload and reload the engine every K turns (0 = never).
    pub reload_every: u32,
    /// When memory is sampled and how long to settle first.
    pub sample: SamplePlan,
    /// Metrics to analyse; empty means every metric that has an expectation.
    pub watch: Vec<String>,
    /// Faults to inject (simulator faults, or harness-side faults on any engine).
    pub faults: Vec<Fault>,
    /// What must hold for the scenario to pass.
    pub expect: Expectations,
    /// Seed for every random choice (simulator noise, generated prompts).
    pub seed: u64,
    /// When the run ends: after every turn, or once every watched metric is decided (then
    /// `turns` is the maximum).
    #[serde(default)]
    pub stop: StopMode,
    /// With `stop: turns`: the most measured turns a run still undecided after `turns` may
    /// extend to; `None`: the default budget, [`DEFAULT_EXTENSION`] times `turns` within the
    /// turn limit (see [`Scenario::max_measured_turns`]); `max_turns: <turns>` opts out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_turns: Option<u32>,
    /// Where the engine's process lives: this machine (the default), an ssh host, an Android
    /// device.
    #[serde(default, skip_serializing_if = "Target::is_local")]
    pub target: Target,
    /// Whether a suite may run this scenario alongside others; `None`: the backend's default
    /// ([`Scenario::effective_concurrency`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub concurrency: Option<Concurrency>,
    /// The session ids the turns use; each turn's is its key (`scenario/sessions.rs`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sessions: Option<Sessions>,
}

impl Scenario {
    /// A scenario built in code rather than read from YAML: `turns` measured turns of `turn` on
    /// `engine`, sampled after load and after close, with no warm-up, reloads, faults or
    /// expectations, seed 0, and no extension past `turns` (`max_turns: turns`). Set the other
    /// fields with struct update syntax.
    pub fn new(name: &str, engine: EngineSpec, turns: u32, turn: Vec<Step>) -> Self {
        Self {
            name: name.to_owned(),
            description: None,
            source: None,
            engine,
            warmup_turns: 0,
            turns,
            turn,
            reload_every: 0,
            sample: SamplePlan {
                after: vec![SamplePoint::Load, SamplePoint::Close],
                settle: Duration::ZERO,
                baseline: 1,
            },
            watch: Vec::new(),
            faults: Vec::new(),
            expect: Expectations::default(),
            seed: 0,
            stop: StopMode::Turns,
            // Built in code, a run takes the turns it was given; a file's scenario extends by
            // default.
            max_turns: Some(turns),
            target: Target::Local,
            concurrency: None,
            sessions: None,
        }
    }

    /// Total number of turns at most: warm-up plus the most measured turns
    /// ([`Scenario::max_measured_turns`]).
    pub fn total_turns(&self) -> u32 {
        self.warmup_turns + self.max_measured_turns()
    }

    /// The most measured turns a run may take: `max_turns` when written; with `stop: turns`
    /// and no `max_turns`, the default budget of [`DEFAULT_EXTENSION`] times `turns`, kept
    /// within [`MAX_TURNS`] with the warm-up; else `turns`.
    pub fn max_measured_turns(&self) -> u32 {
        let default = match self.stop {
            StopMode::Turns => self
                .turns
                .saturating_mul(DEFAULT_EXTENSION)
                .min(MAX_TURNS.saturating_sub(self.warmup_turns)),
            StopMode::Decided => self.turns,
        };
        self.max_turns.unwrap_or(default).max(self.turns)
    }

    /// Whether a run still undecided after `turns` goes on (up to `max_turns`).
    pub fn extends(&self) -> bool {
        self.stop == StopMode::Turns && self.max_measured_turns() > self.turns
    }

    /// Whether the run extends by the default budget (no `max_turns` written): then it is judged
    /// at `turns` exactly as a fixed run and goes on only while its verdict is inconclusive
    /// (`analyze::sequential` explains the error rates).
    pub fn extends_by_default(&self) -> bool {
        self.max_turns.is_none() && self.extends()
    }

    /// The metrics the analyzer should look at.
    pub fn watched_metrics(&self) -> Vec<String> {
        if !self.watch.is_empty() {
            return self.watch.clone();
        }
        self.expect.metrics.keys().cloned().collect()
    }
}

/// Built-in simulator profiles; the DSL validates profile names against this list, which the
/// simulator crate owns.
pub const SIM_PROFILES: &[&str] = sim_backend::BUILTIN_PROFILES;

/// Profiles of the reference OpenCL engine: a clean run and the injected bug classes.
pub const OPENCL_PROFILES: &[&str] = &["clean", "leak-scratch", "leak-kv", "leak-retain"];

/// Which backend runs the scenario (also the values of `leakloop run --backend`).
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[cfg_attr(feature = "cli", derive(clap::ValueEnum))]
#[serde(rename_all = "kebab-case")]
#[cfg_attr(test, schemars(rename = "backend"))]
pub enum BackendKind {
    /// The deterministic simulator (`sim-backend`).
    Sim,
    /// LiteRT-LM through its C API, in a worker process.
    LitertLm,
    /// The reference OpenCL workload.
    Opencl,
    /// A process leakloop does not drive: it runs its own turns and marks each one's end.
    Attach,
    /// An external program speaking the worker protocol (docs/protocol.md); set by scenarios
    /// only, since it needs `engine.command`.
    #[cfg_attr(feature = "cli", value(skip))]
    Exec,
}

impl BackendKind {
    /// The name used in scenarios and on the command line.
    pub fn as_str(&self) -> &'static str {
        crate::backend::of(*self).name
    }

    /// Whether this backend's engine reads a prompt's words (LiteRT-LM tokenizes them, an external
    /// driver may); the
    /// simulator and the OpenCL workload use only its length, so their prompts carry no text.
    pub fn reads_prompt_text(&self) -> bool {
        crate::backend::of(*self).reads_prompt_text
    }
}

/// Which compute device a real engine uses (also the values of `leakloop run --device`).
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "cli", derive(clap::ValueEnum))]
#[serde(rename_all = "kebab-case")]
#[cfg_attr(test, schemars(rename = "device"))]
pub enum Device {
    /// The CPU backend.
    Cpu,
    /// The GPU backend (OpenCL on Android, Metal on macOS, WebGPU/Vulkan on Linux).
    Gpu,
}

impl Device {
    /// The name used in scenarios and on the command line.
    pub fn as_str(&self) -> &'static str {
        match self {
            Device::Cpu => "cpu",
            Device::Gpu => "gpu",
        }
    }
}

/// The engine and its options.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EngineSpec {
    /// Which backend runs.
    pub backend: BackendKind,
    /// Profile name: for the simulator a built-in one ([`SIM_PROFILES`]) or one defined inline under
    /// `profiles`; for the OpenCL engine one of [`OPENCL_PROFILES`].
    pub profile: Option<String>,
    /// Simulator profiles defined in the scenario itself, by name.
    pub inline_profiles: BTreeMap<String, sim_backend::ProfileSpec>,
    /// Model file for real engines, resolved against the scenario's folder.
    pub model: Option<PathBuf>,
    /// Compute device for real engines.
    pub device: Device,
    /// Context size (KV cache) in tokens.
    pub max_tokens: u32,
    /// Threads of a real engine's CPU backend (`litert-lm`); `None`: the library's own choice.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub threads: Option<u32>,
    /// Engine library for real engines (overrides discovery).
    pub lib: Option<PathBuf>,
    /// Per-call timeout for engines in a worker process; a call past it counts as a hang.
    pub call_timeout: Duration,
    /// Run the engine in an isolated worker process (always for real engines by default; opt-in
    /// for the simulator, where it makes `crash` faults real process deaths).
    pub isolate: bool,
    /// The process and its markers, for `backend: attach` (`None` for every other backend).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attach: Option<AttachSpec>,
    /// The driver to start, for `backend: exec` (and only then).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exec: Option<crate::scenario::ExecSpec>,
    /// Attribute per-turn growth to allocation sites (`run --attribute`): the engine's process
    /// runs under an attribution source (heaptrack on Linux).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub attribute: bool,
}

impl EngineSpec {
    /// An engine of `backend` with the DSL's defaults: no profile, model or library, the CPU,
    /// [`DEFAULT_MAX_TOKENS`](crate::scenario::DEFAULT_MAX_TOKENS) tokens, a
    /// [`DEFAULT_CALL_TIMEOUT`](crate::scenario::DEFAULT_CALL_TIMEOUT), and the backend's own
    /// `isolate` default (a worker process for every backend but the simulator and `attach`).
    pub fn new(backend: BackendKind) -> Self {
        Self {
            backend,
            profile: None,
            inline_profiles: BTreeMap::new(),
            model: None,
            device: Device::Cpu,
            max_tokens: crate::scenario::DEFAULT_MAX_TOKENS,
            threads: None,
            lib: None,
            call_timeout: crate::scenario::DEFAULT_CALL_TIMEOUT,
            isolate: crate::backend::of(backend).isolate_by_default,
            attach: None,
            exec: None,
            attribute: false,
        }
    }

    /// An external driver started as `exec.command`, in a worker process.
    pub fn exec(exec: crate::scenario::ExecSpec) -> Self {
        Self {
            exec: Some(exec),
            ..Self::new(BackendKind::Exec)
        }
    }

    /// The simulator running `profile`, in process.
    pub fn sim(profile: &str) -> Self {
        Self {
            profile: Some(profile.to_owned()),
            ..Self::new(BackendKind::Sim)
        }
    }
}

/// Sampler options for opening a session.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SessionOptions {
    /// Sampling temperature.
    pub temperature: Option<f32>,
    /// Top-k sampling.
    pub top_k: Option<u32>,
    /// Top-p sampling.
    pub top_p: Option<f32>,
    /// Sampler seed.
    pub seed: Option<u64>,
    /// The turn's session id from the scenario's `sessions:`, set by the runner (not written in
    /// an `open` step): an engine that caches per session keys its cache by it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<String>,
}

/// What a `send` step sends.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PromptSpec {
    /// The same literal text every turn.
    Text(String),
    /// A list of texts, cycled per turn.
    Cycle(Vec<String>),
    /// A generated prompt of this many tokens; a list is cycled per turn (a prompt-length mix).
    Tokens(Vec<u32>),
}

/// The length in tokens of a literal prompt: its word count, which common English words
/// approximate in the tokenizers the field uses.
pub fn text_tokens(text: &str) -> u32 {
    u32::try_from(text.split_whitespace().count()).unwrap_or(u32::MAX)
}

/// One step of a turn.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Step {
    /// Open a session/conversation.
    Open(SessionOptions),
    /// Send (prefill) a prompt.
    Send(PromptSpec),
    /// Generate up to this many tokens.
    Generate {
        /// The most tokens to generate.
        max_output_tokens: u32,
    },
    /// Generate, but cancel after some tokens.
    Cancel {
        /// Cancel after this many streamed tokens.
        after_tokens: u32,
        /// The most tokens the generation would have produced.
        max_output_tokens: u32,
    },
    /// Close the session.
    Close,
    /// Wait.
    Idle(Duration),
}

/// Points in a turn where memory can be sampled.
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[cfg_attr(test, schemars(rename = "sample_point"))]
pub enum SamplePoint {
    /// After the engine is loaded (and after each reload): the baseline.
    Load,
    /// After a session is opened.
    Open,
    /// Right after generation, before close: the peak of a turn.
    Generate,
    /// After a session is closed: the post-close series the analyzer judges.
    Close,
    /// After an idle step.
    Idle,
}

/// When memory is sampled.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SamplePlan {
    /// The points at which to sample.
    pub after: Vec<SamplePoint>,
    /// How long to wait before each sample so that deferred frees land.
    pub settle: Duration,
    /// Samples taken after each (re)load, `settle` apart (at least 1); they all count as the
    /// (re)load's turn.
    #[serde(default = "one_baseline_sample")]
    pub baseline: u32,
}

fn one_baseline_sample() -> u32 {
    1
}

/// When a run ends.
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "cli", derive(clap::ValueEnum))]
#[serde(rename_all = "snake_case")]
#[cfg_attr(test, schemars(rename = "stop_mode"))]
pub enum StopMode {
    /// Run every turn (`warmup_turns + turns`).
    #[default]
    Turns,
    /// Look at the verdict every few turns and stop once every watched metric is decided;
    /// `turns` is the maximum.
    Decided,
}

impl StopMode {
    /// The word used in scenarios and on the command line.
    pub fn as_str(&self) -> &'static str {
        match self {
            StopMode::Turns => "turns",
            StopMode::Decided => "decided",
        }
    }
}

/// A fault to inject at a turn.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Fault {
    /// The 1-based turn at which it strikes.
    pub at_turn: u32,
    /// What happens.
    pub kind: FaultKind,
}

/// Kinds of injected faults.
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[cfg_attr(test, schemars(rename = "fault_kind"))]
pub enum FaultKind {
    /// The engine's process dies as a native crash would.
    Crash,
    /// The engine stops answering.
    Hang,
    /// Generation returns an error.
    GenerateError,
    /// Harness-side: from this turn on the harness "forgets" to close sessions (keeps them open).
    SkipClose,
}

/// An allowed distance from the baseline.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Tolerance {
    /// Absolute bytes.
    Bytes(u64),
    /// Percent of the baseline.
    Percent(f64),
}

impl Tolerance {
    /// The tolerance in bytes for a given baseline.
    pub fn bytes_for(&self, baseline: u64) -> u64 {
        match *self {
            Tolerance::Bytes(b) => b,
            Tolerance::Percent(p) => (baseline as f64 * p / 100.0).round() as u64,
        }
    }
}

/// Expectations on one metric.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct MetricExpectation {
    /// After close, memory must be within this distance of the baseline (plus the warm-up budget).
    pub tolerance: Option<Tolerance>,
    /// A one-time rise that is allowed (an engine context, a pool filling up), in bytes.
    pub warmup_budget: Option<u64>,
    /// The most growth per turn allowed after warm-up, in bytes (judged on the upper confidence
    /// bound of the slope).
    pub max_growth_per_turn: Option<u64>,
    /// The highest value any post-close sample may have (a latency ceiling: `turn_time: {max:
    /// 2s}`). Every amount of an expectation is in its metric's unit: bytes, or nanoseconds for
    /// a time metric (`unit_of`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max: Option<u64>,
    /// The opt-out of the default expectations (`report_only: true`): the metric is analysed
    /// and reported but judged by nothing. Never combined with a limit.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub report_only: bool,
}

/// What must hold for the scenario to pass.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Expectations {
    /// Every create has its delete (call ledger). Kinds with a [`max_live`](Self::max_live)
    /// bound are judged by that bound instead. `None` (not written) is on by default wherever
    /// the run records a ledger; `Some(false)` is the opt-out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub balanced: Option<bool>,
    /// The most objects alive at once per ledger kind (a cache that keeps the last N
    /// conversations by design): `conversation` bounds that kind from every source,
    /// `sim/conversation` one source's. Judged at every turn boundary over the whole run.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub max_live: BTreeMap<String, u64>,
    /// Per-metric expectations, by metric name.
    pub metrics: BTreeMap<String, MetricExpectation>,
}
