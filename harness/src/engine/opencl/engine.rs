//! [`OpenClEngine`]: the reference OpenCL engine behind the [`Engine`] trait, with its own
//! bookkeeping of what it created and released and, when the interposer is loaded, the
//! interposer's view of the same objects.

use std::collections::BTreeMap;

use opencl3::memory::ClMem;

use crate::engine::ledger::KindCounts;
use crate::engine::opencl::interposer::LoadedInterposer;
use crate::engine::opencl::names::{kinds, ENGINE_BUFFER_BYTES};
use crate::engine::opencl::profile::OpenClProfile;
use crate::engine::opencl::runtime::{ClError, Runtime};
use crate::engine::opencl::workload::{
    self, decode_step, kv_bytes, prefill, prompt_embeddings, scratch_bytes, Cache, Scratch,
    Weights, D_MODEL,
};
use crate::engine::{
    BackendInfo, Engine, EngineError, EngineErrorKind, EngineSnapshot, GenerateOutcome,
    GenerateRequest, Prompt, SessionId,
};
use crate::scenario::{Scenario, SessionOptions};

#[derive(Debug, Default)]
struct Bookkeeping {
    counts: BTreeMap<&'static str, KindCounts>,
    live_bytes: u64,
}

impl Bookkeeping {
    fn create(&mut self, kind: &'static str, n: u64, bytes: u64) {
        self.counts.entry(kind).or_default().created += n;
        self.live_bytes += bytes;
    }

    fn delete(&mut self, kind: &'static str, n: u64, bytes: u64) {
        self.counts.entry(kind).or_default().deleted += n;
        self.live_bytes -= bytes;
    }
}

#[derive(Debug)]
struct Session {
    cache: Cache,
    scratch: Option<Scratch>,
    /// Output row of the last step, kept for checking results.
    last_output: Vec<f32>,
}

/// The loaded state: engine-tier resources.
#[derive(Debug)]
struct Loaded {
    weights: Weights,
    runtime: Runtime,
}

/// The reference OpenCL engine: a small single-head attention decoder with the field's three
/// tiers of resources (context, queue, program and weights per load; a KV cache per session;
/// scratch buffers per session's turns) and the faults of [`OpenClProfile`].
#[derive(Debug)]
pub struct OpenClEngine {
    profile: OpenClProfile,
    capacity: usize,
    seed: u64,
    loaded: Option<Loaded>,
    sessions: BTreeMap<u64, Session>,
    next_session: u64,
    book: Bookkeeping,
    interposer: Option<LoadedInterposer>,
    platform: Option<(String, String)>,
}

fn engine_error(kind: EngineErrorKind, e: ClError) -> EngineError {
    EngineError::new(kind, format!("OpenCL: {e}"))
}

impl OpenClEngine {
    /// Builds the engine for a scenario: `engine.profile` (default `clean`), `engine.max_tokens`
    /// as the KV-cache capacity, and the scenario's seed. Nothing touches OpenCL until `load`.
    pub fn from_scenario(scenario: &Scenario) -> Result<Self, EngineError> {
        let profile = OpenClProfile::parse(scenario.engine.profile.as_deref())
            .map_err(|m| EngineError::new(EngineErrorKind::Load, m))?;
        Self::new(profile, scenario.engine.max_tokens as usize, scenario.seed)
    }

    /// Builds the engine directly (tests, benchmarks).
    pub fn new(profile: OpenClProfile, max_tokens: usize, seed: u64) -> Result<Self, EngineError> {
        if max_tokens == 0 {
            return Err(EngineError::new(
                EngineErrorKind::Load,
                "engine.max_tokens must be at least 1 for the OpenCL engine",
            ));
        }
        Ok(Self {
            profile,
            capacity: max_tokens,
            seed,
            loaded: None,
            sessions: BTreeMap::new(),
            next_session: 1,
            book: Bookkeeping::default(),
            interposer: None,
            platform: None,
        })
    }

    /// The profile this engine runs.
    pub fn profile(&self) -> OpenClProfile {
        self.profile
    }

    /// Whether the OpenCL interposer is loaded in this process (looked up at load).
    pub fn interposer_loaded(&self) -> bool {
        self.interposer.is_some()
    }

    /// The output row of a session's last prefill or generated token (for checking results).
    pub fn last_output(&self, session: SessionId) -> Option<&[f32]> {
        self.sessions
            .get(&session.0)
            .map(|s| s.last_output.as_slice())
    }

    /// Bytes of one session's KV cache.
    pub fn kv_cache_bytes(&self) -> u64 {
        kv_bytes(self.capacity)
    }

    /// Bytes of one session's scratch buffers.
    pub fn scratch_set_bytes(&self) -> u64 {
        scratch_bytes(self.capacity)
    }

    fn loaded(&self, kind: EngineErrorKind) -> Result<&Loaded, EngineError> {
        self.loaded
            .as_ref()
            .ok_or_else(|| EngineError::new(kind, "the OpenCL engine is not loaded"))
    }

