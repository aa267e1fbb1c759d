//! Analyses a whole run: classifies every watched metric and checks the scenario's expectations.

use std::collections::BTreeMap;

use crate::runner::{RunOutcome, RunRecord};
use crate::scenario::FaultKind;

use super::cache_or_leak::explain_keyed_growth;
use super::classify::{classify, ClassifyOptions};
use super::defaults::{balanced_rule, check_horizon, metric_rule, MetricRule};
use super::expectations::{check_balanced, check_max_live, check_metric};
use super::reason::Reason;
use super::sequential::{final_levels, Levels};
use super::series::MetricSeries;
use super::verdict::{Classification, ExpectationResult, MetricAnalysis, Verdict, VerdictStatus};

/// The name of the expectation that every engine error was scripted.
pub const ENGINE_ERRORS: &str = "engine_errors";

/// The verdict on a run: per-metric classifications and every expectation checked.
///
/// Watched metrics (`Scenario::watched_metrics`) and every metric with an expectation are
/// analysed. A run that ended in an engine failure gets [`VerdictStatus::EngineFailed`] but its
/// measurements are still analysed and its expectations still reported. So does a run in which
/// the engine returned errors the scenario did not script (a `generate_error` fault): the runner
/// survived them, but a loop whose turns failed did not measure what it was meant to. What a
/// record cannot show is not passed: for an engine that never loaded, `balanced` and
/// `engine_errors` fail as not evaluated; for an interrupted run (whose record has no ledger and
/// no engine errors) they are not evaluated either.
///
/// With `stop: decided` the levels are those of the look that stopped the run, or what is left
/// of the error budgets (see [`super::sequential`]); otherwise the defaults.
pub fn analyze_run(record: &RunRecord) -> Verdict {
    analyze_run_with(record, final_levels(record))
}

/// As [`analyze_run`], at the given significance levels (a sequential look's share).
pub fn analyze_run_with(record: &RunRecord, levels: Levels) -> Verdict {
    let scenario = &record.scenario;
    let mut names = scenario.watched_metrics();
    for name in scenario.expect.metrics.keys() {
        if !names.contains(name) {
            names.push(name.clone());
        }
    }
    let unknown_ledger = unknown_ledger(record);
    let keys = turn_keys(record);
    let mut metrics = BTreeMap::new();
    let mut expectations = Vec::new();
    // An unknown ledger is not judged by default: only a written `balanced` fails for it.
    let balanced = match &unknown_ledger {
        Some(_) => (scenario.expect.balanced == Some(true)).then_some(false),
        None => balanced_rule(&scenario.expect, &record.ledger),
    };
    if let Some(defaulted) = balanced {
        match &unknown_ledger {
            Some(why) => expectations.push(not_evaluated(
                "balanced",
                "every create has its delete",
                why,
            )),
            None => expectations.extend(
                check_balanced(&record.ledger, &scenario.expect.max_live)
                    .into_iter()
                    .map(|e| ExpectationResult { defaulted, ..e }),
            ),
        }
    }
    if !scenario.expect.max_live.is_empty() {
        match &unknown_ledger {
            Some(why) => expectations.push(not_evaluated(
                "max_live",
                "live objects within their bounds",
                why,
            )),
            None => expectations.extend(check_max_live(&record.ledger, &scenario.expect.max_live)),
        }
    }
    for name in names {
        let expectation = scenario.expect.metrics.get(&name);
        let (series, unreadable) = match MetricSeries::from_record(record, &name) {
            Ok(series) => (series, None),
            Err(why) => (MetricSeries::default(), Some(why)),
        };
        let analysis = (!series.is_empty()).then(|| {
            let options = ClassifyOptions {
                tolerance: expectation.and_then(|e| e.tolerance),
                warmup_turns: u64::from(scenario.warmup_turns),
                max_growth_per_turn: expectation.and_then(|e| e.max_growth_per_turn),
                reload_every: scenario.reload_every,
                confidence: levels.confidence,
                trend_alpha: levels.trend_alpha,
                ..ClassifyOptions::default()
            };
            let mut analysis = classify(&series, &options);
            // Whatever the class word of a metric that did not stay clean: a cache filling over
            // 60 turns and then holding was `plateau` in most runs and, on a CI machine under
            // load, once undecided, and the keyed explanation says what the word cannot.
            if matches!(
                analysis.classification,
                Classification::Growth | Classification::Plateau | Classification::Inconclusive
            ) {
                analysis.keyed_growth =
                    explain_keyed_growth(&series, &keys, u64::from(scenario.warmup_turns));
            }
            analysis
        });
        match (metric_rule(&scenario.expect, &name), expectation, &analysis) {
            (MetricRule::Written, Some(expectation), _) => {
                expectations.extend(check_metric(&name, expectation, analysis.as_ref(), &series));
            }
            // A metric the run could not sample has nothing a default could judge.
            (MetricRule::Defaulted, _, Some(analysis)) => {
                expectations.push(check_horizon(&name, analysis));
            }
            _ => {}
        }
        let analysis = analysis.or_else(|| {
            unreadable.map(|why| MetricAnalysis {
                reason: Reason::Text(why),
                ..MetricAnalysis::default()
            })
        });
        if let Some(analysis) = analysis {
            metrics.insert(name, analysis);
        }
    }
    expectations.push(check_engine_errors(record));
    let status = derive_status(&record.outcome, &expectations);
    Verdict {
        status,
        metrics,
        expectations,
        attribution: None,
        driver_attribution: None,
        cl_objects: None,
    }
}

