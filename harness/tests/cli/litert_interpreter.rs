//! The LiteRT Interpreter driver (`drivers/litert-interpreter/litert_interpreter.py`, `ai-edge-litert`):
//! its conformance (`driver-check`), its tiny model rebuilt byte for byte by the checked-in
//! script, and the scenario library `fixtures/litert-interpreter/`, each scenario ending with the
//! verdict its header states. Without python3 or the package each test says `SKIPPED: ...`;
//! `LEAKLOOP_REQUIRE_PYTHON=1` (CI, which installs the package) turns that into a failure.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Mutex, MutexGuard};

use leakloop::analyze::VerdictStatus;
use leakloop::engine::skip_or_require;
use leakloop::report::read_report;
use rstest::rstest;

use crate::common::{
    assert_driver_refuses_option, leakloop_command, stdout_and_stderr as text, workspace,
};
use crate::fixtures::{expected_exit, run};

const INSTALL: &str = "python3 -m pip install ai-edge-litert==2.3.0";
const REQUIRE_ENV: &str = "LEAKLOOP_REQUIRE_PYTHON";
const DRIVER: &str = "drivers/litert-interpreter/litert_interpreter.py";
const MODEL: &str = "fixtures/models/tiny-mlp.tflite";

/// One run at a time: scenarios measured side by side on a busy machine would be slower, and
/// their drivers' start-up (about 1 s each) would add up to call timeouts.
fn run_lock() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

/// Whether `python3` imports `ai_edge_litert`; reports the skip when it does not.
fn have_runtime(test: &str) -> bool {
    let imports = Command::new("python3")
        .args(["-c", "import ai_edge_litert.interpreter"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !imports {
        skip_or_require(
            REQUIRE_ENV,
            &format!("{test}: python3 cannot import ai_edge_litert ({INSTALL})"),
        );
    }
    imports
}

/// The expectation names a failing scenario states in its `# Fails: a, b` header line.
fn stated_failures(text: &str, path: &Path) -> Vec<String> {
    let line = text
        .lines()
        .find_map(|l| l.strip_prefix("# Fails:"))
        .unwrap_or_else(|| panic!("{} has no `# Fails: ...` header line", path.display()));
    line.split(',').map(|n| n.trim().to_owned()).collect()
}

#[rstest]
fn each_scenario_ends_with_the_verdict_it_states(
    #[files("../fixtures/litert-interpreter/*.yaml")] path: PathBuf,
) {
    let name = path.file_name().unwrap().to_string_lossy().into_owned();
    if !have_runtime(&name) {
        return;
    }
    let scenario = std::fs::read_to_string(&path).unwrap();
    let code = expected_exit(&scenario, &path);
    let _lock = run_lock();
    let dir = tempfile::tempdir().unwrap();
    let output = run(&path, &dir.path().join("out"));
    let shown = text(&output);
    assert_eq!(output.status.code(), Some(code), "{name}:\n{shown}");
    let report = read_report(&dir.path().join("out/report.json")).unwrap();
    assert_eq!(
        report.record.backend.backend, "litert-interpreter",
        "{name}"
    );
    let failed: Vec<&str> = report
        .verdict
        .expectations
        .iter()
        .filter(|e| !e.passed)
        .map(|e| e.name.as_str())
        .collect();
    match code {
        0 => {
            assert_eq!(
                report.verdict.status,
                VerdictStatus::Pass,
                "{name}:\n{shown}"
            );
            assert!(
                report.record.ledger.imbalances().is_empty(),
                "{name}:\n{shown}"
            );
        }
        1 => {
            assert_eq!(
                report.verdict.status,
                VerdictStatus::Fail,
                "{name}:\n{shown}"
            );
            for stated in stated_failures(&scenario, &path) {
                assert!(
                    failed.contains(&stated.as_str()),
                    "{name}: `{stated}` held (failed: {failed:?}):\n{shown}"
                );
            }
        }
        _ => panic!("{name}: the library's scenarios pass (0) or fail (1), not {code}"),
    }
}

#[test]
fn the_driver_conforms_to_the_protocol_in_both_lifecycles() {
    let test = "the_driver_conforms_to_the_protocol_in_both_lifecycles";
    if !have_runtime(test) {
        return;
    }
    // Reuse: the interpreter built at load is destroyed at unload and rebuilt at the reload.
    // Per request: the session's interpreter is destroyed at close, none lives across a reload.
    for (lifecycle, after_reload) in [
        (
            "reuse",
            "after reload: ledger (created/deleted): interpreter 2/1, output 8/8",
        ),
        (
            "per_request",
            "after reload: ledger (created/deleted): interpreter 1/1, output 8/8",
        ),
    ] {
        let output = leakloop_command()
            .args(["driver-check", "--model", MODEL, "--option"])
            .arg(format!("lifecycle={lifecycle}"))
            .args(["--", "python3", DRIVER])
            .current_dir(workspace())
            .output()
            .expect("leakloop runs");
        let shown = text(&output);
        assert_eq!(output.status.code(), Some(0), "{lifecycle}:\n{shown}");
        assert!(shown.contains("conforming:"), "{lifecycle}:\n{shown}");
        assert!(shown.contains(after_reload), "{lifecycle}:\n{shown}");
        assert!(
            shown.contains("litert-interpreter 2.3.0"),
            "{lifecycle}:\n{shown}"
        );
    }
}

#[test]
fn the_driver_refuses_an_option_it_does_not_know() {
    let test = "the_driver_refuses_an_option_it_does_not_know";
    if !have_runtime(test) {
        return;
    }
    assert_driver_refuses_option(
        MODEL,
        DRIVER,
        "cancel=interrupt",
        r#"option `cancel`: "interrupt" is not "stop" or "abandon""#,
    );
}

#[test]
fn the_build_script_writes_the_committed_model_byte_for_byte() {
    let test = "the_build_script_writes_the_committed_model_byte_for_byte";
    if !have_runtime(test) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let built = dir.path().join("tiny-mlp.tflite");
    let output = Command::new("python3")
        .arg("drivers/litert-interpreter/build_model.py")
        .arg(&built)
        .current_dir(workspace())
        .output()
        .expect("python3 runs");
    assert!(output.status.success(), "{}", text(&output));
    let committed = std::fs::read(workspace().join(MODEL)).unwrap();
    let rebuilt = std::fs::read(&built).unwrap();
    assert!(
        committed == rebuilt,
        "{MODEL} ({} bytes) differs from what build_model.py writes ({} bytes): rebuild it",
        committed.len(),
        rebuilt.len()
    );
}
