//! JSON Schemas of sizes, durations and tolerances as users write them (feature `schema`), for
//! `#[schemars(schema_with = "...")]` on the fields that hold them: the patterns accept what
//! [`parse_size`](crate::parse_size) and [`parse_duration`](crate::parse_duration) accept, so an
//! editor flags a unit typo as the parser would.

use schemars::{json_schema, Schema, SchemaGenerator};

/// A size: whole bytes, or a number and a unit.
const SIZE_PATTERN: &str =
    r"^\s*([0-9]+|[0-9]+(\.[0-9]+)?\s*(KB|MB|GB|KiB|MiB|GiB)|[0-9]+(\.0+)?\s*B)\s*$";

/// A duration: a number and a unit, or zero alone.
const DURATION_PATTERN: &str = r"^\s*(0+(\.0+)?|[0-9]+(\.[0-9]+)?\s*(us|ms|s|m))\s*$";

/// A duration of zero, with or without a unit.
const ZERO_DURATION_PATTERN: &str = r"^\s*0+(\.0+)?\s*(us|ms|s|m)?\s*$";

/// A size or a percentage.
const TOLERANCE_PATTERN: &str =
    r"^\s*([0-9]+|[0-9]+(\.[0-9]+)?\s*(KB|MB|GB|KiB|MiB|GiB|%)|[0-9]+(\.0+)?\s*B)\s*$";

/// A size (`5MiB`, `1048576`).
pub fn size(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "description": "A size: a whole number of bytes (`1048576`) or a number and a unit: B, KB, MB, GB (powers of 1000), KiB, MiB, GiB (powers of 1024), e.g. `5MiB`, `1.5GB`. Units are case-sensitive.",
        "type": ["integer", "string"],
        "minimum": 0,
        "pattern": SIZE_PATTERN,
        "examples": ["5MiB", "1.5GB", 1048576]
    })
}

/// A duration (`500ms`, `8s`); a bare number only as `0`.
pub fn duration(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "description": "A duration: a number and a unit: us, ms, s, m (`900us`, `500ms`, `8s`, `1.5m`); `0` alone is allowed; at most one day.",
        "type": ["number", "string"],
        "minimum": 0,
        "maximum": 0,
        "pattern": DURATION_PATTERN,
        "examples": ["500ms", "8s"]
    })
}

/// A duration more than zero (a timeout).
pub fn positive_duration(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "description": "A duration more than 0: a number and a unit: us, ms, s, m (`500ms`, `8s`, `1.5m`); at most one day.",
        "type": ["number", "string"],
        "minimum": 0,
        "maximum": 0,
        "pattern": DURATION_PATTERN,
        "not": {"anyOf": [{"const": 0}, {"type": "string", "pattern": ZERO_DURATION_PATTERN}]},
        "examples": ["60s"]
    })
}

/// A size or a percentage of a baseline (`5MiB`, `2%`).
pub fn tolerance(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "description": "A size (`5MiB`) or a percentage of the baseline (`2%`, `0.5%`).",
        "type": ["integer", "string"],
        "minimum": 0,
        "pattern": TOLERANCE_PATTERN,
        "examples": ["5MiB", "2%"]
    })
}

/// A duration, or a percentage of the first turn's time (`5ms`, `20%`).
pub fn time_tolerance(gen: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "description": "A duration, or a percentage such as `20%`.",
        "anyOf": [
            duration(gen),
            { "type": "string", "pattern": r"^\s*[0-9]+(\.[0-9]+)?\s*%\s*$" }
        ]
    })
}