/// The key of each turn that has one (`Sample::key`), by turn: what `cache_or_leak` reads.
fn turn_keys(record: &RunRecord) -> BTreeMap<u64, String> {
    record
        .samples
        .iter()
        .filter_map(|s| Some((u64::from(s.turn), s.key.clone()?)))
        .collect()
}

/// The verdict's status as it follows from how the run ended and its checked expectations: the
/// one rule that [`analyze_run`] applies and that readers of a saved report check it against.
pub fn derive_status(outcome: &RunOutcome, expectations: &[ExpectationResult]) -> VerdictStatus {
    let unexpected_errors = expectations
        .iter()
        .any(|e| e.name == ENGINE_ERRORS && !e.passed);
    match outcome {
        RunOutcome::Interrupted { .. } => VerdictStatus::Interrupted,
        RunOutcome::EngineFailed { .. } => VerdictStatus::EngineFailed,
        RunOutcome::Completed if unexpected_errors => VerdictStatus::EngineFailed,
        RunOutcome::Completed if expectations.iter().all(|e| e.passed) => VerdictStatus::Pass,
        RunOutcome::Completed if expectations.iter().any(ExpectationResult::failed) => {
            VerdictStatus::Fail
        }
        RunOutcome::Completed => VerdictStatus::Inconclusive,
    }
}

/// Why the record's ledger and engine errors cannot be judged, if they cannot.
fn unknown_ledger(record: &RunRecord) -> Option<String> {
    match &record.outcome {
        RunOutcome::EngineFailed { step, error, .. }
            if step == "load" && record.samples.is_empty() =>
        {
            Some(format!(
                "the engine never loaded ({})",
                error.to_string().trim_end()
            ))
        }
        RunOutcome::Interrupted { signal, turn } => Some(format!(
            "the run was interrupted by {signal} in turn {turn} before its ledger was recorded"
        )),
        _ => None,
    }
}

fn not_evaluated(name: &str, expected: &str, why: &str) -> ExpectationResult {
    ExpectationResult {
        name: name.to_owned(),
        passed: false,
        inconclusive: false,
        expected: expected.to_owned(),
        measured: format!("not evaluated: {why}"),
        turn: None,
        defaulted: false,
    }
}

