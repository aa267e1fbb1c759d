//! The Python-binding driver (`drivers/litert_lm_python.py`): its own tests (`drivers/tests/`),
//! then the tiny model through it as leakloop runs it (`backend: exec`), with the scenarios for
//! the binding's failure modes ending as measured on litert-lm-api 0.18.1, and `compare` of the C
//! API against the binding. A missing `python3`, `litert_lm` package or C library shows as
//! `SKIPPED: ...`, and fails the test with `LEAKLOOP_REQUIRE_ENGINE=1` (CI installs all three).

use std::path::Path;
use std::process::{Command, Output};

use std::sync::{Mutex, MutexGuard};

use crate::common::{leakloop_command, workspace, LEAKLOOP};
use leakloop::analyze::VerdictStatus;
use leakloop::engine::litert_lm::discover_library;
use leakloop::engine::{skip_or_require, EngineErrorKind, WORKER_BIN_ENV};
use leakloop::report::{read_report, ReportFile};
use leakloop::runner::RunOutcome;

const INSTALL: &str = "python3 -m pip install litert-lm-api==0.18.1";
/// The `leakloop` command line under test.
/// Set in CI, where python3, the `litert_lm` package and the C library must all be there.
const REQUIRE_ENV: &str = "LEAKLOOP_REQUIRE_ENGINE";

/// One real-engine run at a time in this test binary: two would measure each other's load
/// (onnxruntime.rs takes it too).
pub(crate) fn memory_lock() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

/// Whether the LiteRT-LM C library and the tiny model `model_file` are here; reports the skip
/// when they are not.
fn require_litert(test: &str, model_file: &str) -> Option<()> {
    if let Err(e) = discover_library(None) {
        skip_or_require(
            REQUIRE_ENV,
            &format!("{test}: {e} (run ci/fetch-litert-lm.sh)"),
        );
        return None;
    }
    let model = workspace().join("fixtures/models").join(model_file);
    if !model.is_file() {
        skip_or_require(
            REQUIRE_ENV,
            &format!("{test}: the model {} is missing", model.display()),
        );
        return None;
    }
    Some(())
}

#[test]
fn the_driver_passes_its_own_tests() {
    let run = Command::new("python3")
        .args(["-m", "unittest", "discover", "-s", "drivers/tests", "-v"])
        .current_dir(workspace())
        .output();
    let out = match run {
        Ok(out) => out,
        Err(e) => {
            skip_or_require(
                REQUIRE_ENV,
                &format!("the_driver_passes_its_own_tests: cannot run python3 ({e}); install Python 3.11"),
            );
            return;
        }
    };
    // unittest reports on stderr; the library's own log lines are left out of the message.
    let report: String = String::from_utf8_lossy(&out.stderr)
        .lines()
        .filter(|l| {
            !l.starts_with(['I', 'W', 'E']) || l.starts_with("ERROR") || l.contains(" ... ")
        })
        .collect::<Vec<_>>()
        .join("\n");
    assert!(
        out.status.success(),
        "drivers/tests failed ({}):\n{report}",
        out.status
    );
    let ran = report
        .lines()
        .find_map(|l| {
            l.strip_prefix("Ran ")?
                .split(' ')
                .next()?
                .parse::<u32>()
                .ok()
        })
        .unwrap_or(0);
    assert!(
        ran >= 10,
        "expected the driver's tests to run, saw {ran}:\n{report}"
    );
    if let Some(reason) = report
        .lines()
        .find_map(|l| l.split("skipped 'SKIPPED: ").nth(1))
    {
        // Only reached without LEAKLOOP_REQUIRE_ENGINE=1: with it the tests fail instead.
        skip_or_require(
            REQUIRE_ENV,
            &format!(
                "drivers/tests engine checks: {} ({INSTALL})",
                reason
                    .trim_end_matches('\'')
                    .split(" (")
                    .next()
                    .unwrap_or(reason)
            ),
        );
    }
}

