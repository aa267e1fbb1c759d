//! Errors of targets and transports, each saying which of the two failed, so that the CLI maps
//! them to one exit code: a target that cannot be used as written is bad input (2), a transport
//! or device that is not there or vanishes is an engine failure (3).

use crate::engine::{EngineError, EngineErrorKind};

/// What went wrong with a target or its transport.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TargetErrorKind {
    /// The target as written cannot be used: a host name that does not resolve, a refused key,
    /// a serial naming no attached device, several devices and no serial.
    BadTarget,
    /// The target is not reachable now: a refused or timed-out connection, no device attached,
    /// a device offline or not authorised, the `ssh`/`adb` program missing.
    Unreachable,
    /// The transport or the device went away during a command.
    Lost,
    /// A command ran on the target and failed (a folder that cannot be made, a file that cannot
    /// be copied, a worker binary that is not there).
    Command,
}

/// A target or transport failure: which transport, and what happened.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{} {transport}: {message}", self.choice())]
pub struct TargetError {
    /// What kind of failure.
    pub kind: TargetErrorKind,
    /// The transport, as named in messages (`ssh user@host:22`, `adb -s SERIAL`).
    pub transport: String,
    /// What happened.
    pub message: String,
}

impl TargetError {
    /// An error of `kind` on `transport`.
    pub fn new(kind: TargetErrorKind, transport: String, message: impl Into<String>) -> Self {
        Self {
            kind,
            transport,
            message: message.into(),
        }
    }

    /// Which choice failed, for the message: the target as written, or its transport.
    pub fn choice(&self) -> &'static str {
        match self.kind {
            TargetErrorKind::BadTarget => "target",
            TargetErrorKind::Unreachable | TargetErrorKind::Lost | TargetErrorKind::Command => {
                "transport"
            }
        }
    }

    /// Whether the scenario's target is at fault (bad input) rather than the machine or device.
    pub fn is_bad_target(&self) -> bool {
        self.kind == TargetErrorKind::BadTarget
    }
}

/// The engine's view of a target failure: the engine cannot be reached, so it is unavailable.
impl From<TargetError> for EngineError {
    fn from(e: TargetError) -> Self {
        EngineError::new(EngineErrorKind::Unavailable, e.to_string())
    }
}

/// What building an engine on a target can fail with: the target or the engine.
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    /// The target or its transport.
    #[error(transparent)]
    Target(#[from] TargetError),
    /// The engine (or its worker).
    #[error(transparent)]
    Engine(#[from] EngineError),
}

impl From<BuildError> for EngineError {
    fn from(e: BuildError) -> Self {
        match e {
            BuildError::Target(e) => e.into(),
            BuildError::Engine(e) => e,
        }
    }
}
