//! The [`Engine`] trait: the lifecycle of an on-device inference engine as the field uses it.
//!
//! Real engines (LiteRT-LM through its C API, an OpenCL workload) and the simulator all implement
//! it, so the runner never knows which one it drives.

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::engine::ledger::KindCounts;
use crate::scenario::SessionOptions;

/// Identifies an open session (conversation) inside one engine.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct SessionId(pub u64);

/// A prompt as sent to the engine.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Prompt {
    /// The literal text.
    pub text: String,
    /// The prompt's length in tokens: exact for generated prompts, a word-count estimate for
    /// literal text.
    pub tokens: u32,
}

/// What the runner asks of one generation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct GenerateRequest {
    /// The most tokens to generate.
    pub max_output_tokens: u32,
    /// Cancel the generation after this many streamed tokens (context/001: a cancel that cannot
    /// interrupt native work must still leave the session closable).
    pub cancel_after_tokens: Option<u32>,
}

/// What one generation produced.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GenerateOutcome {
    /// Tokens streamed before the generation ended.
    pub tokens: u32,
    /// Whether the generation ended because it was cancelled.
    pub cancelled: bool,
}

/// Identity of the backend that ran, as written into every report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BackendInfo {
    /// Backend name as in the scenario (`sim`, `litert-lm`, `opencl`).
    pub backend: String,
    /// Version of the engine or library that ran (for the simulator: the crate version and profile).
    pub version: String,
    /// Further facts worth reporting (device, profile, library path, ...).
    #[serde(default)]
    pub details: BTreeMap<String, String>,
}

/// Cumulative counters an engine reports at a sampling point.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct EngineSnapshot {
    /// Created/deleted counts per resource kind since the engine object was built (not reset by
    /// reloads), e.g. `conversation`, `response`, `cl_mem`.
    pub ledger: BTreeMap<String, KindCounts>,
    /// Memory metrics the engine itself knows, in bytes (e.g. `gpu`, `native_heap`, `pool_reserved`).
    pub metrics: BTreeMap<String, u64>,
    /// Live OpenCL objects by kind and creation site, where the OpenCL interposer is loaded in
    /// the engine's process.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cl_sites: Option<crate::attribution::ClSites>,
}

/// The lifecycle of an inference engine: load, then sessions that are opened, fed, generated from
/// and closed, then unload.
///
/// Every call may fail with an [`EngineError`]; the runner then still closes what it opened, in
/// safe release order (sessions before the engine).
///
/// A crate implements it for its own engine with leakloop's types alone (all re-exported from
/// `leakloop::testing`), and runs it with `ScenarioTest::engine` or serves it as an engine
/// driver with `leakloop::testing::serve_driver` (feature `test-support`).
pub trait Engine {
    /// Which backend this is and which version of it runs.
    fn describe(&self) -> BackendInfo;
    /// Loads the engine (model, settings). Called once at the start and again after each reload.
    fn load(&mut self) -> Result<(), EngineError>;
    /// Opens a session (conversation) for the given 1-based turn.
    fn open_session(
        &mut self,
        turn: u32,
        options: &SessionOptions,
    ) -> Result<SessionId, EngineError>;
    /// Sends (prefills) a prompt into a session.
    fn send(&mut self, session: SessionId, prompt: &Prompt) -> Result<(), EngineError>;
    /// Generates from a session, possibly cancelling after some tokens.
    fn generate(
        &mut self,
        session: SessionId,
        request: &GenerateRequest,
    ) -> Result<GenerateOutcome, EngineError>;
    /// Closes a session and releases what belongs to it.
    fn close_session(&mut self, session: SessionId) -> Result<(), EngineError>;
    /// Unloads the engine, releasing everything it holds.
    fn unload(&mut self) -> Result<(), EngineError>;
    /// Cumulative ledger counts and engine-side memory metrics.
    fn snapshot(&mut self) -> Result<EngineSnapshot, EngineError>;
    /// Waits (idle or settle time). Simulated engines advance a virtual clock instead of sleeping.
    fn idle(&mut self, duration: Duration) {
        std::thread::sleep(duration);
    }
    /// Milliseconds since the engine was built on a simulated clock; `None` for real time.
    fn simulated_clock_ms(&self) -> Option<f64> {
        None
    }
    /// The process that holds the engine's memory, to be probed from outside (a worker process);
    /// `None` when the engine's memory is only known through [`Engine::snapshot`].
    fn process_id(&self) -> Option<u32> {
        None
    }
    /// The turn boundaries the process marks itself, for an engine that runs its own turn loop
    /// (`backend: attach`); `None` when the runner drives the turns.
    fn turn_marks(&mut self) -> Option<&mut dyn TurnMarks> {
        None
    }
    /// Ends the engine's own process after the last call of a run and says how it ended: an
    /// [`EngineErrorKind::Crashed`] error when it died by a signal or exited with a non-zero
    /// status after its last reply (a crash at exit must not go unseen). Engines without a
    /// process of their own have nothing to end.
    fn shut_down(&mut self) -> Result<(), EngineError> {
        Ok(())
    }
    /// Starts the engine's own recording of allocation sites for `run --attribute`, called once
    /// after the engine is built and before it loads: the source that reads them, `None` for an
    /// engine that records none (the default; heaptrack records native memory from outside), or
    /// why it could not start (the run goes on without it). An exec driver whose `hello` offered
    /// the protocol's `sites` capability is asked to start (docs/protocol.md).
    fn start_sites(
        &mut self,
    ) -> Result<Option<Box<dyn crate::attribution::AttributionSource>>, String> {
        Ok(None)
    }
}

