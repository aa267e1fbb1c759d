//! The pipe protocol between the runner and a worker process: one JSON object per line, requests
//! on the worker's stdin, replies on its stdout, strictly one reply per request.
//!
//! The first request is always [`Request::Hello`], which carries the protocol version (and,
//! unless the worker was given a scenario file, the scenario itself). The worker answers
//! [`Response::Hello`] once its engine is built, or [`Response::Failed`] and exits. Every reply
//! also carries the engine's simulated clock, so the parent can answer
//! `Engine::simulated_clock_ms` without a round trip.

use std::time::Duration;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::engine::{
    BackendInfo, EngineError, EngineSnapshot, GenerateOutcome, GenerateRequest, Prompt, SessionId,
};
use crate::scenario::{Scenario, SessionOptions};

/// Version of this protocol; parent and worker must agree on it exactly.
pub(crate) const PROTOCOL_VERSION: u32 = 1;

/// Longest line either side accepts, so a runaway peer cannot exhaust memory.
pub(crate) const MAX_LINE_BYTES: u64 = 16 << 20;

/// A call from the runner to the worker: one per `Engine` method.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "call", rename_all = "snake_case")]
pub(crate) enum Request {
    /// The handshake: must be the first line.
    Hello {
        /// The parent's [`PROTOCOL_VERSION`].
        version: u32,
        /// The scenario to build the engine for; `None` when the worker was given a file.
        scenario: Option<Box<Scenario>>,
    },
    /// `Engine::load`.
    Load,
    /// `Engine::open_session`.
    OpenSession {
        /// The 1-based turn.
        turn: u32,
        /// Sampler options.
        options: SessionOptions,
    },
    /// `Engine::send`.
    Send {
        /// The session.
        session: SessionId,
        /// The prompt.
        prompt: Prompt,
    },
    /// `Engine::generate`.
    Generate {
        /// The session.
        session: SessionId,
        /// What to generate.
        request: GenerateRequest,
    },
    /// `Engine::close_session`.
    CloseSession {
        /// The session.
        session: SessionId,
    },
    /// `Engine::unload`.
    Unload,
    /// `Engine::snapshot`.
    Snapshot,
    /// `Engine::idle`.
    Idle {
        /// How long to wait.
        duration: Duration,
    },
}

impl Request {
    /// The call's name, for error messages.
    pub(crate) fn name(&self) -> &'static str {
        match self {
            Request::Hello { .. } => "hello",
            Request::Load => "load",
            Request::OpenSession { .. } => "open_session",
            Request::Send { .. } => "send",
            Request::Generate { .. } => "generate",
            Request::CloseSession { .. } => "close_session",
            Request::Unload => "unload",
            Request::Snapshot => "snapshot",
            Request::Idle { .. } => "idle",
        }
    }
}

/// The worker's answer to one request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "reply", rename_all = "snake_case")]
pub(crate) enum Response {
    /// The handshake answer: the engine is built.
    Hello {
        /// The worker's [`PROTOCOL_VERSION`].
        version: u32,
        /// The worker's process id.
        pid: u32,
        /// What the engine says it is.
        backend: BackendInfo,
    },
    /// `load` succeeded; the engine may know more about itself now (a library version).
    Loaded {
        /// What the engine says it is after loading.
        backend: BackendInfo,
    },
    /// `open_session` succeeded.
    Opened {
        /// The new session.
        session: SessionId,
    },
    /// `send`, `close_session`, `unload` or `idle` succeeded.
    Done,
    /// `generate` succeeded.
    Generated {
        /// What it produced.
        outcome: GenerateOutcome,
    },
    /// `snapshot` succeeded.
    Snapshot {
        /// The engine's counters, plus the worker's own `native_heap`.
        snapshot: EngineSnapshot,
    },
    /// The call failed inside the engine (or the request made no sense).
    Failed {
        /// The engine's error.
        error: EngineError,
    },
}

/// One line from the worker: a response and the engine's clock after it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Reply {
    /// `Engine::simulated_clock_ms` after the call.
    pub(crate) clock_ms: Option<f64>,
    /// The answer.
    pub(crate) body: Response,
}

/// A line that is not a valid message.
#[derive(Debug, thiserror::Error)]
#[error("malformed protocol line `{excerpt}`: {cause}")]
pub(crate) struct ProtocolError {
    /// The start of the offending line.
    pub(crate) excerpt: String,
    /// What serde said about it.
    pub(crate) cause: String,
}

/// Serialises a message as one line, newline included.
pub(crate) fn encode_line<T: Serialize>(message: &T) -> String {
    // The message types hold only strings, numbers, maps with string keys and paths, for which
    // serde_json cannot fail; a failure would be a bug in these types.
    let mut line = serde_json::to_string(message).expect("protocol messages always serialise");
    line.push('\n');
    line
}

