//! The remote worker's side of sampling: a worker on another machine reads its own /proc there
//! (the same [`ProcessProbe`] a local runner uses on a local worker, for the metrics the
//! scenario watches) and reports the values with each snapshot. The runner cannot read a
//! process on another machine, and a second connection per sample would cost a round trip and
//! an ssh login every turn; the worker's own reading costs two small file reads.

use crate::engine::{
    BackendInfo, Engine, EngineError, EngineSnapshot, GenerateOutcome, GenerateRequest, Prompt,
    SessionId,
};
use crate::probe::ProcessProbe;
use crate::scenario::{Scenario, SessionOptions};

/// An engine whose snapshots also carry this process's own memory, as a local runner's probe
/// would read it from outside.
pub(crate) struct SelfProbed {
    inner: Box<dyn Engine>,
    probe: Option<ProcessProbe>,
}

impl SelfProbed {
    /// Wraps `inner`, reading the process metrics `scenario` watches.
    pub(crate) fn new(inner: Box<dyn Engine>, scenario: &Scenario) -> Self {
        Self {
            inner,
            probe: ProcessProbe::for_watched(&scenario.watched_metrics()),
        }
    }
}

impl std::fmt::Debug for SelfProbed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SelfProbed")
            .field("probe", &self.probe)
            .finish()
    }
}

impl Engine for SelfProbed {
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
    /// The engine's snapshot plus this process's memory; as with a local worker, the process's
    /// reading wins over a value the engine models under the same name.
    fn snapshot(&mut self) -> Result<EngineSnapshot, EngineError> {
        let mut snapshot = self.inner.snapshot()?;
        if let Some(probe) = self.probe.as_mut() {
            // A failed read leaves the engine's own metrics, as the local runner does.
            let _ = probe.read(std::process::id(), &mut |name, value| {
                snapshot.metrics.insert(name.to_owned(), value);
            });
        }
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
        let mut engine = SelfProbed::new(Box::new(Blind), &scenario);
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
}
