//! Table tests of the classifier on hand-shaped series with seeded Gaussian noise.

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, Normal};
use rstest::rstest;

use super::*;
use crate::analyze::series::Epoch;
use crate::analyze::test_support::words;

const MIB: f64 = 1024.0 * 1024.0;
const BASE: f64 = 1024.0 * MIB;

/// `baseline + shape(turn) + noise` for turns `0..=turns`, with seeded Gaussian noise of `sigma`.
fn shaped(turns: u32, sigma: f64, seed: u64, shape: impl Fn(u32) -> f64) -> Vec<(u64, u64)> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let noise = Normal::new(0.0, sigma).unwrap();
    (0..=turns)
        .map(|t| {
            let value = (BASE + shape(t) + noise.sample(&mut rng)).round() as u64;
            (u64::from(t), value)
        })
        .collect()
}

fn options(tolerance_mib: u64) -> ClassifyOptions {
    ClassifyOptions {
        tolerance: Some(Tolerance::Bytes(tolerance_mib << 20)),
        ..ClassifyOptions::default()
    }
}

fn run(points: &[(u64, u64)], options: &ClassifyOptions) -> MetricAnalysis {
    classify(&MetricSeries::from_points(points), options)
}

fn step(at: u32, size: f64) -> impl Fn(u32) -> f64 {
    move |t| if t >= at { size } else { 0.0 }
}

#[rstest]
#[case::flat(0.0, 0.0)]
#[case::small_rise_within_tolerance(0.0, 1.0 * MIB)]
#[case::fall_below_baseline(0.0, -40.0 * MIB)]
fn clean_series(#[case] slope: f64, #[case] rise: f64, #[values(1, 2, 3)] seed: u64) {
    let points = shaped(20, 0.25 * MIB, seed, |t| {
        if t >= 1 {
            rise + slope * f64::from(t)
        } else {
            0.0
        }
    });
    let a = run(&points, &options(5));
    assert_eq!(a.classification, Classification::Clean, "{a:#?}");
    assert!(a.plateau.is_none());
}

#[rstest]
#[case::gpu_context_at_first_turn(1, 1700.0 * MIB)]
#[case::pool_at_turn_three(3, 64.0 * MIB)]
fn one_time_step_is_a_plateau(#[case] at: u32, #[case] size: f64, #[values(1, 2, 3)] seed: u64) {
    let points = shaped(20, 0.5 * MIB, seed, step(at, size));
    let a = run(&points, &options(5));
    assert_eq!(a.classification, Classification::Plateau, "{a:#?}");
    let plateau = a.plateau.unwrap();
    assert_eq!(plateau.settled_at_turn, u64::from(at));
    assert!(
        (plateau.size_bytes as f64 - size).abs() < 2.0 * MIB,
        "{plateau:?}"
    );
}

#[rstest]
fn bounded_warmup_that_stops_is_a_plateau(#[values(1, 2, 3, 4)] seed: u64) {
    // A pool that fills over five turns, then stays.
    let points = shaped(30, 0.5 * MIB, seed, |t| 20.0 * MIB * f64::from(t.min(5)));
    let a = run(&points, &options(5));
    assert_eq!(a.classification, Classification::Plateau, "{a:#?}");
    let settled = a.plateau.unwrap().settled_at_turn;
    assert!((4..=6).contains(&settled), "{settled}");
}

#[rstest]
#[case::leak_from_the_start(0.0, 2.0 * MIB)]
#[case::leak_under_a_step(1700.0 * MIB, 2.0 * MIB)]
#[case::the_field_bug(0.0, 110.0 * MIB)]
fn per_turn_leak_is_growth(
    #[case] step_size: f64,
    #[case] slope: f64,
    #[values(1, 2, 3)] seed: u64,
) {
    let points = shaped(20, 1.0 * MIB, seed, |t| {
        if t >= 1 {
            step_size + slope * f64::from(t)
        } else {
            0.0
        }
    });
    let a = run(&points, &options(5));
    assert_eq!(a.classification, Classification::Growth, "{a:#?}");
    let (lo, hi) = a.slope_interval.unwrap();
    assert!(lo <= slope && slope <= hi, "{lo} {hi}");
    assert!(a.trend_p_value.unwrap() < TREND_ALPHA);
}

#[test]
fn two_points_are_never_clean() {
    let a = run(&[(0, 1000), (1, 1000)], &ClassifyOptions::default());
    assert_eq!(a.classification, Classification::Inconclusive, "{a:#?}");
    assert!(a.turns_needed.unwrap() >= 3);
}

