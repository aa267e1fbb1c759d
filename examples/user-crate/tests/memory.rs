//! Memory tests of this crate, run by `cargo test`: each loads a leakloop scenario, runs it and
//! asserts on the verdict. A failed assertion prints the verdict table and keeps the reports.

use leakloop::scenario::EngineSpec;
use leakloop::testing::{ExpectationKind, ScenarioTest};

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
