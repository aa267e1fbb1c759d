//! `leakloop compare`'s table: two runs of one scenario side by side (what differs between the
//! engines, per metric the classification and growth per turn of each side and their difference,
//! then each side's expectations, ledger imbalances and status).

use std::collections::BTreeSet;
use std::fmt::Write as _;

use leakloop_units::{format_bytes, format_signed_bytes};

use super::plain::{aligned, status_word};
use crate::analyze::Verdict;
use crate::runner::{RunOutcome, RunRecord};

/// The backend, its version and what tells two sides of one backend apart: the library, else the
/// simulator's profile.
fn side_label(record: &RunRecord) -> String {
    let details = &record.backend.details;
    let lib = details
        .get("library")
        .map(|l| format!(" ({l})"))
        .or_else(|| details.get("profile").map(|p| format!(" (profile {p})")))
        .unwrap_or_default();
    format!("{} {}{lib}", record.backend.backend, record.backend.version)
}

fn outcome_line(record: &RunRecord) -> String {
    match &record.outcome {
        RunOutcome::Completed => format!("completed {} turns", record.turns_completed),
        RunOutcome::EngineFailed { turn, step, error } => {
            format!("engine failed at turn {turn} ({step}): {error}")
        }
        RunOutcome::Interrupted { signal, turn } => {
            format!("interrupted by {signal} at turn {turn}")
        }
    }
}

/// Renders two runs of one scenario side by side: per metric the classification, the slope after
/// warm-up and how much more (or less) B grows per turn than A; then the expectations, the ledger
/// imbalances and the status of each side. `differences` are the rows (name, A, B) of what tells
/// the two engines apart (`compare::spec_differences`).
pub(crate) fn compare_runs(
    a: (&RunRecord, &Verdict),
    b: (&RunRecord, &Verdict),
    differences: &[[String; 3]],
) -> String {
    let (ra, va) = a;
    let (rb, vb) = b;
    let mut out = String::new();
    let _ = writeln!(out, "scenario: {}", ra.scenario.name);
    let _ = writeln!(out, "  A: {}: {}", side_label(ra), outcome_line(ra));
    let _ = writeln!(out, "  B: {}: {}", side_label(rb), outcome_line(rb));
    let _ = writeln!(out);
    if differences.is_empty() {
        let _ = writeln!(out, "A and B ran the same engine spec");
    } else {
        let mut rows = vec![["differs".to_owned(), "A".to_owned(), "B".to_owned()]];
        rows.extend(differences.iter().cloned());
        out.push_str(&aligned(&rows, &[0, 1, 2]));
    }
    let _ = writeln!(out);

    let metrics: BTreeSet<&String> = va.metrics.keys().chain(vb.metrics.keys()).collect();
    let mut rows = vec![[
        "metric".to_owned(),
        "A".to_owned(),
        "A growth/turn".to_owned(),
        "B".to_owned(),
        "B growth/turn".to_owned(),
        "B - A per turn".to_owned(),
    ]];
    for metric in metrics {
        let (ma, mb) = (va.metrics.get(metric), vb.metrics.get(metric));
        let class = |m: Option<&crate::analyze::MetricAnalysis>| {
            m.map_or("-".to_owned(), |m| m.classification.as_str().to_owned())
        };
        let slope = |m: Option<&crate::analyze::MetricAnalysis>| {
            m.map_or("-".to_owned(), |m| {
                format_signed_bytes(m.slope_bytes_per_turn)
            })
        };
        let diff = match (ma, mb) {
            (Some(ma), Some(mb)) => {
                format_signed_bytes(mb.slope_bytes_per_turn - ma.slope_bytes_per_turn)
            }
            _ => "-".to_owned(),
        };
        rows.push([
            metric.clone(),
            class(ma),
            slope(ma),
            class(mb),
            slope(mb),
            diff,
        ]);
    }
    out.push_str(&aligned(&rows, &[0]));
    out.push_str(&attribution_section(va, vb));

    for (label, record, verdict) in [("A", ra, va), ("B", rb, vb)] {
        let _ = writeln!(out);
        let _ = writeln!(out, "{label}: {}", status_word(verdict.status));
        for e in &verdict.expectations {
            let turn = e.turn.map(|t| format!(" (turn {t})")).unwrap_or_default();
            let _ = writeln!(
                out,
                "  [{}] {}{}: expected {}, measured {}{turn}",
                if e.passed { "ok" } else { "FAIL" },
                e.name,
                crate::report::notes::default_mark(e.defaulted),
                e.expected,
                e.measured
            );
        }
        for imbalance in record.ledger.imbalances() {
            let since = imbalance
                .first_turn
                .map(|t| format!(", since turn {t}"))
                .unwrap_or_default();
            let _ = writeln!(
                out,
                "  ledger: {} created {} deleted {}{since}",
                imbalance.kind, imbalance.created, imbalance.deleted
            );
        }
        for (name, metric) in &verdict.metrics {
            if let Some(p) = metric.plateau {
                let _ = writeln!(
                    out,
                    "  {name}: one-time rise of {} settled at turn {} (baseline {})",
                    format_signed_bytes(p.size_bytes as f64),
                    p.settled_at_turn,
                    format_bytes(metric.baseline)
                );
            }
        }
    }
    out
}

