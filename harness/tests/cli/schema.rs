//! `docs/scenario.schema.json`, the JSON Schema that editors use to check scenario files. It is
//! generated from the scenario types (a unit test in `scenario/schema.rs` regenerates it), so its
//! keys and names follow the DSL by construction; what generation does not guarantee is held
//! here: every fixture scenario validates, every malformed fixture the schema can see is rejected
//! at the value that is wrong, every key is described, every mapping is closed, the metrics are
//! the registry's, and the unit patterns accept exactly what leakloop's parsers accept.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use jsonschema::Validator;
use leakloop::scenario::{
    load_scenario, parse_scenario, Scenario, ScenarioError, ScenarioErrorKind, METRICS,
};
use serde_json::Value;

use crate::common::workspace;

/// The schema document.
fn schema() -> &'static Value {
    static SCHEMA: OnceLock<Value> = OnceLock::new();
    SCHEMA.get_or_init(|| {
        let path = workspace().join("docs/scenario.schema.json");
        let text =
            std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
    })
}

/// The schema, compiled as draft 2020-12.
fn validator() -> &'static Validator {
    static VALIDATOR: OnceLock<Validator> = OnceLock::new();
    VALIDATOR.get_or_init(|| {
        jsonschema::draft202012::new(schema())
            .unwrap_or_else(|e| panic!("the scenario schema does not compile: {e}"))
    })
}

/// A YAML document as the JSON value an editor's YAML language server validates.
fn yaml_to_json(text: &str) -> Value {
    let yaml: serde_yaml::Value =
        serde_yaml::from_str(text).unwrap_or_else(|e| panic!("not YAML: {e}\n{text}"));
    serde_json::to_value(yaml).unwrap_or_else(|e| panic!("no JSON form: {e}\n{text}"))
}

/// Every schema violation as `(instance pointer, keyword, message)`.
fn violations(text: &str) -> Vec<(String, String, String)> {
    validator()
        .iter_errors(&yaml_to_json(text))
        .map(|e| {
            (
                e.instance_path().to_string(),
                e.kind().keyword().to_owned(),
                e.to_string(),
            )
        })
        .collect()
}

fn schema_accepts(text: &str) -> bool {
    validator().is_valid(&yaml_to_json(text))
}

fn parse(text: &str) -> Result<Scenario, ScenarioError> {
    parse_scenario(text, Path::new("/scenarios/s.yaml"))
}

/// The part of the schema at a JSON pointer.
fn at(pointer: &str) -> &'static Value {
    schema()
        .pointer(pointer)
        .unwrap_or_else(|| panic!("the schema has nothing at {pointer}"))
}

fn strings(value: &Value) -> Vec<String> {
    value
        .as_array()
        .unwrap_or_else(|| panic!("not a list: {value}"))
        .iter()
        .map(|v| v.as_str().expect("a string").to_owned())
        .collect()
}

fn keys(pointer: &str) -> BTreeSet<String> {
    at(pointer)
        .as_object()
        .unwrap_or_else(|| panic!("not a mapping at {pointer}"))
        .keys()
        .cloned()
        .collect()
}

/// The smallest valid scenario; cases append keys to it.
const MINIMAL: &str =
    "name: m\nengine: {backend: sim, profile: cpu-flat}\nturns: 2\nturn: [open: {}, close: {}]\n";

#[test]
fn schema_is_a_valid_draft_2020_12_schema() {
    assert_eq!(
        schema()["$schema"],
        "https://json-schema.org/draft/2020-12/schema"
    );
    if let Err(e) = jsonschema::draft202012::meta::validate(schema()) {
        panic!("docs/scenario.schema.json breaks the 2020-12 meta-schema: {e}");
    }
    // Compiling resolves every `$ref`.
    validator();
}

/// Whether `schema` is described: itself, or the definition it refers to (directly, or as the
/// first choice of an `anyOf`, the form of a step that may also be written empty).
fn described(schema: &Value) -> bool {
    let target = schema
        .get("anyOf")
        .and_then(|any| any.get(0))
        .unwrap_or(schema);
    schema.get("description").is_some()
        || target
            .get("$ref")
            .and_then(Value::as_str)
            .and_then(|r| r.strip_prefix('#'))
            .is_some_and(|pointer| at(pointer).get("description").is_some())
}

