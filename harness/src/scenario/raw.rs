//! Serde types that mirror the scenario YAML one to one.
//!
//! Nothing here is checked beyond YAML types and key names: every unknown key is an error
//! (`deny_unknown_fields`), values with units are kept as the text the user wrote so that
//! [`super::validate`] can resolve them and quote the text back in errors. There is no
//! `#[serde(untagged)]` or `#[serde(flatten)]`: both hide unknown keys and blur error messages.
//! Where one key takes several shapes (a step, a prompt token count or list), a small
//! hand-written visitor decides by the YAML type instead.

use std::collections::BTreeMap;
use std::fmt;

use serde::de::{self, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;

use crate::scenario::attach::RawMarkers;
use crate::scenario::model::{BackendKind, Device, FaultKind, SamplePoint, StopMode};
#[cfg(test)]
use crate::scenario::schema::MetricName;
use crate::scenario::sessions::RawSessions;
use crate::scenario::target::RawTarget;
use crate::scenario::Concurrency;

/// The whole scenario file.
#[derive(Debug, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub(crate) struct RawScenario {
    /// Short identifier of the scenario: lowercase letters, digits, `-` and `_`, at most 64
    /// characters. Names report files and JUnit suites.
    #[cfg_attr(
        test,
        schemars(regex(pattern = r"^[a-z0-9_-]+$"), length(min = 1, max = 64))
    )]
    pub name: String,
    /// What the scenario reproduces (free text).
    #[serde(default)]
    pub description: Option<String>,
    /// Seed for every random choice (simulator noise, generated prompts).
    #[serde(default)]
    #[cfg_attr(test, schemars(extend("default" = 0)))]
    pub seed: Option<u64>,
    /// Which engine runs the scenario and how it is configured.
    pub engine: RawEngine,
    /// Simulator profiles defined in the scenario itself, by name; `engine.profile` may name
    /// one. A name follows the `name` rule and may not reuse a built-in profile's name.
    #[serde(default)]
    pub profiles: Option<BTreeMap<String, sim_backend::ProfileSpec>>,
    /// Turns run before the measured turns; their one-time growth counts against
    /// `warmup_budget`. `warmup_turns + turns` may not exceed 100000.
    #[serde(default)]
    #[cfg_attr(test, schemars(range(min = 0, max = 99_999)))]
    #[cfg_attr(test, schemars(extend("default" = 0)))]
    pub warmup_turns: Option<i64>,
    /// Measured turns, at least 1; `warmup_turns + turns` may not exceed 100000.
    #[cfg_attr(test, schemars(range(min = 1, max = 100_000)))]
    pub turns: i64,
    /// When the run ends. `turns` (the default): after every turn. `decided`: the runner looks
    /// at the verdict after 6 measured turns and then every 25% more turns (at least 2), and
    /// stops once every watched metric is decided; `turns` becomes the maximum. The growth
    /// test's false-positive rate is held across the looks by alpha spending
    /// (docs/analyzer.md).
    #[serde(default)]
    #[cfg_attr(test, schemars(extend("default" = "turns")))]
    pub stop: Option<StopMode>,
    /// With `stop: turns`: the most measured turns a run may extend to when its verdict is
    /// still undecided after `turns` (a growth limit inside the slope's interval, a metric
    /// inconclusive). `turns` is then the minimum; the runner looks after `turns` and then every
    /// 25% more turns (at least 2), and stops at the first look that decides; error rates are
    /// held across the looks by alpha spending over `max_turns` (docs/analyzer.md). A run
    /// still undecided at `max_turns` is inconclusive. Unset: up to 2 x `turns` (within the
    /// turn limit), judged at `turns` as a fixed run and extended only while the verdict is
    /// inconclusive, its looks spending an extra quarter of the error budgets; equal to `turns`:
    /// no extension. At least `turns`; `warmup_turns + max_turns` may not exceed 100000; not
    /// with `stop: decided`
    /// (there `turns` is already the maximum).
    #[serde(default)]
    #[cfg_attr(test, schemars(range(min = 1, max = 100_000)))]
    pub max_turns: Option<i64>,
    /// When `leakloop run` is given a suite: `shared` runs alongside any other scenario (up to
    /// `-j` at a time); `exclusive` runs while no other exclusive scenario runs on the same
    /// device. Unset: `shared` for the simulator, `exclusive` for every other backend
    /// (docs/backends.md). A single scenario ignores it.
    #[serde(default)]
    pub concurrency: Option<Concurrency>,
    /// The session ids the turns use: `{distinct: N, order: cycle|random}`. Each turn's key is
    /// its session id, and the report says whether growth follows new sessions (a cache
    /// filling) or every request (missing eviction). Unset: every turn opens a session of its
    /// own and has no key.
    #[serde(default)]
    pub sessions: Option<RawSessions>,
    /// Unload and reload the engine after every K-th turn's close; 0 means never.
    #[serde(default)]
    #[cfg_attr(test, schemars(range(min = 0, max = 4_294_967_295_i64)))]
    #[cfg_attr(test, schemars(extend("default" = 0)))]
    pub reload_every: Option<i64>,
    /// The steps of one turn, in order; each item is a mapping with exactly one key, the step.
    /// `send`, `generate`, `cancel` and `close` need an open session; every `open` must be
    /// closed in the same turn. Required for every backend but `attach`.
    #[serde(default)]
    #[cfg_attr(test, schemars(length(min = 1)))]
    pub turn: Option<Vec<RawStep>>,
    /// When memory is sampled and how long to settle first. Default: `{after: [load, close],
    /// settle: 0ms}`.
    #[serde(default)]
    pub sample: Option<RawSample>,
    /// Metrics to analyse and plot; default: the metrics named under `expect`. No duplicates.
    #[serde(default)]
    #[cfg_attr(test, schemars(with = "Option<Vec<MetricName>>"))]
    pub watch: Option<Vec<String>>,
    /// Faults to inject. `skip_close` works on every backend; `crash` and `hang` on the
    /// simulator and on any engine in a worker process (`isolate: true`, the default for real
    /// engines); `generate_error` on the simulator only.
    #[serde(default)]
    pub faults: Option<Vec<RawFault>>,
    /// What must hold for the scenario to pass: the create/delete balance and per-metric
    /// limits.
    #[serde(default)]
    pub expect: Option<RawExpect>,
    /// Where the engine's process lives: `local` (the default: this machine), `ssh: {...}` (a
    /// worker started on another machine over ssh) or `adb: {...}` (an Android device: a native
    /// worker, or an app sampled with dumpsys meminfo). docs/device-farm.md.
    #[serde(default)]
    pub target: Option<RawTarget>,
}

