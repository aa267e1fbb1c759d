//! docs/scenario.schema.json, generated from the raw types (`raw.rs`, the target and marker
//! types) with schemars: their doc comments are the descriptions, their serde attributes the
//! keys, and the units crate gives the patterns of sizes and durations. A test regenerates the
//! file and fails on a difference; `LEAKLOOP_UPDATE_SCHEMA=1` rewrites it.
//!
//! The types whose YAML shape a hand-written visitor decides (a step, a token count or list,
//! `expect`, `target`) describe themselves here. Everything schemars needs is a
//! dev-dependency: the library itself does not depend on it.

use std::borrow::Cow;

use schemars::{json_schema, JsonSchema, Schema, SchemaGenerator};
use serde_json::{json, Map, Value};

use crate::scenario::raw::{RawCancel, RawClose, RawExpect, RawGenerate, RawOpen, RawScenario};
use crate::scenario::raw::{RawSend, RawStep, RawTokens, EXPECT_BALANCED, EXPECT_MAX_LIVE};
use crate::scenario::target::{RawAdb, RawSsh, RawTarget};

/// A metric of the registry, for `watch`.
pub(crate) struct MetricName;

impl JsonSchema for MetricName {
    fn schema_name() -> Cow<'static, str> {
        "metric".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "description": "A metric, in bytes (or nanoseconds, for the `*_time` metrics), from the metric registry (docs/metrics.md says what each measures and which probe provides it on which target).",
            "enum": leakloop_metrics::NAMES,
        })
    }
}

impl JsonSchema for RawTokens {
    fn schema_name() -> Cow<'static, str> {
        "tokens".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        let count = json!({"type": "integer", "minimum": 1, "maximum": u32::MAX});
        json_schema!({
            "anyOf": [count, {"type": "array", "minItems": 1, "items": count}],
            "examples": [128, [32, 128]],
        })
    }
}

/// `{name: value}`: a mapping with exactly this one key.
fn one_key(name: &str, value: Schema) -> Value {
    json!({
        "type": "object",
        "additionalProperties": false,
        "required": [name],
        "properties": {name: value},
    })
}

/// `value`, or nothing (`open:` with no value is `open: {}`). Written with `const`, so that
/// [`tidy`] keeps it.
fn or_null(value: Schema) -> Schema {
    json_schema!({"anyOf": [value, {"const": null}]})
}

impl JsonSchema for RawStep {
    fn schema_name() -> Cow<'static, str> {
        "step".into()
    }

    fn json_schema(gen: &mut SchemaGenerator) -> Schema {
        let mut idle = leakloop_units::schema::duration(gen);
        idle.insert(
            "description".into(),
            "Wait this long (the simulator advances a virtual clock), e.g. `8s`.".into(),
        );
        json_schema!({
            "description": "One step of a turn: a mapping with exactly one key, one of `open`, `send`, `generate`, `cancel`, `close`, `idle`.",
            "oneOf": [
                one_key("open", or_null(gen.subschema_for::<RawOpen>())),
                one_key("send", gen.subschema_for::<RawSend>()),
                one_key("generate", gen.subschema_for::<RawGenerate>()),
                one_key("cancel", gen.subschema_for::<RawCancel>()),
                one_key("close", or_null(gen.subschema_for::<RawClose>())),
                one_key("idle", idle),
            ],
        })
    }
}

/// The limits on one metric, in its unit: sizes, or durations for a time metric.
fn limits(timed: bool, gen: &mut SchemaGenerator) -> Value {
    use leakloop_units::schema::{duration, size, time_tolerance, tolerance};
    let (tolerance, amount, tolerance_text, max_text) = if timed {
        (
            time_tolerance(gen),
            duration(gen),
            "The time at the last turn must stay within this distance of the first turn's (plus `warmup_budget`): a duration, or a percentage such as `20%`.",
            "The longest any turn may take.",
        )
    } else {
        (
            tolerance(gen),
            size(gen),
            "After close, memory must stay within this distance of the baseline (plus `warmup_budget`): a size, or a percentage of the baseline such as `2%`.",
            "The highest value any post-close sample may have.",
        )
    };
    let described = |schema: &Schema, text: &str| {
        let mut schema = schema.clone();
        schema.insert("description".into(), text.into());
        schema
    };
    json!({
        "type": "object",
        "additionalProperties": false,
        "minProperties": 1,
        "properties": {
            "tolerance": described(&tolerance, tolerance_text),
            "warmup_budget": described(&amount, "A one-time rise that is allowed (an engine context, a pool filling up)."),
            "max_growth_per_turn": described(&amount, "The most growth per turn allowed after warm-up."),
            "max": described(&amount, max_text),
            "report_only": {
                "description": "Analyse and report this metric without judging it: the opt-out of the default expectation a watched metric gets (no growth that matters over the horizon). Cannot stand beside a limit.",
                "type": "boolean",
            },
        },
    })
}