/// Editors show `description` (a key's own, or its definition's) when hovering a key or offering
/// completions.
#[test]
fn every_property_has_a_description() {
    fn walk(value: &Value, pointer: &str, missing: &mut Vec<String>) {
        match value {
            Value::Object(map) => {
                if let Some(Value::Object(props)) = map.get("properties") {
                    for (key, prop) in props {
                        let is_schema = prop.is_object();
                        if is_schema && !described(prop) {
                            missing.push(format!("{pointer}/properties/{key}"));
                        }
                    }
                }
                for (key, child) in map {
                    walk(child, &format!("{pointer}/{key}"), missing);
                }
            }
            Value::Array(items) => {
                for (i, child) in items.iter().enumerate() {
                    walk(child, &format!("{pointer}/{i}"), missing);
                }
            }
            _ => {}
        }
    }
    let mut missing = Vec::new();
    walk(schema(), "", &mut missing);
    assert!(
        missing.is_empty(),
        "properties without a description: {missing:#?}"
    );
}

/// The DSL rejects unknown keys everywhere, so every mapping the schema describes must too.
#[test]
fn every_mapping_denies_unknown_keys() {
    fn walk(value: &Value, pointer: &str, open: &mut Vec<String>) {
        match value {
            Value::Object(map) => {
                let describes_mapping = map.contains_key("properties")
                    || map.get("type").is_some_and(|t| {
                        t == "object"
                            || t.as_array()
                                .is_some_and(|ts| ts.iter().any(|t| t == "object"))
                    });
                // A map of free names (`profiles`, `env`, `max_live`) checks its values instead;
                // an exec driver's `options` are any JSON values by design.
                let closed = map.get("additionalProperties").is_some_and(|a| a != true)
                    || map.get("propertyNames").is_some()
                    || pointer.ends_with("/options");
                if describes_mapping && !closed {
                    open.push(pointer.to_owned());
                }
                for (key, child) in map {
                    walk(child, &format!("{pointer}/{key}"), open);
                }
            }
            Value::Array(items) => {
                for (i, child) in items.iter().enumerate() {
                    walk(child, &format!("{pointer}/{i}"), open);
                }
            }
            _ => {}
        }
    }
    let mut open = Vec::new();
    walk(schema(), "", &mut open);
    assert!(
        open.is_empty(),
        "mappings that allow unknown keys: {open:#?}"
    );
}

