//! The engine abstraction: the lifecycle every backend implements, the call ledger that counts
//! create/delete pairs, and one module per backend.

mod api;
mod factory;
mod ledger;
pub mod opencl;
mod sim;

pub use api::{
    BackendInfo, Engine, EngineError, EngineErrorKind, EngineSnapshot, GenerateOutcome,
    GenerateRequest, Prompt, SessionId,
};
pub use factory::build_engine;
pub use ledger::{KindCounts, Ledger, LedgerImbalance, TurnLedger};
pub use opencl::OpenClEngine;
pub use sim::SimEngine;
