//! The simulated engine's state machine: load, sessions that are opened, fed, generated from and
//! closed, unload; each call changes the live components, the create/delete ledger and the
//! virtual clock the way the profile says.

use std::collections::{BTreeMap, VecDeque};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::clock::{per_token, VirtualClock};
use crate::components::{Component, Memory, PrefixKey, Region};
use crate::config::SimConfig;
use crate::error::SimError;
use crate::faults::{FaultSchedule, SimFaultKind};
use crate::noise::{apply, Jitter, Noise};
use crate::profile::{Place, Profile};
use crate::real_alloc::RealHeap;
use leakloop_metrics::names::{GPU, NATIVE_HEAP, POOL_ALLOCATED, POOL_RESERVED, PSS, RSS};
use leakloop_metrics::ProbeKind;

/// Names of the metrics [`SimEngine::metrics`] reports, in bytes: the registry's metrics the
/// simulator provides.
pub fn metric_names() -> impl Iterator<Item = &'static str> {
    leakloop_metrics::provided_by(ProbeKind::Simulator).map(|m| m.name)
}

/// A session (the binding layer's chat, over one engine conversation).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct SessionId(pub u64);

/// What one generation produced.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Generation {
    /// Tokens streamed.
    pub tokens: u32,
    /// Whether it was cancelled before `max_output_tokens`.
    pub cancelled: bool,
}

/// Cumulative created/deleted counts of one resource kind.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Counts {
    /// How many were created.
    pub created: u64,
    /// How many were deleted.
    pub deleted: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Health {
    Alive,
    Crashed { turn: u32 },
    Hung { turn: u32 },
}

#[derive(Debug, Clone, Default)]
struct Session {
    turn: u32,
    prompt_tokens: u32,
    responses: u64,
    prefix_stored: bool,
    pool_in_use: u64,
    /// What its prefix-cache entry is stored under.
    prefix_key: Option<PrefixKey>,
}

/// A deterministic simulated inference engine.
#[derive(Debug)]
pub struct SimEngine {
    profile: Profile,
    config: SimConfig,
    health: Health,
    loaded: bool,
    context_built: bool,
    memory: Memory,
    sessions: BTreeMap<u64, Session>,
    next_session: u64,
    next_leak: u64,
    /// Generations since the last load (for `timing.slowdown_per_generation`).
    generations: u32,
    prefix_entries: VecDeque<PrefixKey>,
    /// Session names given to [`SimEngine::open_named_session`], interned.
    session_names: BTreeMap<String, u64>,
    ledger: BTreeMap<&'static str, Counts>,
    clock: VirtualClock,
    noise: Noise,
    faults: FaultSchedule,
    real: Option<RealHeap>,
}

impl SimEngine {
    /// Builds an unloaded engine.
    pub fn new(profile: Profile, config: SimConfig) -> Result<Self, SimError> {
        if config.max_tokens == 0 {
            return Err(SimError::InvalidConfig(
                "max_tokens must be at least 1".into(),
            ));
        }
        if config.really_allocate == Some(0) {
            return Err(SimError::InvalidConfig(
                "the real-allocation divisor must be at least 1".into(),
            ));
        }
        let mut ledger = BTreeMap::new();
        for kind in ["engine", "session", "conversation", "response"] {
            ledger.insert(kind, Counts::default());
        }
        let spec = profile.spec();
        if spec.context.as_u64() > 0 || spec.context_scaled.as_u64() > 0 {
            ledger.insert(context_kind(spec.context_on), Counts::default());
        }
        Ok(Self {
            noise: Noise::new(config.seed, spec.noise.clone()),
            faults: FaultSchedule::new(&config.faults),
            real: config.really_allocate.map(RealHeap::new),
            profile,
            config,
            health: Health::Alive,
            loaded: false,
            context_built: false,
            memory: Memory::default(),
            sessions: BTreeMap::new(),
            next_session: 1,
            next_leak: 0,
            generations: 0,
            prefix_entries: VecDeque::new(),
            session_names: BTreeMap::new(),
            ledger,
            clock: VirtualClock::default(),
        })
    }

