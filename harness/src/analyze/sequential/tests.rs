//! Tests of `sequential.rs`.

use rstest::rstest;

use super::*;
use crate::analyze::test_support::native_heap_record;
use crate::runner::EarlyStop;
use crate::scenario::{StopMode, Tolerance};

const MIB: u64 = 1 << 20;
const BASE: u64 = 1 << 30;
const WIGGLE: [i64; 7] = [40_000, -90_000, 20_000, 110_000, -30_000, -70_000, 80_000];

fn values(turns: u32, per_turn: u64) -> Vec<u64> {
    (0..=turns)
        .map(|t| (BASE as i64 + (per_turn * u64::from(t)) as i64 + WIGGLE[t as usize % 7]) as u64)
        .collect()
}

#[rstest]
#[case(1, &[1])]
#[case(6, &[6])]
#[case(12, &[6, 8, 10, 12])]
#[case(40, &[6, 8, 10, 13, 17, 22, 28, 35, 40])]
fn looks_grow_geometrically_and_end_at_the_maximum(#[case] max: u32, #[case] looks: &[u32]) {
    assert_eq!(look_schedule(max), looks);
}

#[test]
fn looks_stay_few_on_long_runs() {
    assert_eq!(look_schedule(1000).len(), 23);
    assert!(look_schedule(crate::scenario::MAX_TURNS).len() < 50);
}

#[rstest]
#[case(12)]
#[case(40)]
#[case(1000)]
fn the_looks_spend_exactly_the_budget(#[case] max: u32) {
    let looks = look_schedule(max);
    let alpha: f64 = looks.iter().map(|&m| look_levels(m, max).trend_alpha).sum();
    assert!((alpha - TREND_ALPHA).abs() < 1e-12, "{alpha}");
    let miss: f64 = looks
        .iter()
        .map(|&m| 1.0 - look_levels(m, max).confidence)
        .sum();
    assert!((miss - (1.0 - CONFIDENCE)).abs() < 1e-12, "{miss}");
    assert!(looks.iter().all(|&m| look_levels(m, max).trend_alpha > 0.0));
}

#[test]
fn pocock_spending_starts_at_zero_and_ends_at_one() {
    assert_eq!(spent(0.0), 0.0);
    assert!((spent(1.0) - 1.0).abs() < 1e-12);
    assert!((spent(0.5) - 0.6201).abs() < 1e-4);
}

fn record(values: &[u64], turns: u32, expectation: MetricExpectation) -> RunRecord {
    let mut record = native_heap_record(values, expectation);
    record.scenario.turns = turns;
    record.scenario.stop = StopMode::Decided;
    record
}

fn limit(max_growth: u64) -> MetricExpectation {
    MetricExpectation {
        max_growth_per_turn: Some(max_growth),
        ..MetricExpectation::default()
    }
}

#[test]
fn a_leak_stops_within_a_few_looks_and_the_verdict_is_that_looks() {
    let max = 100;
    let mut rule = StopWhenDecided::new(&record(&[BASE], max, limit(MIB)).scenario);
    assert!(rule.wants_look(6) && !rule.wants_look(7) && rule.wants_look(8));
    let (turn, mut leak, reason) = look_schedule(max)
        .into_iter()
        .find_map(|m| {
            let leak = record(&values(m, 110 * MIB), max, limit(MIB));
            rule.look(&leak).map(|reason| (m, leak, reason))
        })
        .expect("an obvious leak is decided");
    // 7 samples cannot reach the first look's level (0.00049) by a rank test (p >= 1/5040 only
    // for all 21 pairs in order), but a strictly rising 110 MiB/turn dwarfs the byte-sized noise:
    // the effect size decides at the first look.
    assert_eq!(turn, 6, "{reason}");
    assert!(reason.contains("native_heap growth"), "{reason}");
    leak.early_stop = Some(EarlyStop {
        turn,
        max_turns: max,
        reason,
    });
    assert_eq!(final_levels(&leak), look_levels(turn, max));
    let verdict = crate::analyze::analyze_run(&leak);
    assert_eq!(verdict.status, crate::analyze::VerdictStatus::Fail);
    let analysis = &verdict.metrics["native_heap"];
    assert_eq!(analysis.confidence, look_levels(turn, max).confidence);
    assert!(!verdict.expectations[0].passed, "{verdict:#?}");
}

