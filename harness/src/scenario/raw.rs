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
use crate::scenario::target::RawTarget;
use crate::scenario::Concurrency;

/// The whole scenario file.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawScenario {
    pub name: String,
    #[serde(default)]
    pub description: Option<String>,
    #[serde(default)]
    pub seed: Option<u64>,
    pub engine: RawEngine,
    #[serde(default)]
    pub profiles: Option<BTreeMap<String, sim_backend::ProfileSpec>>,
    #[serde(default)]
    pub warmup_turns: Option<i64>,
    pub turns: i64,
    #[serde(default)]
    pub stop: Option<StopMode>,
    #[serde(default)]
    pub concurrency: Option<Concurrency>,
    #[serde(default)]
    pub reload_every: Option<i64>,
    /// Required for driven backends, absent for `attach` (checked in validation).
    #[serde(default)]
    pub turn: Option<Vec<RawStep>>,
    #[serde(default)]
    pub sample: Option<RawSample>,
    #[serde(default)]
    pub watch: Option<Vec<String>>,
    #[serde(default)]
    pub faults: Option<Vec<RawFault>>,
    #[serde(default)]
    pub expect: Option<RawExpect>,
    #[serde(default)]
    pub target: Option<RawTarget>,
}

/// `engine:`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawEngine {
    pub backend: BackendKind,
    #[serde(default)]
    pub profile: Option<String>,
    #[serde(default)]
    pub model: Option<String>,
    #[serde(default)]
    pub device: Option<Device>,
    #[serde(default)]
    pub max_tokens: Option<i64>,
    #[serde(default)]
    pub lib: Option<String>,
    #[serde(default)]
    pub call_timeout: Option<UnitText>,
    #[serde(default)]
    pub isolate: Option<bool>,
    /// `backend: attach` (the program leakloop starts) and `backend: exec` (the driver).
    #[serde(default)]
    pub command: Option<Vec<String>>,
    /// `backend: attach` only (see [`crate::scenario::attach`]).
    #[serde(default)]
    pub pid: Option<i64>,
    #[serde(default)]
    pub markers: Option<RawMarkers>,
    #[serde(default)]
    pub stop_grace: Option<UnitText>,
    /// `backend: exec` only (see `scenario/validate/exec.rs`).
    #[serde(default)]
    pub env: Option<BTreeMap<String, String>>,
    #[serde(default)]
    pub cwd: Option<String>,
    #[serde(default)]
    pub options: Option<BTreeMap<String, serde_json::Value>>,
    #[serde(default)]
    pub opencl_interposer: Option<bool>,
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

/// `open: {...}`: sampler options, all optional.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawOpen {
    #[serde(default)]
    pub temperature: Option<f64>,
    #[serde(default)]
    pub top_k: Option<i64>,
    #[serde(default)]
    pub top_p: Option<f64>,
    #[serde(default)]
    pub seed: Option<u64>,
}

/// `send: {...}`: exactly one of `prompt`, `prompts`, `tokens`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawSend {
    #[serde(default)]
    pub prompt: Option<String>,
    #[serde(default)]
    pub prompts: Option<Vec<String>>,
    #[serde(default)]
    pub tokens: Option<RawTokens>,
}

/// `tokens: 128` or `tokens: [32, 128]`.
#[derive(Debug)]
pub(crate) struct RawTokens(pub Vec<i64>);

/// `generate: {...}`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawGenerate {
    pub max_output_tokens: i64,
}

/// `cancel: {...}`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawCancel {
    pub after_tokens: i64,
    pub max_output_tokens: i64,
}

/// `close: {}` (or `close:` with nothing).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawClose {}

/// `sample:`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawSample {
    #[serde(default)]
    pub after: Option<Vec<SamplePoint>>,
    #[serde(default)]
    pub settle: Option<UnitText>,
    #[serde(default)]
    pub baseline: Option<i64>,
}

/// One item of `faults:`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawFault {
    pub at_turn: i64,
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
