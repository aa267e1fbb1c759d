//! leakloop: a test harness that catches memory-leak regressions in on-device LLM inference engines.
//!
//! A [`scenario::Scenario`] scripts identical turn loops (load, then N x open / send / generate /
//! close). The [`runner`] drives an [`engine::Engine`] through that loop while counting every
//! create/delete pair in a call ledger and sampling memory through [`probe`]s. The [`analyze`]
//! module separates one-time steps and plateaus from per-turn growth and checks the scenario's
//! expectations; [`report`] renders the result for people and CI.
//!
//! Features: `cli` (default) is the `leakloop` command line; `test-support` adds
//! `leakloop::testing`, which runs scenarios from a crate's own `#[test]` functions and asserts
//! on their verdicts (see docs/testing-in-your-crate.md).
#![warn(missing_docs)]

pub mod analyze;
pub mod bench;
/// Bisect: one scenario across a series of engine builds, and where a figure changed.
#[cfg(feature = "cli")]
pub(crate) mod bisect;
/// Compare: one scenario on two engines, side by side.
#[cfg(feature = "cli")]
pub(crate) mod compare;
pub mod engine;
#[doc(hidden)]
pub mod fuzzing;
/// History over builds: where each scenario's figures changed.
#[cfg(feature = "cli")]
pub(crate) mod history;
pub mod input;
pub mod probe;
pub mod report;
pub mod runner;
pub mod scenario;
pub mod session;
/// Suites, partitions and their merge: the work behind `leakloop run DIR...` and `merge`.
#[cfg(feature = "cli")]
pub(crate) mod suite;
pub mod walk;

/// The one registry of metrics (name, unit, meaning, providing probes, machine dependence).
pub use leakloop_metrics as registry;

#[cfg(feature = "test-support")]
pub mod testing;

/// The `leakloop` command line (feature `cli`, on by default); not a library API.
#[cfg(feature = "cli")]
#[doc(hidden)]
pub mod cli;

#[cfg(test)]
mod test_util;