    fn session_mut(
        &mut self,
        id: SessionId,
        kind: EngineErrorKind,
    ) -> Result<(&Loaded, &mut Session), EngineError> {
        let loaded = self
            .loaded
            .as_ref()
            .ok_or_else(|| EngineError::new(kind.clone(), "the OpenCL engine is not loaded"))?;
        let session = self
            .sessions
            .get_mut(&id.0)
            .ok_or_else(|| EngineError::new(kind, format!("no open session {}", id.0)))?;
        Ok((loaded, session))
    }

    /// Creates the session's scratch set on first use.
    fn ensure_scratch(&mut self, id: SessionId, kind: EngineErrorKind) -> Result<(), EngineError> {
        let capacity = self.capacity;
        let (loaded, session) = self.session_mut(id, kind.clone())?;
        if session.scratch.is_none() {
            let scratch =
                Scratch::create(&loaded.runtime, capacity).map_err(|e| engine_error(kind, e))?;
            session.scratch = Some(scratch);
            self.book.create(
                kinds::SCRATCH_BUFFER,
                Scratch::BUFFERS,
                scratch_bytes(capacity),
            );
        }
        Ok(())
    }

    fn release_session(&mut self, session: Session) {
        let capacity = self.capacity;
        if let Some(scratch) = session.scratch {
            if self.profile == OpenClProfile::LeakScratch {
                // The injected bug: the handles are dropped without clReleaseMemObject.
                scratch
                    .into_buffers()
                    .into_iter()
                    .for_each(std::mem::forget);
            } else {
                drop(scratch);
                self.book.delete(
                    kinds::SCRATCH_BUFFER,
                    Scratch::BUFFERS,
                    scratch_bytes(capacity),
                );
            }
        }
        match self.profile {
            OpenClProfile::LeakKv => std::mem::forget(session.cache.kv),
            OpenClProfile::LeakRetain => {
                // Our release happens; the extra reference from open keeps the buffer alive.
                drop(session.cache.kv);
                self.book.delete(kinds::KV_CACHE, 1, 0);
            }
            OpenClProfile::Clean | OpenClProfile::LeakScratch => {
                drop(session.cache.kv);
                self.book.delete(kinds::KV_CACHE, 1, kv_bytes(capacity));
            }
        }
        self.book.delete(kinds::SESSION, 1, 0);
    }
}

impl Engine for OpenClEngine {
    fn describe(&self) -> BackendInfo {
        let mut details = BTreeMap::new();
        details.insert("profile".into(), self.profile.to_string());
        details.insert("max_tokens".into(), self.capacity.to_string());
        details.insert("d_model".into(), D_MODEL.to_string());
        details.insert(
            "interposer".into(),
            if self.interposer.is_some() {
                "loaded"
            } else {
                "not loaded"
            }
            .into(),
        );
        if let Some((platform, device)) = &self.platform {
            details.insert("platform".into(), platform.clone());
            details.insert("device".into(), device.clone());
        }
        BackendInfo {
            backend: "opencl".into(),
            version: format!("leakloop reference engine {}", env!("CARGO_PKG_VERSION")),
            details,
        }
    }

    fn load(&mut self) -> Result<(), EngineError> {
        if self.loaded.is_some() {
            return Err(EngineError::new(
                EngineErrorKind::Load,
                "the OpenCL engine is already loaded",
            ));
        }
        let runtime = Runtime::create().map_err(|e| {
            let kind = if e.what.starts_with("finding") {
                EngineErrorKind::Unavailable
            } else {
                EngineErrorKind::Load
            };
            engine_error(kind, e)
        })?;
        let weights = Weights::create(&runtime, self.seed)
            .map_err(|e| engine_error(EngineErrorKind::Load, e))?;
        self.platform = Some((runtime.platform_name.clone(), runtime.device_name.clone()));
        for kind in [kinds::CONTEXT, kinds::COMMAND_QUEUE, kinds::PROGRAM] {
            self.book.create(kind, 1, 0);
        }
        self.book.create(kinds::KERNEL, Runtime::KERNELS, 0);
        self.book
            .create(kinds::WEIGHT_BUFFER, 1, workload::WEIGHT_BYTES);
        self.loaded = Some(Loaded { weights, runtime });
        // The interposer, if any, is loaded together with the OpenCL library.
        self.interposer = LoadedInterposer::find();
        Ok(())
    }

