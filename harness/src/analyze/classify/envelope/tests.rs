use super::*;
use crate::analyze::{classify, ClassifyOptions, MetricSeries};
use crate::scenario::Tolerance;

/// A server's anon_rss: page-granular, its allocator stepping 40-60 KiB up and back at random,
/// judged against a 16 KiB/turn cap: a line through every sample straddles the cap, the
/// troughs and peaks do not.
#[test]
fn an_allocator_stepping_tens_of_kib_passes_a_per_turn_cap_on_its_troughs() {
    let page = 4096;
    let base = 40 << 20;
    // The level each turn: 0 low, otherwise that many pages above it.
    let high: [u64; 41] = [
        0, 0, 12, 12, 0, 0, 0, 15, 0, 0, 14, 14, 14, 0, 0, 0, 13, 13, 0, 0, 0, 15, 15, 15, 0, 0,
        12, 0, 0, 0, 14, 14, 0, 0, 0, 15, 15, 0, 0, 13, 13,
    ];
    let points: Vec<(u64, u64)> = high
        .iter()
        .enumerate()
        .map(|(t, h)| (t as u64, base + (h + (t as u64 % 3 == 1) as u64) * page))
        .collect();
    let options = ClassifyOptions {
        tolerance: Some(Tolerance::Bytes(1 << 20)),
        max_growth_per_turn: Some(16 * 1024),
        ..ClassifyOptions::default()
    };
    let analysis = classify(&MetricSeries::from_points(&points), &options);
    assert_eq!(
        analysis.classification,
        Classification::Clean,
        "{analysis:?}"
    );
    let (_, hi) = analysis.slope_interval.expect("an interval");
    assert!(hi <= 16.0 * 1024.0, "{hi}");
    let Reason::Envelope {
        pattern, outcome, ..
    } = analysis.reason
    else {
        panic!("{:?}", analysis.reason);
    };
    assert_eq!(pattern.kind, PatternKind::Steps);
    assert_eq!(outcome, EnvelopeOutcome::Clean);
    // The same steps on a leak of 20 KiB per turn: over the cap, and growth.
    let leaking: Vec<(u64, u64)> = points
        .iter()
        .map(|(t, v)| (*t, v + t * 20 * 1024))
        .collect();
    let analysis = classify(&MetricSeries::from_points(&leaking), &options);
    assert_eq!(
        analysis.classification,
        Classification::Growth,
        "{analysis:?}"
    );
    assert!(analysis.slope_interval.expect("an interval").1 > 16.0 * 1024.0);
}

#[test]
fn drops_make_a_pattern_and_a_one_time_step_does_not() {
    let teeth: Vec<(f64, f64)> = (0..30)
        .map(|t| (f64::from(t), f64::from(t % 5) * 10.0))
        .collect();
    let (pattern, jumps, _) = find_pattern(&teeth, 1.0, 0.0).expect("a sawtooth");
    assert_eq!(jumps.drops, [5, 10, 15, 20, 25]);
    assert!(jumps.ups.is_empty());
    assert_eq!(pattern.kind, PatternKind::Sawtooth);
    assert_eq!(pattern.drops, 5);
    assert_eq!(pattern.typical_drop, 40.0);
    let step: Vec<(f64, f64)> = (0..30)
        .map(|t| (f64::from(t), if t < 10 { 0.0 } else { 100.0 }))
        .collect();
    assert!(find_pattern(&step, 1.0, 0.0).is_none());
}
