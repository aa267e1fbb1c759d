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
}