/// Every engine error the runner survived must have been scripted by a `generate_error` fault at
/// that turn's generate step; any other one is reported with its turn, step and cause.
fn check_engine_errors(record: &RunRecord) -> ExpectationResult {
    const EXPECTED: &str = "no engine errors other than scripted faults";
    if let Some(why) = unknown_ledger(record) {
        return not_evaluated(ENGINE_ERRORS, EXPECTED, &why);
    }
    let scripted = |turn: u32, step: &str| {
        step == "generate"
            && record
                .scenario
                .faults
                .iter()
                .any(|f| f.kind == FaultKind::GenerateError && f.at_turn == turn)
    };
    let unexpected: Vec<_> = record
        .engine_errors
        .iter()
        .filter(|(turn, step, _)| !scripted(*turn, step))
        .collect();
    let scripted_count = record.engine_errors.len() - unexpected.len();
    let measured = match unexpected.first() {
        None if scripted_count == 0 => "no engine errors".to_owned(),
        None => format!("{scripted_count} scripted engine error(s) only"),
        Some((turn, step, error)) => format!(
            "{} unexpected engine error(s); first in turn {turn} ({step}): {error}",
            unexpected.len()
        ),
    };
    ExpectationResult {
        name: ENGINE_ERRORS.to_owned(),
        passed: unexpected.is_empty(),
        inconclusive: false,
        expected: EXPECTED.to_owned(),
        measured,
        turn: unexpected.first().map(|(turn, _, _)| u64::from(*turn)),
        defaulted: false,
    }
}

#[cfg(test)]
mod tests {
    use rstest::rstest;

    use super::*;
    use crate::analyze::test_support::{native_heap_record, record_with_samples, samples};
    use crate::analyze::Classification;
    use crate::engine::{EngineError, EngineErrorKind};
    use crate::scenario::{MetricExpectation, Tolerance};

    const MIB: u64 = 1 << 20;
    const BASE: u64 = 1 << 30;
    /// Small deterministic wiggle (bytes) so that the noise scale is not zero.
    const WIGGLE: [i64; 7] = [40_000, -90_000, 20_000, 110_000, -30_000, -70_000, 80_000];

    fn values(turns: u32, shape: impl Fn(u32) -> u64) -> Vec<u64> {
        (0..=turns)
            .map(|t| (shape(t) as i64 + WIGGLE[t as usize % WIGGLE.len()]) as u64)
            .collect()
    }

    fn expect(
        tolerance: Option<u64>,
        warmup_budget: Option<u64>,
        max_growth: Option<u64>,
    ) -> MetricExpectation {
        MetricExpectation {
            tolerance: tolerance.map(Tolerance::Bytes),
            warmup_budget,
            max_growth_per_turn: max_growth,
            max: None,
            report_only: false,
        }
    }

    fn record(metric_values: &[u64], expectation: MetricExpectation) -> RunRecord {
        native_heap_record(metric_values, expectation)
    }

