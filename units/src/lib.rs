//! The one parser for every size and duration a leakloop user types: the scenario DSL, inline
//! simulator profiles (through [`serde`]) and the command line (`analyze --tolerance`); and the
//! one formatter that writes sizes, times, changes and rates back for people ([`format_bytes`],
//! [`format_signed_bytes`], [`format_nanos`], [`Quantity`]).
//!
//! It lives in its own small crate because `sim-backend` (which deserializes profiles) sits below
//! the harness (which validates scenarios), and both must read `5MiB` the same way. The set of
//! units is deliberately small (documented in the README) so that a typo such as `5Mib` is an
//! error with a suggestion rather than a silently different number.
#![warn(missing_docs)]

mod format;
#[cfg(feature = "schema")]
pub mod schema;
pub mod serde;
mod suggest;

use std::time::Duration;

pub use format::{
    format_bytes, format_bytes_per_turn, format_nanos, format_signed_bytes, format_signed_nanos,
    format_size, Quantity,
};
pub use suggest::did_you_mean;

/// Size units: name and bytes.
pub const SIZE_UNITS: &[(&str, u64)] = &[
    ("B", 1),
    ("KB", 1_000),
    ("MB", 1_000_000),
    ("GB", 1_000_000_000),
    ("KiB", 1 << 10),
    ("MiB", 1 << 20),
    ("GiB", 1 << 30),
];

/// Duration units: name and nanoseconds.
pub const DURATION_UNITS: &[(&str, u64)] = &[
    ("us", 1_000),
    ("ms", 1_000_000),
    ("s", 1_000_000_000),
    ("m", 60_000_000_000),
];

/// The longest duration accepted: a day is far beyond any settle time, idle step, call timeout
/// or simulated engine call.
pub const MAX_DURATION: Duration = Duration::from_secs(86_400);

/// Why a value with a unit did not parse.
#[derive(Debug, Clone, PartialEq)]
pub struct UnitError {
    /// What is wrong, without the field name (the caller adds it).
    pub message: String,
    /// A unit close to the one written, if any.
    pub suggestion: Option<String>,
    /// The units that would have been accepted, when the unit was the problem.
    pub expected: Vec<String>,
}

impl UnitError {
    fn new(message: impl Into<String>) -> Self {
        UnitError {
            message: message.into(),
            suggestion: None,
            expected: Vec::new(),
        }
    }

    /// The message for a value `text` of kind `what` (`size`, `duration`, `tolerance`):
    /// ``bad size `5Mib`: unknown size unit `Mib` ``.
    pub fn describe(&self, what: &str, text: &str) -> String {
        format!("bad {what} `{}`: {}", text.trim(), self.message)
    }

    /// [`UnitError::describe`] with the suggestion or the accepted units on the same line, for
    /// messages that have no room for notes (command-line values).
    pub fn one_line(&self, what: &str, text: &str) -> String {
        let mut line = self.describe(what, text);
        if let Some(suggestion) = &self.suggestion {
            line.push_str(&format!("; did you mean `{suggestion}`?"));
        } else if !self.expected.is_empty() {
            let names: Vec<String> = self.expected.iter().map(|n| format!("`{n}`")).collect();
            line.push_str(&format!("; expected one of {}", names.join(", ")));
        }
        line
    }
}

/// Splits `12.5 MiB` into (`12.5`, `MiB`); the unit may be empty.
fn split_number(text: &str) -> (&str, &str) {
    let text = text.trim();
    let end = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(text.len());
    (&text[..end], text[end..].trim_start())
}

/// Parses the number part: an integer or a decimal, never negative.
fn parse_number(number: &str, text: &str, what: &str) -> Result<f64, UnitError> {
    if text.trim_start().starts_with('-') {
        return Err(UnitError::new(format!("{what} cannot be negative")));
    }
    if number.is_empty() || number.starts_with('.') || number.ends_with('.') {
        return Err(UnitError::new(format!(
            "expected {what} as a number followed by a unit"
        )));
    }
    number
        .parse::<f64>()
        .map_err(|_| UnitError::new(format!("`{number}` is not a number")))
}

