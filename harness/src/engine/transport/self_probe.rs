//! The remote worker's side of sampling: a worker on another machine reads its own /proc there
//! (the same [`ProcessProbe`] a local runner uses on a local worker, for the metrics the
//! scenario watches) and reports the values with each snapshot. The runner cannot read a
//! process on another machine, and a second connection per sample would cost a round trip and
//! an ssh login every turn; the worker's own reading costs two small file reads.

use crate::engine::transport::probed::TargetProbe;
use crate::engine::{EngineError, EngineSnapshot};
use crate::probe::ProcessProbe;
use crate::scenario::Scenario;

/// This process's memory, as a local runner's probe would read it from outside.
#[derive(Debug)]
pub(crate) struct SelfProbe(Option<ProcessProbe>);

impl SelfProbe {
    /// Reads the process metrics `scenario` watches (nothing when it watches none).
    pub(crate) fn new(scenario: &Scenario) -> Self {
        Self(ProcessProbe::for_watched(&scenario.watched_metrics()))
    }
}

impl TargetProbe for SelfProbe {
    fn read_into(&mut self, snapshot: &mut EngineSnapshot) -> Result<(), EngineError> {
        if let Some(probe) = self.0.as_mut() {
            // A failed read leaves the engine's own metrics, as the local runner does.
            let _ = probe.read(std::process::id(), &mut |name, value| {
                snapshot.metrics.insert(name.to_owned(), value);
            });
        }
        Ok(())
    }

    fn describe(&self) -> Option<String> {
        None
    }

    fn measures_elsewhere(&self) -> bool {
        false
    }
}

#[cfg(all(test, any(target_os = "linux", target_os = "android")))]
mod tests {
    use super::*;
    use crate::engine::transport::probed::Probed;
    use crate::engine::{
        BackendInfo, Engine, EngineErrorKind, GenerateOutcome, GenerateRequest, Prompt, SessionId,
    };
    use crate::scenario::{EngineSpec, SessionOptions};

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
        let mut engine = Probed::new(Box::new(Blind), SelfProbe::new(&scenario));
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
