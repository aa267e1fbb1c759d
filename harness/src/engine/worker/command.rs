//! Which program serves as the worker: by default the `leakloop` binary re-executed as
//! `leakloop worker`; any other program that speaks the protocol when started with its arguments
//! (a test binary re-executing one of its own tests, see `leakloop::testing`).

use std::ffi::OsString;
use std::path::PathBuf;

/// A program and its arguments that, once started, serve one engine over the worker protocol on
/// stdin/stdout.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkerCommand {
    /// The executable.
    pub program: PathBuf,
    /// Its arguments.
    pub args: Vec<OsString>,
    /// Variables added to its environment (before the engine's own, such as a preload).
    pub env: Vec<(String, String)>,
}