/// A decided failure ends the run although another metric is still undecided: a step-noise
/// series that stays inconclusive cannot make the leaking metric pass.
#[test]
fn a_decided_failure_stops_the_run_while_another_metric_is_undecided() {
    let max = 100;
    let m = look_schedule(max)[0];
    let leak = values(m, 110 * MIB);
    // Large steps up and down: no trend, far too noisy to be called clean this early.
    let steps: Vec<u64> = (0..=m)
        .map(|t| BASE + [0, 300, 50, 500, 120, 700, 0][t as usize % 7] * MIB)
        .collect();
    let mut run = record(&leak, max, limit(MIB));
    run.samples = crate::analyze::test_support::samples(
        &[("native_heap", leak.as_slice()), ("rss", steps.as_slice())],
        0,
        &[],
    )
    .into();
    run.scenario
        .expect
        .metrics
        .insert("rss".to_owned(), MetricExpectation::default());
    let verdict = analyze_run_with(&run, look_levels(m, max));
    assert!(
        verdict.metrics["rss"].classification != Classification::Growth,
        "{verdict:#?}"
    );
    let tolerance = ClassifyOptions::default().tolerance_bytes(verdict.metrics["rss"].baseline);
    assert!(
        undecided(&verdict.metrics["rss"], None, tolerance as f64, max - m).is_some(),
        "the test needs an undecided second metric: {:#?}",
        verdict.metrics["rss"]
    );
    let mut rule = StopWhenDecided::new(&run.scenario);
    let reason = rule.look(&run).expect("a decided failure stops the run");
    assert!(
        reason.contains("native_heap.max_growth_per_turn decided to fail after 6 of 100"),
        "{reason}"
    );
}

#[test]
fn a_run_that_was_not_stopped_spends_what_is_left() {
    let mut done = record(&values(12, 0), 12, limit(MIB));
    done.scenario.warmup_turns = 0;
    let levels = final_levels(&done);
    assert_eq!(levels, look_levels(12, 12));
    // An engine failure at turn 9 (between looks 8 and 10) spends the rest at once.
    done.turns_completed = 9;
    let failed = final_levels(&done);
    assert!((failed.trend_alpha - TREND_ALPHA * (1.0 - spent(8.0 / 12.0))).abs() < 1e-15);
    done.scenario.stop = StopMode::Turns;
    assert_eq!(final_levels(&done), Levels::default());
}

#[test]
fn flat_noise_is_not_decided_while_inconclusive_and_never_growth() {
    let max = 40;
    let mut rule = StopWhenDecided::new(&record(&[BASE], max, limit(MIB)).scenario);
    for m in look_schedule(max) {
        let flat = record(&values(m, 0), max, limit(MIB));
        let verdict = analyze_run_with(&flat, look_levels(m, max));
        assert_ne!(
            verdict.metrics["native_heap"].classification,
            Classification::Growth
        );
        if let Some(reason) = rule.look(&flat) {
            assert!(reason.contains("native_heap clean"), "{reason}");
            return;
        }
    }
    panic!("a flat series with 100 KiB noise and a 1 MiB limit is decided within 40 turns");
}

fn growth(lo: f64, hi: f64, end: f64) -> MetricAnalysis {
    MetricAnalysis {
        classification: Classification::Growth,
        baseline: BASE,
        slope_interval: Some((lo, hi)),
        fitted_end_bytes: Some(end),
        ..MetricAnalysis::default()
    }
}

#[rstest]
#[case::limit_inside_the_interval(
    growth(0.5, 2.0, 0.0),
    limit(MIB),
    10,
    Some("growth limit inside the slope interval")
)]
#[case::limit_above(growth(0.1, 0.9, 0.0), limit(MIB), 10, None)]
#[case::limit_below(growth(1.1, 3.0, 0.0), limit(MIB), 10, None)]
#[case::tolerance_crossed_already(growth(0.1, 0.2, 20.0), tolerance(10), 50, None)]
#[case::tolerance_reached_before_the_end(
    growth(0.1, 0.2, 5.0),
    tolerance(10),
    50,
    Some("growing toward its tolerance")
)]
#[case::tolerance_not_reached_even_at_the_upper_bound(
    growth(0.01, 0.05, 5.0),
    tolerance(10),
    50,
    None
)]
fn expectations_are_decided_only_when_a_longer_run_cannot_change_them(
    #[case] mut analysis: MetricAnalysis,
    #[case] expectation: MetricExpectation,
    #[case] turns_left: u32,
    #[case] why: Option<&str>,
) {
    // Slopes and levels above are in MiB.
    analysis.slope_interval = analysis
        .slope_interval
        .map(|(lo, hi)| (lo * MIB as f64, hi * MIB as f64));
    analysis.fitted_end_bytes = analysis
        .fitted_end_bytes
        .map(|e| BASE as f64 + e * MIB as f64);
    assert_eq!(
        undecided(&analysis, Some(&expectation), (10 * MIB) as f64, turns_left),
        why
    );
}

