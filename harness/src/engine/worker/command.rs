//! Which program serves as the worker: by default the `leakloop` binary re-executed as
//! `leakloop worker`; any other program that speaks the protocol when started with its arguments
//! (a test binary re-executing one of its own tests, see `leakloop::testing`).

use std::ffi::OsString;
use std::path::PathBuf;

use crate::engine::build_in_process;
use crate::engine::worker::child::serve_stdio;

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

/// Why a program serving as a worker stopped before the runner closed its stdin.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct ServeError(String);

impl ServeError {
    #[cfg(feature = "test-support")]
    pub(crate) fn new(why: String) -> Self {
        Self(why)
    }
}

/// The body of any program that serves as a worker (`leakloop worker` without `--scenario`, a
/// test binary started as its own worker): builds, in this process, the engine the runner's
/// handshake names and serves it on stdin/stdout until the runner closes stdin.
pub fn serve_worker() -> Result<(), ServeError> {
    serve_stdio(None, Box::new(build_in_process)).map_err(|e| ServeError(e.to_string()))
}
