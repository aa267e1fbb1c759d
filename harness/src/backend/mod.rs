//! The backends a scenario can run on (`engine.backend`): one module each, listed in one table.
//!
//! Each backend's module owns what only it knows: which `engine:` keys it takes and how they are
//! checked, whether it runs in a worker process by default, how it shares the machine in a suite,
//! whether its engine reads a prompt's words, which faults it can take, what a test needs before
//! it can run it, how its engine is built, and the starter scenario `leakloop init` writes for it
//! (its `engine:` section and default watch list; the common text is in `starter.rs`). Code elsewhere asks the row of a scenario's
//! backend ([`of`]) instead of matching on [`BackendKind`](crate::scenario::BackendKind).
//!
//! Adding a backend: a `BackendKind` variant (its name in YAML and on the command line), a module
//! here with its `BACKEND` row, that row in [`REGISTRY`], and its page in docs/.

mod attach;
mod exec;
mod litert_lm;
mod opencl;
mod registry;
mod sim;
mod starter;

pub(crate) use registry::{of, Backend, BuildAxis, EngineInput, Placement};
// Read by the command line only (`leakloop init`).
#[cfg_attr(not(feature = "cli"), allow(unused_imports))]
pub(crate) use starter::{starter_text, CommandUse, Starter, StarterOptions};