/// Three turns of a real engine (LiteRT-LM over ssh, native_heap) rising a steady 4.5 KiB a turn:
/// the differences agree so well that the slope dwarfs their noise, yet nothing in three turns
/// tells a warm-up still settling from a leak.
#[rstest]
#[case::small_rise_is_undecided(4_600.0, Classification::Inconclusive)]
#[case::rise_beyond_tolerance_is_growth(2.0 * MIB, Classification::Growth)]
fn few_strictly_rising_samples_claim_growth_only_beyond_the_tolerance(
    #[case] per_turn: f64,
    #[case] class: Classification,
) {
    let points: Vec<(u64, u64)> = [0.0, 1.0, 1.98, 2.99]
        .iter()
        .enumerate()
        .map(|(t, k)| (t as u64, (BASE + k * per_turn).round() as u64))
        .collect();
    let a = run(&points, &options(1));
    assert_eq!(a.classification, class, "{a:#?}");
    if class == Classification::Inconclusive {
        assert!(a.turns_needed.is_some_and(|n| n > 3), "{a:#?}");
        assert!(
            words(&a).contains("cannot tell a leak from a warm-up"),
            "{}",
            words(&a)
        );
    }
}

/// The CI case: a 3-turn LiteRT-LM run over ssh whose native heap stepped +1.1 MiB at its first
/// turn (beyond a 1 MiB tolerance) and then rose 3.5 KiB a turn. The step is the warm-up; the
/// three steady samples rose 7 KiB, and nothing in them tells a leak.
#[test]
fn a_warmup_step_does_not_count_as_the_few_samples_rise() {
    let points: Vec<(u64, u64)> = [0.0, 1.1 * MIB, 1.1 * MIB + 3_500.0, 1.1 * MIB + 7_100.0]
        .iter()
        .enumerate()
        .map(|(t, v)| (t as u64, (BASE + v).round() as u64))
        .collect();
    let options = ClassifyOptions {
        warmup_turns: 1,
        ..options(1)
    };
    let a = run(&points, &options);
    assert_ne!(a.classification, Classification::Growth, "{a:#?}");
}

#[test]
fn noise_that_could_hide_a_leak_is_inconclusive() {
    // Noise of 20 MiB against a 5 MiB tolerance over 8 turns.
    let points = shaped(8, 20.0 * MIB, 7, |_| 0.0);
    let a = run(&points, &options(5));
    assert_eq!(a.classification, Classification::Inconclusive, "{a:#?}");
    assert!(a.turns_needed.is_none_or(|n| n > 8), "{a:#?}");
}

#[test]
fn small_leak_in_noise_gets_a_turn_estimate_that_decides() {
    let noise = 2.0 * MIB;
    let points = shaped(6, noise, 11, |t| 0.5 * MIB * f64::from(t));
    let a = run(&points, &options(5));
    assert_eq!(a.classification, Classification::Inconclusive, "{a:#?}");
    let needed = a.turns_needed.unwrap();
    let longer = shaped(u32::try_from(needed * 2).unwrap(), noise, 11, |t| {
        0.5 * MIB * f64::from(t)
    });
    let b = run(&longer, &options(5));
    assert_eq!(b.classification, Classification::Growth, "{needed}: {b:#?}");
}

#[rstest]
#[case::up_in_a_flat_series(7, 80.0 * MIB, Classification::Clean, 0.0)]
#[case::down_in_a_flat_series(12, -80.0 * MIB, Classification::Clean, 0.0)]
#[case::up_on_a_plateau(9, 300.0 * MIB, Classification::Plateau, 0.0)]
#[case::up_in_a_leak(15, 300.0 * MIB, Classification::Growth, 2.0 * MIB)]
fn single_spikes_change_nothing(
    #[case] at: u32,
    #[case] spike: f64,
    #[case] expected: Classification,
    #[case] slope: f64,
) {
    let plateau = if expected == Classification::Plateau {
        500.0 * MIB
    } else {
        0.0
    };
    let points = shaped(20, 0.25 * MIB, 5, |t| {
        let base = if t >= 1 {
            plateau + slope * f64::from(t)
        } else {
            0.0
        };
        base + if t == at { spike } else { 0.0 }
    });
    let a = run(&points, &options(5));
    assert_eq!(a.classification, expected, "{a:#?}");
    assert_eq!(a.spike_turns, vec![u64::from(at)]);
}

#[test]
fn declared_warmup_turns_are_excluded() {
    // Three warm-up turns that rise, then flat: with warmup_turns = 3 the rise is the plateau.
    let points = shaped(15, 0.25 * MIB, 3, |t| 10.0 * MIB * f64::from(t.min(3)));
    let opts = ClassifyOptions {
        warmup_turns: 3,
        ..options(5)
    };
    let a = run(&points, &opts);
    assert_eq!(a.classification, Classification::Plateau, "{a:#?}");
    assert!(a.steady_from_turn.unwrap() >= 3);
}

/// Epochs of `period` turns after a load at turn 0; after every reload memory returns to the
/// baseline and `shape(offset)` is added again.
fn reloading(epochs: u32, period: u32, sigma: f64, shape: impl Fn(u32) -> f64) -> MetricSeries {
    let mut rng = ChaCha8Rng::seed_from_u64(21);
    let noise = Normal::new(0.0, sigma).unwrap();
    let mut value = |offset: u32| (BASE + shape(offset) + noise.sample(&mut rng)).round() as u64;
    MetricSeries {
        epochs: (0..epochs)
            .map(|e| {
                let start = e * period;
                Epoch {
                    start_turn: u64::from(start),
                    points: (0..=period)
                        .map(|k| (u64::from(start + k), value(k)))
                        .collect(),
                }
            })
            .collect(),
        baseline_samples: Vec::new(),
    }
}

