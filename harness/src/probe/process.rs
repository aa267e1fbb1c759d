//! Process memory read from outside the process: on Linux and Android from
//! `/proc/<pid>/smaps_rollup` and `/proc/<pid>/status` (RSS, PSS, anonymous RSS and swap, since
//! leaked pages can hide in swap); elsewhere the resident size through `sysinfo` (macOS has its
//! own probe, `task_info`, for the sampling; [`probe_process`] stays generic).

use std::collections::BTreeMap;

use leakloop_metrics::names::{ANON_RSS, PSS, RSS, SWAP};
use leakloop_metrics::ProbeKind;

use crate::engine::EngineError;

/// A process whose memory could not be read.
#[derive(Debug, thiserror::Error)]
#[error("cannot read memory of process {pid}: {cause}")]
pub struct ProbeError {
    /// The process.
    pub pid: u32,
    /// Why.
    pub cause: String,
    /// When the target itself failed (a device gone, a probe command that failed), the error
    /// that ends the run; `None` when only the process could not be read (the engine's next
    /// call says how it died).
    pub fatal: Option<EngineError>,
}

/// Reads the memory metrics of process `pid`, in bytes: `rss`, `pss`, `anon_rss`, `swap` where
/// the OS offers them. Reads every source; the run loop uses a [`ProcessProbe`] that reads only
/// what a scenario watches.
pub fn probe_process(pid: u32) -> Result<BTreeMap<String, u64>, ProbeError> {
    let mut metrics = BTreeMap::new();
    ProcessProbe::all().read(pid, &mut |name, value| {
        metrics.insert(name.to_owned(), value);
    })?;
    Ok(metrics)
}

/// The peak resident memory of this process so far (`VmHWM`), in bytes, where the OS tells.
pub fn peak_rss_bytes() -> Option<u64> {
    imp::peak_rss()
}

/// A process probe that reads only the sources its metrics need, cheapest first:
/// `/proc/<pid>/status` (RSS, anonymous RSS and swap; microseconds) unless PSS is wanted, and
/// `/proc/<pid>/smaps_rollup` only for PSS (it walks every mapping: ~10 µs per MiB resident).
#[derive(Debug, Clone, Default)]
pub struct ProcessProbe {
    /// Read `status` (rss, anon_rss, swap).
    status: bool,
    /// Read `smaps_rollup` (pss, and the others from the same walk).
    rollup: bool,
    /// Reused read buffer, so that a sample allocates nothing once warm.
    #[cfg_attr(
        not(any(target_os = "linux", target_os = "android")),
        expect(dead_code, reason = "only the /proc reader uses it")
    )]
    buffer: String,
}

impl ProcessProbe {
    /// A probe reading every source.
    pub fn all() -> Self {
        Self::for_metrics(&leakloop_metrics::NAMES)
    }

    /// A probe for the given metric names (others are ignored): `None` when none of them is a
    /// process metric, so that nothing is read at all.
    pub fn for_watched<S: AsRef<str>>(watched: &[S]) -> Option<Self> {
        let probe = Self::for_metrics(watched);
        (probe.status || probe.rollup).then_some(probe)
    }

    fn for_metrics<S: AsRef<str>>(watched: &[S]) -> Self {
        let wants = |name: &str| watched.iter().any(|w| w.as_ref() == name);
        let rollup = wants(PSS);
        Self {
            status: !rollup && (wants(RSS) || wants(ANON_RSS) || wants(SWAP)),
            rollup,
            buffer: String::new(),
        }
    }

    /// Whether this probe reads `smaps_rollup` (the costly source).
    pub fn reads_smaps_rollup(&self) -> bool {
        self.rollup
    }

    /// Reads the process's metrics, handing each `(name, bytes)` to `out`.
    pub fn read(
        &mut self,
        pid: u32,
        out: &mut dyn FnMut(&'static str, u64),
    ) -> Result<(), ProbeError> {
        imp::probe(self, pid, out)
    }
}

impl super::Probe for ProcessProbe {
    fn kind(&self) -> ProbeKind {
        if cfg!(any(target_os = "linux", target_os = "android")) {
            ProbeKind::Proc
        } else {
            ProbeKind::Sysinfo
        }
    }

    fn read(&mut self, pid: u32, out: &mut dyn FnMut(&'static str, u64)) -> Result<(), ProbeError> {
        ProcessProbe::read(self, pid, out)
    }
}

#[cfg(any(target_os = "linux", target_os = "android"))]
mod imp {
    use super::*;
    use std::io::Read;

    fn read_into(buffer: &mut String, pid: u32, file: &str) -> Result<(), ProbeError> {
        buffer.clear();
        std::fs::File::open(format!("/proc/{pid}/{file}"))
            .and_then(|mut f| f.read_to_string(buffer))
            .map(drop)
            .map_err(|e| ProbeError {
                pid,
                cause: format!("/proc/{pid}/{file}: {e}"),
                fatal: None,
            })
    }

