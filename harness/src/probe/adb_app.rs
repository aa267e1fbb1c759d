//! An Android app (or any process by pid) on a device reached over adb: the [`Target`] whose
//! one probe is `dumpsys meminfo PACKAGE|PID`, run through adb at every sample and parsed with
//! [`super::dumpsys`]. The engine's driver runs on this machine (it may drive the app, e.g. an
//! `exec` driver sending it intents); the process measured is the one on the device.

use leakloop_metrics::{Metric, Platform, ProbeKind};

use super::{dumpsys, Probe, ProbeError, Target};
use crate::engine::transport::{shown, TargetError, TargetErrorKind, Transport, COMMAND_TIMEOUT};
use crate::engine::{EngineError, EngineErrorKind};
use crate::scenario::{AdbProcess, AdbTarget};

/// What `dumpsys meminfo` prints for a process that is not running (Android 9 to 15).
const NOT_RUNNING: &str = "No process found for:";

/// An app on an Android device, measured with `dumpsys meminfo` through adb.
#[derive(Debug, Clone)]
pub struct AdbAppTarget {
    transport: Transport,
    /// The package or pid, as passed to dumpsys.
    subject: String,
}

impl AdbAppTarget {
    /// The app (or process) `adb` names, after checking that the device answers; `None` when
    /// the target runs leakloop's own worker there instead (a native process).
    pub fn connect(adb: &AdbTarget) -> Option<Result<Self, TargetError>> {
        let subject = match &adb.process {
            AdbProcess::Package(package) => package.clone(),
            AdbProcess::Pid(pid) => pid.to_string(),
            AdbProcess::Native(_) => return None,
        };
        let transport = Transport::Adb(adb.clone());
        Some(
            transport
                .preflight(COMMAND_TIMEOUT)
                .map(|()| Self { transport, subject }),
        )
    }
}

impl Target for AdbAppTarget {
    fn platform(&self) -> Platform {
        Platform::Android
    }

    /// An app's /proc is not readable from adb's shell user; `dumpsys` is.
    fn offers(&self, kind: ProbeKind) -> bool {
        kind == ProbeKind::Dumpsys
    }

    fn open(&self, kind: ProbeKind, _metrics: &[&'static Metric]) -> Option<Box<dyn Probe>> {
        // One dumpsys yields every metric it knows; the set hands over all of them.
        self.offers(kind)
            .then(|| Box::new(DumpsysProbe(self.clone())) as Box<dyn Probe>)
    }

    /// The app names its process itself; the driver's local process is not it.
    fn measured_process(&self, _engine_pid: Option<u32>) -> Option<u32> {
        Some(self.subject.parse().unwrap_or(0))
    }

    fn describe(&self) -> Option<String> {
        Some(format!(
            "{} dumpsys meminfo {}",
            self.transport.name(),
            self.subject
        ))
    }
}

/// A device app's `dumpsys meminfo`, read through adb. Every failure ends the run (the device
/// went away, the app is not running, dumpsys printed nothing readable): no later engine call
/// would notice it.
#[derive(Debug)]
struct DumpsysProbe(AdbAppTarget);

impl DumpsysProbe {
    /// One `dumpsys meminfo` of the subject, as metrics.
    fn sample(&self) -> Result<Vec<(&'static str, u64)>, EngineError> {
        let AdbAppTarget { transport, subject } = &self.0;
        let script = format!("dumpsys meminfo {subject}");
        let ran = transport.run(&script, None, COMMAND_TIMEOUT).map_err(|e| {
            let kind = match e.kind {
                // A device that is gone mid-run ends the run; what was measured is kept.
                TargetErrorKind::Lost
                | TargetErrorKind::Unreachable
                | TargetErrorKind::BadTarget => EngineErrorKind::Crashed {
                    how: format!("the device went away ({})", transport.name()),
                },
                TargetErrorKind::Command => EngineErrorKind::Unavailable,
            };
            EngineError::new(kind, format!("sampling `{script}`: {e}"))
        })?;
        if ran.stdout.contains(NOT_RUNNING) {
            return Err(EngineError::new(
                EngineErrorKind::Crashed {
                    how: format!("{subject} is not running on the device"),
                },
                format!(
                    "{}: `{script}` found no process {subject}",
                    transport.name()
                ),
            ));
        }
        let dumps = dumpsys::parse(&ran.stdout).map_err(|e| {
            EngineError::new(
                EngineErrorKind::Protocol,
                format!(
                    "{}: `{script}` printed no meminfo leakloop can read: {}",
                    transport.name(),
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

impl Probe for DumpsysProbe {
    fn kind(&self) -> ProbeKind {
        ProbeKind::Dumpsys
    }

    fn read(&mut self, pid: u32, out: &mut dyn FnMut(&'static str, u64)) -> Result<(), ProbeError> {
        let metrics = self.sample().map_err(|error| ProbeError {
            pid,
            cause: error.message.clone(),
            fatal: Some(error),
        })?;
        for (name, value) in metrics {
            out(name, value);
        }
        Ok(())
    }
}
