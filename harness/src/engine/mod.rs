//! The engine abstraction: the lifecycle every backend implements, the call ledger that counts
//! create/delete pairs, and one module per backend.

mod api;
pub(crate) mod attach;
mod factory;
pub(crate) mod ledger;
#[doc(hidden)]
pub mod litert_lm;
#[doc(hidden)]
pub mod opencl;
mod sim;
mod skip;
#[doc(hidden)]
pub mod transport;
pub(crate) mod worker;

pub use api::{
    BackendInfo, Engine, EngineError, EngineErrorKind, EngineSnapshot, GenerateOutcome,
    GenerateRequest, Prompt, Ready, SessionId, TurnMarks,
};
pub use ledger::{CountError, KindCounts, Ledger, LedgerImbalance, LedgerRun, TurnLedger};
pub use sim::SimEngine;

// Not API: the backends, their builders and the worker protocol, public for the command line,
// the integration tests and device-tests/.
#[doc(hidden)]
pub use attach::AttachEngine;
pub(crate) use factory::build_on_target_in;
#[doc(hidden)]
pub use factory::{
    build_engine, build_engine_with, build_in_process, build_on_target, build_on_target_with,
};
#[doc(hidden)]
pub use litert_lm::LitertLmEngine;
#[cfg(not(target_os = "android"))]
#[doc(hidden)]
pub use opencl::OpenClEngine;
#[doc(hidden)]
pub use skip::skip_or_require;
#[doc(hidden)]
pub use worker::{
    check_driver, serve_worker, CheckStep, DriverCheckPlan, DriverCheckReport, ServeError,
    StepResult, WorkerCommand, WorkerEngine, WORKER_BIN_ENV,
};
#[cfg(feature = "cli")]
pub(crate) use worker::{end_live_groups, serve_stdio, WorkerError};