#[test]
fn growth_inside_reload_epochs_is_reported() {
    // The workaround from the field: reload every 5 turns; each epoch still leaks 110 MiB/turn.
    let series = reloading(6, 5, 2.0 * MIB, |k| 110.0 * MIB * f64::from(k));
    let opts = ClassifyOptions {
        reload_every: 5,
        ..options(5)
    };
    let a = classify(&series, &opts);
    assert_eq!(a.classification, Classification::Growth, "{a:#?}");
    assert_eq!(a.epochs, 6);
    assert!((a.slope_bytes_per_turn / MIB - 110.0).abs() < 2.0, "{a:#?}");
}

#[test]
fn a_step_after_every_reload_is_a_plateau() {
    let series = reloading(6, 5, 1.0 * MIB, |k| if k >= 1 { 1700.0 * MIB } else { 0.0 });
    let opts = ClassifyOptions {
        reload_every: 5,
        ..options(5)
    };
    let a = classify(&series, &opts);
    assert_eq!(a.classification, Classification::Plateau, "{a:#?}");
    assert_eq!(a.steady_from_turn, Some(1));
}

#[test]
fn max_growth_per_turn_bars_clean_when_the_interval_is_too_wide() {
    let points = shaped(6, 0.5 * MIB, 4, |_| 0.0);
    let loose = run(&points, &options(50));
    assert_eq!(loose.classification, Classification::Clean, "{loose:#?}");
    let strict = ClassifyOptions {
        max_growth_per_turn: Some(1024),
        ..options(50)
    };
    let a = run(&points, &strict);
    assert_eq!(a.classification, Classification::Inconclusive, "{a:#?}");
}

#[test]
fn exact_constant_series_is_clean_without_noise() {
    let points: Vec<(u64, u64)> = (0..=10).map(|t| (t, 4096)).collect();
    let a = run(&points, &ClassifyOptions::default());
    assert_eq!(a.classification, Classification::Clean, "{a:#?}");
    assert_eq!(a.noise_bytes, 0.0);
}

#[test]
fn long_runs_are_thinned_and_still_classified() {
    let points = shaped(20_000, 1.0 * MIB, 9, |t| 64.0 * f64::from(t));
    // A horizon long enough for 64 B/turn to leave the tolerance: not practically nil.
    let long = ClassifyOptions {
        horizon_turns: 1_000_000,
        ..options(5)
    };
    let a = run(&points, &long);
    assert_eq!(a.classification, Classification::Growth, "{a:#?}");
    assert!((a.slope_bytes_per_turn - 64.0).abs() < 16.0, "{a:#?}");
}

/// The field report's four turns (context: Pixel 4a, OpenCL GPU backend), in bytes.
const PIXEL_GRAPHICS: [u64; 5] = [61382656, 1809432576, 1812480000, 1812480000, 1812480000];
const PIXEL_NATIVE_HEAP: [u64; 5] = [130252800, 688574464, 839680000, 1157120000, 1157120000];
const PIXEL_PSS: [u64; 5] = [721974272, 2944274432, 3758080000, 3768320000, 3768320000];

fn pixel(values: &[u64]) -> MetricAnalysis {
    let points: Vec<(u64, u64)> = values
        .iter()
        .enumerate()
        .map(|(t, v)| (t as u64, *v))
        .collect();
    run(&points, &ClassifyOptions::default())
}

#[test]
fn pixel_graphics_is_a_one_time_step_not_growth() {
    let a = pixel(&PIXEL_GRAPHICS);
    assert_eq!(a.classification, Classification::Plateau, "{a:#?}");
    let plateau = a.plateau.unwrap();
    assert_eq!(plateau.settled_at_turn, 1);
    assert!(
        (plateau.size_bytes as f64 / MIB - 1670.0).abs() < 5.0,
        "{plateau:?}"
    );
}

#[test]
fn pixel_native_heap_over_four_turns_is_inconclusive() {
    // It rises 0.67 -> 0.82 -> 1.13 -> 1.13 GB, but Mann-Kendall cannot reach p < 0.01 with four
    // steady samples, and the last two are equal: more turns are needed to call it growth.
    let a = pixel(&PIXEL_NATIVE_HEAP);
    assert_eq!(a.classification, Classification::Inconclusive, "{a:#?}");
    assert!(a.slope_bytes_per_turn > 100.0 * MIB, "{a:#?}");
    assert!(a.turns_needed.unwrap() > 4, "{a:#?}");
}

#[test]
fn pixel_pss_is_not_growth_either() {
    let a = pixel(&PIXEL_PSS);
    assert_ne!(a.classification, Classification::Growth, "{a:#?}");
    assert_ne!(a.classification, Classification::Clean, "{a:#?}");
}

