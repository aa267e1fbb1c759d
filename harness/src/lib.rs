//! leakloop: a test harness that catches memory-leak regressions in on-device LLM inference engines.
//!
//! A [`scenario::Scenario`] scripts identical turn loops (load, then N x open / send / generate /
//! close). The runner drives an [`Engine`] through that loop while counting every create/delete
//! pair in a call ledger and sampling memory through probes. The analyzer separates one-time
//! steps and plateaus from per-turn growth and checks the scenario's expectations into a
//! [`Verdict`]; the report layer renders the result for people and CI.
//!
//! The documented API is small, like the DSL it runs:
//! - [`scenario`]: load (from a file or YAML text) and build scenarios;
//! - [`session::Session`]: run one scenario from start to finish (out folder, engine, turn loop,
//!   analysis, reports) and get its outcome;
//! - `testing` (feature `test-support`): run a scenario from a crate's own `#[test]` and
//!   assert on its verdict;
//! - the outcome: [`runner::RunRecord`] (samples, ledger, provenance) and [`analyze::Verdict`];
//! - [`registry`]: the metrics leakloop knows;
//! - [`engine::Engine`]: the lifecycle to implement for an engine of your own.
//!
//! Features switch dependencies on, not only modules: `cli` (default) is the `leakloop` command
//! line and turns `reports` on; `reports` adds plot.svg, junit.xml and the progress bar (plotters,
//! quick-junit, indicatif); without it a run writes report.json, summary.md and samples.parquet.
//! `test-support` adds `leakloop::testing` (see docs/testing-in-your-crate.md). The other
//! modules are public only for this workspace's own tests, tools and benchmarks and are hidden
//! from the documentation: they are not a stable API.
#![warn(missing_docs)]

pub mod analyze;
pub mod attribution;
mod backend;
/// Bisect: one scenario across a series of engine builds, and where a figure changed.
#[cfg(feature = "cli")]
pub(crate) mod bisect;
/// Compare: one scenario on two engines, side by side.
#[cfg(feature = "cli")]
pub(crate) mod compare;
pub mod engine;
/// History over builds: where each scenario's figures changed.
#[cfg(feature = "cli")]
pub(crate) mod history;
pub mod runner;
pub mod scenario;
pub mod session;
/// Suites, partitions and their merge: the work behind `leakloop run DIR...` and `merge`.
#[cfg(feature = "cli")]
pub(crate) mod suite;

/// The one registry of metrics (name, unit, meaning, providing probes, machine dependence).
pub use leakloop_metrics as registry;

#[cfg(feature = "test-support")]
pub mod testing;

pub use analyze::{Verdict, VerdictStatus};
pub use engine::Engine;
pub use runner::{RunOutcome, RunRecord};
pub use scenario::{load_scenario, Scenario};

// Not API: what the command line, the integration tests, device-tests/, fuzz/ and the
// benchmarks reach into.
#[doc(hidden)]
pub mod fuzzing;
#[doc(hidden)]
pub mod input;
#[doc(hidden)]
pub mod probe;
#[doc(hidden)]
pub mod process;
#[doc(hidden)]
pub mod report;
#[cfg(feature = "results-db")]
pub(crate) mod results_db;
#[doc(hidden)]
pub mod walk;

/// Benchmarks of the analyzer and the harness (`leakloop bench`); not a library API.
#[cfg(feature = "cli")]
#[doc(hidden)]
pub mod bench;

/// The `leakloop` command line (feature `cli`, on by default); not a library API.
#[cfg(feature = "cli")]
#[doc(hidden)]
pub mod cli;

#[cfg(test)]
mod test_util;
