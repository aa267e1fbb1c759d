//! Sizes, durations and tolerances with units, as the DSL writes them. Sizes and durations are
//! read by the `leakloop-units` crate, the one parser that inline simulator profiles and the
//! command line use too; a tolerance is a size or a percentage of the baseline.

use leakloop_units::parse_percent;
pub(crate) use leakloop_units::{parse_duration, parse_size, UnitError};

use crate::scenario::model::Tolerance;

/// Parses a tolerance: a size, or a percentage of the baseline (`2%`, `0.5%`).
pub fn parse_tolerance(text: &str) -> Result<Tolerance, UnitError> {
    if let Some(percent) = text.trim().strip_suffix('%') {
        return parse_percent(percent).map(Tolerance::Percent);
    }
    parse_size(text).map(Tolerance::Bytes)
}

/// [`parse_tolerance`] for a command-line value, with the error on one line.
pub fn parse_tolerance_arg(text: &str) -> Result<Tolerance, String> {
    parse_tolerance(text).map_err(|e| e.one_line("tolerance", text))
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;

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
    #[case::bits("5Mib", "unknown size unit `Mib`")]
    fn bad_tolerances(#[case] text: &str, #[case] message: &str) {
        assert_eq!(parse_tolerance(text).unwrap_err().message, message);
    }

    #[rstest]
    #[case("5MiB", Tolerance::Bytes(5 << 20))]
    #[case("2 MB", Tolerance::Bytes(2_000_000))]
    #[case("4096", Tolerance::Bytes(4096))]
    #[case("2%", Tolerance::Percent(2.0))]
    fn command_line_tolerances(#[case] text: &str, #[case] expected: Tolerance) {
        assert_eq!(parse_tolerance_arg(text), Ok(expected));
    }

    /// Regression: `--tolerance` was read by another parser than the DSL's, which took `5Mib`,
    /// `5m` and `0.5B`; the DSL refuses them, and so does the command line, in the same words.
    #[rstest]
    #[case(
        "five",
        "bad tolerance `five`: expected a size as a number followed by a unit"
    )]
    #[case("-2%", "bad tolerance `-2%`: a percentage cannot be negative")]
    #[case(
        "3 parsecs",
        "bad tolerance `3 parsecs`: unknown size unit `parsecs`; expected one of"
    )]
    #[case(
        "5Mib",
        "bad tolerance `5Mib`: unknown size unit `Mib`; did you mean `MiB`?"
    )]
    #[case(
        "5m",
        "bad tolerance `5m`: unknown size unit `m`; expected one of `B`, `KB`"
    )]
    #[case("0.5B", "bad tolerance `0.5B`: a size in bytes is a whole number")]
    fn bad_command_line_tolerances(#[case] text: &str, #[case] message: &str) {
        let err = parse_tolerance_arg(text).unwrap_err();
        assert!(err.starts_with(message), "{err}");
    }
}
