//! Facts that several renderers state the same way: which metrics to show, whether a metric's
//! expectations held, how an engine error and the verdict read in one line.

use crate::analyze::{Verdict, VerdictStatus};
use crate::engine::{EngineError, EngineErrorKind};
use crate::input::{printable, shorten};
use crate::runner::{RunOutcome, RunRecord};
use crate::scenario::StopMode;

/// Whether the expectations on `metric` held: `None` when it has none.
pub(crate) fn metric_passed(verdict: &Verdict, metric: &str) -> Option<bool> {
    let prefix = format!("{metric}.");
    let mut results = verdict
        .expectations
        .iter()
        .filter(|e| e.name.starts_with(&prefix))
        .map(|e| e.passed)
        .peekable();
    results.peek()?;
    Some(results.all(|passed| passed))
}

/// `pass`, `FAIL`, `UNDECIDED` (none failed, one could not be decided) or `-` for a metric's
/// expectations.
pub(crate) fn metric_result_word(verdict: &Verdict, metric: &str) -> &'static str {
    match metric_passed(verdict, metric) {
        Some(true) => "pass",
        Some(false) if metric_undecided(verdict, metric) => "UNDECIDED",
        Some(false) => "FAIL",
        None => "-",
    }
}

/// Whether none of `metric`'s expectations failed but one could not be decided.
fn metric_undecided(verdict: &Verdict, metric: &str) -> bool {
    let prefix = format!("{metric}.");
    let mine = || {
        verdict
            .expectations
            .iter()
            .filter(|e| e.name.starts_with(&prefix))
    };
    mine().any(|e| e.inconclusive) && !mine().any(|e| e.failed())
}

/// An engine error in words, e.g. `crashed (signal 9 (SIGKILL)): the worker died`.
pub(crate) fn engine_error_text(error: &EngineError) -> String {
    let kind = match &error.kind {
        EngineErrorKind::Unavailable => "unavailable".to_owned(),
        EngineErrorKind::Load => "load failed".to_owned(),
        EngineErrorKind::Open => "open failed".to_owned(),
        EngineErrorKind::Send => "send failed".to_owned(),
        EngineErrorKind::Generate => "generate failed".to_owned(),
        EngineErrorKind::Close => "close failed".to_owned(),
        EngineErrorKind::Unload => "unload failed".to_owned(),
        EngineErrorKind::Crashed { how } => format!("crashed ({how})"),
        EngineErrorKind::Hung { waited_ms } => format!("hung (no answer after {waited_ms} ms)"),
        EngineErrorKind::Protocol => "protocol error".to_owned(),
    };
    if error.message.is_empty() {
        kind
    } else {
        format!("{kind}: {}", error.message)
    }
}

/// The short name of an engine error's kind, as JUnit's error type.
pub(crate) fn engine_error_kind_name(kind: &EngineErrorKind) -> &'static str {
    match kind {
        EngineErrorKind::Unavailable => "unavailable",
        EngineErrorKind::Load => "load",
        EngineErrorKind::Open => "open",
        EngineErrorKind::Send => "send",
        EngineErrorKind::Generate => "generate",
        EngineErrorKind::Close => "close",
        EngineErrorKind::Unload => "unload",
        EngineErrorKind::Crashed { .. } => "crashed",
        EngineErrorKind::Hung { .. } => "hung",
        EngineErrorKind::Protocol => "protocol",
    }
}

/// `sim sim-backend 0.1.0 (profile)`: the backend and its version.
pub(crate) fn backend_line(record: &RunRecord) -> String {
    format!("{} {}", record.backend.backend, record.backend.version)
}

/// How many turns ran, e.g. `9 of 9 turns (1 warm-up)`.
pub(crate) fn turns_line(record: &RunRecord) -> String {
    let total = turns_planned(record);
    let warmup = match record.scenario.warmup_turns {
        0 => String::new(),
        w => format!(" ({w} warm-up)"),
    };
    let stopped = if record.early_stop.is_some() && !decided_at_minimum(record) {
        ", stopped early"
    } else {
        ""
    };
    format!(
        "{} of {total} turns{warmup}{stopped}",
        record.turns_completed
    )
}

/// Whether a run that extends by default (no `max_turns`) did not need to: it ended by its
/// decision at `turns`, and reads as the fixed run it was.
fn decided_at_minimum(record: &RunRecord) -> bool {
    let scenario = &record.scenario;
    scenario.extends_by_default()
        && record
            .early_stop
            .as_ref()
            .is_some_and(|s| s.turn <= scenario.warmup_turns + scenario.turns)
}

/// The turns a run is counted out of: `warmup_turns + turns` for a run that extends by default
/// but ended by its decision at `turns` or before reaching it, else the most it could take.
pub(crate) fn turns_planned(record: &RunRecord) -> u32 {
    let scenario = &record.scenario;
    let minimum = scenario.warmup_turns + scenario.turns;
    let stopped_at = record
        .early_stop
        .as_ref()
        .map_or(record.turns_completed, |s| s.turn);
    if scenario.extends_by_default() && stopped_at <= minimum {
        minimum
    } else {
        scenario.total_turns()
    }
}

