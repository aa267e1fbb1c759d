//! The engine abstraction: the lifecycle every backend implements, the call ledger that counts
//! create/delete pairs, and one module per backend.

mod api;
mod factory;
mod ledger;
pub mod litert_lm;
pub mod opencl;
mod sim;
mod skip;
mod worker;

pub use api::{
    BackendInfo, Engine, EngineError, EngineErrorKind, EngineSnapshot, GenerateOutcome,
    GenerateRequest, Prompt, SessionId,
};
pub use factory::{build_engine, build_in_process};
pub use ledger::{KindCounts, Ledger, LedgerImbalance, LedgerRun, TurnLedger};
pub use litert_lm::LitertLmEngine;
#[cfg(not(target_os = "android"))]
pub use opencl::OpenClEngine;
pub use sim::SimEngine;
pub use skip::skip_or_require;
pub use worker::{
    check_driver, CheckStep, DriverCheckPlan, DriverCheckReport, StepResult, WorkerEngine,
    WORKER_BIN_ENV,
};
pub(crate) use worker::{serve_stdio, WorkerError};
