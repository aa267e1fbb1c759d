//! Sampling an Android app (or any process by pid) from the host: `dumpsys meminfo PACKAGE|PID`
//! run through adb at every snapshot, parsed with [`crate::probe::dumpsys`] and added to the
//! engine's snapshot. The engine's driver runs on this machine (it may drive the app, e.g. an
//! `exec` driver sending it intents); the process measured is the one on the device.

use crate::engine::transport::command::{shown, Transport};
use crate::engine::transport::error::{TargetError, TargetErrorKind};
use crate::engine::transport::probed::TargetProbe;
use crate::engine::transport::stage::COMMAND_TIMEOUT;
use crate::engine::{EngineError, EngineErrorKind, EngineSnapshot};
use crate::probe::dumpsys;

/// What `dumpsys meminfo` prints for a process that is not running (Android 9 to 15).
const NOT_RUNNING: &str = "No process found for:";

/// A device process's `dumpsys meminfo`, read through adb.
#[derive(Debug)]
pub(crate) struct DumpsysProbe {
    transport: Transport,
    /// The package or pid, as passed to dumpsys.
    subject: String,
}

impl DumpsysProbe {
    /// A probe of `subject` (a package or pid), after checking that the device answers.
    pub(crate) fn new(transport: Transport, subject: String) -> Result<Self, TargetError> {
        transport.preflight(COMMAND_TIMEOUT)?;
        Ok(Self { transport, subject })
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

impl TargetProbe for DumpsysProbe {
    fn read_into(&mut self, snapshot: &mut EngineSnapshot) -> Result<(), EngineError> {
        for (name, value) in self.sample()? {
            snapshot.metrics.insert(name.to_owned(), value);
        }
        Ok(())
    }

    fn describe(&self) -> Option<String> {
        Some(format!(
            "{} dumpsys meminfo {}",
            self.transport.name(),
            self.subject
        ))
    }

    /// The measured process is on the device; the driver's local process is not it.
    fn measures_elsewhere(&self) -> bool {
        true
    }
}
