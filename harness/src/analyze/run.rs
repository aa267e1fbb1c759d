//! Analyses a whole run: classifies every watched metric and checks the scenario's expectations.

use std::collections::BTreeMap;

use crate::runner::{RunOutcome, RunRecord};

use super::classify::{classify, ClassifyOptions};
use super::expectations::{check_balanced, check_metric};
use super::series::MetricSeries;
use super::verdict::{Verdict, VerdictStatus};

/// The verdict on a run: per-metric classifications and every expectation checked.
///
/// Watched metrics (`Scenario::watched_metrics`) and every metric with an expectation are
/// analysed. A run that ended in an engine failure gets [`VerdictStatus::EngineFailed`] but its
/// measurements are still analysed and its expectations still reported.
pub fn analyze_run(record: &RunRecord) -> Verdict {
    let scenario = &record.scenario;
    let mut names = scenario.watched_metrics();
    for name in scenario.expect.metrics.keys() {
        if !names.contains(name) {
            names.push(name.clone());
        }
    }
    let mut metrics = BTreeMap::new();
    let mut expectations = Vec::new();
    if scenario.expect.balanced {
        expectations.extend(check_balanced(&record.ledger));
    }
    for name in names {
        let expectation = scenario.expect.metrics.get(&name);
        let series = MetricSeries::from_record(record, &name);
        let analysis = (!series.is_empty()).then(|| {
            let options = ClassifyOptions {
                tolerance: expectation.and_then(|e| e.tolerance),
                warmup_turns: scenario.warmup_turns,
                max_growth_per_turn: expectation.and_then(|e| e.max_growth_per_turn),
                reload_every: scenario.reload_every,
                ..ClassifyOptions::default()
            };
            classify(&series, &options)
        });
        if let Some(expectation) = expectation {
            expectations.extend(check_metric(&name, expectation, analysis.as_ref(), &series));
        }
        if let Some(analysis) = analysis {
            metrics.insert(name, analysis);
        }
    }
    let status = match record.outcome {
        RunOutcome::EngineFailed { .. } => VerdictStatus::EngineFailed,
        RunOutcome::Completed if expectations.iter().all(|e| e.passed) => VerdictStatus::Pass,
        RunOutcome::Completed => VerdictStatus::Fail,
    };
    Verdict {
        status,
        metrics,
        expectations,
    }
}

#[cfg(test)]
mod tests {
    use rstest::rstest;

    use super::*;
    use crate::analyze::test_support::{record_with_samples, samples};
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
        }
    }

    fn record(metric_values: &[u64], expectation: MetricExpectation) -> RunRecord {
        let mut record = record_with_samples(samples(&[("native_heap", metric_values)], 0, &[]));
        record
            .scenario
            .expect
            .metrics
            .insert("native_heap".to_owned(), expectation);
        record
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
    fn too_few_turns_cannot_show_a_growth_limit() {
        let series = values(1, |_| BASE);
        let verdict = analyze_run(&record(&series, expect(None, None, Some(MIB))));
        assert_eq!(verdict.status, VerdictStatus::Fail);
        assert!(verdict.expectations[0]
            .measured
            .starts_with("cannot be bounded"));
    }

    #[test]
    fn unbalanced_ledger_names_the_kind_and_turn() {
        let mut record = record(&values(6, |_| BASE), expect(Some(5 * MIB), None, None));
        record.scenario.expect.balanced = true;
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