/// Looks `unit` up in `table`, or explains which units exist.
fn find_unit(unit: &str, table: &[(&str, u64)], what: &str) -> Result<u64, UnitError> {
    if let Some((_, factor)) = table.iter().find(|(name, _)| *name == unit) {
        return Ok(*factor);
    }
    let names: Vec<&str> = table.iter().map(|(name, _)| *name).collect();
    Err(UnitError {
        message: format!("unknown {what} unit `{unit}`"),
        suggestion: did_you_mean(unit, names.iter().copied()),
        expected: names.iter().map(|n| n.to_string()).collect(),
    })
}

/// Parses a size: integer bytes (`1048576`) or a number with a unit (`1MiB`, `1.5 GB`). A size
/// is a whole number of bytes: `1.5` and `0.5B` are refused.
pub fn parse_size(text: &str) -> Result<u64, UnitError> {
    let (number, unit) = split_number(text);
    let value = parse_number(number, text, "a size")?;
    let factor = if unit.is_empty() {
        if number.contains('.') {
            return Err(UnitError::new(
                "a size without a unit is a whole number of bytes",
            ));
        }
        1
    } else {
        find_unit(unit, SIZE_UNITS, "size")?
    };
    if factor == 1 && value.fract() != 0.0 {
        return Err(UnitError::new("a size in bytes is a whole number"));
    }
    let bytes = (value * factor as f64).round();
    if !bytes.is_finite() || bytes >= u64::MAX as f64 {
        return Err(UnitError::new("size is too large"));
    }
    if unit.is_empty() {
        // Integers are exact; do not go through f64.
        return number
            .parse::<u64>()
            .map_err(|_| UnitError::new("size is too large"));
    }
    Ok(bytes as u64)
}

/// Parses a duration: a number with `us`, `ms`, `s` or `m` (`900us`, `500ms`, `8s`, `1.5m`);
/// `0` alone is allowed; at most [`MAX_DURATION`].
pub fn parse_duration(text: &str) -> Result<Duration, UnitError> {
    let (number, unit) = split_number(text);
    let value = parse_number(number, text, "a duration")?;
    if unit.is_empty() {
        if value == 0.0 {
            return Ok(Duration::ZERO);
        }
        return Err(UnitError {
            message: "a duration needs a unit".into(),
            suggestion: None,
            expected: DURATION_UNITS.iter().map(|(n, _)| n.to_string()).collect(),
        });
    }
    let factor = find_unit(unit, DURATION_UNITS, "duration")?;
    let nanos = (value * factor as f64).round();
    if nanos > MAX_DURATION.as_nanos() as f64 {
        return Err(UnitError::new("duration is longer than a day"));
    }
    Ok(Duration::from_nanos(nanos as u64))
}

/// Parses a percentage without its `%` sign (`2`, `0.5`), never negative.
pub fn parse_percent(text: &str) -> Result<f64, UnitError> {
    let text = text.trim();
    let value = parse_number(text, text, "a percentage")?;
    if text.contains(|c: char| !(c.is_ascii_digit() || c == '.')) {
        return Err(UnitError::new(format!("`{text}` is not a number")));
    }
    Ok(value)
}

/// Writes a duration the way [`parse_duration`] reads it back exactly: whole milliseconds as
/// `40ms`, anything finer in microseconds (`900us`, `1.5us`).
pub fn format_duration(duration: Duration) -> String {
    let nanos = duration.as_nanos();
    if nanos.is_multiple_of(1_000_000) {
        format!("{}ms", nanos / 1_000_000)
    } else if nanos.is_multiple_of(1_000) {
        format!("{}us", nanos / 1_000)
    } else {
        format!("{}.{:03}us", nanos / 1_000, nanos % 1_000)
    }
}

#[cfg(test)]
mod tests;
