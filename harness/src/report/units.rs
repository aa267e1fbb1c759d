//! Amounts in a metric's own unit for the renderers: sizes and rates come from the one formatter
//! in `leakloop-units` (so that the terminal, summary.md, junit and the plot agree); what is left
//! here is choosing the unit by the metric and scaling the plot's axes.

use leakloop_units::Quantity;

use crate::analyze::units::quantity;

pub use leakloop_units::{format_bytes, format_signed_bytes};

/// A growth rate, e.g. `+110.0 MiB/turn`.
pub fn format_per_turn(bytes_per_turn: f64) -> String {
    leakloop_units::format_bytes_per_turn(bytes_per_turn)
}

/// A rate with its confidence interval, e.g. `+110.0 MiB/turn [+108.2 MiB, +111.9 MiB]`.
pub fn format_rate_with_interval(bytes_per_turn: f64, interval: Option<(f64, f64)>) -> String {
    rate_with_interval(Quantity::Bytes, bytes_per_turn, interval)
}

fn rate_with_interval(q: Quantity, per_turn: f64, interval: Option<(f64, f64)>) -> String {
    let rate = q.format_per_turn(per_turn);
    match interval {
        Some((low, high)) => format!(
            "{rate} [{}, {}]",
            q.format_signed(low),
            q.format_signed(high)
        ),
        None => rate,
    }
}

/// Whether `metric` is a time metric (its values are nanoseconds), by the registry.
#[cfg(feature = "reports")]
fn is_time(metric: &str) -> bool {
    quantity(metric) == Quantity::Nanos
}

/// A value of `metric` in its own unit: [`format_bytes`], or a time (`12.3 ms`).
pub fn format_value(metric: &str, value: u64) -> String {
    quantity(metric).format(value as f64)
}

/// [`format_rate_with_interval`] in `metric`'s unit (`+4.00 ms/turn [+3.90 ms, +4.10 ms]`).
pub fn format_rate_with_interval_of(
    metric: &str,
    per_turn: f64,
    interval: Option<(f64, f64)>,
) -> String {
    rate_with_interval(quantity(metric), per_turn, interval)
}

/// [`axis_unit`] in `metric`'s unit: a time axis is drawn in ns, us, ms or s.
#[cfg(feature = "reports")]
pub(crate) fn axis_unit_of(metric: &str, max: u64) -> (f64, &'static str) {
    if !is_time(metric) {
        return axis_unit(max);
    }
    const UNITS: [(u64, &str); 3] = [(1_000_000_000, "s"), (1_000_000, "ms"), (1_000, "us")];
    UNITS
        .iter()
        .find(|(size, _)| max >= 2 * size)
        .map(|&(size, name)| (size as f64, name))
        .unwrap_or((1.0, "ns"))
}

/// The unit in which to draw an axis whose values reach `max_bytes`: the divisor and its name.
#[cfg(feature = "reports")]
pub(crate) fn axis_unit(max_bytes: u64) -> (f64, &'static str) {
    const UNITS: [(u64, &str); 4] = [
        (1 << 30, "GiB"),
        (1 << 20, "MiB"),
        (1 << 10, "KiB"),
        (1, "B"),
    ];
    UNITS
        .iter()
        .find(|(size, _)| max_bytes >= 2 * size)
        .map(|&(size, name)| (size as f64, name))
        .unwrap_or((1.0, "B"))
}

/// A size rounded to `figures` significant figures in its own binary unit, with a sign when
/// `signed` (e.g. `+110 MiB`, `1.7 GiB`, `0 B`): for snapshots that must not churn on noise.
pub(crate) fn format_rounded(bytes: f64, figures: i32, signed: bool) -> String {
    if !bytes.is_finite() {
        return "n/a".to_owned();
    }
    const UNITS: [(f64, &str); 3] = [
        (1_073_741_824.0, "GiB"),
        (1_048_576.0, "MiB"),
        (1024.0, "KiB"),
    ];
    let magnitude = bytes.abs();
    let (size, name) = UNITS
        .iter()
        .copied()
        .find(|(size, _)| magnitude >= *size)
        .unwrap_or((1.0, "B"));
    let value = round_significant(magnitude / size, figures);
    if value == 0.0 || (name == "B" && value.round() == 0.0) {
        return "0 B".to_owned();
    }
    let decimals = if name == "B" {
        0
    } else {
        (figures - 1 - value.log10().floor() as i32).max(0) as usize
    };
    let sign = match (signed, bytes < 0.0) {
        (false, _) => "",
        (true, true) => "-",
        (true, false) => "+",
    };
    format!("{sign}{value:.decimals$} {name}")
}

