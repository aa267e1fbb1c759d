//! The golden view of a run: what detection decided (verdict, ledger, per-metric classification
//! with rounded figures), redacted, as JSON for insta snapshots under `golden/`. A change in
//! detection behaviour shows up as a diff of this view.

use serde_json::{json, Map, Value};

use crate::analyze::Verdict;
use crate::report::facts::{engine_error_kind_name, status_word};
use crate::report::redact::Redactor;
use crate::report::units::format_rounded;
use crate::runner::{RunOutcome, RunRecord};

/// Significant figures kept of slopes and sizes: enough to tell a 110 MiB/turn leak from a
/// 1 MiB/turn drift, few enough that noise in the last digits does not churn snapshots.
const FIGURES: i32 = 2;

fn rounded_bytes(bytes: u64) -> String {
    format_rounded(bytes as f64, FIGURES, false)
}

fn rounded_rate(rate: f64) -> String {
    format!("{}/turn", format_rounded(rate, FIGURES, true))
}

/// The redacted golden view of a run.
pub fn golden_view(record: &RunRecord, verdict: &Verdict) -> Value {
    let redactor = Redactor::for_record(record);
    let (record, verdict) = redactor.redact_run(record, verdict);
    let outcome = match &record.outcome {
        RunOutcome::Completed => json!({"status": "completed"}),
        RunOutcome::EngineFailed { turn, step, error } => json!({
            "status": "engine_failed",
            "turn": turn,
            "step": step,
            "error": engine_error_kind_name(&error.kind),
        }),
        RunOutcome::Interrupted { signal, turn } => json!({
            "status": "interrupted",
            "signal": signal,
            "turn": turn,
        }),
    };
    let totals: Map<String, Value> = record
        .ledger
        .totals
        .iter()
        .map(|(kind, c)| (kind.clone(), json!([c.created, c.deleted])))
        .collect();
    let imbalances: Vec<Value> = record
        .ledger
        .imbalances()
        .into_iter()
        .map(|i| {
            json!({"kind": i.kind, "created": i.created, "deleted": i.deleted, "first_turn": i.first_turn})
        })
        .collect();
    let metrics: Map<String, Value> = verdict
        .metrics
        .iter()
        .map(|(name, m)| {
            let mut entry = json!({
                "classification": m.classification.as_str(),
                "slope_per_turn": rounded_rate(m.slope_bytes_per_turn),
                "baseline": rounded_bytes(m.baseline),
                "last": rounded_bytes(m.last),
            });
            if let Some(p) = &m.plateau {
                entry["plateau"] = json!({
                    "size": format_rounded(p.size_bytes as f64, FIGURES, true),
                    "settled_at_turn": p.settled_at_turn,
                });
            }
            if let Some(n) = m.turns_needed {
                entry["turns_needed"] = json!(n);
            }
            if redactor.is_machine_dependent(name) {
                for key in ["slope_per_turn", "baseline", "last", "plateau"] {
                    if let Some(v) = entry.get_mut(key) {
                        *v = Value::String(crate::report::redact::PROBE.to_owned());
                    }
                }
            }
            (name.clone(), entry)
        })
        .collect();
    let expectations: Vec<Value> = verdict
        .expectations
        .iter()
        .map(
            |e| json!({"name": e.name, "passed": e.passed, "measured": e.measured, "turn": e.turn}),
        )
        .collect();
    let mut view = json!({
        "scenario": record.scenario.name,
        "backend": record.backend.backend,
        "verdict": status_word(verdict.status),
        "outcome": outcome,
        "turns_completed": record.turns_completed,
        "ledger": {"totals": totals, "imbalances": imbalances},
        "metrics": metrics,
        "expectations": expectations,
    });
    redactor.redact_value(&mut view);
    view
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::examples::{clean_run, crashed_run, leak_run};

    #[test]
    fn leak_run_golden_view() {
        let (record, verdict) = leak_run();
        let view = golden_view(&record, &verdict);
        assert_eq!(
            view["metrics"]["native_heap"]["slope_per_turn"],
            "+110 MiB/turn"
        );
        crate::report::golden!(insta::assert_json_snapshot!("golden_view_leak", view));
    }

    #[test]
    fn clean_run_golden_view_hides_probe_values() {
        let (record, verdict) = clean_run();
        let view = golden_view(&record, &verdict);
        assert_eq!(view["metrics"]["rss"]["baseline"], "[probe]");
        assert_eq!(view["metrics"]["rss"]["classification"], "clean");
        crate::report::golden!(insta::assert_json_snapshot!("golden_view_clean", view));
    }

    #[test]
    fn crashed_run_golden_view_names_the_failure() {
        let (record, verdict) = crashed_run();
        let view = golden_view(&record, &verdict);
        assert_eq!(
            view["outcome"],
            json!({"status": "engine_failed", "turn": 4, "step": "generate", "error": "crashed"})
        );
    }

    #[test]
    fn a_slope_change_in_the_third_figure_does_not_churn_but_a_real_change_does() {
        let (record, mut verdict) = leak_run();
        let before = golden_view(&record, &verdict);
        verdict
            .metrics
            .get_mut("native_heap")
            .unwrap()
            .slope_bytes_per_turn *= 1.001;
        assert_eq!(golden_view(&record, &verdict), before);
        verdict
            .metrics
            .get_mut("native_heap")
            .unwrap()
            .slope_bytes_per_turn *= 1.2;
        assert_ne!(golden_view(&record, &verdict), before);
    }
}