/// Epochs of `period` turns after a load at turn 0, noise `sigma` from `seed`; the value at
/// offset `k` of epoch `e` (the reload sample is offset 0) is `baseline + shape(e, k)`.
fn epochs_of(
    epochs: u32,
    period: u32,
    sigma: f64,
    seed: u64,
    shape: impl Fn(u32, u32) -> f64,
) -> MetricSeries {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let noise = Normal::new(0.0, sigma).unwrap();
    MetricSeries {
        epochs: (0..epochs)
            .map(|e| {
                let start = e * period;
                Epoch {
                    start_turn: u64::from(start),
                    points: (0..=period)
                        .map(|k| {
                            let v = BASE + shape(e, k) + noise.sample(&mut rng);
                            (u64::from(start + k), v.round() as u64)
                        })
                        .collect(),
                }
            })
            .collect(),
        baseline_samples: Vec::new(),
    }
}

fn reload_options(period: u32) -> ClassifyOptions {
    ClassifyOptions {
        reload_every: period,
        ..options(5)
    }
}

#[rstest]
#[case::six_epochs(6, 8.0 * MIB)]
#[case::four_epochs_large_steps(4, 30.0 * MIB)]
#[case::ten_epochs_small_steps(10, 3.0 * MIB)]
fn memory_each_reload_leaves_behind_is_growth(
    #[case] epochs: u32,
    #[case] per_reload: f64,
    #[values(1, 2, 3)] seed: u64,
) {
    // Flat inside every epoch; every reload settles `per_reload` higher than the one before.
    let series = epochs_of(epochs, 5, 1.0 * MIB, seed, |e, _| per_reload * f64::from(e));
    let a = classify(&series, &reload_options(5));
    assert_eq!(a.classification, Classification::Growth, "{a:#?}");
    let per_turn = per_reload / 5.0;
    let (lo, hi) = a.slope_interval.unwrap();
    assert!(lo <= per_turn && per_turn <= hi, "{a:#?}");
    assert!(words(&a).contains("each reload leaves"), "{}", words(&a));
    assert!(a.trend_p_value.unwrap() < TREND_ALPHA);
}

#[rstest]
#[case::flat(0.0)]
#[case::step_after_every_reload(300.0 * MIB)]
fn flat_epochs_with_reloads_are_not_growth(#[case] step: f64, #[values(1, 2, 3, 4, 5)] seed: u64) {
    let series = epochs_of(
        8,
        5,
        1.0 * MIB,
        seed,
        |_, k| if k >= 1 { step } else { 0.0 },
    );
    let a = classify(&series, &reload_options(5));
    let expected = if step == 0.0 {
        Classification::Clean
    } else {
        Classification::Plateau
    };
    assert_eq!(a.classification, expected, "{a:#?}");
}

#[rstest]
fn growth_within_epochs_is_still_growth_with_a_ratchet_on_top(#[values(1, 2, 3)] seed: u64) {
    let series = epochs_of(6, 5, 1.0 * MIB, seed, |e, k| {
        4.0 * MIB * f64::from(e) + 2.0 * MIB * f64::from(k)
    });
    let a = classify(&series, &reload_options(5));
    assert_eq!(a.classification, Classification::Growth, "{a:#?}");
    // Reported as the within-epoch slope, which the pooled test found first.
    assert!((a.slope_bytes_per_turn / MIB - 2.0).abs() < 0.5, "{a:#?}");
}

#[rstest]
#[case::two_epochs(2)]
#[case::three_epochs(3)]
fn too_few_epochs_never_claim_a_ratchet(#[case] epochs: u32, #[values(1, 2, 3)] seed: u64) {
    let series = epochs_of(epochs, 5, 1.0 * MIB, seed, |e, _| 30.0 * MIB * f64::from(e));
    let a = classify(&series, &reload_options(5));
    assert_eq!(a.classification, Classification::Inconclusive, "{a:#?}");
    assert!(words(&a).contains("at least 4 epochs"), "{}", words(&a));
    // Four epochs of five turns: the fourth begins at turn 15.
    assert!(a.turns_needed.unwrap() > 15, "{a:#?}");
}

#[rstest]
#[case::cold_first_load(|e: u32, _| if e >= 1 { 40.0 * MIB } else { 0.0 })]
#[case::step_at_the_fifth_load(|e: u32, _| if e >= 4 { 40.0 * MIB } else { 0.0 })]
fn a_one_time_step_between_loads_is_not_growth(
    #[case] shape: fn(u32, u32) -> f64,
    #[values(1, 2, 3)] seed: u64,
) {
    let series = epochs_of(8, 5, 1.0 * MIB, seed, shape);
    let a = classify(&series, &reload_options(5));
    assert_ne!(a.classification, Classification::Growth, "{a:#?}");
}