/// Rounds to `digits` significant figures (for snapshots that should not churn on tiny changes).
pub(crate) fn round_significant(value: f64, digits: i32) -> f64 {
    if value == 0.0 || !value.is_finite() {
        return value;
    }
    let magnitude = value.abs().log10().floor() as i32;
    let factor = 10f64.powi(digits - 1 - magnitude);
    (value * factor).round() / factor
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn time_metrics_are_formatted_as_times_and_memory_as_bytes() {
        assert_eq!(format_value("turn_time", 12_300_000), "12.3 ms");
        assert_eq!(format_value("rss", 1 << 20), "1.0 MiB");
        assert_eq!(
            format_rate_with_interval_of("turn_time", 4e6, Some((3.9e6, 4.1e6))),
            "+4.00 ms/turn [+3.90 ms, +4.10 ms]"
        );
        assert_eq!(axis_unit_of("generate_time", 900_000_000), (1e6, "ms"));
        assert_eq!(axis_unit_of("rss", 3 << 20), (1048576.0, "MiB"));
    }
    use rstest::rstest;

    #[rstest]
    #[case::bytes(512, "512 B")]
    #[case::kib(4096, "4.0 KiB")]
    #[case::mib(110 * 1024 * 1024, "110.0 MiB")]
    #[case::gib(1_900_000_000, "1.8 GiB")]
    fn sizes_use_binary_units(#[case] bytes: u64, #[case] expected: &str) {
        assert_eq!(format_bytes(bytes), expected);
    }

    #[rstest]
    #[case::growth(1_048_576.0, "+1.0 MiB/turn")]
    #[case::shrink(-2048.0, "-2.0 KiB/turn")]
    #[case::zero_after_rounding(0.4, "0 B/turn")]
    #[case::not_a_number(f64::NAN, "n/a")]
    fn rates_carry_a_sign(#[case] rate: f64, #[case] expected: &str) {
        assert_eq!(format_per_turn(rate), expected);
    }

    #[test]
    fn interval_is_shown_in_brackets() {
        assert_eq!(
            format_rate_with_interval(1024.0, Some((512.0, 2048.0))),
            "+1.0 KiB/turn [+512 B, +2.0 KiB]"
        );
    }

    #[rstest]
    #[case::gib(3 << 30, "GiB")]
    #[case::just_below_two_gib((2 << 30) - 1, "MiB")]
    #[case::small(100, "B")]
    fn axis_unit_keeps_tick_labels_readable(#[case] max: u64, #[case] unit: &str) {
        assert_eq!(axis_unit(max).1, unit);
    }

    #[rstest]
    #[case::leak_rate(110.4 * 1_048_576.0, true, "+110 MiB")]
    #[case::gpu_context(1770.0 * 1_048_576.0, false, "1.7 GiB")]
    #[case::small_drift(-9_362.0, true, "-9.1 KiB")]
    #[case::bytes(3.4, true, "+3 B")]
    #[case::nothing(0.2, true, "0 B")]
    fn rounded_sizes_keep_two_figures(#[case] bytes: f64, #[case] signed: bool, #[case] out: &str) {
        assert_eq!(format_rounded(bytes, 2, signed), out);
    }

    #[rstest]
    #[case(123_456.0, 2, 120_000.0)]
    #[case(-0.012_34, 2, -0.012)]
    #[case(0.0, 2, 0.0)]
    fn rounding_keeps_significant_figures(#[case] v: f64, #[case] d: i32, #[case] out: f64) {
        assert!((round_significant(v, d) - out).abs() < 1e-9);
    }
}