/// Which engine runs the scenario and how it is configured; docs/backends.md says which keys
/// each backend takes.
#[derive(Debug, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
#[cfg_attr(test, schemars(rename = "engine"))]
pub(crate) struct RawEngine {
    /// Which backend runs the scenario (docs/backends.md).
    pub backend: BackendKind,
    /// `sim`: required, a built-in simulator profile or a key of `profiles`. `opencl`: one of
    /// `clean`, `leak-scratch`, `leak-kv`, `leak-retain` (none means the engine's default).
    #[serde(default)]
    pub profile: Option<String>,
    /// Model file of a real engine (required for `litert-lm`); a relative path resolves against
    /// the scenario file's folder.
    #[serde(default)]
    pub model: Option<String>,
    /// Compute device of a real engine: `cpu` or `gpu`.
    #[serde(default)]
    #[cfg_attr(test, schemars(extend("default" = "cpu")))]
    pub device: Option<Device>,
    /// Context (KV cache) size in tokens.
    #[serde(default)]
    #[cfg_attr(test, schemars(range(min = 1, max = 4_294_967_295_i64)))]
    #[cfg_attr(test, schemars(extend("default" = crate::scenario::DEFAULT_MAX_TOKENS)))]
    pub max_tokens: Option<i64>,
    /// Threads of the CPU backend of `litert-lm` (default: the library's own choice).
    #[serde(default)]
    #[cfg_attr(test, schemars(range(min = 1, max = 4_294_967_295_i64)))]
    pub threads: Option<i64>,
    /// Engine library of a real engine (overrides discovery); a relative path resolves like
    /// `model`.
    #[serde(default)]
    pub lib: Option<String>,
    /// A call into a worker process that takes longer counts as a hang; more than 0.
    #[serde(default)]
    #[cfg_attr(
        test,
        schemars(schema_with = "leakloop_units::schema::positive_duration")
    )]
    #[cfg_attr(test, schemars(extend("default" = "60s")))]
    pub call_timeout: Option<UnitText>,
    /// Run the engine in a worker process. Default: `false` for `sim` (where `true` makes
    /// `crash` a real process death) and `attach`, `true` for real engines. `exec` always runs
    /// in its own process (`false` is refused).
    #[serde(default)]
    pub isolate: Option<bool>,
    /// `attach`: the program leakloop starts (program and arguments), in the scenario file's
    /// folder, in its own process group; stopped at the end with SIGTERM, then SIGKILL after
    /// `stop_grace`. `exec` (required there): the driver program and its arguments; a program
    /// path with a `/` resolves against the scenario file's folder, a bare name is looked up on
    /// PATH.
    #[serde(default)]
    #[cfg_attr(test, schemars(length(min = 1)))]
    pub command: Option<Vec<String>>,
    /// `attach`: a process already running, measured but neither started nor stopped; its
    /// markers come from `markers.file` or `markers.command`. Without `command` or `pid`, the
    /// attach backend measures the app of `target: {adb: {package | pid}}`.
    #[serde(default)]
    #[cfg_attr(test, schemars(range(min = 1, max = 2_147_483_647)))]
    pub pid: Option<i64>,
    /// `attach`: where turn markers are read and how they look.
    #[serde(default)]
    pub markers: Option<RawMarkers>,
    /// `attach` with `command`: how long the program has after SIGTERM before SIGKILL.
    #[serde(default)]
    #[cfg_attr(test, schemars(schema_with = "leakloop_units::schema::duration"))]
    #[cfg_attr(test, schemars(extend("default" = "5s")))]
    pub stop_grace: Option<UnitText>,
    /// `exec` only: variables added to the driver's environment.
    #[serde(default)]
    pub env: Option<BTreeMap<String, String>>,
    /// `exec` only: the driver's working directory; a relative path resolves against the
    /// scenario file's folder, which is also the default.
    #[serde(default)]
    pub cwd: Option<String>,
    /// `exec` only: backend options passed through to the driver in the handshake
    /// (`engine.options`), any JSON values; the driver says which it knows.
    #[serde(default)]
    pub options: Option<BTreeMap<String, serde_json::Value>>,
    /// `exec` only: preload leakloop's OpenCL call interposer into the driver (it reads the
    /// counts itself, see docs/protocol.md).
    #[serde(default)]
    #[cfg_attr(test, schemars(extend("default" = false)))]
    pub opencl_interposer: Option<bool>,
    /// Attribute per-turn growth to allocation sites: the engine's process (a worker, an exec
    /// driver, a program attach mode starts) runs under heaptrack, and the report lists the sites
    /// whose live bytes grow per turn (docs/attribution.md). Linux only.
    #[serde(default)]
    #[cfg_attr(test, schemars(extend("default" = false)))]
    pub attribute: Option<bool>,
}

