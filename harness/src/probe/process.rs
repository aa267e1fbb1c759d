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
/// `/proc/<pid>/statm` when RSS and anonymous RSS are all it needs (two counters, formatted by
/// the kernel in about half a microsecond), `/proc/<pid>/status` when swap is watched too, and
/// `/proc/<pid>/smaps_rollup` only for PSS (it walks every mapping: ~10 µs per MiB resident).
///
/// The file stays open between samples of one process and is read again from its start: a
/// sample comes right after an engine's turn has taken the caches, when opening a `/proc` path
/// costs several times what reading an open one does (on this project's reference machine,
/// 30 µs for open-read-close of `status` against 6 µs for re-reading an open `statm`). An open
/// file also stays bound to the process it was opened for: once that process is gone, reading
/// fails rather than finding another process that was given the same pid.
#[derive(Debug, Default)]
pub struct ProcessProbe {
    /// Which file serves the watched metrics.
    source: Source,
    /// Reused read buffer, so that a sample allocates nothing once warm.
    #[cfg_attr(
        not(any(target_os = "linux", target_os = "android")),
        expect(dead_code, reason = "only the /proc reader uses it")
    )]
    buffer: Vec<u8>,
    /// The file read at the last sample, and the process it belongs to.
    #[cfg_attr(
        not(any(target_os = "linux", target_os = "android")),
        expect(dead_code, reason = "only the /proc reader uses it")
    )]
    open: Option<(u32, &'static str, std::fs::File)>,
}

