//! Tests of `extend.rs`.

use super::*;
use crate::analyze::test_support::native_heap_record;
use crate::analyze::{VerdictStatus, CONFIDENCE, TREND_ALPHA};
use crate::runner::EarlyStop;
use crate::scenario::{MetricExpectation, StopMode, MAX_TURNS};

const BASE: u64 = 1 << 30;
const KIB: u64 = 1 << 10;
/// Allocator-like noise, in bytes, repeating every 7 turns.
const WIGGLE: [i64; 7] = [40_000, -90_000, 20_000, 110_000, -30_000, -70_000, 80_000];

fn values(turns: u32) -> Vec<u64> {
    (0..=turns)
        .map(|t| (BASE as i64 + WIGGLE[t as usize % 7]) as u64)
        .collect()
}

/// A default-extending run (no `max_turns`) of `turns` measured turns with `limit` bytes/turn on
/// `native_heap`, having run `values.len() - 1` of them.
fn record(values: &[u64], turns: u32, limit: u64) -> RunRecord {
    let mut record = native_heap_record(
        values,
        MetricExpectation {
            max_growth_per_turn: Some(limit),
            ..MetricExpectation::default()
        },
    );
    record.scenario.turns = turns;
    record.scenario.warmup_turns = 0;
    record.scenario.stop = StopMode::Turns;
    record.scenario.max_turns = None;
    record
}

#[test]
fn the_default_budget_is_twice_turns_within_the_turn_limit_and_max_turns_opts_out() {
    let mut scenario = record(&values(1), 20, KIB).scenario;
    assert_eq!(scenario.max_measured_turns(), 40);
    assert!(scenario.extends_by_default());
    scenario.warmup_turns = 10;
    scenario.turns = 60_000;
    assert_eq!(scenario.max_measured_turns(), MAX_TURNS - 10);
    scenario.turns = 20;
    scenario.max_turns = Some(20);
    assert!(!scenario.extends() && !scenario.extends_by_default());
    scenario.max_turns = Some(30);
    assert!(scenario.extends() && !scenario.extends_by_default());
    scenario.max_turns = None;
    scenario.stop = StopMode::Decided;
    assert_eq!(scenario.max_measured_turns(), 20);
}

#[test]
fn the_minimum_is_judged_at_full_levels_and_the_extension_spends_its_share() {
    let looks = looks_between(20, 40);
    assert_eq!(looks, [20, 25, 32, 40]);
    assert_eq!(
        extension_levels(20, &looks, 20, 40, false),
        Levels::default()
    );
    // An engine failure before the minimum is judged as a fixed run.
    assert_eq!(
        extension_levels(12, &looks, 20, 40, true),
        Levels::default()
    );
    let extra: Vec<Levels> = looks[1..]
        .iter()
        .map(|&m| extension_levels(m, &looks, 20, 40, false))
        .collect();
    let alpha: f64 = extra.iter().map(|l| l.trend_alpha).sum();
    assert!(
        (alpha - EXTENSION_SHARE * TREND_ALPHA).abs() < 1e-12,
        "{alpha}"
    );
    let miss: f64 = extra.iter().map(|l| 1.0 - l.confidence).sum();
    assert!(
        (miss - EXTENSION_SHARE * (1.0 - CONFIDENCE)).abs() < 1e-12,
        "{miss}"
    );
    // A run that ended between looks spends what is left of the share.
    let ended = extension_levels(28, &looks, 20, 40, true);
    assert!(
        (ended.trend_alpha - EXTENSION_SHARE * TREND_ALPHA * (1.0 - spent(0.25))).abs() < 1e-15
    );
}

#[test]
fn a_run_decided_at_turns_stops_there() {
    let run = record(&values(20), 20, 64 * KIB);
    let mut rule = ExtendWhileUndecided::new(&run.scenario);
    assert_eq!(rule.looks(), [20, 25, 32, 40]);
    assert!(!rule.wants_look(6) && rule.wants_look(20) && rule.wants_look(25));
    let reason = rule
        .look(&run)
        .expect("a clean run well within its limit is decided");
    assert_eq!(
        reason,
        "every metric expectation decided (all hold) at the minimum of 20 measured turns"
    );
    // Stopped there, it is judged as the fixed run it was.
    let mut run = run;
    run.early_stop = Some(EarlyStop {
        turn: 20,
        max_turns: 40,
        reason,
    });
    assert_eq!(crate::analyze::final_levels(&run), Levels::default());
}

#[test]
fn an_undecided_run_extends_and_decides() {
    let limit = 4 * KIB;
    let mut rule = ExtendWhileUndecided::new(&record(&values(1), 20, limit).scenario);
    let at_turns = record(&values(20), 20, limit);
    let verdict = analyze_run_with(&at_turns, Levels::default());
    assert_eq!(verdict.status, VerdictStatus::Inconclusive, "{verdict:#?}");
    assert_eq!(rule.look(&at_turns), None);
    let (measured, mut run, reason) = [25, 32, 40]
        .into_iter()
        .find_map(|m| {
            let run = record(&values(m), 20, limit);
            rule.look(&run).map(|reason| (m, run, reason))
        })
        .expect("more turns decide it");
    assert!(
        reason.starts_with(&format!(
            "every metric expectation decided (all hold) after {measured} measured turns, \
             extended past turns 20"
        )),
        "{reason}"
    );
    run.early_stop = Some(EarlyStop {
        turn: measured,
        max_turns: 40,
        reason,
    });
    let verdict = crate::analyze::analyze_run(&run);
    assert_eq!(verdict.status, VerdictStatus::Pass, "{verdict:#?}");
}

/// A look judges the ledger's balance only at the end of the run: a run stopped with every
/// metric expectation holding says so, instead of "all hold" before a verdict that fails on a
/// conversation never closed.
#[test]
fn a_stop_on_holding_metrics_does_not_claim_the_ledger_holds() {
    let mut run = record(&values(20), 20, 64 * KIB);
    run.ledger.record_create(3, "sim/conversation");
    let mut rule = ExtendWhileUndecided::new(&run.scenario);
    let reason = rule.look(&run).expect("the metric is decided at turns");
    assert_eq!(
        reason,
        "every metric expectation decided (all hold; the ledger's balance is judged at the end \
         of the run) at the minimum of 20 measured turns"
    );
    run.early_stop = Some(EarlyStop {
        turn: 20,
        max_turns: 40,
        reason,
    });
    let verdict = crate::analyze::analyze_run(&run);
    assert_eq!(verdict.status, VerdictStatus::Fail, "{verdict:#?}");
}

/// An engine error counted at a look fails the run whatever comes: the look stops it, naming
/// the expectation, even while a metric is still undecided.
#[test]
fn an_engine_error_at_a_look_stops_an_undecided_run() {
    let limit = 4 * KIB;
    let mut run = record(&values(20), 20, limit);
    let mut rule = ExtendWhileUndecided::new(&run.scenario);
    assert_eq!(
        rule.look(&run),
        None,
        "the metric alone leaves it undecided"
    );
    run.engine_errors.push((
        7,
        "generate".to_owned(),
        crate::engine::EngineError::new(crate::engine::EngineErrorKind::Unavailable, "refused"),
    ));
    let reason = rule.look(&run).expect("an engine error decides the run");
    assert_eq!(
        reason,
        "`engine_errors` fails, and more turns cannot undo it at the minimum of 20 measured turns"
    );
}
