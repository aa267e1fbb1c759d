//! Isolated worker processes: any engine can run in a child process (`leakloop worker`) that the
//! runner drives over a line-based JSON protocol and probes from outside, so that a native crash
//! or a hang ends the run with a verdict instead of taking the runner down.
//!
//! [`protocol`] is the wire format (docs/protocol.md), [`child`] the built-in worker's serving
//! loop, [`parent`] the supervising [`WorkerEngine`], [`exec`] how an external driver
//! (`backend: exec`) is started under it, [`conformance`] `leakloop driver-check`.

mod child;
mod command;
mod conformance;
mod exec;
mod parent;
mod protocol;
#[cfg(test)]
mod test_engine;
#[cfg(test)]
mod tests;

#[cfg(feature = "cli")]
pub(crate) use crate::process::end_live_groups;
#[cfg(feature = "test-support")]
pub(crate) use child::serve_driver_stdio;
#[cfg(any(feature = "cli", feature = "test-support"))]
pub(crate) use child::serve_stdio;
#[cfg(feature = "cli")]
pub(crate) use child::WorkerError;
pub use command::{serve_worker, ServeError, WorkerCommand};
pub use conformance::{check_driver, CheckStep, DriverCheckPlan, DriverCheckReport, StepResult};
pub(crate) use parent::worker_binary;
pub use parent::{WorkerEngine, WORKER_BIN_ENV};
#[cfg(feature = "test-support")]
pub(crate) use protocol::EngineConfig;
pub(crate) use protocol::{decode_line, Reply, Response};
