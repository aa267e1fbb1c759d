//! ONNX Runtime through its engine driver (`drivers/onnxruntime/driver.py`): the driver against
//! docs/protocol.md (`driver-check`, in each output mode), and every scenario of
//! `fixtures/onnxruntime/` run as leakloop runs it, each ending with the verdict its header
//! states and the ledger kinds and classifications that verdict rests on (measured on
//! onnxruntime 1.32.0; the `ort-genai-*` scenarios on onnxruntime-genai 0.18.0). Without
//! `python3` or the package a test needs it says `SKIPPED: ...`; `LEAKLOOP_REQUIRE_PYTHON=1` (set
//! by CI, which installs both) makes that a failure.

use std::path::PathBuf;
use std::process::{Command, Output};

use leakloop::analyze::{Classification, VerdictStatus};
use leakloop::engine::skip_or_require;
use leakloop::report::{read_report, ReportFile};
use rstest::rstest;

use crate::common::{leakloop_command, stdout_and_stderr as text, workspace};
use crate::fixtures::expected_exit;
use crate::python_driver::memory_lock;

const INSTALL: &str = "python3 -m pip install onnxruntime==1.32.0";
const INSTALL_GENAI: &str = "python3 -m pip install onnxruntime-genai==0.18.0";
const MODEL: &str = "fixtures/onnxruntime/models/tiny-lm.onnx";
const GENAI_MODEL: &str = "fixtures/onnxruntime/models/tiny-lm-genai";
const DRIVER: &str = "drivers/onnxruntime/driver.py";

/// Whether `python3` imports `onnxruntime`; reports the skip when it does not.
fn have_onnxruntime(test: &str) -> bool {
    have_package(test, "onnxruntime", INSTALL)
}

/// Whether `python3` imports `module`; reports the skip (with how to install it) when it does not.
fn have_package(test: &str, module: &str, install: &str) -> bool {
    let imports = Command::new("python3")
        .args(["-c", &format!("import {module}")])
        .output()
        .is_ok_and(|o| o.status.success());
    if !imports {
        skip_or_require(
            "LEAKLOOP_REQUIRE_PYTHON",
            &format!("{test}: python3 cannot import {module} ({install})"),
        );
    }
    imports
}

fn driver_check(options: &[&str]) -> Output {
    let genai = options.contains(&"api=\"genai\"");
    let mut command = leakloop_command();
    let model = if genai { GENAI_MODEL } else { MODEL };
    command.args(["driver-check", "--model", model]);
    for option in options {
        command.args(["--option", option]);
    }
    command
        .args(["--", "python3", DRIVER])
        .current_dir(workspace())
        .output()
        .expect("leakloop runs")
}

#[rstest]
#[case::reused_session_numpy_outputs(&[], "session 1/1")]
#[case::session_per_request(&["session=\"per_request\""], "session 1/1")]
#[case::ortvalue_outputs(&["output=\"ortvalue\""], "output 8/8")]
#[case::iobinding_outputs(&["output=\"iobinding\"", "batch=[1,4]"], "io_binding 8/8")]
#[case::shared_arena(&["arena_extend_strategy=\"next_power_of_two\""], "session 1/1")]
#[case::genai_generator(&["api=\"genai\""], "generator 1/1, model 1/1")]
fn the_driver_conforms_to_the_protocol(#[case] options: &[&str], #[case] ledger: &str) {
    let test = "the_driver_conforms_to_the_protocol";
    if !have_onnxruntime(test) {
        return;
    }
    let genai = options.contains(&"api=\"genai\"");
    if genai && !have_package(test, "onnxruntime_genai", INSTALL_GENAI) {
        return;
    }
    let output = driver_check(options);
    let shown = text(&output);
    assert_eq!(output.status.code(), Some(0), "{options:?}:\n{shown}");
    assert!(shown.contains("conforming:"), "{shown}");
    // The runtime's version, as a release sweep reads it from the report.
    let version = if genai {
        "onnxruntime genai 0."
    } else {
        "onnxruntime 1."
    };
    assert!(shown.contains(version), "{shown}");
    // The counts after the first unload: everything the session made was destroyed.
    let after_unload = shown
        .lines()
        .find(|l| l.contains("after unload: ledger"))
        .unwrap_or_default();
    assert!(after_unload.contains(ledger), "{options:?}:\n{shown}");
}

#[test]
fn the_driver_refuses_an_option_it_does_not_know() {
    if !have_onnxruntime("the_driver_refuses_an_option_it_does_not_know") {
        return;
    }
    let output = driver_check(&["arena=true"]);
    let shown = text(&output);
    assert_ne!(output.status.code(), Some(0), "{shown}");
    assert!(shown.contains("unknown option `arena`"), "{shown}");
    let output = driver_check(&["batch=0"]);
    let shown = text(&output);
    assert_ne!(output.status.code(), Some(0), "{shown}");
    assert!(shown.contains("option `batch` must be"), "{shown}");
}