/// One item of `turn:`: a map with exactly one key naming the step.
#[derive(Debug)]
pub(crate) enum RawStep {
    Open(RawOpen),
    Send(RawSend),
    Generate(RawGenerate),
    Cancel(RawCancel),
    Close(RawClose),
    Idle(UnitText),
}

/// The step names, as written in YAML.
#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(rename_all = "snake_case")]
enum StepName {
    Open,
    Send,
    Generate,
    Cancel,
    Close,
    Idle,
}

/// Open a session (conversation) with optional sampler options; `open: {}` or `open:` uses the
/// engine's defaults.
#[derive(Debug, Default, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
#[cfg_attr(test, schemars(rename = "open"))]
pub(crate) struct RawOpen {
    /// Sampling temperature, 0 to 100.
    #[serde(default)]
    #[cfg_attr(test, schemars(range(min = 0, max = 100)))]
    pub temperature: Option<f64>,
    /// Top-k sampling, 1 or more.
    #[serde(default)]
    #[cfg_attr(test, schemars(range(min = 1, max = 4_294_967_295_i64)))]
    pub top_k: Option<i64>,
    /// Top-p sampling, more than 0 and at most 1.
    #[serde(default)]
    #[cfg_attr(test, schemars(range(max = 1)))]
    pub top_p: Option<f64>,
    /// Sampler seed.
    #[serde(default)]
    pub seed: Option<u64>,
}

