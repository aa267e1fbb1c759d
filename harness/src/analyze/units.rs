//! Byte amounts for people: `1.5 MiB`, `-3.0 KiB`, `+110.0 MiB/turn`.

/// A byte amount in binary units with one decimal (`512 B`, `1.5 MiB`); negative amounts keep
/// their sign.
pub(crate) fn bytes(value: f64) -> String {
    if !value.is_finite() {
        return if value > 0.0 {
            "unbounded".to_owned()
        } else {
            "-unbounded".to_owned()
        };
    }
    const UNITS: [&str; 6] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
    let sign = if value < 0.0 { "-" } else { "" };
    let mut magnitude = value.abs();
    let mut unit = 0;
    while magnitude >= 1024.0 && unit + 1 < UNITS.len() {
        magnitude /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{sign}{magnitude:.0} B")
    } else {
        format!("{sign}{magnitude:.1} {}", UNITS[unit])
    }
}

/// A signed byte amount with an explicit `+` for rises.
pub(crate) fn signed_bytes(value: f64) -> String {
    if value > 0.0 {
        format!("+{}", bytes(value))
    } else {
        bytes(value)
    }
}

/// Whether `metric` is measured in time (its amounts are nanoseconds), by the registry.
pub(crate) fn is_time(metric: &str) -> bool {
    leakloop_metrics::metric(metric).is_some_and(|m| m.unit == leakloop_metrics::Unit::Nanoseconds)
}

/// An amount of `metric` in its own unit: [`bytes`], or a duration for a time metric.
pub(crate) fn amount(metric: &str, value: f64) -> String {
    if is_time(metric) {
        leakloop_units::format_nanos(value)
    } else {
        bytes(value)
    }
}

/// [`amount`] with an explicit `+` for rises.
pub(crate) fn signed_amount(metric: &str, value: f64) -> String {
    if is_time(metric) {
        leakloop_units::format_signed_nanos(value)
    } else {
        signed_bytes(value)
    }
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

    #[rstest]
    #[case(0.0, "0 B")]
    #[case(512.0, "512 B")]
    #[case(1536.0, "1.5 KiB")]
    #[case(110.0 * 1024.0 * 1024.0, "110.0 MiB")]
    #[case(-3.0 * 1024.0, "-3.0 KiB")]
    #[case(f64::INFINITY, "unbounded")]
    fn renders_binary_units(#[case] value: f64, #[case] expected: &str) {
        assert_eq!(bytes(value), expected);
    }

    #[test]
    fn rises_get_a_plus() {
        assert_eq!(signed_bytes(2048.0), "+2.0 KiB");
        assert_eq!(signed_bytes(-2048.0), "-2.0 KiB");
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
