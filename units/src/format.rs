//! The one way leakloop writes amounts for people: sizes in binary units, measured times, signed
//! changes and rates per turn. Every renderer (terminal, summary.md, junit, the plot, compare,
//! bisect, history, the analyzer's reasons) goes through these, so that one amount reads the same
//! everywhere.
//!
//! The spellings, decided once:
//! - a size: `512 B`, `1.5 KiB`, `110.0 MiB`, up to `16.0 EiB` (bytes as a whole number, one
//!   decimal above);
//! - a signed change: `+110.0 MiB`, `-4.0 KiB`, and `0 B` without a sign when it rounds to
//!   nothing (likewise `0 ns`);
//! - a time: three significant figures in ns, us, ms or s ([`format_nanos`]);
//! - a rate: the signed change followed by `/turn`;
//! - not a number: `n/a`; an infinite amount (an interval that cannot be bounded): `unbounded`,
//!   signed where the amount is.

/// Binary size units above bytes, each 1024 times the one before.
const BINARY_UNITS: [&str; 6] = ["KiB", "MiB", "GiB", "TiB", "PiB", "EiB"];

/// What an amount measures, and so how it is written: bytes or nanoseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Quantity {
    /// Bytes, written in binary units ([`format_size`]).
    Bytes,
    /// Nanoseconds, written as a time ([`format_nanos`]).
    Nanos,
}

impl Quantity {
    /// An amount: [`format_size`] or [`format_nanos`].
    pub fn format(self, value: f64) -> String {
        match self {
            Quantity::Bytes => format_size(value),
            Quantity::Nanos => format_nanos(value),
        }
    }

    /// A change with its sign: [`format_signed_bytes`] or [`format_signed_nanos`].
    pub fn format_signed(self, value: f64) -> String {
        match self {
            Quantity::Bytes => format_signed_bytes(value),
            Quantity::Nanos => format_signed_nanos(value),
        }
    }

    /// A change per turn: [`Quantity::format_signed`] followed by `/turn`, or `n/a`.
    pub fn format_per_turn(self, value: f64) -> String {
        if value.is_nan() {
            return NOT_A_NUMBER.to_owned();
        }
        format!("{}/turn", self.format_signed(value))
    }
}

const NOT_A_NUMBER: &str = "n/a";

/// The text of a value that is not finite, or `None` for a finite one.
fn not_finite(value: f64, signed: bool) -> Option<String> {
    if value.is_nan() {
        Some(NOT_A_NUMBER.to_owned())
    } else if value == f64::INFINITY {
        Some(if signed { "+unbounded" } else { "unbounded" }.to_owned())
    } else if value == f64::NEG_INFINITY {
        Some("-unbounded".to_owned())
    } else {
        None
    }
}

/// A size in binary units: `512 B`, `4.0 KiB`, `1.8 GiB`, `16.0 EiB` for `u64::MAX`.
pub fn format_bytes(bytes: u64) -> String {
    format_size(bytes as f64)
}

/// [`format_bytes`] for an amount that may be fractional (a mean, a fitted level) or negative
/// (written with `-`, never with `+`; see [`format_signed_bytes`] for changes).
pub fn format_size(bytes: f64) -> String {
    if let Some(text) = not_finite(bytes, false) {
        return text;
    }
    let sign = if bytes < 0.0 { "-" } else { "" };
    let mut magnitude = bytes.abs();
    if magnitude.round() < 1024.0 {
        let whole = magnitude.round();
        return if whole == 0.0 {
            "0 B".to_owned()
        } else {
            format!("{sign}{whole:.0} B")
        };
    }
    let mut unit = 0;
    magnitude /= 1024.0;
    while magnitude >= 1024.0 && unit + 1 < BINARY_UNITS.len() {
        magnitude /= 1024.0;
        unit += 1;
    }
    format!("{sign}{magnitude:.1} {}", BINARY_UNITS[unit])
}

/// A change in bytes with its sign: `+110.0 MiB`, `-4.0 KiB`, `0 B` when it rounds to nothing.
pub fn format_signed_bytes(bytes: f64) -> String {
    if let Some(text) = not_finite(bytes, true) {
        return text;
    }
    with_sign(bytes, format_size(bytes), "0 B")
}

/// `+` before `text` for a rise; a fall already carries its `-`; `zero` stays bare.
fn with_sign(value: f64, text: String, zero: &str) -> String {
    if value > 0.0 && text != zero {
        format!("+{text}")
    } else {
        text
    }
}

/// Writes a measured time for people, from nanoseconds that may be fractional or negative (a
/// mean, a slope, a difference): three significant figures in the largest unit of
/// [`crate::DURATION_UNITS`] (or `ns`) that keeps the number at least 1, e.g. `850 us`,
/// `12.3 ms`, `-1.50 s`, `0 ns`. Every report formats a time metric's values with this.
pub fn format_nanos(nanos: f64) -> String {
    if let Some(text) = not_finite(nanos, false) {
        return text;
    }
    let magnitude = nanos.abs();
    // Minutes are left out: a turn of 90 s reads better as `90.0 s` than as `1.50 m`.
    let (factor, name) = crate::DURATION_UNITS
        .iter()
        .rev()
        .filter(|(name, _)| *name != "m")
        .map(|&(name, factor)| (factor as f64, name))
        .find(|(factor, _)| magnitude >= *factor)
        .unwrap_or((1.0, "ns"));
    let value = nanos / factor;
    if name == "ns" {
        let whole = value.round();
        return if whole == 0.0 {
            "0 ns".to_owned()
        } else {
            format!("{whole:.0} ns")
        };
    }
    let decimals = if value.abs() >= 100.0 {
        0
    } else if value.abs() >= 10.0 {
        1
    } else {
        2
    };
    format!("{value:.decimals$} {name}")
}

/// [`format_nanos`] with an explicit `+` for a rise: `+5.00 ms`, `-120 us`, `0 ns`.
pub fn format_signed_nanos(nanos: f64) -> String {
    if let Some(text) = not_finite(nanos, true) {
        return text;
    }
    with_sign(nanos, format_nanos(nanos), "0 ns")
}

/// A growth rate in bytes per turn: `+110.0 MiB/turn`, `0 B/turn`, `n/a`.
pub fn format_bytes_per_turn(bytes_per_turn: f64) -> String {
    Quantity::Bytes.format_per_turn(bytes_per_turn)
}
