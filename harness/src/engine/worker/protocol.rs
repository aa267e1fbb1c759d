//! The pipe protocol between the runner and a worker process (the built-in `leakloop worker` or
//! an external engine driver): one JSON object per line, requests on the worker's stdin, replies
//! on its stdout, strictly one reply per request. docs/protocol.md is its specification; the tests
//! here and in `tests` pin the two together.
//!
//! The first request is always [`Request::Hello`], which carries the protocol version and the
//! engine's configuration in a documented shape ([`EngineConfig`]); the built-in worker also gets
//! leakloop's own scenario in it (unless it was given a scenario file). The worker answers
//! [`Response::Hello`] once its engine is built, or [`Response::Failed`] and exits. A reply may
//! carry the engine's simulated clock, so the parent can answer `Engine::simulated_clock_ms`
//! without a round trip.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::engine::{
    BackendInfo, EngineError, EngineErrorKind, EngineSnapshot, GenerateOutcome, GenerateRequest,
    KindCounts, Prompt, SessionId,
};
use crate::scenario::{Device, Scenario, SessionOptions};

/// Version of this protocol; parent and worker must agree on it exactly (docs/protocol.md,
/// "Versions"). 2: `hello` carries [`EngineConfig`], replies are flat objects with an optional
/// `clock_ms`, `idle` takes `duration_ms`.
pub(crate) const PROTOCOL_VERSION: u32 = 2;

/// Longest line either side accepts, so a runaway peer cannot exhaust memory.
pub(crate) const MAX_LINE_BYTES: u64 = 16 << 20;

/// Most ledger kinds or metrics one snapshot may carry, so that a runaway driver cannot fill the
/// runner's name tables (the cap attach mode's LEDGER markers share).
pub(crate) const MAX_SNAPSHOT_ENTRIES: usize = crate::engine::ledger::MAX_SOURCE_KINDS;

/// What a worker is asked to build, in a shape any driver can read (docs/protocol.md, "hello").
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct EngineConfig {
    /// The scenario's `engine.backend` (`sim`, `litert-lm`, `opencl`, `exec`).
    pub(crate) backend: String,
    /// The model file, absolute or relative to the worker's working directory.
    pub(crate) model: Option<PathBuf>,
    /// The compute device (`cpu`, `gpu`).
    pub(crate) device: Device,
    /// Context size in tokens.
    pub(crate) max_tokens: u32,
    /// An engine library to use instead of the one the driver would find.
    pub(crate) lib: Option<PathBuf>,
    /// A profile name (simulator and OpenCL workload).
    pub(crate) profile: Option<String>,
    /// The scenario's seed.
    pub(crate) seed: u64,
    /// Backend options, passed through as written under `engine.options`.
    #[serde(default)]
    pub(crate) options: BTreeMap<String, serde_json::Value>,
}

impl EngineConfig {
    /// The configuration of `scenario`'s engine.
    pub(crate) fn of(scenario: &Scenario) -> Self {
        let engine = &scenario.engine;
        Self {
            backend: engine.backend.as_str().to_owned(),
            model: engine.model.clone(),
            device: engine.device,
            max_tokens: engine.max_tokens,
            lib: engine.lib.clone(),
            profile: engine.profile.clone(),
            seed: scenario.seed,
            options: engine
                .exec
                .as_ref()
                .map(|exec| {
                    exec.options
                        .iter()
                        .map(|(key, value)| (key.clone(), value.to_json()))
                        .collect()
                })
                .unwrap_or_default(),
        }
    }
}

/// A call from the runner to the worker: one per `Engine` method.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "call", rename_all = "snake_case")]
pub(crate) enum Request {
    /// The handshake: must be the first line.
    Hello {
        /// The parent's [`PROTOCOL_VERSION`].
        version: u32,
        /// What to build.
        engine: Box<EngineConfig>,
        /// leakloop's own scenario, for the built-in worker only (external drivers never get
        /// it); `None` when the worker was given a file.
        #[serde(default, skip_serializing_if = "Option::is_none")]
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
        /// How long to wait, in milliseconds.
        duration_ms: u64,
    },
    /// `Engine::start_sites`: start recording allocation sites (only to a driver whose `hello`
    /// offered `sites`); every later `snapshot` reply carries them.
    StartSites {
        /// How many frames of each allocation to keep.
        frames: u32,
    },
}

