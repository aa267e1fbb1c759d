//! [`Probed`]: an engine whose snapshots also carry what a target's probe reads. The probe is
//! chosen by the target (the remote worker's own /proc, a device app's `dumpsys meminfo`); the
//! engine's calls pass through untouched.

use crate::engine::{
    BackendInfo, Engine, EngineError, EngineSnapshot, GenerateOutcome, GenerateRequest, Prompt,
    SessionId, TurnMarks,
};
use crate::scenario::SessionOptions;

/// A probe that a target adds to every snapshot.
pub(crate) trait TargetProbe {
    /// Adds this probe's readings to `snapshot` (its values win over the engine's own under the
    /// same name, as a local probe's do).
    fn read_into(&mut self, snapshot: &mut EngineSnapshot) -> Result<(), EngineError>;

    /// Where the probe reads, for the report's backend details; `None` to say nothing.
    fn describe(&self) -> Option<String>;

    /// Whether the measured process is elsewhere than the engine's local process (then no
    /// local probe may read that one).
    fn measures_elsewhere(&self) -> bool;
}

/// An engine with a target's probe.
pub(crate) struct Probed<P> {
    inner: Box<dyn Engine>,
    probe: P,
}

impl<P: TargetProbe> Probed<P> {
    /// Wraps `inner` with `probe`.
    pub(crate) fn new(inner: Box<dyn Engine>, probe: P) -> Self {
        Self { inner, probe }
    }
}

impl<P: std::fmt::Debug> std::fmt::Debug for Probed<P> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Probed")
            .field("probe", &self.probe)
            .finish()
    }
}

impl<P: TargetProbe> Engine for Probed<P> {
    fn describe(&self) -> BackendInfo {
        let mut backend = self.inner.describe();
        if let Some(target) = self.probe.describe() {
            backend.details.insert("target".into(), target);
        }
        backend
    }
    fn load(&mut self) -> Result<(), EngineError> {
        self.inner.load()
    }
    fn open_session(
        &mut self,
        turn: u32,
        options: &SessionOptions,
    ) -> Result<SessionId, EngineError> {
        self.inner.open_session(turn, options)
    }
    fn send(&mut self, session: SessionId, prompt: &Prompt) -> Result<(), EngineError> {
        self.inner.send(session, prompt)
    }
    fn generate(
        &mut self,
        session: SessionId,
        request: &GenerateRequest,
    ) -> Result<GenerateOutcome, EngineError> {
        self.inner.generate(session, request)
    }
    fn close_session(&mut self, session: SessionId) -> Result<(), EngineError> {
        self.inner.close_session(session)
    }
    fn unload(&mut self) -> Result<(), EngineError> {
        self.inner.unload()
    }
    fn snapshot(&mut self) -> Result<EngineSnapshot, EngineError> {
        let mut snapshot = self.inner.snapshot()?;
        self.probe.read_into(&mut snapshot)?;
        Ok(snapshot)
    }
    fn idle(&mut self, duration: std::time::Duration) {
        self.inner.idle(duration);
    }
    fn simulated_clock_ms(&self) -> Option<f64> {
        self.inner.simulated_clock_ms()
    }
    fn turn_marks(&mut self) -> Option<&mut dyn TurnMarks> {
        self.inner.turn_marks()
    }
    fn process_id(&self) -> Option<u32> {
        if self.probe.measures_elsewhere() {
            None
        } else {
            self.inner.process_id()
        }
    }
}