/// Whether `python3` imports `litert_lm`; reports the skip when it does not.
fn have_binding(test: &str) -> bool {
    let imports = Command::new("python3")
        .args(["-c", "import litert_lm"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !imports {
        skip_or_require(
            REQUIRE_ENV,
            &format!("{test}: python3 cannot import litert_lm ({INSTALL})"),
        );
    }
    imports
}

/// A committed file, as an absolute path: an exec driver runs in its scenario's folder, and
/// paths resolved against a relative folder would not survive that change of directory.
fn committed(path: &str) -> String {
    workspace().join(path).display().to_string()
}

/// `leakloop ARGS --quiet --out DIR` from the repository root.
fn leakloop(args: &[&str], out: &Path) -> Output {
    leakloop_command()
        .args(args)
        .args(["--quiet", "--out"])
        .arg(out)
        .current_dir(workspace())
        // The C API side runs in leakloop's own worker: this build of it.
        .env(WORKER_BIN_ENV, LEAKLOOP)
        .output()
        .expect("leakloop runs")
}

/// Runs a committed scenario through the binding; its exit code and report.json.
fn run_scenario(file: &str, code: i32) -> Option<ReportFile> {
    if !have_binding(file) {
        return None;
    }
    let _lock = memory_lock();
    let dir = tempfile::tempdir().unwrap();
    let path = committed(&format!("fixtures/scenarios/{file}"));
    let output = leakloop(&["run", &path], dir.path());
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert_eq!(output.status.code(), Some(code), "{file}:\n{text}");
    let report = read_report(&dir.path().join("report.json")).unwrap();
    assert_eq!(report.record.backend.backend, "litert-lm-python", "{file}");
    Some(report)
}

fn failed_expectations(report: &ReportFile) -> Vec<&str> {
    let failed = report.verdict.expectations.iter().filter(|e| !e.passed);
    failed.map(|e| e.name.as_str()).collect()
}

#[test]
fn the_chat_loop_through_the_binding_passes() {
    let Some(report) = run_scenario("litert-py-chat.yaml", 0) else {
        return;
    };
    assert_eq!(report.verdict.status, VerdictStatus::Pass);
    assert!(report.record.ledger.imbalances().is_empty());
    let conversations = report.record.ledger.totals["litert-lm-python/conversation"];
    assert_eq!((conversations.created, conversations.deleted), (32, 32));
}

/// Every streamed reply's chunks appended to a list never cleared (`keep_chunks: true`): a
/// Python-level leak (+22.6 KiB/turn of anon_rss measured), which fails on anon_rss's growth with
/// the ledger balanced (the C handles are all released). docs/attribution.md shows where it is.
#[test]
fn chunks_kept_in_a_python_list_fail_on_anon_rss_growth() {
    let Some(report) = run_scenario("litert-py-chunks-kept.yaml", 1) else {
        return;
    };
    assert_eq!(report.verdict.status, VerdictStatus::Fail);
    assert!(report.record.ledger.imbalances().is_empty());
    let failed = failed_expectations(&report);
    assert!(
        failed.contains(&"anon_rss.max_growth_per_turn"),
        "{failed:?}"
    );
}

#[test]
fn cancel_during_generation_through_the_binding_passes() {
    let Some(report) = run_scenario("litert-py-cancel.yaml", 0) else {
        return;
    };
    assert_eq!(report.verdict.status, VerdictStatus::Pass);
    assert!(report.record.ledger.imbalances().is_empty());
}

/// Checks that the run ended with the driver killed by SIGSEGV or SIGABRT in `turn` at `step`;
/// returns the error's message.
fn assert_driver_crashed<'a>(report: &'a ReportFile, turn: u32, step: &str) -> &'a str {
    let RunOutcome::EngineFailed {
        turn: failed_turn,
        step: failed_step,
        error,
    } = &report.record.outcome
    else {
        panic!(
            "expected an engine failure, got {:?}",
            report.record.outcome
        );
    };
    assert_eq!(
        (*failed_turn, failed_step.as_str()),
        (turn, step),
        "{error}"
    );
    let EngineErrorKind::Crashed { how } = &error.kind else {
        panic!("expected a crash, got {error:?}");
    };
    assert!(how.contains("SIGSEGV") || how.contains("SIGABRT"), "{how}");
    &error.message
}

