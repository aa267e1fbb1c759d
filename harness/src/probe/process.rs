//! Process memory read from outside the process: on Linux and Android from
//! `/proc/<pid>/smaps_rollup` and `/proc/<pid>/status` (RSS, PSS, anonymous RSS and swap, since
//! leaked pages can hide in swap); elsewhere the resident size through `sysinfo`.

use std::collections::BTreeMap;

/// A process whose memory could not be read.
#[derive(Debug, thiserror::Error)]
#[error("cannot read memory of process {pid}: {cause}")]
pub struct ProbeError {
    /// The process.
    pub pid: u32,
    /// Why.
    pub cause: String,
}

/// Reads the memory metrics of process `pid`, in bytes: `rss`, `pss`, `anon_rss`, `swap` where
/// the OS offers them.
pub fn probe_process(pid: u32) -> Result<BTreeMap<String, u64>, ProbeError> {
    imp::probe(pid)
}

#[cfg(any(target_os = "linux", target_os = "android"))]
mod imp {
    use super::*;

    pub(super) fn probe(pid: u32) -> Result<BTreeMap<String, u64>, ProbeError> {
        let read = |file: &str| {
            std::fs::read_to_string(format!("/proc/{pid}/{file}")).map_err(|e| ProbeError {
                pid,
                cause: format!("/proc/{pid}/{file}: {e}"),
            })
        };
        let mut metrics = BTreeMap::new();
        // smaps_rollup is missing on old kernels; status alone still gives RSS and swap.
        if let Ok(rollup) = read("smaps_rollup") {
            for (key, name) in [
                ("Rss", "rss"),
                ("Pss", "pss"),
                ("Anonymous", "anon_rss"),
                ("Swap", "swap"),
            ] {
                if let Some(kib) = field_kib(&rollup, key) {
                    metrics.insert(name.to_owned(), kib * 1024);
                }
            }
        }
        let status = read("status")?;
        for (key, name) in [
            ("VmRSS", "rss"),
            ("RssAnon", "anon_rss"),
            ("VmSwap", "swap"),
        ] {
            if let Some(kib) = field_kib(&status, key) {
                metrics.entry(name.to_owned()).or_insert(kib * 1024);
            }
        }
        if metrics.is_empty() {
            return Err(ProbeError {
                pid,
                cause: "no memory fields in /proc status".into(),
            });
        }
        Ok(metrics)
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

    pub(super) fn probe(pid: u32) -> Result<BTreeMap<String, u64>, ProbeError> {
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
        })?;
        Ok(BTreeMap::from([("rss".to_owned(), process.memory())]))
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

    #[test]
    fn a_missing_process_is_an_error_naming_it() {
        let err = probe_process(u32::MAX - 7).unwrap_err();
        assert!(err.to_string().contains(&format!("{}", u32::MAX - 7)));
    }
}
