//! Sampling an Android app (or any process by pid) from the host: `dumpsys meminfo PACKAGE|PID`
//! run through adb at every snapshot, parsed with [`crate::probe::dumpsys`] and merged into the
//! engine's snapshot. The engine's driver runs on this machine (it may drive the app, e.g. an
//! `exec` driver sending it intents); the process measured is the one on the device.

use crate::engine::transport::command::{shown, Transport};
use crate::engine::transport::error::{TargetError, TargetErrorKind};
use crate::engine::transport::stage::COMMAND_TIMEOUT;
use crate::engine::{
    BackendInfo, Engine, EngineError, EngineErrorKind, EngineSnapshot, GenerateOutcome,
    GenerateRequest, Prompt, SessionId,
};
use crate::probe::dumpsys;
use crate::scenario::SessionOptions;

/// What `dumpsys meminfo` prints for a process that is not running (Android 9 to 15).
const NOT_RUNNING: &str = "No process found for:";

/// An engine whose snapshots also carry a device process's `dumpsys meminfo`.
pub struct DumpsysSampled {
    inner: Box<dyn Engine>,
    transport: Transport,
    /// The package or pid, as passed to dumpsys.
    subject: String,
}

impl std::fmt::Debug for DumpsysSampled {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DumpsysSampled")
            .field("subject", &self.subject)
            .finish()
    }
}

impl DumpsysSampled {
    /// Wraps `inner`, after checking that the device answers.
    pub(crate) fn new(
        inner: Box<dyn Engine>,
        transport: Transport,
        subject: String,
    ) -> Result<Self, TargetError> {
        transport.preflight(COMMAND_TIMEOUT)?;
        Ok(Self {
            inner,
            transport,
            subject,
        })
    }

    /// One `dumpsys meminfo` of the subject, as metrics.
    fn sample(&self) -> Result<Vec<(&'static str, u64)>, EngineError> {
        let script = format!("dumpsys meminfo {}", self.subject);
        let ran = self
            .transport
            .run(&script, None, COMMAND_TIMEOUT)
            .map_err(|e| {
                let kind = match e.kind {
                    // A device that is gone mid-run ends the run; what was measured is kept.
                    TargetErrorKind::Lost
                    | TargetErrorKind::Unreachable
                    | TargetErrorKind::BadTarget => EngineErrorKind::Crashed {
                        how: format!("the device went away ({})", self.transport.name()),
                    },
                    TargetErrorKind::Command => EngineErrorKind::Unavailable,
                };
                EngineError::new(kind, format!("sampling `{script}`: {e}"))
            })?;
        if ran.stdout.contains(NOT_RUNNING) {
            return Err(EngineError::new(
                EngineErrorKind::Crashed {
                    how: format!("{} is not running on the device", self.subject),
                },
                format!(
                    "{}: `{script}` found no process {}",
                    self.transport.name(),
                    self.subject
                ),
            ));
        }
        let dumps = dumpsys::parse(&ran.stdout).map_err(|e| {
            EngineError::new(
                EngineErrorKind::Protocol,
                format!(
                    "{}: `{script}` printed no meminfo leakloop can read: {}",
                    self.transport.name(),
                    shown(&e.to_string())
                ),
            )
        })?;
        // `dumpsys meminfo PACKAGE` prints one block per process of the app; the first is its
        // main process.
        let first = dumps.first().ok_or_else(|| {
            EngineError::new(
                EngineErrorKind::Protocol,
                format!("`{script}` printed no process"),
            )
        })?;
        Ok(first.metrics().into_iter().collect())
    }
}

impl Engine for DumpsysSampled {
    fn describe(&self) -> BackendInfo {
        let mut backend = self.inner.describe();
        backend.details.insert(
            "target".into(),
            format!("{} dumpsys meminfo {}", self.transport.name(), self.subject),
        );
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
        for (name, value) in self.sample()? {
            snapshot.metrics.insert(name.to_owned(), value);
        }
        Ok(snapshot)
    }
    fn idle(&mut self, duration: std::time::Duration) {
        self.inner.idle(duration);
    }
    fn simulated_clock_ms(&self) -> Option<f64> {
        self.inner.simulated_clock_ms()
    }
    /// The measured process is on the device; the driver's local process is not it.
    fn process_id(&self) -> Option<u32> {
        None
    }
}