    fn open_session(
        &mut self,
        _turn: u32,
        _options: &SessionOptions,
    ) -> Result<SessionId, EngineError> {
        let loaded = self.loaded(EngineErrorKind::Open)?;
        let cache = Cache::create(&loaded.runtime, self.capacity)
            .map_err(|e| engine_error(EngineErrorKind::Open, e))?;
        if self.profile == OpenClProfile::LeakRetain {
            // SAFETY: a valid buffer handle; the injected bug is that this reference is never
            // released.
            unsafe { opencl3::memory::retain_mem_object(cache.kv.get()) }.map_err(|e| {
                EngineError::new(
                    EngineErrorKind::Open,
                    format!("OpenCL: retaining the KV cache: {e}"),
                )
            })?;
            self.book.create(kinds::KV_CACHE_RETAIN, 1, 0);
        }
        self.book.create(kinds::SESSION, 1, 0);
        self.book
            .create(kinds::KV_CACHE, 1, kv_bytes(self.capacity));
        let id = self.next_session;
        self.next_session += 1;
        self.sessions.insert(
            id,
            Session {
                cache,
                scratch: None,
                last_output: Vec::new(),
            },
        );
        Ok(SessionId(id))
    }

    fn send(&mut self, session: SessionId, prompt: &Prompt) -> Result<(), EngineError> {
        self.ensure_scratch(session, EngineErrorKind::Send)?;
        let seed = self.seed;
        let (loaded, s) = self.session_mut(session, EngineErrorKind::Send)?;
        let tokens = (prompt.tokens.max(1) as usize).min(s.cache.room());
        if tokens == 0 {
            return Err(EngineError::new(
                EngineErrorKind::Send,
                format!("the KV cache is full ({} tokens)", s.cache.capacity),
            ));
        }
        let scratch = s.scratch.as_mut().expect("created above");
        let embeddings = prompt_embeddings(seed, s.cache.len, tokens);
        let send_err = |e| engine_error(EngineErrorKind::Send, e);
        prefill(
            &loaded.runtime,
            &loaded.weights,
            &mut s.cache,
            scratch,
            &embeddings,
        )
        .map_err(send_err)?;
        s.last_output = workload::read_output(&loaded.runtime, scratch).map_err(send_err)?;
        Ok(())
    }

    fn generate(
        &mut self,
        session: SessionId,
        request: &GenerateRequest,
    ) -> Result<GenerateOutcome, EngineError> {
        self.ensure_scratch(session, EngineErrorKind::Generate)?;
        let (loaded, s) = self.session_mut(session, EngineErrorKind::Generate)?;
        let wanted = request
            .cancel_after_tokens
            .map_or(request.max_output_tokens, |c| {
                c.min(request.max_output_tokens)
            });
        let steps = (wanted as usize).min(s.cache.room());
        let scratch = s.scratch.as_ref().expect("created above");
        let gen_err = |e| engine_error(EngineErrorKind::Generate, e);
        for _ in 0..steps {
            decode_step(&loaded.runtime, &loaded.weights, &mut s.cache, scratch)
                .map_err(gen_err)?;
        }
        s.last_output = workload::read_output(&loaded.runtime, scratch).map_err(gen_err)?;
        Ok(GenerateOutcome {
            tokens: steps as u32,
            cancelled: request
                .cancel_after_tokens
                .is_some_and(|c| c < request.max_output_tokens && steps as u32 == c),
        })
    }

    fn close_session(&mut self, session: SessionId) -> Result<(), EngineError> {
        let loaded = self.loaded(EngineErrorKind::Close)?;
        loaded
            .runtime
            .finish()
            .map_err(|e| engine_error(EngineErrorKind::Close, e))?;
        let s = self.sessions.remove(&session.0).ok_or_else(|| {
            EngineError::new(
                EngineErrorKind::Close,
                format!("no open session {}", session.0),
            )
        })?;
        self.release_session(s);
        Ok(())
    }

    fn unload(&mut self) -> Result<(), EngineError> {
        let open: Vec<u64> = self.sessions.keys().copied().collect();
        for id in open {
            self.close_session(SessionId(id))?;
        }
        let Some(loaded) = self.loaded.take() else {
            return Ok(());
        };
        loaded
            .runtime
            .finish()
            .map_err(|e| engine_error(EngineErrorKind::Unload, e))?;
        drop(loaded);
        for kind in [kinds::CONTEXT, kinds::COMMAND_QUEUE, kinds::PROGRAM] {
            self.book.delete(kind, 1, 0);
        }
        self.book.delete(kinds::KERNEL, Runtime::KERNELS, 0);
        self.book
            .delete(kinds::WEIGHT_BUFFER, 1, workload::WEIGHT_BYTES);
        Ok(())
    }

    fn snapshot(&mut self) -> Result<EngineSnapshot, EngineError> {
        let mut snapshot = EngineSnapshot::default();
        for (kind, counts) in &self.book.counts {
            snapshot.ledger.insert((*kind).to_owned(), *counts);
        }
        snapshot
            .metrics
            .insert(ENGINE_BUFFER_BYTES.into(), self.book.live_bytes);
        if let Some(interposer) = &self.interposer {
            interposer
                .read()
                .map_err(|m| EngineError::new(EngineErrorKind::Protocol, m))?
                .add_to(&mut snapshot);
        }
        Ok(snapshot)
    }
}
