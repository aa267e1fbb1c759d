//! leakloop: a test harness that catches memory-leak regressions in on-device LLM inference engines.
//!
//! A [`scenario::Scenario`] scripts identical turn loops (load, then N x open / send / generate /
//! close). The [`runner`] drives an [`engine::Engine`] through that loop while counting every
//! create/delete pair in a call ledger and sampling memory through [`probe`]s. The [`analyze`]
//! module separates one-time steps and plateaus from per-turn growth and checks the scenario's
//! expectations; [`report`] renders the result for people and CI.
#![warn(missing_docs)]

pub mod analyze;
pub mod bench;
pub mod engine;
pub mod input;
pub mod probe;
pub mod report;
pub mod runner;
pub mod scenario;

/// The one registry of metrics (name, unit, meaning, providing probes, machine dependence).
pub use leakloop_metrics as registry;

#[doc(hidden)]
pub mod cli;

#[cfg(test)]
mod test_util;