    /// Loads the engine: maps the weights and allocates its resting native and GPU memory.
    pub fn load(&mut self) -> Result<(), SimError> {
        self.check_alive()?;
        if self.loaded {
            return Err(SimError::AlreadyLoaded);
        }
        let spec = self.profile.spec();
        self.memory
            .insert(Component::Weights, Region::Mapped, spec.weights.as_u64());
        self.memory.insert(
            Component::NativeBase,
            Region::Native,
            spec.native_base.as_u64(),
        );
        self.memory
            .insert(Component::GpuBase, Region::Gpu, spec.gpu_base.as_u64());
        self.clock.advance(spec.timing.load);
        self.loaded = true;
        self.context_built = false;
        self.generations = 0;
        self.count("engine", 1, 0);
        self.sync_real()
    }

    /// Opens a session for `turn` (1-based); its conversation's KV cache is allocated now.
    pub fn open_session(&mut self, turn: u32) -> Result<SessionId, SimError> {
        self.open_named_session(turn, None)
    }

    /// As [`SimEngine::open_session`], for a session the caller names (a model server's
    /// session id): a session opened again under a name already cached finds its prefix-cache
    /// entry (a hit, which stores nothing) instead of storing a new one. Unnamed, every session
    /// is new.
    pub fn open_named_session(
        &mut self,
        turn: u32,
        name: Option<&str>,
    ) -> Result<SessionId, SimError> {
        self.check_ready("open_session")?;
        let prefix_key = name.map(|name| {
            let next = self.session_names.len() as u64;
            PrefixKey::Named(*self.session_names.entry(name.to_owned()).or_insert(next))
        });
        let id = self.next_session;
        self.next_session += 1;
        let kv = self.scaled(self.profile.spec().kv_cache.as_u64());
        self.memory.insert(
            Component::KvCache(id),
            self.profile.spec().kv_cache_on.into(),
            kv,
        );
        self.sessions.insert(
            id,
            Session {
                turn,
                prefix_key,
                ..Session::default()
            },
        );
        self.clock.advance(self.profile.spec().timing.open);
        self.count("session", 1, 0);
        self.count("conversation", 1, 0);
        self.sync_real()?;
        Ok(SessionId(id))
    }

    /// Sends (prefills) a prompt of `prompt_tokens` tokens; the first send of a session stores
    /// its prefix-cache entry.
    pub fn send(&mut self, session: SessionId, prompt_tokens: u32) -> Result<(), SimError> {
        self.session("send", session)?;
        let spec = self.profile.spec();
        let (entry, capacity, place) = (
            spec.prefix_cache_entry.as_u64(),
            spec.prefix_cache_capacity,
            spec.prefix_cache_on,
        );
        self.clock
            .advance(per_token(spec.timing.prefill_per_token, prompt_tokens));
        let state = self.sessions.get_mut(&session.0).expect("checked above");
        state.prompt_tokens = state.prompt_tokens.saturating_add(prompt_tokens);
        let key = state.prefix_key.unwrap_or(PrefixKey::Session(session.0));
        let first_send = !state.prefix_stored;
        state.prefix_stored = true;
        let cached = self.prefix_entries.iter().position(|k| *k == key);
        if let (true, Some(at)) = (first_send, cached) {
            // A hit: the entry becomes the most recently used, nothing new is stored.
            self.prefix_entries.remove(at);
            self.prefix_entries.push_back(key);
        }
        let store = entry > 0 && first_send && cached.is_none() && capacity != Some(0);
        if store {
            self.memory
                .insert(Component::PrefixEntry(key), place.into(), entry);
            self.prefix_entries.push_back(key);
            if let Some(capacity) = capacity {
                while self.prefix_entries.len() > capacity as usize {
                    let oldest = self.prefix_entries.pop_front().expect("non-empty");
                    self.memory.remove(Component::PrefixEntry(oldest));
                }
            }
        }
        self.sync_real()
    }