/// The shape seen on the real LiteRT-LM CPU engine (`fixtures/traces/litert-cpu-reload-run5`):
/// the level after each reload settles like an allocator warming up (+3.3, +1.7, +0.9, +0.1 of
/// a scale) and steps up once more late in the run. Noise 1 MiB; the levels rise by up to 40 MiB.
#[rstest]
#[case::warmup_only(None)]
#[case::warmup_then_a_late_step(Some(4))]
fn levels_that_settle_across_reloads_are_not_growth(
    #[case] step_at: Option<u32>,
    #[values(1, 2, 3, 4, 5)] seed: u64,
) {
    let warmup = [0.0, 20.0, 30.0, 35.0, 35.5, 35.5, 35.5];
    let series = epochs_of(7, 5, 1.0 * MIB, seed, |e, _| {
        let step = match step_at {
            Some(at) if e >= at => 8.0,
            _ => 0.0,
        };
        (warmup[e as usize] + step) * MIB
    });
    let a = classify(&series, &reload_options(5));
    assert_ne!(a.classification, Classification::Growth, "{a:#?}");
}

#[rstest]
fn a_ratchet_after_levels_settle_is_still_growth(#[values(1, 2, 3)] seed: u64) {
    // Two reloads of warm-up, then 6 MiB (6 sigma) left behind by each of the next eight.
    let series = epochs_of(10, 5, 1.0 * MIB, seed, |e, _| {
        let warm = [0.0, 20.0].get(e as usize).copied().unwrap_or(30.0);
        (warm + 6.0 * f64::from(e.saturating_sub(2))) * MIB
    });
    let a = classify(&series, &reload_options(5));
    assert_eq!(a.classification, Classification::Growth, "{a:#?}");
    assert!(words(&a).contains("each reload leaves"), "{}", words(&a));
}

// ---- Real-data failures (issue items 1-6) ----

/// A series from exact values at the given turns.
fn exact(turns: &[u64], values: &[f64]) -> MetricSeries {
    let points: Vec<(u64, u64)> = turns
        .iter()
        .zip(values)
        .map(|(t, v)| (*t, v.round() as u64))
        .collect();
    MetricSeries::from_points(&points)
}

/// Cumulative sums of increments after a start value.
fn cumulative(start: f64, increments: &[f64]) -> Vec<f64> {
    let mut values = vec![start];
    for step in increments {
        values.push(values.last().unwrap() + step);
    }
    values
}

#[rstest]
#[case::iteration_counter(20_000)]
#[case::hundred_million(100_000_000)]
#[case::near_2_53(1 << 48)]
fn sparse_turn_numbers_give_a_verdict_with_the_slope_per_turn_unit(#[case] spacing: u64) {
    // A leak of 2 MiB per sample with 0.25 MiB of noise, sampled every `spacing` turns.
    let points = shaped(20, 0.25 * MIB, 4, |t| 2.0 * MIB * f64::from(t));
    let sparse: Vec<(u64, u64)> = points.iter().map(|(t, v)| (t * spacing, *v)).collect();
    let a = run(&sparse, &options(5));
    assert_eq!(a.classification, Classification::Growth, "{a:#?}");
    let per_turn = 2.0 * MIB / spacing as f64;
    assert!(
        (a.slope_bytes_per_turn / per_turn - 1.0).abs() < 0.05,
        "{} vs {per_turn}",
        a.slope_bytes_per_turn
    );
    // The same samples flat: clean, and nothing panics on the way.
    let flat = shaped(20, 0.25 * MIB, 4, |_| 0.0);
    let sparse: Vec<(u64, u64)> = flat.iter().map(|(t, v)| (t * spacing, *v)).collect();
    assert_eq!(
        run(&sparse, &options(5)).classification,
        Classification::Clean
    );
}

#[test]
fn four_samples_with_a_huge_last_turn_are_judged_without_panicking() {
    let series = exact(&[0, 1, 2, 4_294_967_295], &[BASE, BASE, BASE, BASE]);
    let a = classify(&series, &options(5));
    assert_ne!(a.classification, Classification::Growth, "{a:#?}");
    let at_the_limit = exact(&[0, 1, 2, 1 << 53], &[BASE, BASE + MIB, BASE, BASE]);
    let b = classify(&at_the_limit, &options(5));
    assert!(b.turns_needed.is_none_or(|n| n > 1 << 53), "{b:#?}");
    // A declared warm-up far beyond u32 turn numbers is honoured.
    let declared = ClassifyOptions {
        warmup_turns: 4_000_000_000,
        ..options(5)
    };
    let c = classify(&series, &declared);
    assert_eq!(c.classification, Classification::Inconclusive, "{c:#?}");
}

#[test]
fn a_noiseless_ramp_is_growth() {
    // Peak RSS rising 1.60 MB per step for 10 steps, the last step 1% larger.
    let mut increments = vec![1.6e6; 9];
    increments.push(1.616e6);
    let values = cumulative(500e6, &increments);
    let turns: Vec<u64> = (0..values.len() as u64).collect();
    let a = classify(&exact(&turns, &values), &ClassifyOptions::default());
    assert_eq!(a.classification, Classification::Growth, "{a:#?}");
    assert!(
        (a.slope_bytes_per_turn / 1.6e6 - 1.0).abs() < 0.01,
        "{a:#?}"
    );
}

#[test]
fn a_single_allocator_segment_step_is_not_growth() {
    // Allocator segments of 2 MiB: flat, one segment added at turn 7, flat again.
    let values: Vec<f64> = (0..=14)
        .map(|t| BASE + if t >= 7 { 2.0 * MIB } else { 0.0 })
        .collect();
    let turns: Vec<u64> = (0..=14).collect();
    let a = classify(&exact(&turns, &values), &options(1));
    assert_ne!(a.classification, Classification::Growth, "{a:#?}");
}