#[test]
fn every_fixture_scenario_validates() {
    let dir = workspace().join("fixtures/scenarios");
    let mut checked = 0;
    let mut failures = Vec::new();
    // The attached-process scenarios and the external-driver scenarios (`backend: exec`) live
    // apart, since their engine is a program.
    let entries = std::fs::read_dir(&dir)
        .expect("fixtures/scenarios exists")
        .chain(
            std::fs::read_dir(workspace().join("fixtures/attach")).expect("fixtures/attach exists"),
        )
        .chain(std::fs::read_dir(workspace().join("fixtures/exec")).expect("fixtures/exec exists"))
        .chain(
            std::fs::read_dir(workspace().join("fixtures/caches")).expect("fixtures/caches exists"),
        );
    for entry in entries {
        let path = entry.expect("readable entry").path();
        if path.extension().is_none_or(|e| e != "yaml") {
            continue;
        }
        let text = std::fs::read_to_string(&path).expect("readable fixture");
        let errors = violations(&text);
        if !errors.is_empty() {
            failures.push(format!("{}: {errors:#?}", path.display()));
        }
        checked += 1;
    }
    assert!(
        checked >= 20,
        "only {checked} fixtures found in {}",
        dir.display()
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Malformed fixtures whose defect the schema can see, with the instance pointer and keyword of
/// the violation that must be reported (so a file rejected for some other reason does not count).
const SCHEMA_REJECTS: &[(&str, &str, &str)] = &[
    ("bad-name", "/name", "pattern"),
    ("comments-only", "", "type"),
    ("empty-turn", "/turn", "minItems"),
    ("empty", "", "type"),
    ("expectation-without-limit", "/expect/gpu", "minProperties"),
    ("huge-name", "/name", "maxLength"),
    (
        "inline-profile-unit",
        "/profiles/mine/leak_per_generation",
        "pattern",
    ),
    ("missing-turns", "", "required"),
    ("negative-reload-every", "/reload_every", "minimum"),
    ("negative-tolerance", "/expect/rss/tolerance", "pattern"),
    ("negative-warmup", "/warmup_turns", "minimum"),
    ("not-a-mapping", "", "type"),
    (
        "profile-place-mapping",
        "/profiles/my-phone/context_on",
        "oneOf",
    ),
    (
        "profile-size-negative",
        "/profiles/my-phone/weights",
        "minimum",
    ),
    (
        "profile-size-not-a-size",
        "/profiles/my-phone/weights",
        "pattern",
    ),
    ("profile-size-tagged", "/profiles/my-phone/weights", "type"),
    ("scalar-document", "", "type"),
    ("step-value-wrong-type", "/turn/1", "oneOf"),
    ("target-unknown-kind", "/target", "oneOf"),
    ("too-many-turns", "/turns", "maximum"),
    ("two-keys-in-step", "/turn/0", "oneOf"),
    ("unknown-backend", "/engine/backend", "oneOf"),
    ("unknown-duration-unit", "/turn/4", "oneOf"),
    ("unknown-key-in-step", "/turn/0", "oneOf"),
    ("unknown-key", "", "additionalProperties"),
    ("unknown-metric", "/expect", "additionalProperties"),
    (
        "unknown-nested-key",
        "/expect/native_heap",
        "additionalProperties",
    ),
    (
        "unknown-size-unit",
        "/expect/native_heap/max_growth_per_turn",
        "pattern",
    ),
    ("unknown-step", "/turn/0", "oneOf"),
    ("unknown-stop", "/stop", "oneOf"),
    ("unknown-watch-metric", "/watch/1", "enum"),
    ("wrong-type-engine", "/engine", "type"),
    ("wrong-type-turns", "/turns", "type"),
    ("zero-baseline-samples", "/sample/baseline", "minimum"),
    ("zero-prompt-tokens", "/turn/1", "oneOf"),
    ("zero-threads", "/engine/threads", "minimum"),
    ("zero-turns", "/turns", "minimum"),
];

/// Malformed fixtures whose defect needs more than a schema can say (relations between values,
/// the order of steps): the schema accepts them and `leakloop check` rejects them.
const BEYOND_SCHEMA: &[(&str, &str)] = &[
    (
        "attach-app-with-command",
        "which keys and values a backend takes is its own check (docs/backends.md)",
    ),
    (
        "attach-app-with-pid",
        "which keys and values a backend takes is its own check (docs/backends.md)",
    ),
    (
        "attach-bad-regex",
        "a regular expression is compiled by leakloop's regex engine",
    ),
    (
        "attach-pattern-without-turn",
        "which keys and values a backend takes is its own check (docs/backends.md)",
    ),
    (
        "attach-pid-reads-stdout",
        "which keys and values a backend takes is its own check (docs/backends.md)",
    ),
    (
        "attach-sample-after-generate",
        "which keys and values a backend takes is its own check (docs/backends.md)",
    ),
    (
        "attach-target-ssh",
        "which keys and values a backend takes is its own check (docs/backends.md)",
    ),
    (
        "attach-two-marker-sources",
        "which keys and values a backend takes is its own check (docs/backends.md)",
    ),
    (
        "attach-with-turn",
        "which keys and values a backend takes is its own check (docs/backends.md)",
    ),
    (
        "attach-without-process",
        "which keys and values a backend takes is its own check (docs/backends.md)",
    ),
    (
        "cancel-after-limit",
        "after_tokens < max_output_tokens compares two values",
    ),
    (
        "command-without-attach",
        "which keys and values a backend takes is its own check (docs/backends.md)",
    ),
    (
        "crash-in-process",
        "which faults a backend takes depends on the backend and engine.isolate",
    ),
    (
        "crash-without-generation",
        "a fault needs a step it can strike in",
    ),
    (
        "exec-command-on-sim",
        "which keys and values a backend takes is its own check (docs/backends.md)",
    ),
    (
        "exec-without-command",
        "which keys and values a backend takes is its own check (docs/backends.md)",
    ),
    (
        "expect-without-close-sample",
        "expectations need `load` and `close` under sample.after: a relation between keys",
    ),
    (
        "fault-after-last-turn",
        "at_turn <= warmup_turns + turns compares values",
    ),
    (
        "generate-error-real-engine",
        "which faults a backend takes depends on the backend and engine.isolate",
    ),
    (
        "generated-prompt-too-long",
        "the cap on generated prompts depends on the backend and engine.max_tokens",
    ),
    (
        "missing-model",
        "which keys and values a backend takes is its own check (docs/backends.md)",
    ),
    (
        "missing-profile",
        "which keys and values a backend takes is its own check (docs/backends.md)",
    ),
    (
        "missing-turn",
        "which keys and values a backend takes is its own check (docs/backends.md)",
    ),
    ("open-not-closed", "step order within a turn"),
    ("open-twice", "step order within a turn"),
    (
        "prompt-longer-than-context",
        "a prompt's length is compared with engine.max_tokens",
    ),
    ("send-before-open", "step order within a turn"),
    (
        "send-two-prompts",
        "exactly one of `prompt`, `prompts`, `tokens` is a relation between keys",
    ),
    (
        "target-adb-serial-substitution",
        "a host, user, option or serial is checked for text a shell or ssh would read as more",
    ),
    (
        "target-adb-two-processes",
        "`package` and `pid` exclude each other: a relation between keys",
    ),
    (
        "target-push-without-model",
        "a pushed file must be named under engine",
    ),
    (
        "target-remote-exec",
        "a remote target and an exec driver are two places",
    ),
    (
        "target-remote-in-process",
        "a remote target and engine.isolate: false are two places",
    ),
    (
        "target-ssh-bad-option",
        "a host, user, option or serial is checked for text a shell or ssh would read as more",
    ),
    (
        "target-ssh-host-option",
        "a host, user, option or serial is checked for text a shell or ssh would read as more",
    ),
    (
        "target-ssh-host-quote",
        "a host, user, option or serial is checked for text a shell or ssh would read as more",
    ),
    (
        "target-ssh-host-space",
        "a host, user, option or serial is checked for text a shell or ssh would read as more",
    ),
    (
        "target-ssh-host-substitution",
        "a host, user, option or serial is checked for text a shell or ssh would read as more",
    ),
    (
        "target-ssh-include",
        "the ssh option allowlist is matched in any case, which a portable pattern cannot say",
    ),
    (
        "target-ssh-known-hosts-command",
        "the ssh option allowlist is matched in any case, which a portable pattern cannot say",
    ),
    (
        "target-ssh-local-command",
        "the ssh option allowlist is matched in any case, which a portable pattern cannot say",
    ),
    (
        "target-ssh-match-exec",
        "the ssh option allowlist is matched in any case, which a portable pattern cannot say",
    ),
    (
        "target-ssh-option-newline",
        "a host, user, option or serial is checked for text a shell or ssh would read as more",
    ),
    (
        "target-ssh-proxy-command",
        "the ssh option allowlist is matched in any case, which a portable pattern cannot say",
    ),
    (
        "target-ssh-proxy-jump",
        "the ssh option allowlist is matched in any case, which a portable pattern cannot say",
    ),
    (
        "target-ssh-user-at-option",
        "a host, user, option or serial is checked for text a shell or ssh would read as more",
    ),
    (
        "target-ssh-user-twice",
        "a user in `user` and in `host` are two values",
    ),
    (
        "too-many-turns-with-warmup",
        "a limit on warmup_turns + turns",
    ),
    (
        "unknown-opencl-profile",
        "which keys and values a backend takes is its own check (docs/backends.md)",
    ),
    (
        "unknown-profile",
        "which keys and values a backend takes is its own check (docs/backends.md)",
    ),
];

/// Malformed fixtures that are not one well-formed YAML document (bad bytes, bad syntax, two
/// documents, duplicate keys, alias bombs, absurd nesting): an editor's YAML parser reports them
/// before any schema applies.
const NOT_ONE_YAML_DOCUMENT: &[&str] = &[
    "alias-bomb",
    "binary-garbage",
    "deep-nesting",
    "duplicate-key",
    "duplicate-nested-key",
    "latin1-text",
    "next-line-in-comment",
    "nul-in-comment",
    "syntax-error",
    "two-documents",
];

fn bad_fixture_path(name: &str) -> PathBuf {
    workspace()
        .join("fixtures/bad")
        .join(format!("{name}.yaml"))
}

fn bad_fixture(name: &str) -> String {
    let path = bad_fixture_path(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[test]
fn structural_defects_are_rejected_where_they_are() {
    let mut failures = Vec::new();
    for (name, pointer, keyword) in SCHEMA_REJECTS {
        let text = bad_fixture(name);
        assert!(parse(&text).is_err(), "{name}: leakloop accepts it");
        let errors = violations(&text);
        if !errors.iter().any(|(p, k, _)| p == pointer && k == keyword) {
            failures.push(format!(
                "{name}: no `{keyword}` violation at `{pointer}`; got {errors:#?}"
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn semantic_defects_pass_the_schema_and_fail_the_check() {
    for (name, why) in BEYOND_SCHEMA {
        let text = bad_fixture(name);
        let err = parse(&text).expect_err(name);
        assert_eq!(err.kind(), ScenarioErrorKind::Invalid, "{name}: {err}");
        assert_eq!(
            violations(&text),
            [],
            "{name} is listed as beyond the schema ({why}); if the schema now rejects it, move it \
             to SCHEMA_REJECTS"
        );
    }
}

#[test]
fn broken_yaml_is_rejected_before_the_schema() {
    for name in NOT_ONE_YAML_DOCUMENT {
        let err = load_scenario(&bad_fixture_path(name)).expect_err(name);
        assert!(
            matches!(
                err.kind(),
                ScenarioErrorKind::Encoding
                    | ScenarioErrorKind::Syntax
                    | ScenarioErrorKind::DuplicateKey
                    | ScenarioErrorKind::TooComplex
            ),
            "{name} is listed as broken YAML, but leakloop says {:?}: {err}",
            err.kind()
        );
    }
}

/// A new malformed fixture must be sorted into one of the lists above.
#[test]
fn every_bad_fixture_is_classified() {
    let on_disk: BTreeSet<String> = std::fs::read_dir(workspace().join("fixtures/bad"))
        .expect("fixtures/bad exists")
        .map(|e| e.expect("readable entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .map(|p| p.file_stem().unwrap().to_string_lossy().into_owned())
        .collect();
    let listed: Vec<&str> = SCHEMA_REJECTS
        .iter()
        .map(|(n, _, _)| *n)
        .chain(BEYOND_SCHEMA.iter().map(|(n, _)| *n))
        .chain(NOT_ONE_YAML_DOCUMENT.iter().copied())
        .collect();
    let listed_set: BTreeSet<String> = listed.iter().map(|n| n.to_string()).collect();
    assert_eq!(listed.len(), listed_set.len(), "a fixture is listed twice");
    assert_eq!(listed_set, on_disk);
}

// ---- The schema's lists and limits are the DSL's ----

#[test]
fn metric_lists_are_the_dsl_constants() {
    assert_eq!(strings(at("/$defs/metric/enum")), METRICS);
    let expect_keys = keys("/$defs/expect/properties");
    let wanted: BTreeSet<String> = ["balanced", "max_live"]
        .into_iter()
        .chain(METRICS.iter().copied())
        .map(str::to_owned)
        .collect();
    assert_eq!(expect_keys, wanted);
}

/// The schema's metrics are the registry's, in its order and with its meanings: adding a metric
/// to the registry without the schema (or the other way round) fails here.
#[test]
fn schema_metrics_are_the_registry() {
    let names: Vec<&str> = leakloop::registry::names().collect();
    assert_eq!(strings(at("/$defs/metric/enum")), names);
    for metric in leakloop::registry::REGISTRY {
        let pointer = format!("/$defs/expect/properties/{}/description", metric.name);
        assert_eq!(
            at(&pointer).as_str(),
            Some(format!("Limits on `{}`: {}.", metric.name, metric.meaning).as_str()),
            "{pointer}"
        );
    }
}

// ---- Values with units: the schema's patterns agree with leakloop's parsers ----

/// Where a value of each kind goes in a scenario (`X` is replaced by the value as YAML).
const SIZE_AT: &str = "expect: {rss: {max_growth_per_turn: X}}";
const TOLERANCE_AT: &str = "expect: {rss: {tolerance: X}}";
const DURATION_AT: &str = "sample: {settle: X}";
const TIMEOUT_AT: &str = "engine: {backend: sim, profile: cpu-flat, call_timeout: X}";
const PROFILE_SIZE_AT: &str = "profiles: {p: {weights: X}}";
const PROFILE_DURATION_AT: &str = "profiles: {p: {timing: {load: X}}}";

fn scenario_with(place: &str, value: &str) -> String {
    let entry = place.replace('X', value);
    if place.starts_with("engine:") {
        MINIMAL.replace("engine: {backend: sim, profile: cpu-flat}", &entry)
    } else {
        format!("{MINIMAL}{entry}\n")
    }
}

#[rstest::rstest]
// DSL sizes: integer bytes, or a number and one of B, KB, MB, GB, KiB, MiB, GiB.
#[case::size_zero(SIZE_AT, "0", true)]
#[case::size_bytes(SIZE_AT, "1048576", true)]
#[case::size_b(SIZE_AT, "12B", true)]
#[case::size_kb(SIZE_AT, "3KB", true)]
#[case::size_mb(SIZE_AT, "5MB", true)]
#[case::size_gb(SIZE_AT, "2GB", true)]
#[case::size_kib(SIZE_AT, "3KiB", true)]
#[case::size_mib(SIZE_AT, "5MiB", true)]
#[case::size_gib(SIZE_AT, "2GiB", true)]
#[case::size_spaced(SIZE_AT, "1 MiB", true)]
#[case::size_padded(SIZE_AT, "' 5MiB '", true)]
#[case::size_fraction(SIZE_AT, "1.5GiB", true)]
#[case::size_float_whole(SIZE_AT, "1.0", true)]
#[case::size_exponent_number(SIZE_AT, "1e3", true)]
#[case::size_quoted_bytes(SIZE_AT, "'4096'", true)]
#[case::size_lowercase(SIZE_AT, "5mib", false)]
#[case::size_bits(SIZE_AT, "5Mib", false)]
#[case::size_terabytes(SIZE_AT, "1TB", false)]
#[case::size_negative(SIZE_AT, "-5MiB", false)]
#[case::size_negative_number(SIZE_AT, "-5", false)]
#[case::size_unit_only(SIZE_AT, "MiB", false)]
#[case::size_fractional_bytes(SIZE_AT, "1.5", false)]
#[case::size_quoted_fractional_bytes(SIZE_AT, "'1.5'", false)]
#[case::size_two_dots(SIZE_AT, "1.2.3MiB", false)]
#[case::size_half_byte(SIZE_AT, "0.5B", false)]
#[case::size_whole_bytes_as_decimal(SIZE_AT, "2.0B", true)]
#[case::size_minutes(SIZE_AT, "5m", false)]
#[case::size_trailing_dot(SIZE_AT, "1.MiB", false)]
#[case::size_leading_dot(SIZE_AT, ".5MiB", false)]
#[case::size_plus(SIZE_AT, "'+5'", false)]
#[case::size_quoted_exponent(SIZE_AT, "'1e3'", false)]
#[case::size_percent(SIZE_AT, "2%", false)]
#[case::size_list(SIZE_AT, "[1]", false)]
// Tolerances: a size or a percentage.
#[case::tolerance_percent(TOLERANCE_AT, "2%", true)]
#[case::tolerance_spaced_percent(TOLERANCE_AT, "0.5 %", true)]
#[case::tolerance_zero_percent(TOLERANCE_AT, "0%", true)]
#[case::tolerance_size(TOLERANCE_AT, "5MiB", true)]
#[case::tolerance_bytes(TOLERANCE_AT, "0", true)]
#[case::tolerance_negative(TOLERANCE_AT, "-2%", false)]
#[case::tolerance_trailing_dot(TOLERANCE_AT, "2.%", false)]
#[case::tolerance_bare_percent(TOLERANCE_AT, "'%'", false)]
#[case::tolerance_size_percent(TOLERANCE_AT, "'5MiB %'", false)]
#[case::tolerance_word(TOLERANCE_AT, "two%", false)]
#[case::tolerance_exponent(TOLERANCE_AT, "1e2%", false)]
// DSL durations: a number and ms, s or m; 0 alone.
#[case::duration_zero(DURATION_AT, "0", true)]
#[case::duration_zero_float(DURATION_AT, "0.0", true)]
#[case::duration_zero_text(DURATION_AT, "'0'", true)]
#[case::duration_zero_ms(DURATION_AT, "0ms", true)]
#[case::duration_millis(DURATION_AT, "500ms", true)]
#[case::duration_seconds(DURATION_AT, "8s", true)]
#[case::duration_minutes(DURATION_AT, "2m", true)]
#[case::duration_micros(DURATION_AT, "900us", true)]
#[case::duration_fraction(DURATION_AT, "1.5s", true)]
#[case::duration_padded(DURATION_AT, "' 1 s '", true)]
#[case::duration_no_unit(DURATION_AT, "8", false)]
#[case::duration_float_no_unit(DURATION_AT, "1.0", false)]
#[case::duration_hours(DURATION_AT, "1h", false)]
#[case::duration_spelled(DURATION_AT, "8sec", false)]
#[case::duration_typo(DURATION_AT, "8mss", false)]
#[case::duration_negative(DURATION_AT, "-1s", false)]
#[case::duration_trailing_dot(DURATION_AT, "1.s", false)]
#[case::duration_leading_dot(DURATION_AT, ".5s", false)]
#[case::duration_compound(DURATION_AT, "1m30s", false)]
#[case::duration_uppercase(DURATION_AT, "8S", false)]
#[case::timeout_seconds(TIMEOUT_AT, "30s", true)]
#[case::timeout_zero(TIMEOUT_AT, "0", false)]
#[case::timeout_zero_seconds(TIMEOUT_AT, "0s", false)]
#[case::timeout_zero_fraction(TIMEOUT_AT, "0.0ms", false)]
// Simulator profile sizes (bytesize): case-insensitive units up to exabytes.
#[case::profile_size_mib(PROFILE_SIZE_AT, "110MiB", true)]
#[case::profile_size_decimal(PROFILE_SIZE_AT, "1.5GB", true)]
#[case::profile_size_spaced(PROFILE_SIZE_AT, "64 KiB", true)]
#[case::profile_size_bytes(PROFILE_SIZE_AT, "4096", true)]
#[case::profile_size_quoted_bytes(PROFILE_SIZE_AT, "'4096'", true)]
#[case::profile_size_lowercase(PROFILE_SIZE_AT, "5mb", false)]
#[case::profile_size_letter(PROFILE_SIZE_AT, "5 k", false)]
#[case::profile_size_short_binary(PROFILE_SIZE_AT, "5Mi", false)]
#[case::profile_size_trailing_dot(PROFILE_SIZE_AT, "1.MB", false)]
#[case::profile_size_leading_dot(PROFILE_SIZE_AT, ".5MB", false)]
#[case::profile_size_plus(PROFILE_SIZE_AT, "'+5'", false)]
#[case::profile_size_float(PROFILE_SIZE_AT, "1.5", false)]
#[case::profile_size_quoted_float(PROFILE_SIZE_AT, "'1.5'", false)]
#[case::profile_size_trailing_space(PROFILE_SIZE_AT, "'5MiB '", true)]
#[case::profile_size_leading_space(PROFILE_SIZE_AT, "' 5MiB'", true)]
#[case::profile_size_unknown_unit(PROFILE_SIZE_AT, "5XB", false)]
#[case::profile_size_negative(PROFILE_SIZE_AT, "-5", false)]
#[case::profile_size_negative_unit(PROFILE_SIZE_AT, "-5MiB", false)]
#[case::profile_size_two_dots(PROFILE_SIZE_AT, "1.2.3MB", false)]
#[case::profile_size_empty(PROFILE_SIZE_AT, "''", false)]
// Simulator profile durations (humantime): one or more number-unit pairs.
#[case::profile_duration_millis(PROFILE_DURATION_AT, "40ms", true)]
#[case::profile_duration_micros(PROFILE_DURATION_AT, "900us", true)]
#[case::profile_duration_micro_sign(PROFILE_DURATION_AT, "900µs", false)]
#[case::profile_duration_fraction(PROFILE_DURATION_AT, "1.5s", true)]
#[case::profile_duration_spaced(PROFILE_DURATION_AT, "3 s", true)]
#[case::profile_duration_words(PROFILE_DURATION_AT, "5 seconds", false)]
#[case::profile_duration_compound(PROFILE_DURATION_AT, "1h 2m", false)]
#[case::profile_duration_joined(PROFILE_DURATION_AT, "1s2ms", false)]
#[case::profile_duration_month(PROFILE_DURATION_AT, "1M", false)]
#[case::profile_duration_integer(PROFILE_DURATION_AT, "5", false)]
#[case::profile_duration_text_number(PROFILE_DURATION_AT, "'5'", false)]
#[case::profile_duration_trailing_dot(PROFILE_DURATION_AT, "1.s", false)]
#[case::profile_duration_unknown_unit(PROFILE_DURATION_AT, "5 fortnights", false)]
#[case::profile_duration_uppercase(PROFILE_DURATION_AT, "5S", false)]
#[case::profile_duration_negative(PROFILE_DURATION_AT, "-5s", false)]
#[case::profile_duration_trailing_number(PROFILE_DURATION_AT, "1s2", false)]
#[case::profile_size_bits(PROFILE_SIZE_AT, "5Mib", false)]
#[case::profile_size_minutes(PROFILE_SIZE_AT, "5m", false)]
#[case::profile_size_half_byte(PROFILE_SIZE_AT, "0.5B", false)]
#[case::profile_duration_zero(PROFILE_DURATION_AT, "0", true)]
fn unit_values_agree(#[case] place: &str, #[case] value: &str, #[case] valid: bool) {
    let text = scenario_with(place, value);
    let parsed = parse(&text);
    assert_eq!(
        parsed.is_ok(),
        valid,
        "leakloop on `{value}`: {:?}",
        parsed.err().map(|e| e.to_string())
    );
    assert_eq!(
        schema_accepts(&text),
        valid,
        "schema on `{value}`: {:#?}",
        violations(&text)
    );
}

/// Every unit leakloop names when it rejects an unknown one is accepted by the schema, as a
/// whole and as a fractional number: a unit added to the DSL must be added to the schema too.
#[rstest::rstest]
#[case::size(SIZE_AT, "5zz")]
#[case::duration(DURATION_AT, "5zz")]
fn every_dsl_unit_is_in_the_schema(#[case] place: &str, #[case] unknown: &str) {
    let err = parse(&scenario_with(place, unknown)).expect_err(unknown);
    assert!(err.expected().len() >= 3, "{err}");
    for unit in err.expected() {
        // A size in bytes is whole: `1.5B` is refused by both.
        let fraction = if unit == "B" { "1.0" } else { "1.5" };
        for number in ["5", fraction] {
            let text = scenario_with(place, &format!("{number}{unit}"));
            assert!(parse(&text).is_ok(), "{number}{unit}");
            assert!(
                schema_accepts(&text),
                "{number}{unit}: {:#?}",
                violations(&text)
            );
        }
    }
}