/// Parses one line (with or without its newline).
pub(crate) fn decode_line<T: DeserializeOwned>(line: &str) -> Result<T, ProtocolError> {
    serde_json::from_str(line.trim_end_matches(['\n', '\r'])).map_err(|e| ProtocolError {
        excerpt: excerpt(line),
        cause: e.to_string(),
    })
}

/// The first 120 characters of a line, for error messages.
pub(crate) fn excerpt(line: &str) -> String {
    let line = line.trim_end();
    match line.char_indices().nth(120) {
        Some((cut, _)) => format!("{}...", &line[..cut]),
        None => line.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use rstest::rstest;

    use super::*;
    use crate::engine::{EngineErrorKind, KindCounts};

    fn round_trip<T>(message: T)
    where
        T: Serialize + DeserializeOwned + PartialEq + std::fmt::Debug,
    {
        let line = encode_line(&message);
        assert!(line.ends_with('\n'));
        assert_eq!(
            line.matches('\n').count(),
            1,
            "one message, one line: {line}"
        );
        let back: T = decode_line(&line).unwrap();
        assert_eq!(back, message);
    }

    #[rstest]
    #[case::hello_without_scenario(Request::Hello { version: PROTOCOL_VERSION, scenario: None })]
    #[case::load(Request::Load)]
    #[case::open(Request::OpenSession {
        turn: 3,
        options: SessionOptions { temperature: Some(0.25), top_k: Some(20), top_p: None, seed: Some(7) },
    })]
    #[case::send_with_newlines(Request::Send {
        session: SessionId(4),
        prompt: Prompt { text: "line one\nline \"two\"".into(), tokens: 5 },
    })]
    #[case::generate_with_cancel(Request::Generate {
        session: SessionId(4),
        request: GenerateRequest { max_output_tokens: 64, cancel_after_tokens: Some(8) },
    })]
    #[case::close(Request::CloseSession { session: SessionId(4) })]
    #[case::unload(Request::Unload)]
    #[case::snapshot(Request::Snapshot)]
    #[case::idle(Request::Idle { duration: Duration::from_millis(1500) })]
    fn requests_round_trip(#[case] request: Request) {
        round_trip(request);
    }

    #[rstest]
    #[case::hello(Response::Hello {
        version: PROTOCOL_VERSION,
        pid: 42,
        backend: BackendInfo {
            backend: "sim".into(),
            version: "0.1.0".into(),
            details: BTreeMap::from([("profile".into(), "cpu-flat".into())]),
        },
    })]
    #[case::opened(Response::Opened { session: SessionId(9) })]
    #[case::done(Response::Done)]
    #[case::generated(Response::Generated {
        outcome: GenerateOutcome { tokens: 8, cancelled: true },
    })]
    #[case::snapshot(Response::Snapshot {
        snapshot: EngineSnapshot {
            ledger: BTreeMap::from([("conversation".into(), KindCounts { created: 3, deleted: 2 })]),
            metrics: BTreeMap::from([("native_heap".into(), 123_456_789)]),
        },
    })]
    #[case::failed_generate(Response::Failed {
        error: EngineError::new(EngineErrorKind::Generate, "context full"),
    })]
    #[case::failed_crash(Response::Failed {
        error: EngineError::new(EngineErrorKind::Crashed { how: "signal 6 (SIGABRT)".into() }, "x"),
    })]
    fn replies_round_trip(#[case] body: Response) {
        round_trip(Reply {
            clock_ms: Some(12.5),
            body,
        });
    }

    #[test]
    fn the_wire_format_names_the_call_and_reply() {
        assert_eq!(
            encode_line(&Request::CloseSession {
                session: SessionId(2)
            }),
            "{\"call\":\"close_session\",\"session\":2}\n"
        );
        assert_eq!(
            encode_line(&Reply {
                clock_ms: None,
                body: Response::Done
            }),
            "{\"clock_ms\":null,\"body\":{\"reply\":\"done\"}}\n"
        );
    }

    #[rstest]
    #[case::not_json("running 1 test", "expected value")]
    #[case::unknown_call("{\"call\":\"explode\"}", "unknown variant `explode`")]
    #[case::missing_field("{\"call\":\"close_session\"}", "missing field `session`")]
    fn malformed_lines_are_errors_quoting_the_line(#[case] line: &str, #[case] cause: &str) {
        let err = decode_line::<Request>(line).unwrap_err();
        assert!(err.cause.contains(cause), "{err}");
        assert!(err.to_string().contains(line), "{err}");
    }

    #[test]
    fn long_lines_are_cut_in_error_messages() {
        let line = "x".repeat(1000);
        let err = decode_line::<Reply>(&line).unwrap_err();
        assert_eq!(err.excerpt.len(), 123);
    }
}
