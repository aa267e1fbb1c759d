//! The analyzer's amounts in words, through the one formatter in `leakloop-units`: a metric's
//! amounts in its own unit ([`quantity`]), probabilities and confidence levels.

use leakloop_units::Quantity;

/// How `metric`'s amounts are written, by the registry's unit: a time metric's are
/// nanoseconds; every other metric (and a name the registry does not know, e.g. a trace's
/// column) is bytes.
pub(crate) fn quantity(metric: &str) -> Quantity {
    match leakloop_metrics::metric(metric).map(|m| m.unit) {
        Some(leakloop_metrics::Unit::Nanoseconds) => Quantity::Nanos,
        _ => Quantity::Bytes,
    }
}

/// An amount of `metric` in its own unit: a size, or a duration for a time metric.
pub(crate) fn amount(metric: &str, value: f64) -> String {
    quantity(metric).format(value)
}

/// [`amount`] with an explicit `+` for rises.
pub(crate) fn signed_amount(metric: &str, value: f64) -> String {
    quantity(metric).format_signed(value)
}

/// A probability with two significant digits and no trailing zeros: `0.005`, `0.0019`.
pub(crate) fn probability(p: f64) -> String {
    if !(p > 0.0 && p.is_finite()) {
        return format!("{p}");
    }
    let decimals = (1 - p.log10().floor() as i32).max(0) as usize;
    let text = format!("{p:.decimals$}");
    if text.contains('.') {
        text.trim_end_matches('0').trim_end_matches('.').to_owned()
    } else {
        text
    }
}

/// A confidence level in percent with as many decimals as keep it off 100%: `95%`, `99.8%`,
/// `99.92%` (the levels of sequential looks are close to 1).
pub(crate) fn confidence_percent(confidence: f64) -> String {
    let miss = ((1.0 - confidence) * 100.0).max(1e-4);
    let decimals = (-miss.log10()).ceil().clamp(0.0, 4.0) as usize;
    format!("{:.decimals$}%", confidence * 100.0)
}

#[cfg(test)]
mod tests {
    use rstest::rstest;

    use super::*;

    #[test]
    fn amounts_follow_the_metric_unit_in_the_registry() {
        assert_eq!(amount("turn_time", 12_300_000.0), "12.3 ms");
        assert_eq!(signed_amount("turn_time", 4e6), "+4.00 ms");
        assert_eq!(amount("rss", 1536.0), "1.5 KiB");
        assert_eq!(amount("a_trace_column", 1536.0), "1.5 KiB");
    }

    #[rstest]
    #[case(0.005, "0.005")]
    #[case(0.0019234, "0.0019")]
    #[case(0.95, "0.95")]
    #[case(0.000_012_5, "0.000013")]
    fn probabilities_keep_two_significant_digits(#[case] p: f64, #[case] expected: &str) {
        assert_eq!(probability(p), expected);
    }

    #[rstest]
    #[case(0.95, "95%")]
    #[case(0.969, "97%")]
    #[case(0.998, "99.8%")]
    #[case(0.99921, "99.92%")]
    fn confidence_levels_never_round_to_a_hundred(#[case] c: f64, #[case] expected: &str) {
        assert_eq!(confidence_percent(c), expected);
    }
}