/// The `/proc` file a probe reads.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
enum Source {
    /// Nothing watched is a process metric.
    #[default]
    Nothing,
    /// `statm`: rss and anon_rss.
    Statm,
    /// `status`: rss, anon_rss and swap.
    Status,
    /// `smaps_rollup` (pss and the others from the same walk), `status` for what it lacks.
    Rollup,
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
        (probe.source != Source::Nothing).then_some(probe)
    }

    fn for_metrics<S: AsRef<str>>(watched: &[S]) -> Self {
        let wants = |name: &str| watched.iter().any(|w| w.as_ref() == name);
        let source = if wants(PSS) {
            Source::Rollup
        } else if wants(SWAP) {
            Source::Status
        } else if wants(RSS) || wants(ANON_RSS) {
            Source::Statm
        } else {
            Source::Nothing
        };
        Self {
            source,
            buffer: Vec::new(),
            open: None,
        }
    }

    /// Whether this probe reads `smaps_rollup` (the costly source).
    pub fn reads_smaps_rollup(&self) -> bool {
        self.source == Source::Rollup
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

    /// Reads `/proc/<pid>/<file>` whole into the probe's buffer, through the file kept open
    /// from the last read of the same process and file when there is one.
    fn read_into(probe: &mut ProcessProbe, pid: u32, file: &'static str) -> Result<(), ProbeError> {
        let error = |e: std::io::Error| ProbeError {
            pid,
            cause: format!("/proc/{pid}/{file}: {e}"),
            fatal: None,
        };
        probe.buffer.clear();
        let kept = matches!(&probe.open, Some((p, f, _)) if *p == pid && *f == file);
        if !kept {
            probe.open = None;
            let opened = std::fs::File::open(format!("/proc/{pid}/{file}")).map_err(error)?;
            probe.open = Some((pid, file, opened));
        }
        let Some((_, _, opened)) = &probe.open else {
            unreachable!("opened just above")
        };
        if let Err(e) = read_from_start(opened, &mut probe.buffer) {
            probe.open = None;
            return Err(error(e));
        }
        Ok(())
    }

    /// The text last read (empty if it was not UTF-8, which no `/proc` file of these is).
    fn text(probe: &ProcessProbe) -> &str {
        std::str::from_utf8(&probe.buffer).unwrap_or_default()
    }

    /// Reads a `/proc` file from offset 0 to its end (reading from the start makes the kernel
    /// produce the text afresh). Bounded: these files are a few KiB; more than 1 MiB is an error.
    fn read_from_start(file: &std::fs::File, bytes: &mut Vec<u8>) -> std::io::Result<()> {
        use std::os::unix::fs::FileExt;
        const MAX_BYTES: usize = 1 << 20;
        let mut chunk = [0u8; 4096];
        loop {
            let n = file.read_at(&mut chunk, bytes.len() as u64)?;
            if n == 0 {
                return Ok(());
            }
            if bytes.len() + n > MAX_BYTES {
                return Err(std::io::Error::other("longer than 1 MiB"));
            }
            bytes.extend_from_slice(&chunk[..n]);
        }
    }

    pub(super) fn probe(
        probe: &mut ProcessProbe,
        pid: u32,
        out: &mut dyn FnMut(&'static str, u64),
    ) -> Result<(), ProbeError> {
        let no_fields = |file: &str| ProbeError {
            pid,
            cause: format!("no memory fields in /proc/{pid}/{file} (the process has exited)"),
            fatal: None,
        };
        if probe.source == Source::Statm {
            read_into(probe, pid, "statm")?;
            let (rss, anon) =
                statm_bytes(text(probe), page_size()).ok_or_else(|| no_fields("statm"))?;
            out(RSS, rss);
            out(ANON_RSS, anon);
            return Ok(());
        }
        let mut found = [false; 3];
        let mut any = false;
        // smaps_rollup is missing on old kernels; status alone still gives RSS and swap.
        if probe.source == Source::Rollup && read_into(probe, pid, "smaps_rollup").is_ok() {
            for (key, name) in [
                ("Rss", RSS),
                ("Pss", PSS),
                ("Anonymous", ANON_RSS),
                ("Swap", SWAP),
            ] {
                if let Some(kib) = field_kib(text(probe), key) {
                    if let Some(i) = [RSS, ANON_RSS, SWAP].iter().position(|n| *n == name) {
                        found[i] = true;
                    }
                    any = true;
                    out(name, kib.saturating_mul(1024));
                }
            }
        }
        if probe.source == Source::Status || found.contains(&false) {
            read_into(probe, pid, "status")?;
            for (i, (key, name)) in [("VmRSS", RSS), ("RssAnon", ANON_RSS), ("VmSwap", SWAP)]
                .into_iter()
                .enumerate()
            {
                if found[i] {
                    continue;
                }
                if let Some(kib) = field_kib(text(probe), key) {
                    any = true;
                    out(name, kib.saturating_mul(1024));
                }
            }
        }
        if !any {
            return Err(no_fields("status"));
        }
        Ok(())
    }

    /// The page size `statm` counts in.
    fn page_size() -> u64 {
        // SAFETY: sysconf reads a constant of the system.
        let size = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
        u64::try_from(size).ok().filter(|s| *s > 0).unwrap_or(4096)
    }

    /// Resident and anonymous resident bytes from `statm` ("size resident shared text lib data
    /// dt", in pages; the kernel counts shared as file plus shmem pages, so resident minus shared
    /// is the anonymous pages `status` calls RssAnon). `None` for a process without memory (an
    /// exited one reads all zeros) or text that is not statm's.
    pub(super) fn statm_bytes(text: &str, page: u64) -> Option<(u64, u64)> {
        let mut fields = text.split_ascii_whitespace().map(|f| f.parse::<u64>().ok());
        let size = fields.next()??;
        let resident = fields.next()??;
        let shared = fields.next()??;
        if size == 0 {
            return None;
        }
        let anon = resident.checked_sub(shared)?;
        Some((resident.checked_mul(page)?, anon.checked_mul(page)?))
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
    fn statm_gives_resident_and_anonymous_pages_in_bytes() {
        assert_eq!(
            imp::statm_bytes("5000 300 100 10 0 900 0\n", 4096),
            Some((300 * 4096, 200 * 4096))
        );
        // An exited process (a zombie) reads all zeros: no memory, not an empty one.
        assert_eq!(imp::statm_bytes("0 0 0 0 0 0 0\n", 4096), None);
        assert_eq!(imp::statm_bytes("5000 300\n", 4096), None);
        assert_eq!(imp::statm_bytes("5000 100 300 0 0 0 0\n", 4096), None);
        assert_eq!(
            imp::statm_bytes("1 18446744073709551615 0 0 0 0 0", 4096),
            None
        );
    }

    /// statm and status count the same pages: a probe that needs no swap reads the cheaper one
    /// and gets what status would have said.
    #[test]
    fn statm_agrees_with_status() {
        let pid = std::process::id();
        let mut statm = ProcessProbe::for_watched(&["rss", "anon_rss"]).unwrap();
        let mut status = ProcessProbe::for_watched(&["rss", "anon_rss", "swap"]).unwrap();
        let mut a = BTreeMap::new();
        let mut b = BTreeMap::new();
        statm
            .read(pid, &mut |n, v| {
                a.insert(n, v);
            })
            .unwrap();
        status
            .read(pid, &mut |n, v| {
                b.insert(n, v);
            })
            .unwrap();
        assert_eq!(a.keys().copied().collect::<Vec<_>>(), ["anon_rss", "rss"]);
        assert!(b.contains_key("swap"), "{b:?}");
        for name in ["rss", "anon_rss"] {
            // Other test threads allocate between the two reads.
            assert!(a[name].abs_diff(b[name]) < 32 << 20, "{name}: {a:?} {b:?}");
        }
    }

    /// The file a probe keeps open is read afresh each time, and stays bound to its process.
    #[test]
    fn a_kept_file_sees_growth_and_fails_once_its_process_is_gone() {
        let mut probe = ProcessProbe::for_watched(&["rss"]).unwrap();
        let rss = |probe: &mut ProcessProbe, pid| {
            let mut rss = None;
            probe.read(pid, &mut |n, v| {
                if n == "rss" {
                    rss = Some(v)
                }
            })?;
            Ok::<_, ProbeError>(rss.unwrap())
        };
        let pid = std::process::id();
        let before = rss(&mut probe, pid).unwrap();
        let block = vec![1u8; 64 << 20];
        std::hint::black_box(&block);
        let after = rss(&mut probe, pid).unwrap();
        assert!(after >= before + (48 << 20), "rss {before} -> {after}");
        drop(block);

        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        assert!(rss(&mut probe, child.id()).unwrap() > 0);
        child.kill().unwrap();
        child.wait().unwrap();
        let err = rss(&mut probe, child.id()).unwrap_err();
        assert!(err.to_string().contains(&child.id().to_string()), "{err}");
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
