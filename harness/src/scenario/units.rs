//! Sizes, durations and tolerances with units, as the DSL writes them.
//!
//! The DSL accepts a deliberately small set of units (documented in the README) so that a typo
//! such as `5Mib` is an error with a suggestion rather than a silently different number.

use std::time::Duration;

use crate::scenario::model::Tolerance;

/// Size units: name and bytes.
pub(crate) const SIZE_UNITS: &[(&str, u64)] = &[
    ("B", 1),
    ("KB", 1_000),
    ("MB", 1_000_000),
    ("GB", 1_000_000_000),
    ("KiB", 1 << 10),
    ("MiB", 1 << 20),
    ("GiB", 1 << 30),
];

/// Duration units: name and milliseconds.
pub(crate) const DURATION_UNITS: &[(&str, u64)] = &[("ms", 1), ("s", 1_000), ("m", 60_000)];

/// Why a value with a unit did not parse.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct UnitError {
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
        suggestion: crate::scenario::error::did_you_mean(unit, names.iter().copied()),
        expected: names.iter().map(|n| n.to_string()).collect(),
    })
}

/// Parses a size: integer bytes (`1048576`) or a number with a unit (`1MiB`, `1.5 GB`).
pub(crate) fn parse_size(text: &str) -> Result<u64, UnitError> {
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

/// Parses a duration: a number with `ms`, `s` or `m` (`500ms`, `8s`, `1.5m`); `0` alone is allowed.
pub(crate) fn parse_duration(text: &str) -> Result<Duration, UnitError> {
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
    let millis = value * factor as f64;
    // A day is far beyond any sensible settle time, idle step or call timeout.
    if millis > 86_400_000.0 {
        return Err(UnitError::new("duration is longer than a day"));
    }
    Ok(Duration::from_secs_f64(millis / 1000.0))
}

/// Parses a tolerance: a size, or a percentage of the baseline (`2%`, `0.5%`).
pub(crate) fn parse_tolerance(text: &str) -> Result<Tolerance, UnitError> {
    let trimmed = text.trim();
    if let Some(percent) = trimmed.strip_suffix('%') {
        let percent = percent.trim_end();
        let value = parse_number(percent, percent, "a percentage")?;
        if percent.contains(|c: char| !(c.is_ascii_digit() || c == '.')) {
            return Err(UnitError::new(format!("`{percent}` is not a number")));
        }
        return Ok(Tolerance::Percent(value));
    }
    parse_size(text).map(Tolerance::Bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;

    #[rstest]
    #[case::bare_bytes("1048576", 1_048_576)]
    #[case::bytes_unit("12B", 12)]
    #[case::kb("3KB", 3_000)]
    #[case::mb("5MB", 5_000_000)]
    #[case::gb("2GB", 2_000_000_000)]
    #[case::kib("3KiB", 3_072)]
    #[case::mib("5MiB", 5 * 1_048_576)]
    #[case::gib("2GiB", 2 * 1_073_741_824)]
    #[case::space("1 MiB", 1_048_576)]
    #[case::fraction("1.5GiB", 1_610_612_736)]
    #[case::zero("0", 0)]
    fn sizes(#[case] text: &str, #[case] bytes: u64) {
        assert_eq!(parse_size(text), Ok(bytes));
    }

    #[rstest]
    #[case::lowercase_unit("5mib", "unknown size unit `mib`", Some("MiB"))]
    #[case::bits("5Mib", "unknown size unit `Mib`", Some("MiB"))]
    #[case::terabytes("1TB", "unknown size unit `TB`", None)]
    #[case::negative("-5MiB", "a size cannot be negative", None)]
    #[case::no_number("MiB", "expected a size as a number followed by a unit", None)]
    #[case::fractional_bytes("1.5", "a size without a unit is a whole number of bytes", None)]
    #[case::two_dots("1.2.3MiB", "`1.2.3` is not a number", None)]
    #[case::too_large("99999999999999999999", "size is too large", None)]
    fn bad_sizes(#[case] text: &str, #[case] message: &str, #[case] suggestion: Option<&str>) {
        let err = parse_size(text).unwrap_err();
        assert_eq!(err.message, message);
        assert_eq!(err.suggestion.as_deref(), suggestion);
    }

    #[rstest]
    #[case::millis("500ms", Duration::from_millis(500))]
    #[case::seconds("8s", Duration::from_secs(8))]
    #[case::minutes("2m", Duration::from_secs(120))]
    #[case::fraction("1.5s", Duration::from_millis(1500))]
    #[case::zero("0", Duration::ZERO)]
    #[case::zero_ms("0ms", Duration::ZERO)]
    fn durations(#[case] text: &str, #[case] duration: Duration) {
        assert_eq!(parse_duration(text), Ok(duration));
    }

    #[rstest]
    #[case::no_unit("8", "a duration needs a unit", None)]
    #[case::hours("1h", "unknown duration unit `h`", None)]
    #[case::spelled("8sec", "unknown duration unit `sec`", None)]
    #[case::millis_typo("8mss", "unknown duration unit `mss`", Some("ms"))]
    #[case::negative("-1s", "a duration cannot be negative", None)]
    #[case::too_long("2000m", "duration is longer than a day", None)]
    fn bad_durations(#[case] text: &str, #[case] message: &str, #[case] suggestion: Option<&str>) {
        let err = parse_duration(text).unwrap_err();
        assert_eq!(err.message, message);
        assert_eq!(err.suggestion.as_deref(), suggestion);
    }

    #[rstest]
    #[case::percent("2%", Tolerance::Percent(2.0))]
    #[case::fraction_percent("0.5 %", Tolerance::Percent(0.5))]
    #[case::bytes("5MiB", Tolerance::Bytes(5 * 1_048_576))]
    fn tolerances(#[case] text: &str, #[case] tolerance: Tolerance) {
        assert_eq!(parse_tolerance(text), Ok(tolerance));
    }

    #[rstest]
    #[case::negative_percent("-2%", "a percentage cannot be negative")]
    #[case::word_percent("two%", "`two` is not a number")]
    #[case::unit_percent("2MiB%", "`2MiB` is not a number")]
    fn bad_tolerances(#[case] text: &str, #[case] message: &str) {
        assert_eq!(parse_tolerance(text).unwrap_err().message, message);
    }
}