/// For `stop: decided` or a run that may extend to `max_turns`, what the stop rule did:
/// `stopped early at turn 9 of 13: <why>`, or, for a run that ran to its last turn, that no look
/// found every metric decided (a run that crashed or was interrupted ended for that reason, which
/// the verdict line says).
pub(crate) fn stop_line(record: &RunRecord) -> Option<String> {
    let scenario = &record.scenario;
    if decided_at_minimum(record) {
        return None;
    }
    let rule = if scenario.extends_by_default() {
        format!(
            "turns {}, extended by default while the verdict was inconclusive, up to {}",
            scenario.turns,
            scenario.max_measured_turns()
        )
    } else if scenario.extends() {
        format!(
            "turns {}, extended while undecided up to max_turns {}",
            scenario.turns,
            scenario.max_measured_turns()
        )
    } else {
        "stop: decided".to_owned()
    };
    if let Some(stop) = &record.early_stop {
        return Some(format!(
            "stopped early at turn {} of {} ({rule}): {}",
            stop.turn,
            stop.max_turns,
            // The reason comes from report.json when re-rendered: escaped and bounded.
            shorten(&printable(&stop.reason), 400)
        ));
    }
    // A run that extends by default ran out only if it reached its last turn (a record built
    // as a fixed run ends at `turns`).
    let ran_out = (scenario.stop == StopMode::Decided || scenario.extends())
        && matches!(record.outcome, RunOutcome::Completed)
        && (!scenario.extends_by_default() || record.turns_completed >= scenario.total_turns());
    ran_out.then(|| {
        let what = if scenario.extends_by_default() {
            "decided every expectation of a watched metric"
        } else {
            "found every watched metric decided"
        };
        format!(
            "{rule}, but no look before turn {} {what}",
            scenario.total_turns()
        )
    })
}

/// The one-line verdict: `PASS`, `FAIL`, `INCONCLUSIVE`, `ENGINE FAILED` or `INTERRUPTED`, with
/// what it rests on.
pub(crate) fn verdict_line(record: &RunRecord, verdict: &Verdict) -> (VerdictStatus, String) {
    let failed = verdict.expectations.iter().filter(|e| !e.passed).count();
    let total = verdict.expectations.len();
    let text = match (&verdict.status, &record.outcome) {
        (VerdictStatus::EngineFailed, RunOutcome::EngineFailed { turn, step, error }) => format!(
            "ENGINE FAILED in turn {turn} ({step}): {}",
            engine_error_text(error)
        ),
        (VerdictStatus::EngineFailed, _) => {
            "ENGINE FAILED (the run record says it did not)".to_owned()
        }
        (VerdictStatus::Interrupted, RunOutcome::Interrupted { signal, turn }) => format!(
            "INTERRUPTED by {signal} in turn {turn}: {} of {total} expectations held on what was \
             measured so far",
            total - failed
        ),
        (VerdictStatus::Interrupted, _) => {
            "INTERRUPTED (the run record says it was not)".to_owned()
        }
        (VerdictStatus::Fail, _) => {
            let failed = verdict.expectations.iter().filter(|e| e.failed()).count();
            format!("FAIL: {failed} of {total} expectations failed")
        }
        (VerdictStatus::Inconclusive, _) => {
            // A run that could have gone on says how: more turns is the usual cure.
            let hint = if record.scenario.extends() || record.scenario.stop == StopMode::Decided {
                ""
            } else {
                "; `max_turns` lets a run go on until it is decided"
            };
            format!(
                "INCONCLUSIVE: {failed} of {total} expectations could not be decided within the \
                 run (not shown clean, not shown leaking){hint}"
            )
        }
        (VerdictStatus::Pass, _) if total == 0 => "PASS: no expectations to check".to_owned(),
        (VerdictStatus::Pass, _) => format!("PASS: all {total} expectations held"),
    };
    (verdict.status, text)
}

/// What an empty ledger means: nothing was counted, or (for an interrupted run) nothing was kept.
pub(crate) fn empty_ledger_text(record: &RunRecord) -> &'static str {
    match record.outcome {
        RunOutcome::Interrupted { .. } => "not recorded (the run was interrupted)",
        // Nobody but the process itself can count what it creates (docs/attach.md).
        _ if record.scenario.engine.attach.is_some() => {
            "not known: the attached process wrote no LEDGER marker lines"
        }
        _ => "nothing was counted",
    }
}

/// The status word used in summary.md and JUnit properties.
pub(crate) fn status_word(status: VerdictStatus) -> &'static str {
    match status {
        VerdictStatus::Pass => "pass",
        VerdictStatus::Fail => "fail",
        VerdictStatus::Inconclusive => "inconclusive",
        VerdictStatus::EngineFailed => "engine failed",
        VerdictStatus::Interrupted => "interrupted",
    }
}
