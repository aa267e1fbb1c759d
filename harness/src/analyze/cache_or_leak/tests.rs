use std::collections::BTreeMap;

use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, Normal};

use super::*;
use crate::analyze::series::Epoch;

const MIB: u64 = 1 << 20;

/// Turns of each seeded series.
const TURNS: u64 = 40;

/// What a synthetic engine keeps per turn.
#[derive(Debug, Clone, Copy)]
enum Engine {
    /// A cache of `capacity` entries (oldest evicted first) of 8 MiB each.
    Cache { capacity: usize },
    /// 2 MiB left behind by every request.
    Leak,
    /// Both: an unbounded cache and a per-request leak.
    Both,
    /// Nothing: only noise.
    Flat,
}

/// A seeded run of `turns` turns whose keys are drawn from `distinct` session ids; noise of
/// 256 KiB on every sample.
fn run(
    engine: Engine,
    turns: u64,
    distinct: u32,
    seed: u64,
) -> (MetricSeries, BTreeMap<u64, String>) {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let noise = Normal::new(0.0, 256.0 * 1024.0).unwrap();
    let mut cache: Vec<u32> = Vec::new();
    let mut held = 0u64;
    let base = 512 * MIB;
    let mut points = vec![(0, base)];
    let mut keys = BTreeMap::new();
    for turn in 1..=turns {
        let key = rng.random_range(0..distinct);
        keys.insert(turn, format!("sess-{key}"));
        let hit = cache.contains(&key);
        if !hit {
            cache.push(key);
        }
        match engine {
            Engine::Cache { capacity } => {
                if cache.len() > capacity {
                    cache.remove(0);
                }
                held = cache.len() as u64 * 8 * MIB;
            }
            Engine::Leak => held += 2 * MIB,
            Engine::Both => held = cache.len() as u64 * 8 * MIB + turn * 2 * MIB,
            Engine::Flat => {}
        }
        let value = (base + held) as f64 + noise.sample(&mut rng);
        points.push((turn, value as u64));
    }
    (MetricSeries::from_points(&points), keys)
}

fn explain(engine: Engine, seed: u64) -> KeyedGrowth {
    let (series, keys) = run(engine, TURNS, 8, seed);
    explain_keyed_growth(&series, &keys, 0).expect("keyed")
}

/// How often each engine is named right over 500 seeded series of 40 turns and 8 session ids.
#[rstest::rstest]
#[case::cache_bounded_below_its_keys(Engine::Cache { capacity: 4 }, KeyedExplanation::CacheFilling, 0.85)]
#[case::cache_holding_every_key(Engine::Cache { capacity: 100 }, KeyedExplanation::CacheFilling, 0.95)]
#[case::leak_per_request(Engine::Leak, KeyedExplanation::PerRequest, 0.95)]
#[case::both(Engine::Both, KeyedExplanation::Both, 0.90)]
#[case::noise_only(Engine::Flat, KeyedExplanation::Neither, 0.97)]
fn each_kind_of_growth_is_named_right_in_most_seeded_series(
    #[case] engine: Engine,
    #[case] expected: KeyedExplanation,
    #[case] at_least: f64,
) {
    let runs = 500;
    let mut named = BTreeMap::<String, u32>::new();
    for seed in 0..runs {
        let e = explain(engine, seed);
        *named.entry(format!("{:?}", e.explanation)).or_default() += 1;
    }
    let right = f64::from(named.get(&format!("{expected:?}")).copied().unwrap_or(0)) / runs as f64;
    eprintln!("{engine:?}: {named:?} ({:.1}% right)", right * 100.0);
    assert!(right >= at_least, "{engine:?}: {named:?}");
}

#[test]
fn a_bounded_cache_says_where_new_keys_stopped_costing() {
    // Noise-free, keys cycled: 8 distinct keys, a cache of 4 entries.
    let points: Vec<(u64, u64)> = (0..=40u64)
        .map(|t| (t, 100 * MIB + t.min(4) * 8 * MIB))
        .collect();
    let keys = (1..=40u64)
        .map(|t| (t, format!("k{}", (t - 1) % 8)))
        .collect();
    let e = explain_keyed_growth(&MetricSeries::from_points(&points), &keys, 0).unwrap();
    assert_eq!(e.explanation, KeyedExplanation::CacheFilling);
    assert_eq!(e.per_new_key_bytes, (8 * MIB) as f64);
    assert_eq!(e.per_request_bytes, 0.0);
    assert_eq!(e.filled_after_keys, Some(4));
    assert_eq!(e.distinct_keys, 8);
}

#[test]
fn an_unbounded_cache_still_grew_on_its_last_new_key() {
    let points: Vec<(u64, u64)> = (0..=24u64)
        .map(|t| (t, 100 * MIB + t.min(8) * 8 * MIB))
        .collect();
    let keys = (1..=24u64)
        .map(|t| (t, format!("k{}", (t - 1) % 8)))
        .collect();
    let e = explain_keyed_growth(&MetricSeries::from_points(&points), &keys, 0).unwrap();
    assert_eq!(e.explanation, KeyedExplanation::CacheFilling);
    assert_eq!(e.filled_after_keys, None);
    // The first turn's increment carries the one-time rise and is left out.
    assert_eq!((e.new_key_turns, e.repeat_turns), (7, 16));
}

#[test]
fn every_turn_a_new_key_cannot_tell_a_cache_from_a_leak() {
    let points: Vec<(u64, u64)> = (0..=12u64).map(|t| (t, 100 * MIB + t * MIB)).collect();
    let keys = (1..=12u64).map(|t| (t, format!("k{t}"))).collect();
    let e = explain_keyed_growth(&MetricSeries::from_points(&points), &keys, 0).unwrap();
    assert_eq!(e.explanation, KeyedExplanation::Unseparated);
    assert_eq!(e.repeat_turns, 0);
}

#[test]
fn a_reload_empties_the_cache_so_keys_are_new_again() {
    // Two epochs of 8 turns, 4 keys cycled, an unbounded cache emptied by the reload.
    let epoch = |start: u64| Epoch {
        start_turn: start,
        points: (0..=8u64)
            .map(|i| (start + i, 100 * MIB + i.min(4) * 8 * MIB))
            .collect(),
    };
    let series = MetricSeries {
        epochs: vec![epoch(0), epoch(8)],
        baseline_samples: Vec::new(),
    };
    let keys = (1..=16u64)
        .map(|t| (t, format!("k{}", (t - 1) % 4)))
        .collect();
    let e = explain_keyed_growth(&series, &keys, 0).unwrap();
    assert_eq!((e.new_key_turns, e.repeat_turns), (6, 8));
    assert_eq!(e.explanation, KeyedExplanation::CacheFilling);
}

#[test]
fn no_keys_no_explanation() {
    let series = MetricSeries::from_points(&[(0, 1), (1, 2)]);
    assert_eq!(explain_keyed_growth(&series, &BTreeMap::new(), 0), None);
}
