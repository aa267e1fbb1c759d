use std::time::Duration;

use rstest::rstest;

use super::*;

#[rstest]
#[case::bare_bytes("1048576", 1_048_576)]
#[case::bytes_unit("12B", 12)]
#[case::whole_bytes_written_as_decimal("12.0B", 12)]
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
#[case::minutes_as_size("5m", "unknown size unit `m`", None)]
#[case::half_a_byte("0.5B", "a size in bytes is a whole number", None)]
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
#[case::micros("900us", Duration::from_micros(900))]
#[case::millis("500ms", Duration::from_millis(500))]
#[case::seconds("8s", Duration::from_secs(8))]
#[case::minutes("2m", Duration::from_secs(120))]
#[case::fraction("1.5s", Duration::from_millis(1500))]
#[case::tenth("0.1s", Duration::from_millis(100))]
#[case::zero("0", Duration::ZERO)]
#[case::zero_ms("0ms", Duration::ZERO)]
fn durations(#[case] text: &str, #[case] duration: Duration) {
    assert_eq!(parse_duration(text), Ok(duration));
}

#[rstest]
#[case::no_unit("8", "a duration needs a unit", None)]
#[case::hours("1h", "unknown duration unit `h`", None)]
#[case::spelled("8sec", "unknown duration unit `sec`", None)]
#[case::compound("1s 500ms", "unknown duration unit `s 500ms`", None)]
#[case::millis_typo("8mss", "unknown duration unit `mss`", Some("ms"))]
#[case::negative("-1s", "a duration cannot be negative", None)]
#[case::too_long("2000m", "duration is longer than a day", None)]
fn bad_durations(#[case] text: &str, #[case] message: &str, #[case] suggestion: Option<&str>) {
    let err = parse_duration(text).unwrap_err();
    assert_eq!(err.message, message);
    assert_eq!(err.suggestion.as_deref(), suggestion);
}

#[rstest]
#[case(Duration::from_secs(4), "4000ms")]
#[case(Duration::from_micros(900), "900us")]
#[case(Duration::from_nanos(1_500), "1.500us")]
#[case(Duration::ZERO, "0ms")]
fn durations_are_written_the_way_they_are_read(#[case] duration: Duration, #[case] text: &str) {
    assert_eq!(format_duration(duration), text);
    assert_eq!(parse_duration(text), Ok(duration));
}

#[rstest]
#[case::percent("2", 2.0)]
#[case::fraction("0.5", 0.5)]
fn percents(#[case] text: &str, #[case] value: f64) {
    assert_eq!(parse_percent(text), Ok(value));
}

#[rstest]
#[case::negative("-2", "a percentage cannot be negative")]
#[case::word("two", "`two` is not a number")]
#[case::unit("2MiB", "`2MiB` is not a number")]
fn bad_percents(#[case] text: &str, #[case] message: &str) {
    assert_eq!(parse_percent(text).unwrap_err().message, message);
}

#[derive(Debug, ::serde::Deserialize)]
struct Profile {
    #[serde(deserialize_with = "crate::serde::size")]
    size: u64,
    #[serde(deserialize_with = "crate::serde::duration")]
    time: Duration,
}

#[test]
fn serde_fields_read_what_the_dsl_reads() {
    let p: Profile = serde_yaml::from_str("{size: 1.5KiB, time: 900us}").unwrap();
    assert_eq!((p.size, p.time), (1536, Duration::from_micros(900)));
    let p: Profile = serde_yaml::from_str("{size: 1024, time: 0}").unwrap();
    assert_eq!((p.size, p.time), (1024, Duration::ZERO));
}

#[rstest]
#[case::bits(
    "{size: 5Mib, time: 1s}",
    "bad size `5Mib`: unknown size unit `Mib`",
    Some("MiB")
)]
#[case::half_byte(
    "{size: 0.5B, time: 1s}",
    "bad size `0.5B`: a size in bytes is a whole number",
    None
)]
#[case::minutes_size("{size: 5m, time: 1s}", "bad size `5m`: unknown size unit `m`", None)]
#[case::negative(
    "{size: -1, time: 1s}",
    "bad size `-1`: a size cannot be negative",
    None
)]
#[case::fraction(
    "{size: 0.5, time: 1s}",
    "bad size `0.5`: a size without a unit is a whole number of bytes",
    None
)]
#[case::mss(
    "{size: 1, time: 8mss}",
    "bad duration `8mss`: unknown duration unit `mss`",
    Some("ms")
)]
fn serde_errors_read_back_as_the_dsl_error(
    #[case] yaml: &str,
    #[case] message: &str,
    #[case] suggestion: Option<&str>,
) {
    let err = serde_yaml::from_str::<Profile>(yaml)
        .unwrap_err()
        .to_string();
    // serde_yaml adds the field before the message and the position after it.
    let err = err.split_once(": ").unwrap().1;
    let err = err.rsplit_once(" at line").unwrap().0;
    let (got, got_suggestion, _) =
        crate::serde::explain_message(err).unwrap_or_else(|| panic!("not a unit error: {err}"));
    assert!(got.starts_with(message), "{got}");
    assert_eq!(got_suggestion.as_deref(), suggestion);
}