#[test]
fn conversations_left_to_a_disabled_collector_fail_on_the_ledger_and_growth_and_crash_at_exit() {
    let Some(report) = run_scenario("litert-py-gc-dropped.yaml", 3) else {
        return;
    };
    // Python frees the conversations after their engine closed, as the driver exits: SIGSEGV
    // in 8 of 9 runs, SIGABRT in one (docs/litert-lm-python.md).
    let message = assert_driver_crashed(&report, 22, "exit");
    assert!(message.contains("after its last reply"), "{message}");
    assert_eq!(report.record.turns_completed, 22);
    assert_eq!(
        failed_expectations(&report),
        [
            "balanced.litert-lm-python/conversation",
            "rss.max_growth_per_turn",
            // anon_rss is watched without limits: the kept conversations fail its default.
            "anon_rss.horizon",
            "native_heap.max_growth_per_turn"
        ]
    );
    let conversations = report.record.ledger.totals["litert-lm-python/conversation"];
    assert_eq!((conversations.created, conversations.deleted), (22, 0));
}

#[test]
fn closing_conversations_after_their_engine_crashes_the_driver() {
    let Some(report) = run_scenario("litert-py-engine-closed.yaml", 3) else {
        return;
    };
    assert_eq!(report.verdict.status, VerdictStatus::EngineFailed);
    // SIGSEGV or SIGABRT, by run (docs/litert-lm-python.md).
    assert_driver_crashed(&report, 5, "reload");
    // The turns before the crash are kept.
    assert_eq!(report.record.turns_completed, 5);
}

#[test]
fn compare_sets_the_c_api_against_the_binding() {
    let test = "compare_sets_the_c_api_against_the_binding";
    if require_litert(test, "tiny-qwen2-f32.litertlm").is_none() || !have_binding(test) {
        return;
    }
    let _lock = memory_lock();
    let dir = tempfile::tempdir().unwrap();
    let output = leakloop(
        &[
            "compare",
            &committed("fixtures/scenarios/litert-cpu-chat.yaml"),
            "--engine",
            &committed("fixtures/engines/litert-lm-python.yaml"),
        ],
        dir.path(),
    );
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_eq!(
        output.status.code(),
        Some(0),
        "{stdout}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    // A: whichever C library discovery finds (CI: LITERT_LM_LIB, 0.18.1, the wheel's own).
    assert!(stdout.contains("  A: litert-lm "), "{stdout}");
    assert!(stdout.contains("  B: litert-lm-python 0.18.1"), "{stdout}");
    assert!(
        stdout.contains("A: PASS") && stdout.contains("B: PASS"),
        "{stdout}"
    );
    for side in ["a", "b"] {
        let report = read_report(&dir.path().join(side).join("report.json")).unwrap();
        assert_eq!(report.verdict.status, VerdictStatus::Pass, "side {side}");
    }
}

#[test]
fn the_driver_conforms_to_the_protocol() {
    let test = "the_driver_conforms_to_the_protocol";
    if !have_binding(test) {
        return;
    }
    let output = leakloop_command()
        .args([
            "driver-check",
            "--model",
            "fixtures/models/tiny-qwen2-f32.litertlm",
            "--",
        ])
        .arg("drivers/litert_lm_python.py")
        .current_dir(workspace())
        .output()
        .expect("leakloop runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stdout}{stderr}");
    assert!(stdout.contains("conforming:"), "{stdout}{stderr}");
}
