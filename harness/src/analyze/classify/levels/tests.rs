//! Tests of `levels.rs`.

use crate::analyze::classify::{classify, ClassifyOptions};
use crate::analyze::{Classification, MetricSeries, Reason};
use crate::scenario::Tolerance;

const MIB: f64 = 1024.0 * 1024.0;
const BASE: f64 = 1024.0 * MIB;

/// Noise of about 200 KiB that repeats: deterministic, no trend.
const WIGGLE: [f64; 7] = [0.3, -0.9, 0.2, 1.1, -0.3, -0.7, 0.8];
const NOISE: f64 = MIB / 4.0;

fn series(levels: impl Fn(u64) -> f64, turns: u64, per_turn: f64) -> MetricSeries {
    let points: Vec<(u64, u64)> = (0..=turns)
        .map(|t| {
            let v = BASE + levels(t) + per_turn * t as f64 + WIGGLE[t as usize % 7] * NOISE;
            (t, v.round() as u64)
        })
        .collect();
    MetricSeries::from_points(&points)
}

fn options() -> ClassifyOptions {
    ClassifyOptions {
        tolerance: Some(Tolerance::Bytes((5.0 * MIB) as u64)),
        ..ClassifyOptions::default()
    }
}

/// A level that switched up by 3 MiB late (turn 14 of 20) and stayed, within the 5 MiB
/// tolerance: not growth, but two flat levels or the late step it is.
#[test]
fn a_late_switch_within_tolerance_is_not_growth() {
    let analysis = classify(
        &series(|t| if t >= 14 { 3.0 * MIB } else { 0.0 }, 20, 0.0),
        &options(),
    );
    assert_ne!(
        analysis.classification,
        Classification::Growth,
        "{analysis:#?}"
    );
    assert!(
        matches!(
            analysis.reason,
            Reason::FlatLevels {
                ups: 1,
                drops: 0,
                at_turn: 14,
                ..
            } | Reason::LateStep { turn: 14, .. }
        ),
        "{:?}",
        analysis.reason
    );
}

/// Up at turn 5, down at 11, up again at 15 (12 MiB, beyond the tolerance) and flat inside each
/// level: a bounded level, plateau.
#[test]
fn levels_that_come_and_go_beyond_tolerance_are_a_plateau() {
    let level = |t: u64| {
        if (5..11).contains(&t) || t >= 15 {
            12.0 * MIB
        } else {
            0.0
        }
    };
    let analysis = classify(&series(level, 30, 0.0), &options());
    assert_eq!(
        analysis.classification,
        Classification::Plateau,
        "{analysis:#?}"
    );
}

/// The same levels with a leak of 1 MiB per turn inside them: growth, as before.
#[test]
fn a_leak_inside_the_levels_stays_growth() {
    let level = |t: u64| {
        if (5..11).contains(&t) || t >= 15 {
            12.0 * MIB
        } else {
            0.0
        }
    };
    let analysis = classify(&series(level, 30, MIB), &options());
    assert_eq!(
        analysis.classification,
        Classification::Growth,
        "{analysis:#?}"
    );
}

/// Memory taken in chunks and never given back (jumps up only) is not a level that comes and
/// goes: the split leaves it alone.
#[test]
fn a_staircase_is_not_split() {
    let level = |t: u64| 10.0 * MIB * (t / 7) as f64;
    let analysis = classify(&series(level, 30, 0.0), &options());
    assert!(
        !matches!(analysis.reason, Reason::FlatLevels { .. }),
        "{:?}",
        analysis.reason
    );
    assert_ne!(analysis.classification, Classification::Clean);
    assert_ne!(analysis.classification, Classification::Plateau);
}

/// Samples of a generated step-noise series (`bench detection`, seed 1, 20 turns), in MiB above
/// the baseline: two levels about 12 MiB apart, switched between 7 times, more often high in
/// the second half. Before switching levels were judged, the tests on every sample called it
/// growth (Mann-Kendall p = 0.0013).
const SWITCHING: [f64; 21] = [
    0.7, 0.3, 13.0, 1.5, -0.8, 11.9, -0.0, 0.3, 0.6, -0.5, 1.3, -0.9, -0.7, 12.1, 11.0, 12.6, 13.6,
    10.2, 11.8, 0.1, 12.0,
];

fn switching(per_turn: f64) -> MetricSeries {
    let points: Vec<(u64, u64)> = SWITCHING
        .iter()
        .enumerate()
        .map(|(t, v)| {
            (
                t as u64,
                (BASE + v * MIB + per_turn * t as f64).round() as u64,
            )
        })
        .collect();
    MetricSeries::from_points(&points)
}

/// An allocator switching back and forth between two levels, with levels of one or two samples
/// the split cannot judge: not growth, and the reason names the pattern.
#[test]
fn levels_switched_back_and_forth_are_not_growth() {
    let analysis = classify(&switching(0.0), &options());
    assert_eq!(
        analysis.classification,
        Classification::Plateau,
        "{analysis:#?}"
    );
    assert!(
        matches!(
            analysis.reason,
            Reason::SwitchingLevels {
                levels: 2,
                switches: 7,
                ..
            }
        ),
        "{:?}",
        analysis.reason
    );
}

/// The same switching with a leak of 1 MiB per turn under it moves both levels: growth.
#[test]
fn a_leak_under_switching_levels_stays_growth() {
    let analysis = classify(&switching(MIB), &options());
    assert_eq!(
        analysis.classification,
        Classification::Growth,
        "{analysis:#?}"
    );
}

/// A steady leak has no gaps in its values: never grouped into levels, whatever its size.
#[test]
fn a_steady_leak_is_never_taken_for_levels() {
    for per_turn in [0.5 * MIB, 2.0 * MIB, 8.0 * MIB] {
        let analysis = classify(&series(|_| 0.0, 30, per_turn), &options());
        assert_eq!(
            analysis.classification,
            Classification::Growth,
            "{per_turn}: {analysis:#?}"
        );
        assert!(!matches!(analysis.reason, Reason::SwitchingLevels { .. }));
    }
}
