//! Probes chosen by where the measured process lives.
//!
//! A [`Target`] is a place a process can live (this machine today; other machines and devices
//! implement the same trait) and opens the [`Probe`]s that can read a process there. A
//! [`ProbeSet`] asks the metric registry which probe provides each watched metric on the
//! target's platform (cheapest first, among those the target can open), opens each probe once for
//! the metrics it serves, and reads nothing when no watched metric needs the runner to read it.
//! Metrics the engine reports itself (its C heap, the OpenCL interposer's counts, the
//! simulator's model) come with the engine's snapshot, not from here.

use std::fmt;

use leakloop_metrics::{Metric, Platform, ProbeKind};

use super::{AdbAppTarget, ProbeError, RemoteWorkerTarget};
use crate::engine::transport::TargetError;
use crate::scenario::{Scenario, Target as ScenarioTarget};

/// Reads memory metrics of a process from outside it.
pub trait Probe: fmt::Debug + Send {
    /// Which registry source this is.
    fn kind(&self) -> ProbeKind;

    /// Reads process `pid`'s metrics, handing each `(name, bytes)` to `out`. A probe may hand
    /// over more metrics than it was opened for (one read yields them together), never fewer
    /// without an error.
    fn read(&mut self, pid: u32, out: &mut dyn FnMut(&'static str, u64)) -> Result<(), ProbeError>;
}

/// Where a measured process lives, as far as sampling is concerned.
pub trait Target: fmt::Debug {
    /// The operating system there (selects providers in the metric registry).
    fn platform(&self) -> Platform;

    /// Whether this target can run probe `kind` (if not, the registry's next provider is tried).
    fn offers(&self, kind: ProbeKind) -> bool;

    /// Opens probe `kind` for `metrics` (all provided by it); `None` when there is nothing to
    /// read for them.
    fn open(&self, kind: ProbeKind, metrics: &[&'static Metric]) -> Option<Box<dyn Probe>>;

    /// The process id the probes read, given the engine's process on this machine (if any):
    /// that process here; on a target that names its process itself (an app by package), its
    /// own id (0 when it has none), the engine's local process being only its driver.
    fn measured_process(&self, engine_pid: Option<u32>) -> Option<u32> {
        engine_pid
    }

    /// Where the process is measured, for the report's backend details (`target`); `None` to
    /// say nothing.
    fn describe(&self) -> Option<String> {
        None
    }
}

/// The target `scenario` names: this machine, a remote worker's machine (which reports its own
/// memory), or an app on an Android device (after checking that the device answers).
pub fn target_for(scenario: &Scenario) -> Result<Box<dyn Target>, TargetError> {
    Ok(match &scenario.target {
        ScenarioTarget::Local => Box::new(LocalTarget),
        ScenarioTarget::Ssh(_) => Box::new(RemoteWorkerTarget::new(Platform::Linux)),
        ScenarioTarget::Adb(adb) => match AdbAppTarget::connect(adb) {
            Some(app) => Box::new(app?),
            None => Box::new(RemoteWorkerTarget::new(Platform::Android)),
        },
    })
}

/// This machine: `/proc` on Linux and Android, `task_info` on macOS, `sysinfo` elsewhere.
#[derive(Debug, Clone, Copy, Default)]
pub struct LocalTarget;

impl Target for LocalTarget {
    fn platform(&self) -> Platform {
        Platform::current()
    }

    fn offers(&self, kind: ProbeKind) -> bool {
        match kind {
            ProbeKind::Proc => cfg!(any(target_os = "linux", target_os = "android")),
            ProbeKind::TaskInfo => cfg!(target_os = "macos"),
            ProbeKind::Sysinfo => !cfg!(any(
                target_os = "linux",
                target_os = "android",
                target_os = "macos"
            )),
            _ => false,
        }
    }

    fn open(&self, kind: ProbeKind, metrics: &[&'static Metric]) -> Option<Box<dyn Probe>> {
        if !self.offers(kind) {
            return None;
        }
        let names: Vec<&str> = metrics.iter().map(|m| m.name).collect();
        match kind {
            #[cfg(target_os = "macos")]
            ProbeKind::TaskInfo => Some(Box::new(super::task_info::TaskInfoProbe)),
            // /proc, or sysinfo where there is no /proc and no task_info: one reader.
            _ => super::ProcessProbe::for_watched(&names).map(|p| Box::new(p) as Box<dyn Probe>),
        }
    }
}

/// The probes a run reads at each sample, one per source, for the watched metrics only.
#[derive(Debug, Default)]
pub struct ProbeSet {
    probes: Vec<Box<dyn Probe>>,
}

impl ProbeSet {
    /// The probes `target` needs for the `watched` metric names: for each, the registry's first
    /// provider on the target's platform that the target can open. Names the registry does not
    /// know, and metrics the engine reports itself, need no probe.
    pub fn for_watched<S: AsRef<str>>(target: &dyn Target, watched: &[S]) -> Self {
        let platform = target.platform();
        let mut wanted: Vec<(ProbeKind, Vec<&'static Metric>)> = Vec::new();
        for metric in watched
            .iter()
            .filter_map(|name| leakloop_metrics::metric(name.as_ref()))
        {
            let Some(kind) = metric.runner_probe(platform, |kind| target.offers(kind)) else {
                continue;
            };
            match wanted.iter_mut().find(|(k, _)| *k == kind) {
                Some((_, metrics)) => metrics.push(metric),
                None => wanted.push((kind, vec![metric])),
            }
        }
        let probes = wanted
            .into_iter()
            .filter_map(|(kind, metrics)| target.open(kind, &metrics))
            .collect();
        Self { probes }
    }

    /// Whether nothing is read at a sample.
    pub fn is_empty(&self) -> bool {
        self.probes.is_empty()
    }

    /// The sources read at each sample, in order.
    pub fn kinds(&self) -> Vec<ProbeKind> {
        self.probes.iter().map(|p| p.kind()).collect()
    }

    /// Reads every probe for process `pid`; the first probe that fails ends the read with its
    /// error (the process is gone or unreadable, or the target failed: [`ProbeError::fatal`]).
    pub fn read(
        &mut self,
        pid: u32,
        out: &mut dyn FnMut(&'static str, u64),
    ) -> Result<(), ProbeError> {
        for probe in &mut self.probes {
            probe.read(pid, out)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A target on another platform whose probes report fixed values: what a remote target
    /// plugs in.
    #[derive(Debug)]
    struct FakeAndroidApp;

    #[derive(Debug)]
    struct Fixed(ProbeKind, Vec<&'static str>);

    impl Probe for Fixed {
        fn kind(&self) -> ProbeKind {
            self.0
        }
        fn read(
            &mut self,
            _pid: u32,
            out: &mut dyn FnMut(&'static str, u64),
        ) -> Result<(), ProbeError> {
            for name in &self.1 {
                out(name, 7);
            }
            Ok(())
        }
    }

    impl Target for FakeAndroidApp {
        fn platform(&self) -> Platform {
            Platform::Android
        }
        fn offers(&self, kind: ProbeKind) -> bool {
            // An app's /proc is not readable from a shell; dumpsys is.
            kind == ProbeKind::Dumpsys
        }
        fn open(&self, kind: ProbeKind, metrics: &[&'static Metric]) -> Option<Box<dyn Probe>> {
            let names = metrics.iter().map(|m| m.name).collect();
            Some(Box::new(Fixed(kind, names)))
        }
    }

    #[test]
    fn nothing_is_read_when_no_watched_metric_needs_the_runner() {
        let set = ProbeSet::for_watched(&LocalTarget, &["native_heap", "gpu", "cl_mem_bytes"]);
        assert!(set.is_empty(), "{set:?}");
        assert!(ProbeSet::for_watched(&LocalTarget, &["not_a_metric"]).is_empty());
    }

    #[cfg(any(target_os = "linux", target_os = "android"))]
    #[test]
    fn this_machine_reads_proc_once_for_every_process_metric() {
        let mut set = ProbeSet::for_watched(&LocalTarget, &["rss", "native_heap", "swap"]);
        assert_eq!(set.kinds(), [ProbeKind::Proc]);
        let mut names = Vec::new();
        set.read(std::process::id(), &mut |name, _| names.push(name))
            .unwrap();
        assert!(
            names.contains(&"rss") && names.contains(&"swap"),
            "{names:?}"
        );
        assert!(
            !names.contains(&"pss"),
            "smaps_rollup must not be read: {names:?}"
        );
        let err = set.read(u32::MAX - 7, &mut |_, _| {}).unwrap_err();
        assert_eq!(err.pid, u32::MAX - 7);
    }

    #[test]
    fn another_target_plugs_in_its_own_probes_by_platform() {
        let mut set =
            ProbeSet::for_watched(&FakeAndroidApp, &["rss", "java_heap", "anon_rss", "gpu"]);
        // anon_rss has only /proc, which this target cannot read: no probe, nothing invented.
        assert_eq!(set.kinds(), [ProbeKind::Dumpsys]);
        let mut names = Vec::new();
        set.read(1, &mut |name, _| names.push(name)).unwrap();
        assert_eq!(names, ["rss", "java_heap", "gpu"]);
    }
}