/// Where a marked process became ready to be measured: the point its baseline stands for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ready {
    /// It wrote its ready line before any turn marker: every marker after it is a turn.
    Line,
    /// Its first turn marker came first (this turn, in the process's numbering): the baseline
    /// stands for that turn, and the turns are the markers after it.
    Turn(u64),
}

/// Turn boundaries marked by the measured process (marker lines), for the runner's marker clock.
/// Turn numbers are the process's own; they rise with every marker.
pub trait TurnMarks {
    /// Waits until the process is ready to be measured: its ready line or, failing that, its
    /// first turn marker. Fails as [`TurnMarks::wait_turn_closed`] does. By default a source is
    /// ready at once (it has no ready line).
    fn wait_ready(&mut self) -> Result<Ready, EngineError> {
        Ok(Ready::Line)
    }
    /// Waits until the process marks a turn after `after` closed (any turn when `None`) and
    /// returns the latest marked turn. Fails with [`EngineErrorKind::Hung`] when no marker
    /// comes in time, [`EngineErrorKind::Crashed`] when the process ends first,
    /// [`EngineErrorKind::Protocol`] for a repeated or falling turn number, and
    /// [`EngineErrorKind::Unavailable`] when the marker source itself ends.
    fn wait_turn_closed(&mut self, after: Option<u64>) -> Result<u64, EngineError>;
    /// The latest turn marked closed, taken for a sample (after the settle time, markers may
    /// have moved on past the one waited for).
    fn take_latest_turn(&mut self) -> Option<u64>;
    /// The first turn marked since attaching: the runner's turn 1 after a ready line (without
    /// one, the baseline's turn, and the runner counts from the marker after it).
    fn first_turn(&self) -> Option<u64>;
    /// The wall time per turn, in nanoseconds, of the turn [`TurnMarks::take_latest_turn`] last
    /// returned: from the marker before it to its own (`turn_time`); `None` for the first
    /// marker seen, or for a source that does not time its markers.
    fn taken_turn_nanos(&self) -> Option<u64> {
        None
    }
    /// Called once the baseline after a ready line is sampled: the latest turn marked before
    /// that, when one was (a process that goes straight into its first turn can close it
    /// within the settle time, and that turn is then in the baseline). The baseline then stands
    /// for that turn, as a baseline taken at a first turn marker does. `None` by default.
    fn marked_before_baseline(&mut self) -> Option<u64> {
        None
    }

    /// The key the turn [`TurnMarks::take_latest_turn`] last returned was marked with (the
    /// marker pattern's `key` group: a session id, a shape), taken with it; `None` when its
    /// marker named none.
    fn taken_turn_key(&self) -> Option<String> {
        None
    }
}

impl fmt::Debug for dyn Engine + '_ {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Engine")
            .field("backend", &self.describe().backend)
            .finish()
    }
}

/// What went wrong inside an engine.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum EngineErrorKind {
    /// The engine or its library is not available (missing library, missing model).
    Unavailable,
    /// Loading the engine failed.
    Load,
    /// Opening a session failed.
    Open,
    /// Sending a prompt failed.
    Send,
    /// Generation failed.
    Generate,
    /// Closing a session failed.
    Close,
    /// Unloading the engine failed.
    Unload,
    /// The engine's process died (a native crash, an abort, a kill).
    Crashed {
        /// How the process ended, e.g. `signal 6 (SIGABRT)` or `exit status 134`.
        how: String,
    },
    /// The engine did not answer within the timeout.
    Hung {
        /// How long the runner waited, in milliseconds.
        waited_ms: u64,
    },
    /// The worker spoke out of protocol.
    Protocol,
}

impl EngineErrorKind {
    /// Whether the engine is gone after this error (no further calls make sense).
    pub fn is_fatal(&self) -> bool {
        matches!(
            self,
            EngineErrorKind::Unavailable
                | EngineErrorKind::Crashed { .. }
                | EngineErrorKind::Hung { .. }
                | EngineErrorKind::Protocol
        )
    }
}

/// An error from an engine call, with its kind and a human-readable cause.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[error("{message}")]
pub struct EngineError {
    /// What kind of failure this is.
    pub kind: EngineErrorKind,
    /// The cause, as the engine or the runner describes it.
    pub message: String,
}

impl EngineError {
    /// Builds an error of the given kind.
    pub fn new(kind: EngineErrorKind, message: impl Into<String>) -> Self {
        Self {
            kind,
            message: message.into(),
        }
    }
}
