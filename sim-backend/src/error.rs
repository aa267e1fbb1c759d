//! Errors of the simulated engine: misuse (a call in the wrong state), injected faults, and
//! configurations it cannot run.

/// What went wrong in a simulated engine call.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SimError {
    /// A call that needs a loaded engine came before `load` or after `unload`.
    #[error("{op}: the engine is not loaded")]
    NotLoaded {
        /// The call.
        op: &'static str,
    },
    /// `load` on an engine that is already loaded.
    #[error("load: the engine is already loaded")]
    AlreadyLoaded,
    /// A session id this engine never handed out.
    #[error("{op}: session {session} was never opened")]
    UnknownSession {
        /// The call.
        op: &'static str,
        /// The session id.
        session: u64,
    },
    /// A session that was closed (or torn down by `unload`) was used again.
    #[error("{op}: session {session} is closed")]
    SessionClosed {
        /// The call.
        op: &'static str,
        /// The session id.
        session: u64,
    },
    /// An injected crash: the engine is gone.
    #[error("simulated crash (native abort in the engine) during generation in turn {turn}")]
    Crashed {
        /// The turn whose generation crashed.
        turn: u32,
    },
    /// An injected hang: the engine stopped answering.
    #[error("simulated hang: generation in turn {turn} never returned")]
    Hung {
        /// The turn whose generation hung.
        turn: u32,
    },
    /// An injected generation error; the session stays usable and closable.
    #[error("simulated generation error in turn {turn}")]
    GenerateFailed {
        /// The turn whose generation failed.
        turn: u32,
    },
    /// The configuration cannot run.
    #[error("invalid simulator configuration: {0}")]
    InvalidConfig(String),
    /// The real-allocation mode would hold more than its limit.
    #[error(
        "real allocation mode would hold {wanted} bytes, more than its limit of {limit}; raise \
         the divisor"
    )]
    RealAllocationLimit {
        /// Bytes it would have held.
        wanted: u64,
        /// The limit.
        limit: u64,
    },
}

impl SimError {
    /// Whether the engine is gone after this error (crash or hang).
    pub fn is_fatal(&self) -> bool {
        matches!(self, SimError::Crashed { .. } | SimError::Hung { .. })
    }
}