impl JsonSchema for RawExpect {
    fn schema_name() -> Cow<'static, str> {
        "expect".into()
    }

    fn json_schema(gen: &mut SchemaGenerator) -> Schema {
        let mut properties = Map::new();
        properties.insert(
            EXPECT_BALANCED.into(),
            json!({
                "description": "Every create has its delete in the call ledger. On by default wherever the run records a ledger; `false` opts out.",
                "type": "boolean",
            }),
        );
        properties.insert(
            EXPECT_MAX_LIVE.into(),
            json!({
                "description": "The most objects of each ledger kind alive at once, at every turn boundary: `conversation` bounds that kind from every source, `sim/conversation` one source's. A bounded kind is judged by its bound instead of `balanced`; a bound that names no counted kind fails.",
                "type": "object",
                "propertyNames": {"pattern": "^[A-Za-z0-9_.-][A-Za-z0-9_./-]{0,126}[A-Za-z0-9_.-]$|^[A-Za-z0-9_.-]$"},
                "additionalProperties": {"type": "integer", "minimum": 0},
            }),
        );
        // One key per metric of the registry, so a new metric needs no edit here.
        for metric in leakloop_metrics::REGISTRY {
            let timed = metric.unit == leakloop_metrics::Unit::Nanoseconds;
            let mut entry = limits(timed, gen);
            let meaning = metric.meaning.trim_end_matches('.');
            entry["description"] = format!("Limits on `{}`: {meaning}.", metric.name).into();
            properties.insert(metric.name.into(), entry);
        }
        json_schema!({
            "description": "What must hold for the scenario to pass: the create/delete balance and per-metric limits, by metric name (docs/metrics.md).",
            "type": "object",
            "additionalProperties": false,
            "properties": properties,
        })
    }
}

impl JsonSchema for RawTarget {
    fn schema_name() -> Cow<'static, str> {
        "target".into()
    }

    fn json_schema(gen: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "description": "Where the engine's process lives: `local`, or a mapping with one key, `local`, `ssh` or `adb`.",
            "oneOf": [
                {"const": "local", "description": "This machine (the default)."},
                one_key("local", json_schema!({"description": "This machine (the default)."})),
                one_key("ssh", gen.subschema_for::<RawSsh>()),
                one_key("adb", gen.subschema_for::<RawAdb>()),
            ],
        })
    }
}

/// Rewrites what schemars writes for Rust rather than for YAML: an optional key (`Option` with
/// `#[serde(default)]`) is left out, never written empty, so its value's schema stands alone
/// (no `null`, no `"default": null`); doc comments are wrapped at 100 columns, descriptions are
/// not (a blank line still separates paragraphs).
fn tidy(value: &mut Value) {
    match value {
        Value::Object(map) => {
            if let Some(Value::Object(properties)) = map.get_mut("properties") {
                properties.values_mut().for_each(not_null);
            }
            if let Some(Value::String(text)) = map.get_mut("description") {
                *text = text
                    .split("\n\n")
                    .map(|p| p.split('\n').map(str::trim).collect::<Vec<_>>().join(" "))
                    .collect::<Vec<_>>()
                    .join("\n\n");
            }
            map.values_mut().for_each(tidy);
        }
        Value::Array(items) => items.iter_mut().for_each(tidy),
        _ => {}
    }
}

