//! `stop: decided` / `leakloop run --stop decided`: runs that end once the verdict is decided.

use std::path::{Path, PathBuf};
use std::process::Output;

use leakloop::analyze::Classification;
use leakloop::report::read_report;
use leakloop::runner::Phase;

use crate::common::leakloop_command;
use crate::fixtures::run_with as run;

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("../fixtures/scenarios/{name}.yaml"))
}

fn text(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

#[test]
fn the_field_leak_stops_within_a_few_looks_and_still_fails_its_limits() {
    let out = tempfile::tempdir().unwrap();
    let output = run(
        &fixture("flutter-gemma-opencl-leak"),
        out.path(),
        &["--stop", "decided", "--turns", "100"],
    );
    let stdout = text(&output);
    assert_eq!(output.status.code(), Some(1), "{stdout}");
    assert!(
        stdout.contains("stopped early at turn 7 of 101"),
        "{stdout}"
    );
    let report = read_report(&out.path().join("report.json")).unwrap();
    let stop = report.record.early_stop.as_ref().expect("stopped early");
    assert_eq!((stop.turn, stop.max_turns), (7, 101));
    assert_eq!(report.record.turns_completed, 7);
    assert!(
        stop.reason.contains("native_heap growth"),
        "{}",
        stop.reason
    );
    let metrics = &report.verdict.metrics;
    assert_eq!(
        metrics["native_heap"].classification,
        Classification::Growth
    );
    assert_eq!(metrics["gpu"].classification, Classification::Plateau);
    let failed: Vec<&str> = report
        .verdict
        .expectations
        .iter()
        .filter(|e| !e.passed)
        .map(|e| e.name.as_str())
        .collect();
    // pss, watched without limits, grows with the native heap: its default fails too.
    assert_eq!(
        failed,
        [
            "native_heap.tolerance",
            "native_heap.max_growth_per_turn",
            "pss.horizon"
        ]
    );
    // `analyze` of the saved report judges it at the levels the run was judged at.
    let analyzed = leakloop_command()
        .arg("analyze")
        .arg(out.path().join("report.json"))
        .args(["--format", "json"])
        .output()
        .unwrap();
    assert_eq!(analyzed.status.code(), Some(1));
    let json: serde_json::Value = serde_json::from_slice(&analyzed.stdout).unwrap();
    assert_eq!(
        json["metrics"]["native_heap"]["confidence"].as_f64(),
        Some(metrics["native_heap"].confidence)
    );
    assert!(metrics["native_heap"].confidence > 0.99);
    // The saved report re-renders with the same verdict.
    let again = leakloop_command()
        .arg("report")
        .arg(out.path())
        .output()
        .unwrap();
    assert_eq!(again.status.code(), Some(1));
    assert!(text(&again).contains("stopped early at turn 7 of 101"));
}

#[test]
fn a_flat_engine_stops_once_clean_and_takes_its_baseline_samples() {
    let out = tempfile::tempdir().unwrap();
    let output = run(&fixture("stop-decided-flat"), out.path(), &[]);
    let stdout = text(&output);
    assert_eq!(output.status.code(), Some(0), "{stdout}");
    let report = read_report(&out.path().join("report.json")).unwrap();
    let stop = report.record.early_stop.as_ref().expect("stopped early");
    assert!(stop.turn < 60, "{stop:?}");
    for analysis in report.verdict.metrics.values() {
        assert!(
            matches!(
                analysis.classification,
                Classification::Clean | Classification::Plateau
            ),
            "{analysis:?}"
        );
    }
    let baselines = report
        .record
        .samples
        .iter()
        .filter(|s| s.phase == Phase::Load)
        .count();
    assert_eq!(baselines, 3);
}

#[test]
fn stop_turns_on_the_command_line_runs_every_turn() {
    let out = tempfile::tempdir().unwrap();
    let output = run(
        &fixture("stop-decided-flat"),
        out.path(),
        &["--stop", "turns", "--turns", "30"],
    );
    assert_eq!(output.status.code(), Some(0), "{}", text(&output));
    let report = read_report(&out.path().join("report.json")).unwrap();
    assert_eq!(report.record.turns_completed, 31);
    // Without `max_turns` the run may extend to 60 turns, but it was decided at its 30: the look
    // there ended it (the open conversation a look sees in the ledger is no failure).
    let stop = report
        .record
        .early_stop
        .expect("the look at turns ended the run");
    assert_eq!((stop.turn, stop.max_turns), (31, 61));
    assert!(
        stop.reason.contains("at the minimum of 30 measured turns"),
        "{}",
        stop.reason
    );
    assert!(
        !text(&output).contains("stopped early"),
        "{}",
        text(&output)
    );
}

#[test]
fn max_turns_equal_to_turns_opts_out_of_the_default_extension() {
    let out = tempfile::tempdir().unwrap();
    let output = run(
        &fixture("stop-decided-flat"),
        out.path(),
        &["--stop", "turns", "--turns", "30", "--max-turns", "30"],
    );
    assert_eq!(output.status.code(), Some(0), "{}", text(&output));
    let report = read_report(&out.path().join("report.json")).unwrap();
    assert_eq!(report.record.early_stop, None);
    assert_eq!(report.record.turns_completed, 31);
}

#[test]
fn an_unknown_stop_mode_is_a_usage_error() {
    let out = tempfile::tempdir().unwrap();
    let output = run(
        &fixture("stop-decided-flat"),
        out.path(),
        &["--stop", "sometimes"],
    );
    assert_eq!(output.status.code(), Some(2));
}