/// Send (prefill) a prompt: exactly one of `prompt`, `prompts` or `tokens`.
#[derive(Debug, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
#[cfg_attr(test, schemars(rename = "send"))]
pub(crate) struct RawSend {
    /// The same literal text every turn.
    #[serde(default)]
    pub prompt: Option<String>,
    /// A list of texts, cycled per turn.
    #[serde(default)]
    #[cfg_attr(test, schemars(length(min = 1)))]
    pub prompts: Option<Vec<String>>,
    /// A generated prompt of this many tokens, or a list of token counts cycled per turn (a
    /// prompt-length mix); each at least 1.
    #[serde(default)]
    pub tokens: Option<RawTokens>,
}

/// `tokens: 128` or `tokens: [32, 128]`.
#[derive(Debug)]
pub(crate) struct RawTokens(pub Vec<i64>);

/// Generate a response.
#[derive(Debug, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
#[cfg_attr(test, schemars(rename = "generate"))]
pub(crate) struct RawGenerate {
    /// The most tokens to generate, 1 or more.
    #[cfg_attr(test, schemars(range(min = 1, max = 4_294_967_295_i64)))]
    pub max_output_tokens: i64,
}

/// Generate, then cancel after some streamed tokens.
#[derive(Debug, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
#[cfg_attr(test, schemars(rename = "cancel"))]
pub(crate) struct RawCancel {
    /// Cancel after this many streamed tokens; less than `max_output_tokens`.
    #[cfg_attr(test, schemars(range(min = 0, max = 4_294_967_295_i64)))]
    pub after_tokens: i64,
    /// The most tokens the generation would have produced, 1 or more.
    #[cfg_attr(test, schemars(range(min = 1, max = 4_294_967_295_i64)))]
    pub max_output_tokens: i64,
}

/// Close the session: `close: {}` or `close:`.
#[derive(Debug, Default, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
#[cfg_attr(test, schemars(rename = "close"))]
pub(crate) struct RawClose {}

/// When memory is sampled and how long to settle first.
#[derive(Debug, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
#[cfg_attr(test, schemars(rename = "sample"))]
pub(crate) struct RawSample {
    /// The points at which to sample: `load`, `open`, `generate`, `close`, `idle`; non-empty,
    /// no duplicates, each must happen in the turn. With any metric under `expect`, must
    /// include `load` and `close`.
    #[serde(default)]
    #[cfg_attr(test, schemars(length(min = 1)))]
    #[cfg_attr(test, schemars(extend("default" = ["load", "close"])))]
    pub after: Option<Vec<SamplePoint>>,
    /// How long to wait before each sample so that deferred frees land.
    #[serde(default)]
    #[cfg_attr(test, schemars(schema_with = "leakloop_units::schema::duration"))]
    #[cfg_attr(test, schemars(extend("default" = "0ms")))]
    pub settle: Option<UnitText>,
    /// How many baseline samples to take after load and after each reload, `settle` apart;
    /// all count as the (re)load's turn. 1 to 100; needs `load` under `after`.
    #[serde(default)]
    #[cfg_attr(test, schemars(range(min = 1, max = 100)))]
    #[cfg_attr(test, schemars(extend("default" = 1)))]
    pub baseline: Option<i64>,
}

/// A fault to inject.
#[derive(Debug, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
#[cfg_attr(test, schemars(rename = "fault"))]
pub(crate) struct RawFault {
    /// The 1-based turn at which the fault strikes, at most `warmup_turns + turns`.
    #[cfg_attr(test, schemars(range(min = 1, max = 100_000)))]
    pub at_turn: i64,
    /// What happens: `crash`, `hang` (simulator, or any isolated engine), `generate_error`
    /// (simulator only) or `skip_close` (any backend).
    pub kind: FaultKind,
}

/// `expect:`: the ledger balance and a map from metric name to its limits.
///
/// Names are checked against the metric registry, so a new metric needs no field here. A name
/// the registry does not know is kept (its value unread) for the validator to report at its key,
/// with a did-you-mean, before anything about its value. An entry without a value (`rss:`) is
/// "not given", as for every other optional key.
#[derive(Debug, Default)]
pub(crate) struct RawExpect {
    pub balanced: Option<bool>,
    /// `max_live`: the most objects of each ledger kind alive at once.
    pub max_live: Option<BTreeMap<String, u64>>,
    pub metrics: Vec<(String, RawMetricExpect)>,
    /// The first key that is neither `balanced`, `max_live` nor a registered metric.
    pub unknown: Option<String>,
}

/// The key of `expect:` for create/delete balance.
pub(crate) const EXPECT_BALANCED: &str = "balanced";