#[rstest]
#[case::bytes_on_tens_of_mb(12, 97.0, 1.0 * MIB, 0.0)]
#[case::one_byte_per_turn(9, 1.0, 1.0 * MIB, 0.0)]
fn practically_nil_growth_is_clean_until_a_longer_horizon_makes_it_matter(
    #[case] turns: u32,
    #[case] slope: f64,
    #[case] tolerance: f64,
    #[case] sigma: f64,
) {
    let points = shaped(turns, sigma, 3, |t| slope * f64::from(t));
    let options = ClassifyOptions {
        tolerance: Some(Tolerance::Bytes(tolerance as u64)),
        ..ClassifyOptions::default()
    };
    let a = run(&points, &options);
    // Its upper bound keeps it within the tolerance over the horizon: practically nil, and the
    // level is within the tolerance, so it is clean (with its slope in the reason).
    assert_eq!(a.classification, Classification::Clean, "{a:#?}");
    assert!(!a.fails());
    assert!(words(&a).contains("95% CI"), "{}", words(&a));
    // The same growth over a horizon long enough for it to matter fails.
    let long = ClassifyOptions {
        horizon_turns: 100 * (tolerance / slope) as u64,
        ..options
    };
    let b = run(&points, &long);
    assert_eq!(b.growth_matters, Some(true), "{b:#?}");
    assert!(b.fails());
}

#[test]
fn a_growth_cap_decides_whether_growth_matters() {
    let points = shaped(20, 0.25 * MIB, 2, |t| 2.0 * MIB * f64::from(t));
    let capped = |cap: u64| ClassifyOptions {
        max_growth_per_turn: Some(cap),
        ..options(5)
    };
    let small = run(&points, &capped(4 << 20));
    assert_eq!(small.classification, Classification::Growth);
    assert_eq!(small.growth_matters, Some(false), "{small:#?}");
    let large = run(&points, &capped(1 << 20));
    assert_eq!(large.growth_matters, Some(true), "{large:#?}");
    let field = run(&points, &options(5));
    assert_eq!(field.growth_matters, Some(true), "{field:#?}");
    // +13 KiB/turn over 18 turns: beyond a 1 MiB tolerance within 1000 turns, so it fails by
    // default; a 64 KiB cap says it does not matter.
    let small = shaped(18, 300.0, 3, |t| 13.0 * 1024.0 * f64::from(t));
    let by_horizon = run(&small, &options(1));
    assert_eq!(by_horizon.classification, Classification::Growth);
    assert_eq!(by_horizon.growth_matters, Some(true), "{by_horizon:#?}");
    let by_cap = run(&small, &capped(64 << 10));
    assert_eq!(by_cap.growth_matters, Some(false), "{by_cap:#?}");
    assert!(
        words(&by_cap).contains("within the 64.0 KiB per turn allowed"),
        "{}",
        words(&by_cap)
    );
}

#[test]
fn a_slowing_warmup_is_not_growth_on_eight_samples() {
    let values = cumulative(BASE, &[8.9, 1.9, 1.4, 0.4, 3.0, 0.4, 0.1].map(|m| m * MIB));
    let turns: Vec<u64> = (0..values.len() as u64).collect();
    let a = classify(&exact(&turns, &values), &ClassifyOptions::default());
    assert_ne!(a.classification, Classification::Growth, "{a:#?}");
}

#[test]
fn a_fifty_fold_jump_at_the_last_turn_is_not_clean() {
    let mut values = vec![100.0 * MIB; 12];
    for (i, v) in values.iter_mut().enumerate() {
        *v += [0.0, 0.2, -0.1, 0.1, -0.2, 0.0][i % 6] * MIB;
    }
    *values.last_mut().unwrap() *= 50.0;
    let turns: Vec<u64> = (0..values.len() as u64).collect();
    let a = classify(&exact(&turns, &values), &options(5));
    assert_eq!(a.classification, Classification::Inconclusive, "{a:#?}");
    assert!(words(&a).contains("last"), "{}", words(&a));
}

#[test]
fn a_saturated_counter_is_refused() {
    let points: Vec<(u64, u64)> = (0..10)
        .map(|t| (t, (1u64 << 60).saturating_mul(1 << t)))
        .collect();
    let a = run(&points, &options(5));
    assert_eq!(a.classification, Classification::Inconclusive, "{a:#?}");
    assert!(words(&a).contains("saturated"), "{}", words(&a));
}

/// 40 turns of RSS around 730 MB with sample noise of 6.7 MB, drifting slightly down.
fn flat_noisy_rss(seed: u64) -> Vec<(u64, u64)> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let noise: Normal<f64> = Normal::new(0.0, 6.7e6).unwrap();
    (0..=40)
        .map(|t| {
            (
                t,
                (730e6 - 0.05e6 * t as f64 + noise.sample(&mut rng)).round() as u64,
            )
        })
        .collect()
}

