use super::*;
use crate::analyze::test_support::{record_with_samples, samples};
use crate::analyze::{analyze_run, Classification, VerdictStatus};
use crate::runner::RunRecord;
use crate::scenario::MetricExpectation;

const MIB: u64 = 1 << 20;
const BASE: u64 = 1 << 30;
/// Small deterministic wiggle (bytes) so that the noise scale is not zero.
const WIGGLE: [i64; 5] = [30_000, -60_000, 10_000, 50_000, -20_000];

/// A completed run watching `native_heap` (no `expect` entry) whose series rises by
/// `per_turn` bytes a turn.
fn watched_record(per_turn: u64) -> RunRecord {
    let values: Vec<u64> = (0..=20u64)
        .map(|t| (BASE as i64 + (per_turn * t) as i64 + WIGGLE[t as usize % 5]) as u64)
        .collect();
    let mut record = record_with_samples(samples(&[("native_heap", &values)], 0, &[]));
    record.scenario.watch = vec!["native_heap".to_owned()];
    record
}

fn named<'a>(verdict: &'a crate::analyze::Verdict, name: &str) -> Option<&'a ExpectationResult> {
    verdict.expectations.iter().find(|e| e.name == name)
}

/// The silent pass of issue 22: a watched metric growing 110 MiB a turn, with no `expect` for
/// it, passed with `engine_errors` as its only expectation.
#[test]
fn a_watched_metric_without_expectations_fails_on_growth_that_matters() {
    let verdict = analyze_run(&watched_record(110 * MIB));
    assert_eq!(verdict.status, VerdictStatus::Fail, "{verdict:#?}");
    let horizon = named(&verdict, "native_heap.horizon").expect("a default expectation");
    assert!(!horizon.passed && horizon.defaulted, "{horizon:?}");
    assert!(
        horizon.measured.starts_with("growth: +110.0 MiB per turn"),
        "{horizon:?}"
    );
    assert_eq!(
        horizon.expected,
        "no growth that matters: the lower 95% bound of the growth over 1,000 turns within the \
         default tolerance 10.2 MiB"
    );
    assert!(!named(&verdict, ENGINE_ERRORS_NAME).unwrap().defaulted);
}

const ENGINE_ERRORS_NAME: &str = crate::analyze::ENGINE_ERRORS;

#[test]
fn report_only_opts_out_and_still_reports_the_growth() {
    let mut record = watched_record(110 * MIB);
    record.scenario.expect.metrics.insert(
        "native_heap".to_owned(),
        MetricExpectation {
            report_only: true,
            ..MetricExpectation::default()
        },
    );
    let verdict = analyze_run(&record);
    assert_eq!(verdict.status, VerdictStatus::Pass, "{verdict:#?}");
    assert_eq!(
        verdict.metrics["native_heap"].classification,
        Classification::Growth
    );
    assert!(verdict
        .expectations
        .iter()
        .all(|e| !e.name.starts_with("native_heap.")));
}

#[test]
fn growth_too_small_to_matter_over_the_horizon_passes_the_default() {
    // 2 KiB a turn is 2 MiB over 1,000 turns, within the default tolerance of 1 % of 1 GiB;
    // the wiggle is small beside it, so the class is still growth.
    let verdict = analyze_run(&watched_record(2 << 10).clone());
    let horizon = named(&verdict, "native_heap.horizon").expect("a default expectation");
    assert!(horizon.passed && horizon.defaulted, "{horizon:?}");
    assert_eq!(verdict.status, VerdictStatus::Pass);
}

#[test]
fn a_time_metric_gets_no_default() {
    let values: Vec<u64> = (0..=20u64).map(|t| 1_000_000 + t * 100_000).collect();
    let mut record = record_with_samples(samples(&[("turn_time", &values)], 0, &[]));
    record.scenario.watch = vec!["turn_time".to_owned()];
    let verdict = analyze_run(&record);
    assert!(verdict.metrics.contains_key("turn_time"));
    assert_eq!(
        verdict
            .expectations
            .iter()
            .map(|e| e.name.as_str())
            .collect::<Vec<_>>(),
        [ENGINE_ERRORS_NAME]
    );
}

#[test]
fn balanced_is_judged_by_default_where_the_run_recorded_a_ledger() {
    let mut record = watched_record(0);
    for turn in 1..=4 {
        record.ledger.record_create(turn, "sim/conversation");
    }
    let verdict = analyze_run(&record);
    let balanced = named(&verdict, "balanced.sim/conversation").expect("a default balance");
    assert!(!balanced.passed && balanced.defaulted, "{balanced:?}");
    assert_eq!(verdict.status, VerdictStatus::Fail);

    record.scenario.expect.balanced = Some(false);
    let verdict = analyze_run(&record);
    assert!(verdict
        .expectations
        .iter()
        .all(|e| !e.name.starts_with("balanced")));

    record.scenario.expect.balanced = Some(true);
    let verdict = analyze_run(&record);
    let balanced = named(&verdict, "balanced.sim/conversation").expect("a written balance");
    assert!(!balanced.defaulted);

    // An engine that records no ledger has nothing to balance.
    let verdict = analyze_run(&watched_record(0));
    assert!(verdict
        .expectations
        .iter()
        .all(|e| !e.name.starts_with("balanced")));
}

#[test]
fn the_plan_lists_written_defaulted_and_unjudged_metrics() {
    let mut scenario = crate::analyze::test_support::scenario();
    scenario.watch = vec![
        "native_heap".to_owned(),
        "pss".to_owned(),
        "rss".to_owned(),
        "turn_time".to_owned(),
    ];
    scenario.expect.metrics.insert(
        "native_heap".to_owned(),
        MetricExpectation {
            max_growth_per_turn: Some(MIB),
            ..MetricExpectation::default()
        },
    );
    scenario.expect.metrics.insert(
        "rss".to_owned(),
        MetricExpectation {
            report_only: true,
            ..MetricExpectation::default()
        },
    );
    let plan: Vec<(String, bool)> = planned_expectations(&scenario)
        .into_iter()
        .map(|p| (p.name, p.defaulted))
        .collect();
    let want = [
        ("balanced", true),
        ("native_heap.max_growth_per_turn", false),
        ("pss.horizon", true),
        ("rss", false),
        ("turn_time", false),
        (ENGINE_ERRORS_NAME, false),
    ]
    .map(|(n, d)| (n.to_owned(), d));
    assert_eq!(plan, want);
}

#[test]
fn thousands_are_separated() {
    assert_eq!(thousands(7), "7");
    assert_eq!(thousands(1000), "1,000");
    assert_eq!(thousands(1_234_567), "1,234,567");
}