    /// Generates up to `max_output_tokens`, cancelling after `cancel_after` tokens if given.
    ///
    /// The first generation after a load builds the engine context. Each generation holds its
    /// activations and a pool workspace until the session closes, and leaves the profile's
    /// per-generation leak behind for good.
    pub fn generate(
        &mut self,
        session: SessionId,
        max_output_tokens: u32,
        cancel_after: Option<u32>,
    ) -> Result<Generation, SimError> {
        let turn = self.session("generate", session)?.turn;
        match self.faults.take(turn) {
            Some(SimFaultKind::Crash) => {
                self.health = Health::Crashed { turn };
                return Err(SimError::Crashed { turn });
            }
            Some(SimFaultKind::Hang) => {
                self.health = Health::Hung { turn };
                return Err(SimError::Hung { turn });
            }
            Some(SimFaultKind::GenerateError) => return Err(SimError::GenerateFailed { turn }),
            None => {}
        }
        let spec = self.profile.spec().clone();
        if !self.context_built {
            let bytes = spec
                .context
                .as_u64()
                .saturating_add(self.scaled(spec.context_scaled.as_u64()));
            self.memory
                .insert(Component::Context, spec.context_on.into(), bytes);
            self.clock.advance(spec.timing.first_inference);
            self.context_built = true;
            if bytes > 0 {
                self.count(context_kind(spec.context_on), 1, 0);
            }
        }
        self.memory.insert(
            Component::Activations(session.0),
            spec.activations_on.into(),
            spec.activations.as_u64(),
        );
        let leak = self.scaled(spec.leak_per_generation.as_u64());
        if leak > 0 {
            if self.real.is_some() {
                // Backed by real allocations: one block per generation, as a leaking engine
                // makes them.
                self.memory
                    .insert(Component::Leaked(self.next_leak), spec.leak_on.into(), leak);
                self.next_leak += 1;
            } else {
                // Only counted: one block that grows, so that a million-turn leak costs the
                // simulator a number, not a million entries (68 bytes each, which the harness's
                // own memory figures would carry).
                self.memory
                    .grow(Component::Leaked(0), spec.leak_on.into(), leak);
            }
        }
        let state = self.sessions.get_mut(&session.0).expect("checked above");
        let pool_per_token = spec.pool_per_token.as_u64();
        if pool_per_token > 0 {
            let bucket = state
                .prompt_tokens
                .max(1)
                .checked_next_power_of_two()
                .unwrap_or(u32::MAX)
                .max(spec.pool_min_bucket);
            let workspace = u64::from(bucket).saturating_mul(pool_per_token);
            state.pool_in_use = state.pool_in_use.max(workspace);
            if !self.memory.contains(Component::PoolBlock(bucket)) {
                self.memory
                    .insert(Component::PoolBlock(bucket), spec.pool_on.into(), workspace);
            }
        }
        state.responses += 1;
        let tokens = cancel_after.map_or(max_output_tokens, |c| c.min(max_output_tokens));
        self.clock
            .advance(per_token(spec.timing.decode_per_token, tokens));
        self.clock.advance(per_token(
            spec.timing.slowdown_per_generation,
            self.generations,
        ));
        self.generations = self.generations.saturating_add(1);
        self.count("response", 1, 0);
        self.sync_real()?;
        Ok(Generation {
            tokens,
            cancelled: cancel_after.is_some_and(|c| c < max_output_tokens),
        })
    }

    /// Closes a session: frees its responses (activations, pool workspace) and, unless the
    /// profile forgets to, deletes its conversation (KV cache). The per-generation leak stays.
    pub fn close_session(&mut self, session: SessionId) -> Result<(), SimError> {
        self.session("close_session", session)?;
        let state = self.sessions.remove(&session.0).expect("checked above");
        self.memory.remove(Component::Activations(session.0));
        self.count("response", 0, state.responses);
        self.count("session", 0, 1);
        if self.profile.spec().close_deletes_conversation {
            self.memory.remove(Component::KvCache(session.0));
            self.count("conversation", 0, 1);
        }
        self.clock.advance(self.profile.spec().timing.close);
        self.sync_real()
    }

    /// Unloads the engine, returning everything it holds. Sessions still open are torn down
    /// with it (and stay undeleted in the ledger).
    pub fn unload(&mut self) -> Result<(), SimError> {
        self.check_ready("unload")?;
        self.memory.clear();
        self.sessions.clear();
        self.prefix_entries.clear();
        let context_kind = context_kind(self.profile.spec().context_on);
        if self.context_built && self.ledger.contains_key(context_kind) {
            self.count(context_kind, 0, 1);
        }
        self.context_built = false;
        self.loaded = false;
        self.clock.advance(self.profile.spec().timing.unload);
        self.count("engine", 0, 1);
        self.sync_real()
    }

    /// Waits on the virtual clock.
    pub fn idle(&mut self, duration: Duration) {
        self.clock.advance(duration);
    }

    /// Simulated time since the engine was built.
    pub fn clock(&self) -> Duration {
        self.clock.now()
    }

    /// Simulated time since the engine was built, in milliseconds.
    pub fn clock_ms(&self) -> f64 {
        self.clock.now().as_secs_f64() * 1000.0
    }

    /// A measurement of every metric in [`metric_names`], in bytes, with this sample's seeded noise.
    pub fn metrics(&mut self) -> BTreeMap<String, u64> {
        let jitter = self.noise.draw();
        self.metrics_with(jitter)
    }