#[test]
fn several_baseline_samples_let_a_flat_noisy_series_be_clean() {
    // Without the drift: a series that falls is clean however noisy its one baseline sample.
    let points: Vec<(u64, u64)> = flat_noisy_rss(8)
        .into_iter()
        .map(|(t, v)| (t, v + 50_000 * t))
        .collect();
    let tolerance = ClassifyOptions {
        tolerance: Some(Tolerance::Bytes(15_000_000)),
        ..ClassifyOptions::default()
    };
    let single = classify(&MetricSeries::from_points(&points), &tolerance);
    assert_eq!(
        single.classification,
        Classification::Inconclusive,
        "{single:#?}"
    );
    assert!(
        words(&single).contains("baseline samples") && words(&single).contains("tolerance"),
        "{}",
        words(&single)
    );
    // Eight baseline samples taken after load, settling between them.
    let mut rng = ChaCha8Rng::seed_from_u64(9);
    let noise: Normal<f64> = Normal::new(0.0, 6.7e6).unwrap();
    let baseline: Vec<u64> = (0..8)
        .map(|_| (730e6 + noise.sample(&mut rng)).round() as u64)
        .collect();
    let series = MetricSeries::with_baseline_samples(&baseline, &points[1..], 0);
    let several = classify(&series, &tolerance);
    assert_eq!(
        several.classification,
        Classification::Clean,
        "{several:#?}"
    );
}

// ---- Cost: linear in the number of samples (timings are in `leakloop bench`, not here) ----

/// `n` samples after the baseline, `spacing` turns apart, rising `slope` per turn, with seeded
/// Gaussian noise of 0.5 MiB.
fn long_series(n: u64, spacing: u64, slope: f64) -> Vec<(u64, u64)> {
    let mut rng = ChaCha8Rng::seed_from_u64(n ^ spacing);
    let noise = Normal::new(0.0, 0.5 * MIB).unwrap();
    (0..=n)
        .map(|k| {
            let value = BASE + slope * (k * spacing) as f64 + noise.sample(&mut rng);
            (k * spacing, value.round() as u64)
        })
        .collect()
}

#[test]
fn a_million_samples_are_judged() {
    let leak = run(&long_series(1_000_000, 1, 64.0), &options(5));
    assert_eq!(leak.classification, Classification::Growth, "{leak:#?}");
    assert!(
        (leak.slope_bytes_per_turn / 64.0 - 1.0).abs() < 0.02,
        "{leak:#?}"
    );
    assert_eq!(leak.points, 1_000_001);
    assert!(leak.steady_from_turn.unwrap() < 10, "{leak:#?}");
    let flat = run(&long_series(1_000_000, 1, 0.0), &options(5));
    assert_eq!(flat.classification, Classification::Clean, "{flat:#?}");
}

#[test]
fn a_hundred_thousand_samples_up_to_turn_2_53_are_judged() {
    let spacing = (1u64 << 53) / 100_000;
    let leak = run(&long_series(100_000, spacing, 1e-6), &options(5));
    assert_eq!(leak.classification, Classification::Growth, "{leak:#?}");
    assert!(
        (leak.slope_bytes_per_turn / 1e-6 - 1.0).abs() < 0.05,
        "{leak:#?}"
    );
}

#[test]
fn long_reload_epochs_pool_within_the_pair_budget() {
    // 60 epochs of 1999 turns (about 120,000 samples), growing 4 KiB per turn inside each and
    // returning at every reload: the pooled slope still finds it, from a bounded number of pairs.
    let series = reloading(60, 1999, 0.25 * MIB, |k| 4096.0 * f64::from(k));
    let a = classify(&series, &reload_options(1999));
    assert_eq!(a.classification, Classification::Growth, "{a:#?}");
    assert!(
        (a.slope_bytes_per_turn / 4096.0 - 1.0).abs() < 0.05,
        "{a:#?}"
    );
    let lengths = vec![2000; 60];
    let cap = points_cap(&lengths);
    assert!(60 * cap * (cap - 1) / 2 <= MAX_PAIRS, "{cap}");
    assert!(cap > 200, "{cap}");
}

// ---- Real traces the second round got wrong (fixtures/traces/real/) ----

/// Values at consecutive turns from 0.
fn consecutive(values: &[f64]) -> MetricSeries {
    let turns: Vec<u64> = (0..values.len() as u64).collect();
    exact(&turns, values)
}

#[test]
fn a_last_sample_slightly_above_a_settled_line_is_not_a_jump() {
    // A one-time rise of 20 MiB, then flat with 0.05 MiB of noise; the last sample stands 0.5 MiB
    // above the line: beyond 4 noise deviations, within the 1 MiB tolerance, and far above the
    // baseline only because of the plateau.
    let mut values = vec![BASE];
    let wiggle = [
        0.0, 0.04, -0.03, 0.05, -0.05, 0.02, -0.04, 0.03, 0.0, -0.02, 0.04, -0.01,
    ];
    values.extend(wiggle.iter().map(|w| BASE + (20.0 + w) * MIB));
    values.push(BASE + 20.5 * MIB);
    let a = classify(&consecutive(&values), &options(1));
    assert!(!words(&a).contains("the last sample"), "{a:#?}");
    assert_eq!(a.classification, Classification::Plateau, "{a:#?}");
}

