//! Tests of the test-support surface, with the simulator (in this process, and in this unit-test
//! binary started again as its worker).

use super::*;
use crate::report::{read_samples, REPORT_JSON, SAMPLES_STORE};
use crate::runner::RunOutcome;
use crate::scenario::EngineSpec;

fn flat() -> ScenarioTest {
    ScenarioTest::chat("flat", EngineSpec::sim("cpu-flat"))
        .turns(20)
        .expect_balanced()
        .expect_max_growth_per_turn("native_heap", 256 << 10)
}

fn leaking() -> ScenarioTest {
    ScenarioTest::chat("leaking", EngineSpec::sim("forgets-delete"))
        .turns(12)
        .expect_balanced()
        .expect_max_growth_per_turn("native_heap", 1 << 20)
}

/// The panic message of `assert` on `run`, which must panic.
fn panic_message(assert: impl FnOnce() + std::panic::UnwindSafe) -> String {
    let payload = std::panic::catch_unwind(assert).expect_err("the assertion must panic");
    payload
        .downcast_ref::<String>()
        .cloned()
        .unwrap_or_default()
}

#[test]
fn a_passing_run_removes_its_reports_and_a_failed_assertion_keeps_them() {
    let run = flat().run();
    run.assert_pass()
        .assert_check_passed("balanced")
        .assert_check_passed("native_heap.max_growth_per_turn");
    let dir = run.reports_dir().to_owned();
    assert!(dir.join(REPORT_JSON).is_file() && dir.join(SAMPLES_STORE).is_file());
    drop(run);
    assert!(!dir.exists(), "{} was not removed", dir.display());

    let run = leaking().run();
    let dir = run.reports_dir().to_owned();
    let message = panic_message(|| {
        run.assert_pass();
    });
    assert!(dir.join(REPORT_JSON).is_file(), "{}", dir.display());
    // The message is the table `leakloop run` prints, then where the reports are.
    assert!(
        message.starts_with("leakloop: leaking: expected the verdict pass, got fail\n"),
        "{message}"
    );
    assert!(message.contains("balanced.sim/conversation"), "{message}");
    assert!(message.contains("native_heap"), "{message}");
    assert!(
        message.ends_with(&format!("reports kept in {}", dir.display())),
        "{message}"
    );
    assert!(!message.contains('\u{1b}'), "styles in {message:?}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_leak_fails_with_typed_checks() {
    let run = leaking().run();
    run.assert_fail()
        .assert_check_failed("balanced.sim/conversation")
        .assert_check_failed("native_heap.max_growth_per_turn");
    let check = run.check("native_heap.max_growth_per_turn").unwrap();
    assert_eq!(check.kind, Some(ExpectationKind::MaxGrowthPerTurn));
    assert_eq!(check.limit, Some(1048576.0));
    let growth = run.growth("native_heap").unwrap();
    assert_eq!(check.growth, Some(growth));
    assert!(growth.interval.unwrap().0 > 1048576.0, "{growth:?}");
    let names: Vec<String> = run.failed_checks().into_iter().map(|c| c.name).collect();
    assert!(
        names.contains(&"balanced.sim/conversation".to_owned()),
        "{names:?}"
    );

    let message = panic_message(|| {
        run.assert_check_failed("rss.tolerance");
    });
    assert!(
        message.contains("no such expectation was checked"),
        "{message}"
    );
    std::fs::remove_dir_all(run.keep_reports()).unwrap();
}

/// The scenario runs isolated: its engine lives in this test binary started again as a worker
/// (this very test, selected alone). The injected crash kills that worker, not this process,
/// and what was measured before it is in the record and on disk.
#[test]
fn an_isolated_engine_runs_in_this_test_binary_as_its_worker() {
    // In the worker, serve before making a folder that its exit would leave behind.
    serve_worker_if_requested();
    let reports = tempfile::tempdir().unwrap();
    let run = flat()
        .turns(6)
        .configure(|s| {
            s.engine.isolate = true;
            s.faults = vec![crate::scenario::Fault {
                at_turn: 4,
                kind: crate::scenario::FaultKind::Crash,
            }];
        })
        .reports_in(reports.path())
        .run();
    run.assert_status(VerdictStatus::EngineFailed);
    match &run.record().outcome {
        RunOutcome::EngineFailed { turn, .. } => assert_eq!(*turn, 4),
        other => panic!("expected the worker to crash, got {other:?}"),
    }
    let streamed = read_samples(&reports.path().join(SAMPLES_STORE)).unwrap();
    assert_eq!(streamed.samples, run.record().samples);
    assert!(!run.record().samples.is_empty());
}

#[test]
fn a_scenario_file_that_is_not_valid_names_its_place() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bad.yaml");
    std::fs::write(&path, "name: bad\nturns: many\n").unwrap();
    let err = ScenarioTest::from_file(&path).unwrap_err().to_string();
    assert!(err.contains("bad.yaml"), "{err}");
}