/// Every call's name, in the order docs/protocol.md lists them.
#[cfg(test)]
pub(crate) const CALL_NAMES: [&str; 10] = [
    "hello",
    "load",
    "open_session",
    "send",
    "generate",
    "close_session",
    "unload",
    "snapshot",
    "idle",
    "start_sites",
];

/// Every reply's name, in the order docs/protocol.md lists them.
#[cfg(test)]
pub(crate) const REPLY_NAMES: [&str; 7] = [
    "hello",
    "loaded",
    "opened",
    "done",
    "generated",
    "snapshot",
    "failed",
];

impl Request {
    /// An idle request for `duration`, rounded up to whole milliseconds.
    pub(crate) fn idle(duration: std::time::Duration) -> Self {
        let ms = duration.as_nanos().div_ceil(1_000_000);
        Request::Idle {
            duration_ms: u64::try_from(ms).unwrap_or(u64::MAX),
        }
    }

    /// The name of the reply that answers this call when it succeeds.
    pub(crate) fn reply_name(&self) -> &'static str {
        match self {
            Request::Hello { .. } => "hello",
            Request::Load => "loaded",
            Request::OpenSession { .. } => "opened",
            Request::Generate { .. } => "generated",
            Request::Snapshot => "snapshot",
            Request::Send { .. }
            | Request::CloseSession { .. }
            | Request::Unload
            | Request::Idle { .. }
            | Request::StartSites { .. } => "done",
        }
    }

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
            Request::StartSites { .. } => "start_sites",
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
        /// The driver's offer to record allocation sites (`{"source":"tracemalloc"}`), checked
        /// only when the run attributes (`attribution::offered_source`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        sites: Option<serde_json::Value>,
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
        /// Live bytes per allocation site, after `start_sites`: checked by the attribution
        /// source (`attribution::SiteFeed`), so that a malformed list costs the attribution and
        /// never the sample.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        sites: Option<serde_json::Value>,
    },
    /// The call failed inside the engine (or the request made no sense).
    Failed {
        /// The engine's error.
        error: WireError,
    },
}

/// An [`EngineError`] as the protocol writes it: one flat object,
/// `{"kind":"generate","message":"context full"}` (`crashed` adds `how`, `hung` `waited_ms`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct WireError {
    /// What kind of failure this is.
    #[serde(flatten)]
    pub(crate) kind: EngineErrorKind,
    /// The cause.
    pub(crate) message: String,
}

impl From<EngineError> for WireError {
    fn from(error: EngineError) -> Self {
        Self {
            kind: error.kind,
            message: error.message,
        }
    }
}

impl From<WireError> for EngineError {
    fn from(error: WireError) -> Self {
        EngineError::new(error.kind, error.message)
    }
}

impl Response {
    /// The reply's name, for error messages.
    pub(crate) fn name(&self) -> &'static str {
        match self {
            Response::Hello { .. } => "hello",
            Response::Loaded { .. } => "loaded",
            Response::Opened { .. } => "opened",
            Response::Done => "done",
            Response::Generated { .. } => "generated",
            Response::Snapshot { .. } => "snapshot",
            Response::Failed { .. } => "failed",
        }
    }
}

/// One line from the worker: a response and, for a simulated engine, its clock after it. On the
/// wire this is one flat object: `{"reply":"done","clock_ms":12.5}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Reply {
    /// `Engine::simulated_clock_ms` after the call; absent (or null) for real time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) clock_ms: Option<f64>,
    /// The answer.
    #[serde(flatten)]
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

