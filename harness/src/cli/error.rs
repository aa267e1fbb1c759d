//! The CLI's one error type and the documented exit codes it maps to.

/// The documented exit codes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Exit {
    /// Every expectation held.
    Pass = 0,
    /// An expectation failed (a leak, an unbalanced create/delete).
    ExpectationFailed = 1,
    /// Bad input or usage (a malformed scenario or trace, a missing file).
    BadInput = 2,
    /// The engine failed (crash, hang, load error).
    EngineFailed = 3,
    /// `run` was stopped by SIGINT; it wrote a partial report marked interrupted (128 + 2, what a
    /// shell reports for a process that SIGINT ended).
    InterruptedBySigint = 130,
    /// `run` was stopped by SIGTERM (a CI job's timeout); it wrote a partial report marked
    /// interrupted (128 + 15).
    InterruptedBySigterm = 143,
}

impl Exit {
    /// The exit code of a run stopped by `signal` (`SIGINT` or `SIGTERM`).
    pub fn interrupted(signal: &str) -> Exit {
        if signal == "SIGINT" {
            Exit::InterruptedBySigint
        } else {
            Exit::InterruptedBySigterm
        }
    }
}

/// Everything that can stop a subcommand, each mapped to one exit code.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    /// Bad input or usage: exit 2.
    #[error(transparent)]
    BadInput(anyhow::Error),
    /// The engine failed before anything could be judged: exit 3.
    #[error(transparent)]
    Engine(anyhow::Error),
}

impl CliError {
    /// The exit code this error ends the process with.
    pub fn exit(&self) -> Exit {
        match self {
            CliError::BadInput(_) => Exit::BadInput,
            CliError::Engine(_) => Exit::EngineFailed,
        }
    }

    /// A bad-input error from anything printable.
    pub fn bad_input(message: impl std::fmt::Display) -> Self {
        CliError::BadInput(anyhow::anyhow!("{message}"))
    }
}