/// `leakloop run fixtures/onnxruntime/NAME.yaml`: its exit code, which must be the one its
/// header states, and its report.
fn run_scenario(name: &str) -> Option<(ReportFile, String)> {
    if !have_onnxruntime(name) {
        return None;
    }
    if name.starts_with("ort-genai") && !have_package(name, "onnxruntime_genai", INSTALL_GENAI) {
        return None;
    }
    let path = workspace().join(format!("fixtures/onnxruntime/{name}.yaml"));
    let expected = expected_exit(&std::fs::read_to_string(&path).unwrap(), &path);
    let _lock = memory_lock();
    let dir = tempfile::tempdir().unwrap();
    let output = leakloop_command()
        .arg("run")
        .arg(&path)
        .args(["--quiet", "--out"])
        .arg(dir.path())
        .output()
        .expect("leakloop runs");
    let shown = text(&output);
    assert_eq!(output.status.code(), Some(expected), "{name}:\n{shown}");
    let report = read_report(&dir.path().join("report.json")).unwrap();
    assert_eq!(report.record.backend.backend, "onnxruntime", "{name}");
    Some((report, shown))
}

fn unbalanced(report: &ReportFile) -> Vec<String> {
    let imbalances = report.record.ledger.imbalances();
    imbalances.into_iter().map(|i| i.kind).collect()
}

fn failed_expectations(report: &ReportFile) -> Vec<&str> {
    let failed = report.verdict.expectations.iter().filter(|e| !e.passed);
    failed.map(|e| e.name.as_str()).collect()
}

/// The scenarios whose lifecycle is sound: they pass and every native object the runtime made
/// is destroyed. Where a scenario's point is that memory stops rising (the arena filled by a
/// shape mix), its metric must not be classified as growth; elsewhere a slope of a few hundred
/// bytes per turn is classified either way from run to run, and the verdict is what counts.
#[rstest]
#[case::reused_session("ort-reuse", &[])]
#[case::session_per_request_released("ort-per-request", &[])]
#[case::iobinding_outputs("ort-iobinding", &[])]
#[case::shape_mix_fills_the_arena_once("ort-shape-mix", &["native_heap"])]
#[case::no_arena_no_mem_pattern("ort-no-arena", &[])]
#[case::shared_arena_outlives_sessions("ort-shared-arena", &[])]
#[case::reload_every_10_turns("ort-reload", &[])]
#[case::genai_generator_per_conversation("ort-genai-chat", &[])]
fn a_sound_lifecycle_passes(#[case] name: &str, #[case] not_growth: &[&str]) {
    let Some((report, shown)) = run_scenario(name) else {
        return;
    };
    assert_eq!(report.verdict.status, VerdictStatus::Pass, "{shown}");
    assert_eq!(unbalanced(&report), Vec::<String>::new(), "{shown}");
    let native = if name.starts_with("ort-genai") {
        "onnxruntime/generator"
    } else {
        "onnxruntime/session"
    };
    let sessions = report.record.ledger.totals[native];
    assert!(sessions.created >= 1, "{shown}");
    for metric in not_growth {
        let class = report.verdict.metrics[*metric].classification;
        assert_ne!(class, Classification::Growth, "{name}: {metric}:\n{shown}");
    }
    if name == "ort-reload" {
        // One session per load: the first and one after each of the 4 reloads.
        assert_eq!((sessions.created, sessions.deleted), (5, 5), "{shown}");
    }
    if name == "ort-iobinding" {
        let bindings = report.record.ledger.totals["onnxruntime/io_binding"];
        assert_eq!(bindings.created, 33 * 16, "{shown}");
    }
}

/// The background documents' anti-patterns: each fails on its own ledger kind and on RSS growth.
#[rstest]
#[case::session_rebuilt_per_request_never_released("ort-per-request-kept", "onnxruntime/session")]
#[case::outputs_kept("ort-outputs-kept", "onnxruntime/output")]
#[case::genai_generators_kept("ort-genai-kept", "onnxruntime/generator")]
fn an_anti_pattern_fails_on_its_ledger_kind_and_growth(#[case] name: &str, #[case] kind: &str) {
    let Some((report, shown)) = run_scenario(name) else {
        return;
    };
    assert_eq!(report.verdict.status, VerdictStatus::Fail, "{shown}");
    let unbalanced = unbalanced(&report);
    assert!(unbalanced.iter().any(|k| k == kind), "{shown}");
    // What else is unbalanced is the model kept at unload (release: keep applies to it too).
    assert!(
        unbalanced
            .iter()
            .all(|k| k == kind || k == "onnxruntime/model"),
        "{shown}"
    );
    let live = report.record.ledger.totals[kind];
    assert_eq!(live.deleted, 0, "{shown}");
    let failed = failed_expectations(&report);
    assert!(
        failed.contains(&format!("balanced.{kind}").as_str()),
        "{shown}"
    );
    assert!(failed.contains(&"rss.max_growth_per_turn"), "{shown}");
    assert_eq!(
        report.verdict.metrics["rss"].classification,
        Classification::Growth,
        "{shown}"
    );
}

#[test]
fn every_scenario_of_the_library_is_run_by_a_test_here() {
    let covered = [
        "ort-reuse",
        "ort-per-request",
        "ort-iobinding",
        "ort-shape-mix",
        "ort-no-arena",
        "ort-shared-arena",
        "ort-reload",
        "ort-per-request-kept",
        "ort-outputs-kept",
        "ort-genai-chat",
        "ort-genai-kept",
    ];
    let folder: PathBuf = workspace().join("fixtures/onnxruntime");
    let mut found: Vec<String> = std::fs::read_dir(&folder)
        .unwrap()
        .filter_map(|e| {
            let name = e.unwrap().file_name().into_string().ok()?;
            Some(name.strip_suffix(".yaml")?.to_owned())
        })
        .collect();
    found.sort();
    let mut covered: Vec<String> = covered.iter().map(|s| (*s).to_owned()).collect();
    covered.sort();
    assert_eq!(found, covered);
}
