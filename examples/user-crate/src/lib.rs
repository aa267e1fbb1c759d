//! Stands for an engine project's crate (say, Rust bindings over an inference library). Its
//! engine, [`TinyEngine`], implements leakloop's `Engine`, so the memory tests in
//! `tests/memory.rs` run leakloop scenarios on it: in the test binary started again as its
//! worker (`ScenarioTest::engine`), and as an engine driver (`src/bin/tiny-driver.rs`).

use std::collections::BTreeMap;

use leakloop::testing::{
    BackendInfo, Engine, EngineError, EngineErrorKind, EngineSnapshot, GenerateOutcome,
    GenerateRequest, KindCounts, Prompt, SessionId, SessionOptions,
};

/// Bytes of KV cache each conversation holds while it is open.
pub const KV_CACHE_BYTES: usize = 4 << 20;

/// A tiny inference engine: each conversation holds a KV cache until it is closed. One made with
/// [`TinyEngine::forgetting_deletes`] has the bug leakloop is for: closing a conversation
/// forgets to free its cache and never deletes it.
#[derive(Debug, Default)]
pub struct TinyEngine {
    forget_deletes: bool,
    loaded: bool,
    next: u64,
    conversations: BTreeMap<SessionId, Vec<u8>>,
    forgotten: Vec<Vec<u8>>,
    /// Conversations created and deleted, as the engine's own handles count them.
    counts: KindCounts,
}

impl TinyEngine {
    /// An engine that frees what it closes.
    pub fn new() -> Self {
        Self::default()
    }

    /// An engine whose close forgets the conversation.
    pub fn forgetting_deletes() -> Self {
        Self {
            forget_deletes: true,
            ..Self::default()
        }
    }

    fn conversation(&self, session: SessionId, kind: EngineErrorKind) -> Result<(), EngineError> {
        if self.conversations.contains_key(&session) {
            Ok(())
        } else {
            Err(EngineError::new(
                kind,
                format!("no open conversation {}", session.0),
            ))
        }
    }
}

impl Engine for TinyEngine {
    fn describe(&self) -> BackendInfo {
        BackendInfo {
            backend: "tiny".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            details: BTreeMap::new(),
        }
    }

    fn load(&mut self) -> Result<(), EngineError> {
        self.loaded = true;
        Ok(())
    }

    fn open_session(
        &mut self,
        _turn: u32,
        _options: &SessionOptions,
    ) -> Result<SessionId, EngineError> {
        if !self.loaded {
            return Err(EngineError::new(EngineErrorKind::Open, "no model loaded"));
        }
        self.next += 1;
        let id = SessionId(self.next);
        // Written, not only reserved, so that it is resident memory.
        self.conversations.insert(id, vec![1; KV_CACHE_BYTES]);
        self.counts.created += 1;
        Ok(id)
    }

    fn send(&mut self, session: SessionId, _prompt: &Prompt) -> Result<(), EngineError> {
        self.conversation(session, EngineErrorKind::Send)
    }

    fn generate(
        &mut self,
        session: SessionId,
        request: &GenerateRequest,
    ) -> Result<GenerateOutcome, EngineError> {
        self.conversation(session, EngineErrorKind::Generate)?;
        Ok(GenerateOutcome {
            tokens: request.max_output_tokens,
            cancelled: false,
        })
    }

    fn close_session(&mut self, session: SessionId) -> Result<(), EngineError> {
        self.conversation(session, EngineErrorKind::Close)?;
        let cache = self.conversations.remove(&session).unwrap_or_default();
        if self.forget_deletes {
            self.forgotten.push(cache);
        } else {
            self.counts.deleted += 1;
        }
        Ok(())
    }

    fn unload(&mut self) -> Result<(), EngineError> {
        self.loaded = false;
        Ok(())
    }

    fn snapshot(&mut self) -> Result<EngineSnapshot, EngineError> {
        Ok(EngineSnapshot {
            ledger: BTreeMap::from([("conversation".to_owned(), self.counts)]),
            metrics: BTreeMap::new(),
            ..Default::default()
        })
    }
}