    #[rstest]
    #[case::flat_within_tolerance(
        values(20, |_| BASE), expect(Some(5 * MIB), None, Some(MIB)),
        VerdictStatus::Pass, Classification::Clean, &[])]
    #[case::gpu_context_within_budget(
        values(20, |t| if t >= 1 { BASE + 1700 * MIB } else { BASE }),
        expect(Some(5 * MIB), Some(2048 * MIB), Some(MIB)),
        VerdictStatus::Pass, Classification::Plateau, &[])]
    #[case::gpu_context_over_budget(
        values(20, |t| if t >= 1 { BASE + 1700 * MIB } else { BASE }),
        expect(Some(5 * MIB), Some(1024 * MIB), None),
        VerdictStatus::Fail, Classification::Plateau,
        &["native_heap.tolerance", "native_heap.warmup_budget"])]
    #[case::the_field_leak(
        values(20, |t| BASE + 110 * MIB * u64::from(t)),
        expect(Some(5 * MIB), None, Some(MIB)),
        VerdictStatus::Fail, Classification::Growth,
        &["native_heap.tolerance", "native_heap.max_growth_per_turn"])]
    fn verdicts(
        #[case] series: Vec<u64>,
        #[case] expectation: MetricExpectation,
        #[case] status: VerdictStatus,
        #[case] class: Classification,
        #[case] failed: &[&str],
    ) {
        let verdict = analyze_run(&record(&series, expectation));
        assert_eq!(verdict.status, status, "{verdict:#?}");
        assert_eq!(verdict.metrics["native_heap"].classification, class);
        let names: Vec<&str> = verdict
            .expectations
            .iter()
            .filter(|e| !e.passed)
            .map(|e| e.name.as_str())
            .collect();
        assert_eq!(names, failed, "{verdict:#?}");
    }

    #[test]
    fn failed_growth_limit_says_what_where_and_how_much() {
        let series = values(20, |t| BASE + 110 * MIB * u64::from(t));
        let verdict = analyze_run(&record(&series, expect(None, None, Some(MIB))));
        let growth = &verdict.expectations[0];
        assert_eq!(growth.name, "native_heap.max_growth_per_turn");
        assert_eq!(
            growth.expected,
            "at most 1.0 MiB per turn (upper 95% bound)"
        );
        assert!(
            growth.measured.starts_with("+110.0 MiB per turn"),
            "{growth:?}"
        );
        assert_eq!(growth.turn, Some(0));
    }

    #[test]
    fn failed_growth_limit_names_the_turn_the_growth_began() {
        // A leak of 256 KiB per turn from turn 1, with a pool of 128 KiB released after turn 10:
        // the slope is fitted from turn 11 on, but the growth began at turn 1.
        let series: Vec<u64> = (0..=30u32)
            .map(|t| {
                let pool = if (1..=10).contains(&t) { 128 << 10 } else { 0 };
                let wiggle = WIGGLE[t as usize % WIGGLE.len()] / 10;
                (BASE as i64 + (256 << 10) * i64::from(t) + pool + wiggle) as u64
            })
            .collect();
        let verdict = analyze_run(&record(&series, expect(None, None, Some(64 << 10))));
        assert!(verdict.metrics["native_heap"].steady_from_turn > Some(1));
        let growth = &verdict.expectations[0];
        assert_eq!(growth.name, "native_heap.max_growth_per_turn");
        assert!(!growth.passed);
        assert_eq!(growth.turn, Some(1), "{verdict:#?}");
    }

    #[test]
    fn too_few_turns_cannot_decide_a_growth_limit() {
        let series = values(1, |_| BASE);
        let verdict = analyze_run(&record(&series, expect(None, None, Some(MIB))));
        // Not shown within the limit, not shown beyond it: undecided, not failed.
        assert_eq!(verdict.status, VerdictStatus::Inconclusive);
        assert!(verdict.expectations[0].inconclusive);
        assert!(verdict.expectations[0]
            .measured
            .starts_with("cannot be bounded"));
    }

    #[test]
    fn unbalanced_ledger_names_the_kind_and_turn() {
        let mut record = record(&values(6, |_| BASE), expect(Some(5 * MIB), None, None));
        record.scenario.expect.balanced = Some(true);
        for turn in 1..=6 {
            record.ledger.record_create(turn, "sim/conversation");
            if turn < 4 {
                record.ledger.record_delete(turn, "sim/conversation");
            }
        }
        let verdict = analyze_run(&record);
        assert_eq!(verdict.status, VerdictStatus::Fail);
        let balance = &verdict.expectations[0];
        assert_eq!(balance.name, "balanced.sim/conversation");
        assert_eq!(
            balance.measured,
            "6 created, 3 deleted (+3 live), off balance from turn 4"
        );
        assert_eq!(balance.turn, Some(4));
    }

    #[test]
    fn engine_failure_still_analyses_what_was_measured() {
        let mut record = record(
            &values(8, |t| BASE + 50 * MIB * u64::from(t)),
            expect(None, None, Some(MIB)),
        );
        record.outcome = RunOutcome::EngineFailed {
            turn: 9,
            step: "generate".to_owned(),
            error: EngineError::new(
                EngineErrorKind::Crashed {
                    how: "signal 9 (SIGKILL)".to_owned(),
                },
                "lowmemorykiller",
            ),
        };
        let verdict = analyze_run(&record);
        assert_eq!(verdict.status, VerdictStatus::EngineFailed);
        assert_eq!(
            verdict.metrics["native_heap"].classification,
            Classification::Growth
        );
        assert!(!verdict.expectations[0].passed);
    }

    #[rstest]
    #[case::scripted_fault_passes(Some(4), 4, "generate", VerdictStatus::Pass)]
    #[case::unscripted_generate_error_is_an_engine_failure(
        None,
        4,
        "generate",
        VerdictStatus::EngineFailed
    )]
    #[case::fault_at_another_turn_does_not_excuse_it(
        Some(3),
        4,
        "generate",
        VerdictStatus::EngineFailed
    )]
    #[case::an_open_error_is_never_scripted(Some(4), 4, "open", VerdictStatus::EngineFailed)]
    fn engine_errors_the_runner_survived_fail_the_run_unless_scripted(
        #[case] fault_turn: Option<u32>,
        #[case] error_turn: u32,
        #[case] step: &str,
        #[case] status: VerdictStatus,
    ) {
        let mut record = record(&values(8, |_| BASE), expect(None, None, Some(MIB)));
        record.scenario.faults = fault_turn
            .map(|at_turn| crate::scenario::Fault {
                at_turn,
                kind: FaultKind::GenerateError,
            })
            .into_iter()
            .collect();
        record.engine_errors = vec![(
            error_turn,
            step.to_owned(),
            EngineError::new(EngineErrorKind::Generate, "sampler not implemented"),
        )];
        let verdict = analyze_run(&record);
        assert_eq!(verdict.status, status);
        let check = verdict
            .expectations
            .iter()
            .find(|e| e.name == "engine_errors")
            .unwrap();
        assert_eq!(check.passed, status == VerdictStatus::Pass, "{check:?}");
        if !check.passed {
            assert_eq!(check.turn, Some(u64::from(error_turn)));
            assert!(check.measured.contains("sampler not implemented"));
        }
    }

    #[test]
    fn leak_inside_reload_epochs_fails_the_growth_limit() {
        // Memory returns at each reload (every 5 turns) but grows 110 MiB per turn inside each.
        let series = values(30, |t| match t {
            0 => BASE,
            t => BASE + 110 * MIB * u64::from((t - 1) % 5 + 1),
        });
        let mut record = record_with_samples(samples(
            &[("native_heap", &series)],
            5,
            &[("native_heap", BASE)],
        ));
        record.scenario.reload_every = 5;
        record
            .scenario
            .expect
            .metrics
            .insert("native_heap".to_owned(), expect(None, None, Some(MIB)));
        let verdict = analyze_run(&record);
        let analysis = &verdict.metrics["native_heap"];
        assert_eq!(analysis.epochs, 6, "{analysis:#?}");
        assert_eq!(
            analysis.classification,
            Classification::Growth,
            "{analysis:#?}"
        );
        assert_eq!(verdict.status, VerdictStatus::Fail);
    }

    /// Regression: an engine that never loaded showed `balanced` (0 kinds) and `engine_errors`
    /// as passed expectations.
    #[test]
    fn an_engine_that_never_loaded_passes_no_expectation() {
        let mut record = record_with_samples(Vec::new());
        record.scenario.expect.balanced = Some(true);
        record
            .scenario
            .expect
            .metrics
            .insert("native_heap".to_owned(), expect(None, None, Some(MIB)));
        record.outcome = RunOutcome::EngineFailed {
            turn: 0,
            step: "load".to_owned(),
            error: EngineError::new(EngineErrorKind::Load, "model file not found"),
        };
        let verdict = analyze_run(&record);
        assert_eq!(verdict.status, VerdictStatus::EngineFailed);
        let names: Vec<&str> = verdict
            .expectations
            .iter()
            .map(|e| e.name.as_str())
            .collect();
        assert_eq!(
            names,
            ["balanced", "native_heap.max_growth_per_turn", ENGINE_ERRORS]
        );
        for e in &verdict.expectations {
            assert!(!e.passed, "{e:?}");
        }
        assert!(
            verdict.expectations[0]
                .measured
                .starts_with("not evaluated: the engine never loaded"),
            "{:?}",
            verdict.expectations[0]
        );
        assert!(verdict.expectations[2]
            .measured
            .contains("model file not found"));
    }

    #[test]
    fn an_interrupted_run_is_interrupted_and_judges_no_ledger() {
        let mut record = record(
            &values(8, |t| BASE + 50 * MIB * u64::from(t)),
            expect(None, None, Some(MIB)),
        );
        record.scenario.expect.balanced = Some(true);
        record.outcome = RunOutcome::Interrupted {
            signal: "SIGTERM".to_owned(),
            turn: 9,
        };
        let verdict = analyze_run(&record);
        assert_eq!(verdict.status, VerdictStatus::Interrupted);
        let balanced = &verdict.expectations[0];
        assert!(!balanced.passed);
        assert!(
            balanced
                .measured
                .contains("interrupted by SIGTERM in turn 9"),
            "{balanced:?}"
        );
        assert_eq!(
            verdict.metrics["native_heap"].classification,
            Classification::Growth
        );
    }

    #[rstest]
    #[case::completed_all_passed(RunOutcome::Completed, &[true, true], VerdictStatus::Pass)]
    #[case::completed_one_failed(RunOutcome::Completed, &[true, false], VerdictStatus::Fail)]
    #[case::interrupted(
        RunOutcome::Interrupted { signal: "SIGINT".into(), turn: 2 },
        &[true, true],
        VerdictStatus::Interrupted
    )]
    fn the_status_follows_from_outcome_and_expectations(
        #[case] outcome: RunOutcome,
        #[case] passed: &[bool],
        #[case] status: VerdictStatus,
    ) {
        let expectations: Vec<ExpectationResult> = passed
            .iter()
            .enumerate()
            .map(|(i, &passed)| ExpectationResult {
                name: format!("m{i}.tolerance"),
                passed,
                inconclusive: false,
                expected: String::new(),
                measured: String::new(),
                turn: None,
                defaulted: false,
            })
            .collect();
        assert_eq!(derive_status(&outcome, &expectations), status);
    }

    /// An undecided expectation makes a completed run inconclusive, unless another one failed:
    /// a leak shown is a failure whatever else could not be decided.
    #[test]
    fn an_undecided_expectation_is_inconclusive_unless_another_failed() {
        let result = |passed, inconclusive| ExpectationResult {
            name: "native_heap.max_growth_per_turn".to_owned(),
            passed,
            inconclusive,
            expected: String::new(),
            measured: String::new(),
            turn: None,
            defaulted: false,
        };
        let completed = RunOutcome::Completed;
        let undecided = [result(true, false), result(false, true)];
        assert_eq!(
            derive_status(&completed, &undecided),
            VerdictStatus::Inconclusive
        );
        let and_failed = [result(false, true), result(false, false)];
        assert_eq!(derive_status(&completed, &and_failed), VerdictStatus::Fail);
    }

    /// A slow leak at its growth limit under noise: the limit lies inside the slope's interval,
    /// so the run is neither passed nor failed.
    #[test]
    fn a_limit_inside_the_slope_interval_is_undecided() {
        // 1 MiB/turn under noise of a few MiB (the wiggle scaled, in another order).
        let noisy = values(10, |t| {
            (BASE as i64 + i64::from(t) * MIB as i64 + 20 * WIGGLE[(3 * t as usize) % 7]) as u64
        });
        let slope = |limit| {
            let verdict = analyze_run(&record(&noisy, expect(None, None, Some(limit))));
            let (lo, hi) = verdict.metrics["native_heap"].slope_interval.unwrap();
            (verdict, lo, hi)
        };
        let (_, lo, hi) = slope(MIB);
        assert!(
            0.0 < lo && lo < hi,
            "the test needs a rising interval: {lo}..{hi}"
        );
        let inside = ((lo + hi) / 2.0) as u64;
        let (verdict, ..) = slope(inside);
        let limit = &verdict.expectations[0];
        assert!(!limit.passed && limit.inconclusive, "{limit:?}");
        assert_eq!(limit.turn, None);
        assert_eq!(verdict.status, VerdictStatus::Inconclusive);
        let (verdict, ..) = slope(hi.ceil() as u64 + 1);
        assert_eq!(verdict.status, VerdictStatus::Pass, "{verdict:#?}");
        let (verdict, ..) = slope((lo / 2.0) as u64);
        assert!(verdict.expectations[0].failed(), "{verdict:#?}");
        assert_eq!(verdict.status, VerdictStatus::Fail);
    }

    #[test]
    fn expected_metric_without_samples_fails() {
        let mut record = record(&values(6, |_| BASE), expect(Some(MIB), None, None));
        record
            .scenario
            .expect
            .metrics
            .insert("gpu".to_owned(), expect(None, Some(MIB), None));
        let verdict = analyze_run(&record);
        assert_eq!(verdict.status, VerdictStatus::Fail);
        let gpu = verdict
            .expectations
            .iter()
            .find(|e| e.name == "gpu.warmup_budget")
            .unwrap();
        assert_eq!(gpu.measured, "no samples of this metric were taken");
        assert!(!verdict.metrics.contains_key("gpu"));
    }
}
