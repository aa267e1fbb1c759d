//! A tiny real engine for testing the worker without any backend: each open session holds a
//! touched 4 MiB block on the C heap, counted in its ledger as `conversation`.
//!
//! It also provides the entry point of test worker processes: the unit-test binary re-executed
//! with [`TEST_WORKER_ENV`] set serves this engine over the real pipe protocol, so supervision
//! tests meet real aborts and real hangs.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::time::Duration;

use crate::engine::worker::child::serve_stdio;
use crate::engine::{
    BackendInfo, Engine, EngineError, EngineErrorKind, EngineSnapshot, GenerateOutcome,
    GenerateRequest, KindCounts, Prompt, SessionId,
};
use crate::scenario::{EngineSpec, Fault, PromptSpec, Scenario, SessionOptions, Step};

/// Set in the environment of a test worker process.
pub(crate) const TEST_WORKER_ENV: &str = "LEAKLOOP_TEST_WORKER";

/// Bytes each open session holds.
pub(crate) const SESSION_BYTES: usize = 4 << 20;

/// The engine: sessions that hold memory until closed.
#[derive(Debug, Default)]
pub(crate) struct TinyEngine {
    loaded: bool,
    next_session: u64,
    sessions: BTreeMap<SessionId, Vec<u8>>,
    conversations: KindCounts,
    /// Writes to file descriptor 1 on load, as native engine code logging to stdout does.
    chatty: bool,
}

impl TinyEngine {
    pub(crate) fn new(_scenario: &Scenario) -> Self {
        Self::default()
    }

    fn session(&self, session: SessionId, kind: EngineErrorKind) -> Result<(), EngineError> {
        if self.sessions.contains_key(&session) {
            Ok(())
        } else {
            Err(EngineError::new(
                kind,
                format!("no open session {}", session.0),
            ))
        }
    }
}

impl Engine for TinyEngine {
    fn describe(&self) -> BackendInfo {
        BackendInfo {
            backend: "tiny".into(),
            version: "1".into(),
            details: BTreeMap::from([("loaded".into(), self.loaded.to_string())]),
        }
    }

    fn load(&mut self) -> Result<(), EngineError> {
        if self.chatty {
            let line = b"tiny engine: native log line on stdout\n";
            // SAFETY: write(2) on fd 1 from a buffer that lives across the call.
            unsafe { libc::write(1, line.as_ptr().cast(), line.len()) };
        }
        self.loaded = true;
        Ok(())
    }

    fn open_session(
        &mut self,
        _turn: u32,
        _options: &SessionOptions,
    ) -> Result<SessionId, EngineError> {
        if !self.loaded {
            return Err(EngineError::new(EngineErrorKind::Open, "not loaded"));
        }
        self.next_session += 1;
        let id = SessionId(self.next_session);
        self.sessions.insert(id, vec![1; SESSION_BYTES]);
        self.conversations.created += 1;
        Ok(id)
    }

    fn send(&mut self, session: SessionId, _prompt: &Prompt) -> Result<(), EngineError> {
        self.session(session, EngineErrorKind::Send)
    }

    fn generate(
        &mut self,
        session: SessionId,
        request: &GenerateRequest,
    ) -> Result<GenerateOutcome, EngineError> {
        self.session(session, EngineErrorKind::Generate)?;
        let cancel = request
            .cancel_after_tokens
            .filter(|&c| c < request.max_output_tokens);
        Ok(GenerateOutcome {
            tokens: cancel.unwrap_or(request.max_output_tokens),
            cancelled: cancel.is_some(),
        })
    }

    fn close_session(&mut self, session: SessionId) -> Result<(), EngineError> {
        self.session(session, EngineErrorKind::Close)?;
        self.sessions.remove(&session);
        self.conversations.deleted += 1;
        Ok(())
    }

    fn unload(&mut self) -> Result<(), EngineError> {
        self.loaded = false;
        Ok(())
    }

    fn snapshot(&mut self) -> Result<EngineSnapshot, EngineError> {
        Ok(EngineSnapshot {
            ledger: BTreeMap::from([("conversation".into(), self.conversations)]),
            metrics: BTreeMap::new(),
            ..Default::default()
        })
    }

    fn idle(&mut self, _duration: Duration) {}
}

/// A scenario for the tiny engine: open, send, generate, close; 5 s per call.
pub(crate) fn scenario_with_faults(faults: Vec<Fault>) -> Scenario {
    Scenario {
        faults,
        ..Scenario::new(
            "worker-test",
            EngineSpec {
                call_timeout: Duration::from_secs(5),
                isolate: true,
                ..EngineSpec::sim("cpu-flat")
            },
            3,
            vec![
                Step::Open(SessionOptions::default()),
                Step::Send(PromptSpec::Text("hi".into())),
                Step::Generate {
                    max_output_tokens: 16,
                },
                Step::Close,
            ],
        )
    }
}

/// Arguments that make this test binary run only [`worker_process_entry`].
pub(crate) fn test_worker_args() -> Vec<OsString> {
    [
        "engine::worker::test_engine::worker_process_entry",
        "--exact",
        "--include-ignored",
        "--nocapture",
        "--test-threads=1",
    ]
    .into_iter()
    .map(OsString::from)
    .collect()
}

/// Not a test: the body of a test worker process (see the module docs). Without
/// [`TEST_WORKER_ENV`] it returns at once.
#[test]
#[ignore = "entry point of the worker processes that the supervision tests spawn"]
fn worker_process_entry() {
    if std::env::var_os(TEST_WORKER_ENV).is_none() {
        return;
    }
    // The test framework has printed this test's name without ending the line; end it so that
    // the handshake reply starts a line of its own.
    println!();
    let build = |s: &Scenario| -> Result<Box<dyn Engine>, EngineError> {
        let mut engine = TinyEngine::new(s);
        engine.chatty = true;
        Ok(Box::new(engine))
    };
    let result = serve_stdio(None, Box::new(build));
    if let Err(err) = &result {
        eprintln!("test worker: {err}");
    }
    // Exit here so that the test framework prints nothing more once serving ends.
    std::process::exit(if result.is_ok() { 0 } else { 2 });
}