/// Where each side's growth was allocated (`compare --attribute`): the sites that grow in B and
/// not in A, in both, and in A only; empty when neither side was attributed.
fn attribution_section(va: &Verdict, vb: &Verdict) -> String {
    let mut out = String::new();
    let lines = match (&va.attribution, &vb.attribution) {
        (None, None) => return out,
        (Some(a), Some(b)) => crate::attribution::comparison_lines(a, b),
        (a, b) => [("A", a), ("B", b)]
            .into_iter()
            .map(|(label, side)| match side {
                Some(side) => format!("{label}: {}", crate::attribution::headline(side)),
                None => format!("{label}: not attributed (its warning says why)"),
            })
            .collect(),
    };
    let _ = writeln!(out);
    let _ = writeln!(out, "Allocation sites, growth per turn [interval]");
    for line in lines {
        let _ = writeln!(out, "{line}");
    }
    out
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::time::Duration;

    use super::*;
    use crate::analyze::{Classification, ExpectationResult, MetricAnalysis, VerdictStatus};
    use crate::engine::{BackendInfo, Ledger};
    use crate::scenario::{
        BackendKind, Device, EngineSpec, Expectations, SamplePlan, SamplePoint, Scenario, Step,
    };

    fn record(version: &str, leak: bool) -> RunRecord {
        let mut ledger = Ledger::new();
        for turn in 1..=3 {
            ledger.record_create(turn, "litert-lm/conversation");
            if !leak || turn == 1 {
                ledger.record_delete(turn, "litert-lm/conversation");
            }
        }
        RunRecord {
            scenario: Scenario {
                name: "litert-cpu-chat".into(),
                description: None,
                source: None,
                engine: EngineSpec {
                    attribute: false,
                    backend: BackendKind::LitertLm,
                    profile: None,
                    inline_profiles: BTreeMap::new(),
                    model: None,
                    device: Device::Cpu,
                    max_tokens: 1024,
                    threads: None,
                    lib: None,
                    call_timeout: Duration::from_secs(60),
                    isolate: true,
                    attach: None,
                    exec: None,
                },
                warmup_turns: 0,
                turns: 3,
                turn: vec![Step::Close],
                reload_every: 0,
                sample: SamplePlan {
                    after: vec![SamplePoint::Load],
                    settle: Duration::ZERO,
                    baseline: 1,
                },
                watch: vec![],
                faults: vec![],
                expect: Expectations::default(),
                seed: 0,
                stop: crate::scenario::StopMode::Turns,
                max_turns: None,
                target: crate::scenario::Target::Local,
                concurrency: None,
                sessions: None,
            },
            backend: BackendInfo {
                backend: "litert-lm".into(),
                version: version.into(),
                details: BTreeMap::from([(
                    "library".to_owned(),
                    format!("target/litert-lm/{version}/liblitert-lm.so"),
                )]),
            },
            samples: crate::runner::Samples::new(),
            ledger,
            turns_completed: 3,
            engine_errors: vec![],
            outcome: RunOutcome::Completed,
            early_stop: None,
            provenance: None,
        }
    }

    fn analysis(class: Classification, slope: f64, plateau: Option<i64>) -> MetricAnalysis {
        MetricAnalysis {
            classification: class,
            baseline: 64 << 20,
            after_warmup: None,
            last: 66 << 20,
            slope_bytes_per_turn: slope,
            slope_interval: None,
            confidence: 0.95,
            plateau: plateau.map(|size_bytes| crate::analyze::PlateauInfo {
                size_bytes,
                settled_at_turn: 1,
            }),
            turns_needed: None,
            points: 31,
            reason: Default::default(),
            epochs: 1,
            ..MetricAnalysis::default()
        }
    }

    fn verdict(status: VerdictStatus, rss_slope: f64, passed: bool) -> Verdict {
        Verdict {
            attribution: None,
            driver_attribution: None,
            cl_objects: None,
            status,
            metrics: BTreeMap::from([
                (
                    "rss".to_owned(),
                    analysis(
                        if passed {
                            Classification::Plateau
                        } else {
                            Classification::Growth
                        },
                        rss_slope,
                        passed.then_some(1_500_000),
                    ),
                ),
                (
                    "native_heap".to_owned(),
                    analysis(Classification::Clean, 12.0, None),
                ),
            ]),
            expectations: vec![ExpectationResult {
                name: "rss.max_growth_per_turn".into(),
                passed,
                inconclusive: false,
                expected: "<= 64 KiB/turn".into(),
                measured: leakloop_units::format_bytes_per_turn(rss_slope),
                turn: (!passed).then_some(2),
                defaulted: false,
            }],
        }
    }

    #[test]
    fn renders_a_fixed_build_next_to_a_leaking_one() {
        let (ra, va) = (
            record("0.18.1", true),
            verdict(VerdictStatus::Fail, 541_000.0, false),
        );
        let (rb, vb) = (
            record("0.19.0.dev20261026", false),
            verdict(VerdictStatus::Pass, 1_900.0, true),
        );
        let differences = crate::compare::spec_differences(&ra, &rb);
        let text = compare_runs((&ra, &va), (&rb, &vb), &differences);
        insta::assert_snapshot!(text);
    }
}