/// The version a `hello` line asks for, read leniently: another version may shape the rest of
/// the message differently, and must still be refused as a version mismatch.
pub(crate) fn hello_version(line: &str) -> Option<u32> {
    #[derive(Deserialize)]
    struct AnyHello {
        call: String,
        version: u32,
    }
    let hello: AnyHello = serde_json::from_str(line.trim_end_matches(['\n', '\r'])).ok()?;
    (hello.call == "hello").then_some(hello.version)
}

/// Why a line the worker meant as a reply is not a valid one, or `None` when the line is not
/// meant as a reply at all (not a JSON object with a `reply` key: a preloaded library's banner,
/// which the handshake skips). A `hello` reply is checked field by field, so that the message
/// names the field that is missing or out of range (issue 23: a `hello` without `pid` used to be
/// skipped as noise until the call timed out).
pub(crate) fn reply_problem(line: &str) -> Option<String> {
    let Ok(value) = serde_json::from_str::<serde_json::Value>(line.trim_end_matches(['\n', '\r']))
    else {
        return glued_reply(line);
    };
    let reply = value.as_object()?.get("reply")?;
    if reply.as_str() == Some("hello") {
        if let Some(why) = hello_problem(&value) {
            return Some(format!(
                "its `hello` reply {why} (docs/protocol.md, \"hello\"): `{}`",
                excerpt(line)
            ));
        }
    }
    decode_line::<Reply>(line).err().map(|e| e.to_string())
}

/// A reply that starts after other text on the same line, named with both: skipping the line
/// as banner noise would leave the runner waiting out the call's timeout for a reply that
/// already came (issue 21: libtest's `test NAME ... `, printed without a newline by a test
/// binary started without `--quiet`, glued onto a driver's `hello`). Only the first few `{` are
/// tried, so that a long line of braces costs little.
fn glued_reply(line: &str) -> Option<String> {
    let line = line.trim_end_matches(['\n', '\r']);
    let (at, _) = line
        .match_indices('{')
        .filter(|(at, _)| *at > 0)
        .take(8)
        .find(|(at, _)| {
            serde_json::from_str::<serde_json::Value>(&line[*at..])
                .is_ok_and(|v| v.as_object().is_some_and(|o| o.contains_key("reply")))
        })?;
    let (before, reply) = line.split_at(at);
    Some(format!(
        "a reply came after other output on the same stdout line: `{}` before `{}`; stdout \
         carries whole reply lines only (a Rust test binary prints `test NAME ... ` there \
         unless started with `--quiet`)",
        excerpt(before),
        excerpt(reply)
    ))
}

/// What is wrong with the fields of a `hello` reply, if anything.
fn hello_problem(value: &serde_json::Value) -> Option<String> {
    let whole = |name: &str, what: &str| -> Option<String> {
        match value.get(name) {
            None => Some(format!("has no `{name}` field ({what})")),
            Some(v) if v.as_u64().is_some_and(|n| u32::try_from(n).is_ok()) => None,
            Some(v) => Some(format!(
                "has `{name}`: {v}, which is not {what} (a whole number from 0 to {})",
                u32::MAX
            )),
        }
    };
    if let Some(why) = whole("version", "the protocol version") {
        return Some(why);
    }
    if let Some(why) = whole("pid", "the driver's process id") {
        return Some(why);
    }
    let Some(backend) = value.get("backend") else {
        return Some(
            "has no `backend` field (an object with the strings `backend` and `version`)".into(),
        );
    };
    for field in ["backend", "version"] {
        match backend.get(field) {
            Some(serde_json::Value::String(_)) => {}
            None => return Some(format!("has no `backend.{field}` field (a string)")),
            Some(other) => {
                return Some(format!(
                    "has `backend.{field}`: {other}, which is not a string"
                ))
            }
        }
    }
    match backend.get("details") {
        None | Some(serde_json::Value::Null) => None,
        Some(serde_json::Value::Object(details)) => details
            .iter()
            .find(|(_, v)| !v.is_string())
            .map(|(k, v)| format!("has `backend.details.{k}`: {v}, which is not a string")),
        Some(other) => Some(format!(
            "has `backend.details`: {other}, which is not an object of strings"
        )),
    }
}