/// The key of `expect:` for bounded live counts per ledger kind.
pub(crate) const EXPECT_MAX_LIVE: &str = "max_live";

/// Limits on one metric.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawMetricExpect {
    #[serde(default)]
    pub tolerance: Option<UnitText>,
    #[serde(default)]
    pub warmup_budget: Option<UnitText>,
    #[serde(default)]
    pub max_growth_per_turn: Option<UnitText>,
    #[serde(default)]
    pub max: Option<UnitText>,
    /// `report_only: true`: analyse and report the metric without judging it (the opt-out of
    /// the default expectations).
    #[serde(default)]
    pub report_only: Option<bool>,
}

/// A size, duration or tolerance exactly as written: `5MiB`, `8s`, `2%`, or a bare number.
///
/// Numbers are kept as their decimal text so the validator parses every form with one parser
/// and can quote what the user wrote.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct UnitText(pub String);

impl<'de> Deserialize<'de> for UnitText {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = UnitText;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a number with a unit, such as `5MiB`, `500ms` or `2%`")
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<UnitText, E> {
                Ok(UnitText(v.to_string()))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<UnitText, E> {
                Ok(UnitText(v.to_string()))
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<UnitText, E> {
                Ok(UnitText(v.to_string()))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<UnitText, E> {
                Ok(UnitText(v.to_owned()))
            }
        }
        deserializer.deserialize_any(V)
    }
}

impl<'de> Deserialize<'de> for RawExpect {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = RawExpect;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a mapping of `balanced` and metric names to their limits")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<RawExpect, A::Error> {
                let mut out = RawExpect::default();
                while let Some(key) = map.next_key::<String>()? {
                    if key == EXPECT_BALANCED {
                        out.balanced = Some(map.next_value()?);
                    } else if key == EXPECT_MAX_LIVE {
                        out.max_live = map.next_value()?;
                    } else if leakloop_metrics::metric(&key).is_some() {
                        if let Some(limits) = map.next_value::<Option<RawMetricExpect>>()? {
                            out.metrics.push((key, limits));
                        }
                    } else {
                        map.next_value::<de::IgnoredAny>()?;
                        out.unknown.get_or_insert(key);
                    }
                }
                Ok(out)
            }
        }
        deserializer.deserialize_map(V)
    }
}

impl<'de> Deserialize<'de> for RawTokens {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = RawTokens;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a token count or a list of token counts, such as `128` or `[32, 128]`")
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<RawTokens, E> {
                i64::try_from(v)
                    .map(|v| RawTokens(vec![v]))
                    .map_err(|_| E::custom(format!("token count {v} is too large")))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<RawTokens, E> {
                Ok(RawTokens(vec![v]))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<RawTokens, A::Error> {
                let mut counts = Vec::new();
                while let Some(count) = seq.next_element::<i64>()? {
                    counts.push(count);
                }
                Ok(RawTokens(counts))
            }
        }
        deserializer.deserialize_any(V)
    }
}

impl<'de> Deserialize<'de> for RawStep {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = RawStep;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(
                    "a step: a map with one key, one of `open`, `send`, `generate`, `cancel`, \
                     `close`, `idle` (for example `- close: {}`)",
                )
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<RawStep, A::Error> {
                let Some(name) = map.next_key::<StepName>()? else {
                    return Err(de::Error::custom(
                        "empty step: write one of `open`, `send`, `generate`, `cancel`, \
                         `close`, `idle`",
                    ));
                };
                let step = match name {
                    StepName::Open => {
                        RawStep::Open(map.next_value::<Option<RawOpen>>()?.unwrap_or_default())
                    }
                    StepName::Send => RawStep::Send(map.next_value()?),
                    StepName::Generate => RawStep::Generate(map.next_value()?),
                    StepName::Cancel => RawStep::Cancel(map.next_value()?),
                    StepName::Close => {
                        RawStep::Close(map.next_value::<Option<RawClose>>()?.unwrap_or_default())
                    }
                    StepName::Idle => RawStep::Idle(map.next_value()?),
                };
                if let Some(extra) = map.next_key::<String>()? {
                    return Err(de::Error::custom(format!(
                        "a step has exactly one key, but this one also has `{extra}`; \
                         start each step with its own `- `"
                    )));
                }
                Ok(step)
            }
        }
        deserializer.deserialize_map(V)
    }
}
