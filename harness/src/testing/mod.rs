//! Running scenarios from a crate's own tests (feature `test-support`).
//!
//! A test loads a scenario (a file, YAML text, or built in code), runs it, and asserts on the
//! verdict. A failed assertion panics with the verdict table `leakloop run` prints and the
//! folder where the run's reports (report.json, summary.md, samples.parquet; junit.xml and plot.svg
//! too with the `reports` feature) were kept; a passing run's temporary folder is removed (set
//! [`REPORTS_ENV`] to keep every run's reports).
//!
//! ```
//! use leakloop::testing::ScenarioTest;
//!
//! let run = ScenarioTest::from_yaml(
//!     r#"
//! name: kv-cache-kept
//! engine: {backend: sim, profile: forgets-delete}
//! turns: 12
//! turn: [open: {}, send: {prompt: "hi"}, generate: {max_output_tokens: 8}, close: {}]
//! expect:
//!   balanced: true
//!   native_heap: {max_growth_per_turn: 1MiB}
//! "#,
//! )
//! .unwrap()
//! .run();
//! run.assert_fail()
//!     .assert_check_failed("balanced.sim/conversation")
//!     .assert_check_failed("native_heap.max_growth_per_turn");
//! // The numbers behind the verdict, typed:
//! let growth = run.check("native_heap.max_growth_per_turn").unwrap();
//! assert!(growth.observed.unwrap() > growth.limit.unwrap());
//! ```
//!
//! Engines that run isolated (`engine.isolate`, the default for LiteRT-LM) need a worker
//! process. The test binary is its own worker: [`ScenarioTest::run`] starts this binary again
//! with only the current test selected and [`SERVE_ENV`] set, and in that child the same call
//! serves the engine instead of running the scenario ([`this_test_worker`]). Nothing else is
//! needed in a `#[test]` function; a test binary with its own `main` calls
//! [`serve_worker_if_requested`] first.
//!
//! Your own engine (any [`Engine`]) runs the same way: [`ScenarioTest::engine`] builds it in that
//! worker, sampled from outside. [`serve_driver`] makes a program of yours an engine driver
//! (`backend: exec`, docs/protocol.md) instead. Everything an [`Engine`] implementation needs
//! is re-exported here.

mod driver;
mod outcome;
mod own_engine;
mod scenario_test;
mod worker;

pub use driver::{serve_driver, serve_driver_with, DriverConfig};
pub use outcome::TestRun;
pub use scenario_test::{RunError, ScenarioTest, REPORTS_ENV};
pub use worker::{serve_worker_if_requested, this_test_worker, SERVE_ENV, SERVE_OWN_ENGINE};

pub use crate::analyze::{Check, ExpectationKind, GrowthPerTurn, VerdictStatus};
pub use crate::engine::{
    BackendInfo, Engine, EngineError, EngineErrorKind, EngineSnapshot, GenerateOutcome,
    GenerateRequest, KindCounts, Prompt, ServeError, SessionId,
};
pub use crate::scenario::{Device, OptionValue, SessionOptions};

#[cfg(test)]
mod tests;