/// Why the cumulative ledger counts of `later` are not those of `earlier` or more, if they are
/// not: counts are cumulative from `hello` on, across `unload` and `load` (docs/protocol.md,
/// "snapshot"). A kind `later` does not list is not judged.
pub(crate) fn counts_went_down(
    earlier: &BTreeMap<String, KindCounts>,
    later: &BTreeMap<String, KindCounts>,
) -> Option<String> {
    earlier.iter().find_map(|(kind, before)| {
        let after = later.get(kind)?;
        (after.created < before.created || after.deleted < before.deleted).then(|| {
            format!(
                "the ledger counts of `{kind}` went down from {} created, {} deleted to {} \
                 created, {} deleted (they are cumulative since `hello`, across `unload` and \
                 `load`: a driver must not restart them when it reloads its engine)",
                before.created, before.deleted, after.created, after.deleted
            )
        })
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
    use std::time::Duration;

    use rstest::rstest;

    use super::*;

    fn config() -> EngineConfig {
        EngineConfig {
            backend: "exec".into(),
            model: Some("/models/tiny.litertlm".into()),
            device: Device::Cpu,
            max_tokens: 512,
            lib: None,
            profile: None,
            seed: 7,
            options: BTreeMap::from([("threads".into(), serde_json::json!(2))]),
        }
    }

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
    #[case::hello_without_scenario(Request::Hello {
        version: PROTOCOL_VERSION,
        engine: Box::new(config()),
        scenario: None,
    })]
    #[case::load(Request::Load)]
    #[case::open(Request::OpenSession {
        turn: 3,
        options: SessionOptions { temperature: Some(0.25), top_k: Some(20), top_p: None, seed: Some(7), session: None },
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
    #[case::idle(Request::Idle { duration_ms: 1500 })]
    #[case::start_sites(Request::StartSites { frames: 16 })]
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
        sites: Some(serde_json::json!({"source": "tracemalloc"})),
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
            ..Default::default()
        },
        sites: None,
    })]
    #[case::failed_generate(Response::Failed {
        error: EngineError::new(EngineErrorKind::Generate, "context full").into(),
    })]
    #[case::failed_crash(Response::Failed {
        error: EngineError::new(EngineErrorKind::Crashed { how: "signal 6 (SIGABRT)".into() }, "x").into(),
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
            "{\"reply\":\"done\"}\n"
        );
        assert_eq!(
            encode_line(&Reply {
                clock_ms: Some(1.5),
                body: Response::Done
            }),
            "{\"clock_ms\":1.5,\"reply\":\"done\"}\n"
        );
        assert_eq!(
            encode_line(&Request::idle(Duration::from_micros(1))),
            "{\"call\":\"idle\",\"duration_ms\":1}\n"
        );
    }

    #[test]
    fn names_cover_every_message() {
        let requests = [
            Request::Hello {
                version: 2,
                engine: Box::new(config()),
                scenario: None,
            },
            Request::Load,
            Request::OpenSession {
                turn: 1,
                options: SessionOptions::default(),
            },
            Request::Send {
                session: SessionId(1),
                prompt: Prompt {
                    text: String::new(),
                    tokens: 0,
                },
            },
            Request::Generate {
                session: SessionId(1),
                request: GenerateRequest {
                    max_output_tokens: 1,
                    cancel_after_tokens: None,
                },
            },
            Request::CloseSession {
                session: SessionId(1),
            },
            Request::Unload,
            Request::Snapshot,
            Request::Idle { duration_ms: 0 },
            Request::StartSites { frames: 1 },
        ];
        let names: Vec<_> = requests.iter().map(Request::name).collect();
        assert_eq!(names, CALL_NAMES);
        for (request, name) in requests.iter().zip(CALL_NAMES) {
            assert!(encode_line(request).starts_with(&format!("{{\"call\":\"{name}\"")));
        }
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
    fn the_version_of_any_hello_can_be_read() {
        assert_eq!(
            hello_version("{\"call\":\"hello\",\"version\":9,\"new\":[]}\n"),
            Some(9)
        );
        assert_eq!(hello_version("{\"call\":\"load\",\"version\":9}"), None);
        assert_eq!(hello_version("hello?"), None);
    }

    #[rstest]
    #[case::no_pid(
        r#"{"reply":"hello","version":2,"backend":{"backend":"x","version":"1"}}"#,
        "has no `pid` field"
    )]
    #[case::pid_above_u32(
        r#"{"reply":"hello","version":2,"pid":5000000000,"backend":{"backend":"x","version":"1"}}"#,
        "has `pid`: 5000000000, which is not the driver's process id"
    )]
    #[case::pid_a_string(
        r#"{"reply":"hello","version":2,"pid":"12","backend":{"backend":"x","version":"1"}}"#,
        "has `pid`: \"12\""
    )]
    #[case::no_version(
        r#"{"reply":"hello","pid":1,"backend":{"backend":"x","version":"1"}}"#,
        "has no `version` field"
    )]
    #[case::no_backend(r#"{"reply":"hello","version":2,"pid":1}"#, "has no `backend` field")]
    #[case::backend_version_a_number(
        r#"{"reply":"hello","version":2,"pid":1,"backend":{"backend":"x","version":1}}"#,
        "`backend.version`: 1, which is not a string"
    )]
    #[case::details_a_number(r#"{"reply":"hello","version":2,"pid":1,"backend":{"backend":"x","version":"1","details":{"n":2}}}"#, "`backend.details.n`: 2")]
    fn a_bad_hello_reply_names_its_field(#[case] line: &str, #[case] says: &str) {
        let why = reply_problem(line).expect("a reply attempt");
        assert!(why.contains(says), "{why}");
        assert!(why.starts_with("its `hello` reply"), "{why}");
    }

    #[test]
    fn only_json_objects_with_a_reply_key_are_reply_attempts() {
        assert_eq!(reply_problem("loading model..."), None);
        assert_eq!(reply_problem("{\"log\":\"starting\"}"), None);
        assert_eq!(reply_problem("[1,2]"), None);
        let good =
            r#"{"reply":"hello","version":2,"pid":1,"backend":{"backend":"x","version":"1"}}"#;
        assert_eq!(reply_problem(good), None);
        assert!(reply_problem("{\"reply\":\"opened\"}")
            .unwrap()
            .contains("missing field `session`"));
        assert_eq!(reply_problem("a {brace} and {\"log\":1}"), None);
    }

    /// Issue 21: libtest's `test NAME ... ` (no newline without `--quiet`) glued onto a driver's
    /// `hello` was skipped as noise, and the runner waited out the call timeout.
    #[test]
    fn a_reply_glued_after_other_output_is_named_with_what_came_before_it() {
        let line = r#"test tests::my_engine ... {"reply":"hello","version":2,"pid":1,"backend":{"backend":"x","version":"1"}}"#;
        let why = reply_problem(line).expect("a glued reply is a reply attempt");
        assert!(
            why.contains("`test tests::my_engine ...` before `{\"reply\":\"hello\""),
            "{why}"
        );
        assert!(why.contains("--quiet"), "{why}");
    }

    #[test]
    fn counts_that_restart_are_named_and_missing_kinds_are_not_judged() {
        let counts = |c, d| KindCounts {
            created: c,
            deleted: d,
        };
        let before = BTreeMap::from([("conversation".to_owned(), counts(3, 3))]);
        let restarted = BTreeMap::from([("conversation".to_owned(), counts(0, 0))]);
        let why = counts_went_down(&before, &restarted).unwrap();
        assert!(
            why.contains("`conversation` went down from 3 created"),
            "{why}"
        );
        assert_eq!(counts_went_down(&restarted, &before), None);
        assert_eq!(counts_went_down(&before, &BTreeMap::new()), None);
    }

    #[test]
    fn long_lines_are_cut_in_error_messages() {
        let line = "x".repeat(1000);
        let err = decode_line::<Reply>(&line).unwrap_err();
        assert_eq!(err.excerpt.len(), 123);
    }
}
