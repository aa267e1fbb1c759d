//! The error of one failed C-API call: which function, and what the library said about it.

use crate::engine::litert_lm::ffi::Api;
use crate::engine::{EngineError, EngineErrorKind};

/// A LiteRT-LM C-API call failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{call} failed: {detail}")]
pub struct CallError {
    /// The C function, e.g. `litert_lm_engine_create`.
    pub call: &'static str,
    /// The library's own message where it gave one, else what leakloop saw.
    pub detail: String,
}

impl CallError {
    /// An error with a message of leakloop's own.
    pub(crate) fn new(call: &'static str, detail: impl Into<String>) -> Self {
        Self {
            call,
            detail: detail.into(),
        }
    }

    /// A call that returned NULL or non-zero: the library's last error message explains it.
    pub(crate) fn from_library(api: &Api, call: &'static str) -> Self {
        let detail = api
            .last_error()
            .unwrap_or_else(|| "the call failed and the library gave no message".to_owned());
        Self { call, detail }
    }

    /// As an engine error of the given kind (the step that failed).
    pub(crate) fn into_engine(self, kind: EngineErrorKind) -> EngineError {
        EngineError::new(kind, self.to_string())
    }
}