#[rstest]
#[case::zero(0.0, "0 ns")]
#[case::below_half_a_nano(0.4, "0 ns")]
#[case::nanos(850.0, "850 ns")]
#[case::micros(12_345.0, "12.3 us")]
#[case::millis(5_000_000.0, "5.00 ms")]
#[case::hundreds_of_millis(250_400_000.0, "250 ms")]
#[case::seconds(1_500_000_000.0, "1.50 s")]
#[case::minutes_stay_seconds(90e9, "90.0 s")]
#[case::negative(-120_000.0, "-120 us")]
#[case::not_a_number(f64::NAN, "n/a")]
#[case::infinite(f64::INFINITY, "unbounded")]
fn measured_times_read_in_their_own_unit(#[case] nanos: f64, #[case] text: &str) {
    assert_eq!(format_nanos(nanos), text);
}

#[rstest]
#[case::rise(5e6, "+5.00 ms")]
#[case::fall(-5e6, "-5.00 ms")]
#[case::zero(0.0, "0 ns")]
#[case::rounds_to_zero(0.3, "0 ns")]
#[case::negative_rounds_to_zero(-0.3, "0 ns")]
#[case::not_a_number(f64::NAN, "n/a")]
#[case::rise_without_bound(f64::INFINITY, "+unbounded")]
#[case::fall_without_bound(f64::NEG_INFINITY, "-unbounded")]
fn signed_times_show_a_rise(#[case] nanos: f64, #[case] text: &str) {
    assert_eq!(format_signed_nanos(nanos), text);
}

#[rstest]
#[case::zero(0, "0 B")]
#[case::one(1, "1 B")]
#[case::last_byte_count(1023, "1023 B")]
#[case::one_kib(1024, "1.0 KiB")]
#[case::kib(1536, "1.5 KiB")]
#[case::just_below_a_mib((1 << 20) - 1, "1024.0 KiB")]
#[case::mib(110 << 20, "110.0 MiB")]
#[case::gib(1_900_000_000, "1.8 GiB")]
#[case::tib(3 << 40, "3.0 TiB")]
#[case::max(u64::MAX, "16.0 EiB")]
fn sizes_use_binary_units(#[case] bytes: u64, #[case] text: &str) {
    assert_eq!(format_bytes(bytes), text);
}

#[rstest]
#[case::fraction_of_a_byte(0.4, "0 B")]
#[case::rounds_up_into_kib(1023.6, "1.0 KiB")]
#[case::negative_keeps_its_sign(-3072.0, "-3.0 KiB")]
#[case::negative_rounding_to_zero(-0.3, "0 B")]
#[case::not_a_number(f64::NAN, "n/a")]
#[case::infinite(f64::INFINITY, "unbounded")]
#[case::negative_infinite(f64::NEG_INFINITY, "-unbounded")]
fn fractional_sizes_round_to_what_is_shown(#[case] bytes: f64, #[case] text: &str) {
    assert_eq!(format_size(bytes), text);
}

#[rstest]
#[case::rise(2048.0, "+2.0 KiB")]
#[case::fall(-2048.0, "-2.0 KiB")]
#[case::zero(0.0, "0 B")]
#[case::rounds_to_zero(0.4, "0 B")]
#[case::negative_rounds_to_zero(-0.4, "0 B")]
#[case::one_byte(1.0, "+1 B")]
#[case::max(u64::MAX as f64, "+16.0 EiB")]
#[case::not_a_number(f64::NAN, "n/a")]
#[case::rise_without_bound(f64::INFINITY, "+unbounded")]
#[case::fall_without_bound(f64::NEG_INFINITY, "-unbounded")]
fn changes_carry_a_sign_except_nothing(#[case] bytes: f64, #[case] text: &str) {
    assert_eq!(format_signed_bytes(bytes), text);
}

#[rstest]
#[case::bytes(Quantity::Bytes, 1_048_576.0, "+1.0 MiB/turn")]
#[case::bytes_fall(Quantity::Bytes, -2048.0, "-2.0 KiB/turn")]
#[case::bytes_nothing(Quantity::Bytes, 0.4, "0 B/turn")]
#[case::time(Quantity::Nanos, 4e6, "+4.00 ms/turn")]
#[case::time_nothing(Quantity::Nanos, 0.0, "0 ns/turn")]
#[case::not_a_number(Quantity::Bytes, f64::NAN, "n/a")]
#[case::unbounded(Quantity::Nanos, f64::INFINITY, "+unbounded/turn")]
fn rates_are_signed_changes_per_turn(#[case] q: Quantity, #[case] rate: f64, #[case] text: &str) {
    assert_eq!(q.format_per_turn(rate), text);
}

#[test]
fn a_quantity_writes_amounts_in_its_own_unit() {
    assert_eq!(Quantity::Bytes.format(1536.0), "1.5 KiB");
    assert_eq!(Quantity::Nanos.format(1536.0), "1.54 us");
    assert_eq!(Quantity::Bytes.format_signed(1536.0), "+1.5 KiB");
    assert_eq!(Quantity::Nanos.format_signed(-1536.0), "-1.54 us");
    assert_eq!(format_bytes_per_turn(1024.0), "+1.0 KiB/turn");
}