fn tolerance(mib: u64) -> MetricExpectation {
    MetricExpectation {
        tolerance: Some(Tolerance::Bytes(mib * MIB)),
        ..MetricExpectation::default()
    }
}

#[test]
fn inconclusive_is_never_decided() {
    let analysis = MetricAnalysis::default();
    assert_eq!(undecided(&analysis, None, 1e9, 0), Some("inconclusive"));
}

fn settled(class: Classification, hi_mib: f64, end_mib: f64) -> MetricAnalysis {
    MetricAnalysis {
        classification: class,
        baseline: BASE,
        slope_interval: Some((-hi_mib * MIB as f64, hi_mib * MIB as f64)),
        fitted_end_bytes: Some(BASE as f64 + end_mib * MIB as f64),
        ..MetricAnalysis::default()
    }
}

#[rstest]
#[case::clean_with_a_tight_slope(settled(Classification::Clean, 0.01, 1.0), 50, None)]
#[case::clean_at_the_maximum(settled(Classification::Clean, 0.5, 1.0), 0, None)]
#[case::clean_whose_slope_could_leave_the_tolerance(
    settled(Classification::Clean, 0.2, 1.0),
    50,
    Some("clean so far, but the slope could leave the tolerance by the maximum")
)]
#[case::plateau_with_a_tight_slope(settled(Classification::Plateau, 0.1, 500.0), 50, None)]
#[case::a_leak_behind_a_big_rise_is_no_plateau_yet(
    settled(Classification::Plateau, 1.0, 500.0),
    50,
    Some("a plateau so far, but the slope could still climb beyond the tolerance")
)]
fn clean_and_plateau_are_decided_only_when_the_slope_is_bounded_to_the_maximum(
    #[case] analysis: MetricAnalysis,
    #[case] turns_left: u32,
    #[case] why: Option<&str>,
) {
    assert_eq!(
        undecided(&analysis, None, (10 * MIB) as f64, turns_left),
        why
    );
}

#[test]
fn an_extending_run_looks_first_at_its_minimum_and_spends_exactly_the_budget() {
    assert_eq!(
        looks_between(8, 64),
        [8, 10, 13, 17, 22, 28, 35, 44, 55, 64]
    );
    let mut scenario = crate::analyze::test_support::scenario();
    scenario.warmup_turns = 2;
    scenario.turns = 8;
    scenario.max_turns = Some(64);
    assert!(scenario.extends());
    assert_eq!(scenario.total_turns(), 66);
    let rule = StopWhenDecided::new(&scenario);
    assert_eq!(rule.looks()[..3], [10, 12, 15]);
    let looks = scenario_looks(&scenario);
    let alpha: f64 = looks
        .iter()
        .map(|&m| TREND_ALPHA * share(m, &looks, 64, false))
        .sum();
    assert!((alpha - TREND_ALPHA).abs() < 1e-12, "{alpha}");
    // The first look spends only its share: a run that decides at its minimum is judged at a
    // stricter level than one that never extends.
    assert!(share(8, &looks, 64, false) < 1.0);
    // Without `max_turns` (or with it equal to `turns`) nothing changes: one analysis, at the end.
    scenario.max_turns = Some(8);
    assert!(!scenario.extends() && scenario_looks(&scenario).is_empty());
}

#[test]
fn an_extending_run_without_metrics_ends_at_its_minimum() {
    let mut run = record(&values(8, 0), 8, limit(MIB));
    run.scenario.stop = StopMode::Turns;
    run.scenario.max_turns = Some(40);
    run.scenario.expect.metrics.clear();
    run.scenario.watch.clear();
    run.samples.clear();
    let mut rule = StopWhenDecided::new(&run.scenario);
    let reason = rule.look(&run).expect("nothing to extend for");
    assert!(reason.contains("no metric to decide"), "{reason}");
}

#[test]
fn an_extending_run_undecided_at_its_minimum_goes_on() {
    // A flat series judged against a limit just above zero: the interval straddles it at the
    // minimum's share of the budget, so the first look does not stop the run.
    let mut run = record(&values(8, 0), 8, limit(1));
    run.scenario.stop = StopMode::Turns;
    run.scenario.max_turns = Some(64);
    let mut rule = StopWhenDecided::new(&run.scenario);
    assert_eq!(rule.look(&run), None);
}
