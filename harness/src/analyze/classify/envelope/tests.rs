use super::*;
use crate::analyze::{classify, ClassifyOptions, MetricSeries};
use crate::scenario::Tolerance;

/// A garbage-collected heap: 2 MiB gathered per turn and dropped every fifth turn, with a little
/// jitter; clean, then with 200 KiB per turn that the collections do not give back.
fn teeth(leak_per_turn: u64) -> Vec<(u64, u64)> {
    (0..=40u64)
        .map(|t| {
            (
                t,
                (1 << 30) + (t % 5) * (2 << 20) + (t * 7 % 3) * 65536 + t * leak_per_turn,
            )
        })
        .collect()
}

#[test]
fn a_clean_sawtooth_is_bounded_and_the_same_teeth_on_a_leak_are_growth() {
    let options = ClassifyOptions {
        tolerance: Some(Tolerance::Bytes(1 << 20)),
        ..ClassifyOptions::default()
    };
    let clean = classify(&MetricSeries::from_points(&teeth(0)), &options);
    assert!(
        matches!(
            clean.classification,
            Classification::Clean | Classification::Plateau
        ),
        "{clean:?}"
    );
    let leaking = classify(&MetricSeries::from_points(&teeth(200 << 10)), &options);
    assert_eq!(
        leaking.classification,
        Classification::Growth,
        "{leaking:?}"
    );
    let (lo, hi) = leaking.slope_interval.expect("an interval");
    assert!(lo <= 204_800.0 && 204_800.0 <= hi, "{lo} {hi}");
}

#[test]
fn drops_make_a_pattern_and_a_one_time_step_does_not() {
    let teeth: Vec<(f64, f64)> = (0..30)
        .map(|t| (f64::from(t), f64::from(t % 5) * 10.0))
        .collect();
    let (jumps, _) = find_jumps(&teeth, 1.0, 0.0).expect("jumps");
    let pattern = pattern_of(&teeth, &jumps).expect("a sawtooth");
    assert_eq!(jumps.drops, [5, 10, 15, 20, 25]);
    assert!(jumps.ups.is_empty());
    assert_eq!(pattern.kind, PatternKind::Sawtooth);
    assert_eq!(pattern.drops, 5);
    assert_eq!(pattern.typical_drop, 40.0);
    let step: Vec<(f64, f64)> = (0..30)
        .map(|t| (f64::from(t), if t < 10 { 0.0 } else { 100.0 }))
        .collect();
    assert!(find_jumps(&step, 1.0, 0.0)
        .and_then(|(jumps, _)| pattern_of(&step, &jumps))
        .is_none());
}
