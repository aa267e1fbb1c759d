//! Deserializers for sizes and durations in serde types that a user writes (the simulator's
//! inline profiles), reading text with the same parser as the DSL.
//!
//! serde carries an error as text, so a unit error is written as
//! ``bad size `5Mib`: unknown size unit `Mib` (expected one of `B`, ...)`` and
//! [`explain_message`] turns it back into the message, suggestion and expected units the DSL
//! shows for the same mistake.

use std::fmt;
use std::time::Duration;

use serde::de::{self, Deserializer, Visitor};
use serde::Serializer;

use crate::{did_you_mean, format_duration, parse_duration, parse_size, UnitError};

/// Joins the expected units onto a unit error's message.
const EXPECTED: &str = " (expected one of ";

fn to_message(what: &str, text: &str, err: &UnitError) -> String {
    let mut message = err.describe(what, text);
    if !err.expected.is_empty() {
        let names: Vec<String> = err.expected.iter().map(|n| format!("`{n}`")).collect();
        message.push_str(&format!("{EXPECTED}{})", names.join(", ")));
    }
    message
}

/// Reads back a message written by these deserializers: (message, suggestion, expected units),
/// or `None` for any other message.
pub fn explain_message(message: &str) -> Option<(String, Option<String>, Vec<String>)> {
    if !(message.starts_with("bad size `") || message.starts_with("bad duration `")) {
        return None;
    }
    let Some((head, list)) = message.split_once(EXPECTED) else {
        return Some((message.to_owned(), None, Vec::new()));
    };
    let expected: Vec<String> = list
        .split('`')
        .skip(1)
        .step_by(2)
        .map(str::to_owned)
        .collect();
    // The unit written is the last backticked word: "bad size `5Mib`: unknown size unit `Mib`".
    let written = head
        .split('`')
        .skip(1)
        .step_by(2)
        .last()
        .unwrap_or_default();
    let suggestion = did_you_mean(written, expected.iter().map(String::as_str));
    Some((head.to_owned(), suggestion, expected))
}

struct SizeVisitor;

impl Visitor<'_> for SizeVisitor {
    type Value = u64;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a size: whole bytes or a number and a unit, e.g. 110MiB")
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<u64, E> {
        Ok(v)
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<u64, E> {
        u64::try_from(v)
            .map_err(|_| E::custom(format!("bad size `{v}`: a size cannot be negative")))
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<u64, E> {
        self.visit_str(&v.to_string())
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<u64, E> {
        parse_size(v).map_err(|e| E::custom(to_message("size", v, &e)))
    }
}

struct DurationVisitor;

impl Visitor<'_> for DurationVisitor {
    type Value = Duration;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a duration: a number and us, ms, s or m, e.g. 40ms")
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Duration, E> {
        self.visit_str(&v.to_string())
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Duration, E> {
        self.visit_str(&v.to_string())
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Duration, E> {
        self.visit_str(&v.to_string())
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Duration, E> {
        parse_duration(v).map_err(|e| E::custom(to_message("duration", v, &e)))
    }
}

/// Deserializes a size in bytes: an integer, or text such as `110MiB` ([`parse_size`]).
pub fn size<'de, D: Deserializer<'de>>(deserializer: D) -> Result<u64, D::Error> {
    deserializer.deserialize_any(SizeVisitor)
}

/// Deserializes a duration written as text such as `40ms` ([`parse_duration`]).
pub fn duration<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Duration, D::Error> {
    deserializer.deserialize_any(DurationVisitor)
}

/// Serializes a duration as text [`duration`] reads back exactly ([`format_duration`]).
pub fn serialize_duration<S: Serializer>(d: &Duration, serializer: S) -> Result<S::Ok, S::Error> {
    serializer.serialize_str(&format_duration(*d))
}
