//! Sampling leakloop's own worker on another machine (an ssh host, an Android device's shell).
//!
//! The runner cannot read a process on another machine, and a second connection per sample
//! would cost a round trip and a login every turn. So the worker reads its own memory there with
//! the same [`ProbeSet`] a local runner uses ([`LocalTarget`]'s probes, for the metrics the
//! scenario watches) and reports the values with each snapshot ([`SelfReporting`]); on the
//! runner's side its target ([`RemoteWorkerTarget`]) opens no probe: those metrics arrive with
//! the engine's snapshot, as the registry's engine-reported metrics do.

use leakloop_metrics::{Metric, Platform, ProbeKind};

use super::{LocalTarget, Probe, ProbeSet, Target};
use crate::engine::{
    BackendInfo, Engine, EngineError, EngineSnapshot, GenerateOutcome, GenerateRequest, Prompt,
    SessionId,
};
use crate::scenario::{Scenario, SessionOptions};

/// The runner's view of a remote worker's machine: everything is reported by the worker.
#[derive(Debug, Clone, Copy)]
pub struct RemoteWorkerTarget {
    platform: Platform,
}

impl RemoteWorkerTarget {
    /// A worker on a machine running `platform`.
    pub fn new(platform: Platform) -> Self {
        Self { platform }
    }
}

impl Target for RemoteWorkerTarget {
    fn platform(&self) -> Platform {
        self.platform
    }

    /// The worker reads its own process there; the runner reads nothing across the transport.
    fn offers(&self, _kind: ProbeKind) -> bool {
        false
    }

    fn open(&self, _kind: ProbeKind, _metrics: &[&'static Metric]) -> Option<Box<dyn Probe>> {
        None
    }
}

/// The worker's side: an engine whose snapshots also carry this process's own memory, as a local
/// runner's probes would read it from outside. The reading happens between engine calls.
pub struct SelfReporting {
    inner: Box<dyn Engine>,
    probes: ProbeSet,
}

impl SelfReporting {
    /// Wraps `inner`, reading the metrics `scenario` watches (nothing when it watches none).
    pub fn new(inner: Box<dyn Engine>, scenario: &Scenario) -> Self {
        let probes = ProbeSet::for_watched(&LocalTarget, &scenario.watched_metrics());
        Self { inner, probes }
    }
}

impl std::fmt::Debug for SelfReporting {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SelfReporting")
            .field("probes", &self.probes)
            .finish()
    }
}

impl Engine for SelfReporting {
    fn describe(&self) -> BackendInfo {
        self.inner.describe()
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
        // A failed read leaves the engine's own metrics, as the local runner does. The probes'
        // values win over the engine's own under the same name, as they do in the runner.
        let _ = self.probes.read(std::process::id(), &mut |name, value| {
            snapshot.metrics.insert(name.to_owned(), value);
        });
        Ok(snapshot)
    }
    fn idle(&mut self, duration: std::time::Duration) {
        self.inner.idle(duration);
    }
    fn simulated_clock_ms(&self) -> Option<f64> {
        self.inner.simulated_clock_ms()
    }
    fn process_id(&self) -> Option<u32> {
        self.inner.process_id()
    }
    fn shut_down(&mut self) -> Result<(), EngineError> {
        self.inner.shut_down()
    }
}

#[cfg(all(test, any(target_os = "linux", target_os = "android")))]
mod tests {
    use super::*;
    use crate::engine::EngineErrorKind;
    use crate::scenario::EngineSpec;

    /// An engine that knows no memory of its own.
    struct Blind;

    impl Engine for Blind {
        fn describe(&self) -> BackendInfo {
            BackendInfo {
                backend: "blind".into(),
                version: String::new(),
                details: Default::default(),
            }
        }
        fn load(&mut self) -> Result<(), EngineError> {
            Ok(())
        }
        fn open_session(&mut self, _: u32, _: &SessionOptions) -> Result<SessionId, EngineError> {
            Err(EngineError::new(EngineErrorKind::Open, "not here"))
        }
        fn send(&mut self, _: SessionId, _: &Prompt) -> Result<(), EngineError> {
            Ok(())
        }
        fn generate(
            &mut self,
            _: SessionId,
            _: &GenerateRequest,
        ) -> Result<GenerateOutcome, EngineError> {
            Err(EngineError::new(EngineErrorKind::Generate, "not here"))
        }
        fn close_session(&mut self, _: SessionId) -> Result<(), EngineError> {
            Ok(())
        }
        fn unload(&mut self) -> Result<(), EngineError> {
            Ok(())
        }
        fn snapshot(&mut self) -> Result<EngineSnapshot, EngineError> {
            Ok(EngineSnapshot::default())
        }
    }

    #[test]
    fn snapshots_carry_the_watched_process_metrics_of_this_process() {
        let mut scenario = Scenario::new("s", EngineSpec::sim("cpu-flat"), 1, vec![]);
        scenario.watch = vec!["rss".into(), "native_heap".into()];
        let mut engine = SelfReporting::new(Box::new(Blind), &scenario);
        let snapshot = engine.snapshot().unwrap();
        let rss = snapshot.metrics["rss"];
        // This test process's own resident size, as /proc/self/status says.
        let status = std::fs::read_to_string("/proc/self/status").unwrap();
        let vm_rss_kib: u64 = status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap();
        let close = (vm_rss_kib * 1024).abs_diff(rss) < 64 << 20;
        assert!(close, "rss {rss} vs VmRSS {vm_rss_kib} KiB");
        assert!(
            !snapshot.metrics.contains_key("pss"),
            "pss is not watched: {snapshot:?}"
        );
    }

    #[test]
    fn the_runner_opens_no_probe_on_a_remote_worker() {
        let target = RemoteWorkerTarget::new(Platform::Android);
        assert!(ProbeSet::for_watched(&target, &["rss", "pss", "java_heap"]).is_empty());
    }
}