#[test]
fn a_steady_leak_on_six_samples_is_growth() {
    // +10 MiB per turn with a little unevenness, the last sample 0.5 MiB above the line through
    // the others (Bun #10265 has this shape).
    let values = cumulative(40.0 * MIB, &[10.1, 10.4, 10.1, 8.1, 10.5].map(|m| m * MIB));
    let a = classify(&consecutive(&values), &options(1));
    assert_eq!(a.classification, Classification::Growth, "{a:#?}");
}

#[test]
fn five_strictly_rising_samples_far_beyond_the_noise_are_growth() {
    // A rank test on five samples cannot go below p = 1/120; the effect size can.
    let values = cumulative(BASE, &[10.1, 10.4, 10.1, 9.6].map(|m| m * MIB));
    let a = classify(&consecutive(&values), &options(1));
    assert_eq!(a.classification, Classification::Growth, "{a:#?}");
    assert!(
        words(&a).contains("every steady sample above"),
        "{}",
        words(&a)
    );
}

#[test]
fn a_few_rising_samples_as_uneven_as_their_rise_are_not_growth() {
    // Strictly rising, but the steps scatter as much as they rise: the effect is not significant.
    let values = cumulative(BASE, &[0.3, 2.2, 0.2, 2.3, 0.1].map(|m| m * MIB));
    let a = classify(&consecutive(&values), &options(1));
    assert_ne!(a.classification, Classification::Growth, "{a:#?}");
}

#[test]
fn a_garbage_collected_heap_that_ratchets_past_its_earlier_peaks_is_growth() {
    // A high load sample, collections during the warm-up, then a climb of 4 MiB per turn that
    // goes clearly beyond everything before it (LiteLLM #8551 has this shape).
    let mut values: Vec<f64> = [300.0, 120.0, 115.0, 220.0, 225.0, 230.0, 235.0, 95.0, 105.0]
        .iter()
        .map(|m| m * MIB)
        .collect();
    values
        .extend((0..16).map(|i| (255.0 + 4.0 * f64::from(i) + [0.3, -0.2][i as usize % 2]) * MIB));
    let a = classify(&consecutive(&values), &ClassifyOptions::default());
    assert_eq!(a.classification, Classification::Growth, "{a:#?}");
}

#[rstest]
fn a_sawtooth_that_climbs_back_to_where_it_fell_from_is_not_growth(
    #[values(4, 5, 6)] period: u32,
    #[values(1, 2, 3)] seed: u64,
) {
    let points = shaped(24, 0.1 * MIB, seed, |t| 2.0 * MIB * f64::from(t % period));
    let a = run(&points, &options(1));
    assert_ne!(a.classification, Classification::Growth, "{a:#?}");
}

#[test]
fn a_leak_with_a_collection_in_its_last_samples_is_still_growth() {
    // undici #3458 (fixtures/traces/real/undici-3458-cloned-response.csv), in MiB every 50
    // requests: a leak of about 8 MiB per sample with small collections, then one of 24 MiB two
    // samples before the end. The consecutive differences hardly see it; the later half's slope
    // is only known to its scatter around its own line.
    let mib = [
        66, 68, 76, 84, 93, 101, 110, 117, 125, 133, 141, 134, 143, 149, 155, 163, 171, 178, 185,
        183, 196, 205, 212, 219, 226, 233, 241, 249, 257, 264, 240, 244,
    ];
    let values: Vec<f64> = mib.iter().map(|m| f64::from(*m) * MIB).collect();
    let turns: Vec<u64> = (1..=values.len() as u64).map(|i| i * 50).collect();
    let a = classify(&exact(&turns, &values), &ClassifyOptions::default());
    assert_eq!(a.classification, Classification::Growth, "{a:#?}");
}

/// A saturating warm-up `size * (1 - exp(-t / tau))` with a time constant of 2-3 turns, 10 turns
/// long: its tail still rises after the settle turn, but its later half does not keep the slope.
/// With the first third of the steady part dropped as the only check, 1.7% of these 2000 seeded
/// series were called growth (34); with the later half's slope required too, 0.9% (18).
#[test]
fn a_slow_saturating_warmup_is_rarely_growth() {
    let mut rng = ChaCha8Rng::seed_from_u64(22);
    let series = 2000;
    let mut growth = 0;
    for seed in 0..series {
        let size = rand::RngExt::random_range(&mut rng, 20.0..200.0) * MIB;
        let tau = rand::RngExt::random_range(&mut rng, 2.0..3.0);
        let points = shaped(10, MIB, seed, |t| {
            size * (1.0 - (-f64::from(t) / tau).exp())
        });
        growth += u32::from(run(&points, &options(5)).classification == Classification::Growth);
    }
    eprintln!("growth: {growth} of {series}");
    assert!(
        f64::from(growth) <= 0.01 * f64::from(series as u32),
        "{growth} of {series}"
    );
}