    pub(super) fn probe(
        probe: &mut ProcessProbe,
        pid: u32,
        out: &mut dyn FnMut(&'static str, u64),
    ) -> Result<(), ProbeError> {
        let mut found = [false; 3];
        let mut any = false;
        // smaps_rollup is missing on old kernels; status alone still gives RSS and swap.
        if probe.rollup && read_into(&mut probe.buffer, pid, "smaps_rollup").is_ok() {
            for (key, name) in [
                ("Rss", RSS),
                ("Pss", PSS),
                ("Anonymous", ANON_RSS),
                ("Swap", SWAP),
            ] {
                if let Some(kib) = field_kib(&probe.buffer, key) {
                    if let Some(i) = [RSS, ANON_RSS, SWAP].iter().position(|n| *n == name) {
                        found[i] = true;
                    }
                    any = true;
                    out(name, kib * 1024);
                }
            }
        }
        if probe.status || (probe.rollup && found.contains(&false)) {
            read_into(&mut probe.buffer, pid, "status")?;
            for (i, (key, name)) in [("VmRSS", RSS), ("RssAnon", ANON_RSS), ("VmSwap", SWAP)]
                .into_iter()
                .enumerate()
            {
                if found[i] {
                    continue;
                }
                if let Some(kib) = field_kib(&probe.buffer, key) {
                    any = true;
                    out(name, kib * 1024);
                }
            }
        }
        if !any {
            return Err(ProbeError {
                pid,
                cause: "no memory fields in /proc status".into(),
                fatal: None,
            });
        }
        Ok(())
    }

    pub(super) fn peak_rss() -> Option<u64> {
        let status = std::fs::read_to_string("/proc/self/status").ok()?;
        field_kib(&status, "VmHWM").map(|kib| kib * 1024)
    }

    /// Value of a `Key:   123 kB` line.
    pub(super) fn field_kib(text: &str, key: &str) -> Option<u64> {
        text.lines().find_map(|line| {
            let rest = line.strip_prefix(key)?.strip_prefix(':')?;
            rest.split_whitespace().next()?.parse().ok()
        })
    }
}

#[cfg(not(any(target_os = "linux", target_os = "android")))]
mod imp {
    use super::*;
    use sysinfo::{Pid, ProcessRefreshKind, ProcessesToUpdate, System};

    pub(super) fn probe(
        _probe: &mut ProcessProbe,
        pid: u32,
        out: &mut dyn FnMut(&'static str, u64),
    ) -> Result<(), ProbeError> {
        let mut system = System::new();
        let spid = Pid::from_u32(pid);
        system.refresh_processes_specifics(
            ProcessesToUpdate::Some(&[spid]),
            true,
            ProcessRefreshKind::nothing().with_memory(),
        );
        let process = system.process(spid).ok_or_else(|| ProbeError {
            pid,
            cause: "no such process".into(),
            fatal: None,
        })?;
        out(RSS, process.memory());
        Ok(())
    }

    pub(super) fn peak_rss() -> Option<u64> {
        None
    }
}

#[cfg(all(test, any(target_os = "linux", target_os = "android")))]
mod tests {
    use super::*;

    #[test]
    fn parses_kib_fields() {
        let text = "Rss:                1234 kB\nPss:  99 kB\nSwap: 0 kB\n";
        assert_eq!(imp::field_kib(text, "Rss"), Some(1234));
        assert_eq!(imp::field_kib(text, "Pss"), Some(99));
        assert_eq!(imp::field_kib(text, "Anonymous"), None);
    }

    #[test]
    fn sees_its_own_resident_memory_grow_when_pages_are_touched() {
        let pid = std::process::id();
        let before = probe_process(pid).unwrap()["rss"];
        let block = vec![1u8; 64 << 20];
        std::hint::black_box(&block);
        let after = probe_process(pid).unwrap()["rss"];
        assert!(after >= before + (48 << 20), "rss {before} -> {after}");
        drop(block);
    }

    /// Issue 15: smaps_rollup walks every mapping (milliseconds for a big process) and was read
    /// at every sample even when no PSS was watched.
    #[test]
    fn reads_smaps_rollup_only_when_pss_is_watched() {
        assert!(ProcessProbe::for_watched(&["native_heap", "gpu"]).is_none());
        let status_only = ProcessProbe::for_watched(&["rss", "native_heap"]).unwrap();
        assert!(!status_only.reads_smaps_rollup());
        let with_pss = ProcessProbe::for_watched(&["pss"]).unwrap();
        assert!(with_pss.reads_smaps_rollup());
        let mut names = Vec::new();
        let mut probe = ProcessProbe::for_watched(&["anon_rss"]).unwrap();
        probe
            .read(std::process::id(), &mut |name, _| names.push(name))
            .unwrap();
        assert!(
            names.contains(&"rss") && names.contains(&"anon_rss"),
            "{names:?}"
        );
        assert!(!names.contains(&"pss"), "{names:?}");
        let mut names = Vec::new();
        ProcessProbe::for_watched(&["pss"])
            .unwrap()
            .read(std::process::id(), &mut |name, _| names.push(name))
            .unwrap();
        assert!(names.contains(&"pss"), "{names:?}");
    }

    #[test]
    fn the_peak_is_at_least_what_is_resident_now() {
        let now = probe_process(std::process::id()).unwrap()["rss"];
        assert!(peak_rss_bytes().unwrap() >= now / 2, "{now}");
    }

    #[test]
    fn a_missing_process_is_an_error_naming_it() {
        let err = probe_process(u32::MAX - 7).unwrap_err();
        assert!(err.to_string().contains(&format!("{}", u32::MAX - 7)));
    }
}
