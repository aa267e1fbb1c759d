//! Hand-built scenarios and run records for the analyzer's tests.

use std::collections::BTreeMap;

use crate::engine::{BackendInfo, Ledger};
use crate::runner::{Phase, RunOutcome, RunRecord, Sample};
use crate::scenario::{EngineSpec, MetricExpectation, Scenario, Step};

/// A small simulator scenario without expectations.
pub(crate) fn scenario() -> Scenario {
    Scenario::new(
        "analyzer-test",
        EngineSpec::sim("cpu-flat"),
        10,
        vec![Step::Close],
    )
}

/// A completed run of [`scenario`] with these samples and an empty ledger.
pub(crate) fn record_with_samples(samples: Vec<Sample>) -> RunRecord {
    RunRecord {
        scenario: scenario(),
        backend: BackendInfo {
            backend: "sim".to_owned(),
            version: "test".to_owned(),
            details: BTreeMap::new(),
        },
        turns_completed: samples.iter().map(|s| s.turn).max().unwrap_or(0),
        samples: samples.into(),
        ledger: Ledger::new(),
        engine_errors: Vec::new(),
        outcome: RunOutcome::Completed,
        early_stop: None,
        provenance: None,
    }
}

/// Samples for a run: per metric a post-close series `values[turn]` (turn 0 = load), with a reload
/// sample `reload[k]` after every `reload_every` turns when given.
pub(crate) fn samples(
    metrics: &[(&str, &[u64])],
    reload_every: u32,
    reload_values: &[(&str, u64)],
) -> Vec<Sample> {
    let turns = metrics.first().map_or(0, |m| m.1.len()) as u32;
    let pick = |turn: u32| -> BTreeMap<String, u64> {
        metrics
            .iter()
            .map(|(name, values)| ((*name).to_owned(), values[turn as usize]))
            .collect()
    };
    let mut out = Vec::new();
    let mut epoch = 1;
    for turn in 0..turns {
        let phase = if turn == 0 { Phase::Load } else { Phase::Close };
        out.push(Sample {
            turn,
            phase,
            epoch,
            t_ms: f64::from(turn) * 1000.0,
            metrics: pick(turn).into(),
            key: None,
        });
        if turn > 0 && reload_every > 0 && turn % reload_every == 0 && turn + 1 < turns {
            epoch += 1;
            out.push(Sample {
                turn,
                phase: Phase::Reload,
                epoch,
                t_ms: f64::from(turn) * 1000.0 + 500.0,
                metrics: reload_values
                    .iter()
                    .map(|(n, v)| ((*n).to_owned(), *v))
                    .collect(),
                key: None,
            });
        }
    }
    out
}

/// A completed run whose only metric, `native_heap`, has the post-close series `values` (turn 0
/// = load) and `expectation`.
pub(crate) fn native_heap_record(values: &[u64], expectation: MetricExpectation) -> RunRecord {
    let mut record = record_with_samples(samples(&[("native_heap", values)], 0, &[]));
    record
        .scenario
        .expect
        .metrics
        .insert("native_heap".to_owned(), expectation);
    record
}

/// An analysis's reason as the reports word it (a memory metric's, in bytes).
pub(crate) fn words(analysis: &crate::analyze::MetricAnalysis) -> String {
    crate::report::render_reason("native_heap", &analysis.reason)
}