/// A property's schema without the `null` schemars adds for an `Option`.
fn not_null(property: &mut Value) {
    let Some(map) = property.as_object_mut() else {
        return;
    };
    if map.get("default") == Some(&Value::Null) {
        map.remove("default");
    }
    if let Some(Value::Array(types)) = map.get_mut("type") {
        types.retain(|t| t != "null");
        if types.len() == 1 {
            let only = types.remove(0);
            map.insert("type".into(), only);
        }
    }
    let nullable = match map.get("anyOf") {
        Some(Value::Array(any)) => any.len() == 2 && any[1] == json!({"type": "null"}),
        _ => false,
    };
    if nullable {
        if let Some(Value::Array(mut any)) = map.remove("anyOf") {
            if let Value::Object(inner) = any.swap_remove(0) {
                for (key, value) in inner {
                    map.entry(key).or_insert(value);
                }
            }
        }
    }
}

/// The schema as docs/scenario.schema.json holds it.
pub(crate) fn generate() -> String {
    // An optional key (`Option` with a default) is described by its value alone, without null;
    // where an empty value means something (`open:`, `close:`), the step says so itself.
    let mut schema = schemars::generate::SchemaSettings::draft2020_12()
        .into_generator()
        .into_root_schema_for::<RawScenario>();
    schema.insert(
        "$id".into(),
        "https://leakloop.invalid/scenario.schema.json".into(),
    );
    schema.insert("title".into(), "leakloop scenario".into());
    schema.insert(
        "description".into(),
        "A leakloop scenario: one engine, an identical turn loop, sampling points and \
         expectations. Generated from leakloop's scenario types (`harness/src/scenario/raw.rs`); \
         do not edit by hand. An editor aid: `leakloop check` remains the authority and also \
         checks what a schema cannot see (which keys each backend takes, step order within a \
         turn, `after_tokens` < `max_output_tokens`, fault turns within `warmup_turns + turns`, \
         and that a `sim` profile named under `profiles` exists)."
            .into(),
    );
    let mut schema = serde_json::to_value(&schema).expect("a schema is JSON");
    tidy(&mut schema);
    let mut text = serde_json::to_string_pretty(&schema).expect("a schema is JSON");
    text.push('\n');
    text
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;

    fn schema_file() -> PathBuf {
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../docs/scenario.schema.json")
    }

    /// The committed schema is what the types generate; after changing a raw type, rerun with
    /// `LEAKLOOP_UPDATE_SCHEMA=1` to rewrite it.
    #[test]
    fn docs_scenario_schema_is_generated_from_the_types() {
        let generated = generate();
        let path = schema_file();
        if std::env::var_os("LEAKLOOP_UPDATE_SCHEMA").is_some_and(|v| v == "1") {
            std::fs::write(&path, &generated).unwrap();
            return;
        }
        let committed = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            committed == generated,
            "{} is not what the scenario types generate; regenerate it with \
             `LEAKLOOP_UPDATE_SCHEMA=1 cargo test -p leakloop --lib scenario::schema`",
            path.display()
        );
    }

    /// The defaults an editor shows are the ones validation applies.
    #[test]
    fn the_schema_defaults_are_the_dsl_defaults() {
        use crate::scenario::{DEFAULT_CALL_TIMEOUT, DEFAULT_MARKER_TIMEOUT, DEFAULT_STOP_GRACE};
        let schema: Value = serde_json::from_str(&generate()).unwrap();
        let default = |pointer: &str| {
            let at = format!("/$defs/{pointer}/default");
            schema
                .pointer(&at)
                .unwrap_or_else(|| panic!("{at}"))
                .clone()
        };
        let duration = |pointer: &str| {
            leakloop_units::parse_duration(default(pointer).as_str().unwrap()).unwrap()
        };
        assert_eq!(
            default("engine/properties/max_tokens"),
            crate::scenario::DEFAULT_MAX_TOKENS
        );
        assert_eq!(
            duration("engine/properties/call_timeout"),
            DEFAULT_CALL_TIMEOUT
        );
        assert_eq!(duration("engine/properties/stop_grace"), DEFAULT_STOP_GRACE);
        assert_eq!(
            duration("markers/properties/timeout"),
            DEFAULT_MARKER_TIMEOUT
        );
    }

    #[test]
    fn every_registry_metric_has_limits_and_a_watch_name() {
        let schema: Value = serde_json::from_str(&generate()).unwrap();
        let expect = &schema["$defs"]["expect"]["properties"];
        let watch = &schema["$defs"]["metric"]["enum"];
        for name in leakloop_metrics::NAMES {
            assert!(expect.get(name).is_some(), "expect.{name}");
            assert!(
                watch.as_array().unwrap().iter().any(|n| n == name),
                "watch: {name}"
            );
        }
    }
}
