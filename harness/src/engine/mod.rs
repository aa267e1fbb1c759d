//! The engine abstraction: the lifecycle every backend implements, the call ledger that counts
//! create/delete pairs, and one module per backend.

mod api;
pub(crate) mod attach;
mod factory;
pub(crate) mod ledger;
pub mod litert_lm;
pub mod opencl;
mod sim;
mod skip;
pub mod transport;
pub(crate) mod worker;

pub use api::{
    BackendInfo, Engine, EngineError, EngineErrorKind, EngineSnapshot, GenerateOutcome,
    GenerateRequest, Prompt, SessionId, TurnMarks,
};
pub use attach::AttachEngine;
pub use factory::{
    build_engine, build_engine_with, build_in_process, build_on_target, build_on_target_with,
};
pub use ledger::{CountError, KindCounts, Ledger, LedgerImbalance, LedgerRun, TurnLedger};
pub use litert_lm::LitertLmEngine;
#[cfg(not(target_os = "android"))]
pub use opencl::OpenClEngine;
pub use sim::SimEngine;
pub use skip::skip_or_require;
pub use worker::{
    check_driver, serve_worker, CheckStep, DriverCheckPlan, DriverCheckReport, ServeError,
    StepResult, WorkerCommand, WorkerEngine, WORKER_BIN_ENV,
};
#[cfg(feature = "cli")]
pub(crate) use worker::{end_live_groups, serve_stdio, WorkerError};
