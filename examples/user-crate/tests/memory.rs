//! Memory tests of this crate, run by `cargo test`: each loads a leakloop scenario, runs it and
//! asserts on the verdict. A failed assertion prints the verdict table and keeps the reports.

use leakloop::scenario::EngineSpec;
use leakloop::testing::{ExpectationKind, ScenarioTest};
use leakloop_user_crate_example::TinyEngine;

/// Set to 1 where LiteRT-LM must be there (CI): a missing library then fails instead of skipping.
const REQUIRE_ENGINE: &str = "LEAKLOOP_REQUIRE_ENGINE";

#[test]
fn a_clean_engine_passes() {
    ScenarioTest::from_file("scenarios/flat.yaml")
        .unwrap()
        .run()
        .assert_pass();
}

#[test]
fn a_conversation_never_deleted_is_caught() {
    let run = ScenarioTest::from_file("scenarios/forgets-delete.yaml")
        .unwrap()
        .run();
    run.assert_fail()
        .assert_check_failed("balanced.sim/conversation")
        .assert_check_failed("native_heap.max_growth_per_turn");
    let growth = run.check("native_heap.max_growth_per_turn").unwrap();
    assert_eq!(growth.kind, Some(ExpectationKind::MaxGrowthPerTurn));
    let (low, _) = growth.growth.unwrap().interval.unwrap();
    assert!(low > growth.limit.unwrap(), "{growth:?}");
}

/// The same loop built in code instead of read from a file.
#[test]
fn a_scenario_built_in_code_passes() {
    ScenarioTest::chat("flat-in-code", EngineSpec::sim("cpu-flat"))
        .turns(20)
        .expect_balanced()
        .expect_max_growth_per_turn("native_heap", 256 << 10)
        .run()
        .assert_pass();
}

/// Needs LiteRT-LM's C library (`LITERT_LM_LIB`, see leakloop's ci/fetch-litert-lm.sh); prints
/// `SKIPPED: ...` without it.
#[test]
fn litert_lm_cpu_chat_stays_flat() {
    let Some(test) = ScenarioTest::from_file("scenarios/litert-cpu-chat.yaml")
        .unwrap()
        .skip_unless_available(REQUIRE_ENGINE)
    else {
        return;
    };
    let run = test.run();
    run.assert_pass();
    assert!(run.record().ledger.imbalances().is_empty());
}

/// This crate's own engine, run by leakloop in this test binary started again as its worker
/// (sampled from outside, so a crash in the engine ends the run with a verdict).
#[test]
fn tiny_engine_frees_its_conversations() {
    let run = ScenarioTest::from_file("scenarios/tiny-chat.yaml")
        .unwrap()
        .engine(TinyEngine::new)
        .run();
    run.assert_pass();
    assert_eq!(run.record().ledger.totals["tiny/conversation"].created, 22);
}

/// The bug leakloop is for: a close that forgets to free the conversation.
#[test]
fn tiny_engine_forgetting_deletes_is_caught() {
    ScenarioTest::from_file("scenarios/tiny-chat.yaml")
        .unwrap()
        .engine(TinyEngine::forgetting_deletes)
        .run()
        .assert_fail()
        .assert_check_failed("balanced.tiny/conversation")
        .assert_check_failed("rss.max_growth_per_turn");
}

/// The same engine as an engine driver (src/bin/tiny-driver.rs), the way `leakloop run` would
/// start it; `engine.options` reach it in the handshake.
#[test]
fn tiny_driver_serves_the_engine_to_any_scenario() {
    let with_driver = |forget_deletes: bool| {
        ScenarioTest::from_file("scenarios/tiny-chat.yaml")
            .unwrap()
            .configure(|s| {
                let exec = s.engine.exec.as_mut().expect("an exec scenario");
                exec.command = vec![env!("CARGO_BIN_EXE_tiny-driver").to_owned()];
                exec.options
                    .insert("forget_deletes".to_owned(), forget_deletes.into());
            })
            .run()
    };
    with_driver(false).assert_pass();
    with_driver(true)
        .assert_fail()
        .assert_check_failed("balanced.tiny/conversation");
}
