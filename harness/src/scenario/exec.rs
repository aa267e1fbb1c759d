//! `engine: {backend: exec, ...}`: an external program that speaks the worker protocol
//! (docs/protocol.md) is the engine.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// How to start an engine driver, and what to pass it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ExecSpec {
    /// The program and its arguments (never empty). A program path with a `/` in it is resolved
    /// against the scenario's folder when the scenario is read; a bare name is looked up on
    /// `PATH`.
    pub command: Vec<String>,
    /// Variables added to the driver's environment (on top of the runner's).
    pub env: BTreeMap<String, String>,
    /// The driver's working directory. A scenario read from a file defaults to the file's folder
    /// (so relative arguments are relative to the scenario, as every path in it); `None`: the
    /// runner's.
    pub cwd: Option<PathBuf>,
    /// Backend options passed through to the driver in the handshake, as written.
    pub options: BTreeMap<String, serde_json::Value>,
    /// Preload the OpenCL call interposer into the driver (it then reads the counts itself
    /// through `leakloop_cl_snapshot`, see docs/protocol.md).
    pub opencl_interposer: bool,
}

impl ExecSpec {
    /// A driver started as `command`, with nothing else set.
    pub fn new(command: impl IntoIterator<Item = impl Into<String>>) -> Self {
        Self {
            command: command.into_iter().map(Into::into).collect(),
            ..Self::default()
        }
    }
}