    /// The metrics without noise: the model's exact state.
    pub fn exact_metrics(&self) -> BTreeMap<String, u64> {
        self.metrics_with(Jitter::default())
    }

    fn metrics_with(&self, jitter: Jitter) -> BTreeMap<String, u64> {
        let spec = self.profile.spec();
        let footprint = self.memory.footprint();
        let native = apply(footprint.native, jitter.native);
        let gpu = apply(footprint.gpu, jitter.gpu);
        let private = apply(spec.process_private.as_u64(), jitter.process);
        let pss = private
            .saturating_add(footprint.mapped)
            .saturating_add(native)
            .saturating_add(gpu);
        let rss = pss.saturating_add(spec.shared_pages.as_u64());
        let pool_allocated = self.sessions.values().map(|s| s.pool_in_use).sum();
        BTreeMap::from([
            (GPU.to_owned(), gpu),
            (NATIVE_HEAP.to_owned(), native),
            (POOL_ALLOCATED.to_owned(), pool_allocated),
            (POOL_RESERVED.to_owned(), self.memory.pool_reserved()),
            (PSS.to_owned(), pss),
            (RSS.to_owned(), rss),
        ])
    }

    /// Cumulative created/deleted counts per resource kind: `engine`, `session` (the binding's),
    /// `conversation` (the engine's), `response`, and the engine context (`gpu_context`, or
    /// `engine_context` when it lives on the native heap) when the profile has one.
    pub fn ledger(&self) -> BTreeMap<String, Counts> {
        self.ledger
            .iter()
            .map(|(kind, counts)| ((*kind).to_owned(), *counts))
            .collect()
    }

    /// The profile this engine simulates.
    pub fn profile(&self) -> &Profile {
        &self.profile
    }

    /// The run settings.
    pub fn config(&self) -> &SimConfig {
        &self.config
    }

    /// Whether the engine is loaded.
    pub fn is_loaded(&self) -> bool {
        self.loaded
    }

    /// The fatal error every call now returns, once an injected crash or hang has struck.
    pub fn failure(&self) -> Option<SimError> {
        self.check_alive().err()
    }

    /// Sessions currently open.
    pub fn open_sessions(&self) -> usize {
        self.sessions.len()
    }

    /// Real heap bytes held in real-allocation mode (`None` when the mode is off).
    pub fn real_heap_bytes(&self) -> Option<u64> {
        self.real.as_ref().map(RealHeap::held)
    }

    fn check_alive(&self) -> Result<(), SimError> {
        match self.health {
            Health::Alive => Ok(()),
            Health::Crashed { turn } => Err(SimError::Crashed { turn }),
            Health::Hung { turn } => Err(SimError::Hung { turn }),
        }
    }

    fn check_ready(&self, op: &'static str) -> Result<(), SimError> {
        self.check_alive()?;
        if !self.loaded {
            return Err(SimError::NotLoaded { op });
        }
        Ok(())
    }

    fn session(&self, op: &'static str, session: SessionId) -> Result<&Session, SimError> {
        self.check_ready(op)?;
        match self.sessions.get(&session.0) {
            Some(state) => Ok(state),
            None if session.0 > 0 && session.0 < self.next_session => {
                Err(SimError::SessionClosed {
                    op,
                    session: session.0,
                })
            }
            None => Err(SimError::UnknownSession {
                op,
                session: session.0,
            }),
        }
    }

    fn count(&mut self, kind: &'static str, created: u64, deleted: u64) {
        let counts = self.ledger.entry(kind).or_default();
        counts.created += created;
        counts.deleted += deleted;
    }

    /// `bytes` (given at the profile's reference context size) scaled to this run's `max_tokens`.
    fn scaled(&self, bytes: u64) -> u64 {
        let scaled = u128::from(bytes) * u128::from(self.config.max_tokens)
            / u128::from(self.profile.spec().reference_max_tokens);
        u64::try_from(scaled).unwrap_or(u64::MAX)
    }

    fn sync_real(&mut self) -> Result<(), SimError> {
        match &mut self.real {
            Some(real) => real.sync(self.memory.native_blocks()),
            None => Ok(()),
        }
    }
}

fn context_kind(place: Place) -> &'static str {
    match place {
        Place::Gpu => "gpu_context",
        Place::Native => "engine_context",
    }
}

#[cfg(test)]
mod tests;
