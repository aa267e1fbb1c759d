//! The OpenCL interposer (`cl-interposer`, built as `libcl_interposer.so`) seen from the
//! harness: where the built library is, the environment that loads it into an engine process,
//! and reading its counts from inside that process.

use std::collections::BTreeMap;
use std::ffi::{c_char, CString};
use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::symbols;
use crate::attribution::{ClSiteLive, ClSites};
use crate::engine::opencl::names::CL_MEM_BYTES;
use crate::engine::{EngineSnapshot, KindCounts};

/// How many creation sites an engine snapshot carries at most (those with the most live
/// objects), so that a snapshot stays far below the worker protocol's line limit.
pub const MAX_CARRIED_SITES: usize = 1024;

/// File name of the built interposer.
pub const INTERPOSER_FILE: &str = "libcl_interposer.so";

/// Environment variable that points at a built interposer explicitly.
pub const INTERPOSER_ENV: &str = "LEAKLOOP_CL_INTERPOSER";

/// Fixed malloc mmap threshold for engine processes: glibc's dynamic threshold otherwise keeps
/// one to four freed large buffers on the heap after the first turns, a one-time plateau that
/// looks like growth in short runs.
pub const MMAP_THRESHOLD_TUNABLE: &str = "glibc.malloc.mmap_threshold=131072";

/// Finds the built interposer: `LEAKLOOP_CL_INTERPOSER` if set, else `libcl_interposer.so` in the
/// folder of the running executable or its parent, or in their `deps/` folder. `cargo build`
/// puts the library in `target/<profile>/`; `cargo test` leaves it in `target/<profile>/deps/`
/// only, so a fresh `cargo test --workspace` finds it there.
pub fn find_interposer() -> Result<PathBuf, String> {
    if let Some(path) = std::env::var_os(INTERPOSER_ENV) {
        let path = PathBuf::from(path);
        return if path.is_file() {
            Ok(path)
        } else {
            Err(format!("{INTERPOSER_ENV}={} is not a file", path.display()))
        };
    }
    let exe = std::env::current_exe().map_err(|e| format!("cannot locate this executable: {e}"))?;
    let mut tried = Vec::new();
    for dir in exe.ancestors().skip(1).take(2) {
        for candidate in [
            dir.join(INTERPOSER_FILE),
            dir.join("deps").join(INTERPOSER_FILE),
        ] {
            if candidate.is_file() {
                return Ok(candidate);
            }
            tried.push(candidate.display().to_string());
        }
    }
    Err(format!(
        "{INTERPOSER_FILE} not found (looked at {}); build it with `cargo build -p cl-interposer` or set {INTERPOSER_ENV}",
        tried.join(", ")
    ))
}

fn prepend(var: &str, value: &str, sep: char) -> String {
    match std::env::var(var) {
        Ok(old) if !old.is_empty() => format!("{value}{sep}{old}"),
        _ => value.to_owned(),
    }
}

/// The environment that loads the interposer at `path` into an engine process started from this
/// one: `OPENCL_DYLIB_PATH` (for `opencl3`'s own loading, which opens OpenCL privately and so
/// ignores preloads), `LD_PRELOAD` (for engines that link `libOpenCL`), and a fixed glibc mmap
/// threshold. Existing `LD_PRELOAD` and `GLIBC_TUNABLES` values are kept after ours.
pub fn interposer_env(path: &Path) -> Vec<(String, String)> {
    let p = path.display().to_string();
    vec![
        ("OPENCL_DYLIB_PATH".into(), p.clone()),
        ("LD_PRELOAD".into(), prepend("LD_PRELOAD", &p, ':')),
        (
            "GLIBC_TUNABLES".into(),
            prepend("GLIBC_TUNABLES", MMAP_THRESHOLD_TUNABLE, ':'),
        ),
    ]
}

/// The environment that brings the interposer at `path` into an engine process that uses OpenCL
/// through its own linking or loading (LiteRT-LM): `LD_PRELOAD`, and `shim_dir` (see
/// [`opencl_name_shim`](super::opencl_name_shim)) first on `LD_LIBRARY_PATH` for engines that
/// `dlopen("libOpenCL.so")` and look functions up on that handle. Existing values are kept after
/// ours. Nothing else in the process changes: the interposer loads the real library on the
/// first OpenCL call, so a process that makes none never loads OpenCL.
pub fn preload_env(path: &Path, shim_dir: &Path) -> Vec<(String, String)> {
    vec![
        (
            "LD_PRELOAD".into(),
            prepend("LD_PRELOAD", &path.display().to_string(), ':'),
        ),
        (
            "LD_LIBRARY_PATH".into(),
            prepend("LD_LIBRARY_PATH", &shim_dir.display().to_string(), ':'),
        ),
    ]
}

/// One kind's totals as the interposer reports them (mirrors `cl_interposer::KindTotals`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
pub struct ClKindTotals {
    /// Objects created.
    pub created: u64,
    /// Objects whose application references all went away.
    pub released: u64,
    /// Objects alive now.
    pub live: u64,
    /// Requested bytes of the live objects.
    pub live_bytes: u64,
    /// Successful retains.
    pub retains: u64,
    /// Successful releases.
    pub releases: u64,
}

/// One creation-site frame as the interposer reports it (mirrors `cl_interposer::sites::SiteFrame`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
pub struct ClSiteFrame {
    /// The return address in the engine's process.
    pub address: u64,
    /// The library or executable holding it (`?` when unknown).
    pub module: String,
    /// The call's offset from the module's load address.
    pub offset: u64,
    /// The exported symbol holding it, where `dladdr` found one.
    #[serde(default)]
    pub symbol: Option<String>,
}

/// One creation site's live objects (mirrors `cl_interposer::SiteTotals`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
pub struct ClSiteTotals {
    /// The kind.
    pub kind: String,
    /// The creating call's stack, innermost first.
    pub frames: Vec<ClSiteFrame>,
    /// Live objects created there.
    pub live: u64,
    /// Their requested bytes.
    pub live_bytes: u64,
    /// Objects created there in all.
    pub created: u64,
}

/// Objects counted without a site, by the cap that stopped it (mirrors `cl_interposer::Unsited`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
pub struct ClUnsited {
    /// Past the cap on distinct sites.
    pub sites_full: u64,
    /// Past the cap on live objects with a site.
    pub objects_full: u64,
}

/// The interposer's snapshot (mirrors `cl_interposer::Snapshot`, JSON layout version 1 or 2;
/// version 1 has no sites).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
pub struct ClSnapshot {
    /// Layout version.
    pub version: u32,
    /// Totals per kind (`cl_mem`, `cl_svm`, `cl_context`, `cl_command_queue`, `cl_program`,
    /// `cl_kernel`).
    pub kinds: BTreeMap<String, ClKindTotals>,
    /// Retains and releases of handles it never saw created.
    pub untracked_calls: u64,
    /// Creation sites holding live objects (version 2).
    #[serde(default)]
    pub sites: Vec<ClSiteTotals>,
    /// Objects counted without a site (version 2).
    #[serde(default)]
    pub unsited: ClUnsited,
}

impl ClSnapshot {
    /// Adds these counts to an engine snapshot: each CL kind as a ledger kind (created, and
    /// deleted = released: the application's references reached zero) and the live `cl_mem`
    /// bytes as the metric [`CL_MEM_BYTES`].
    pub fn add_to(&self, snapshot: &mut EngineSnapshot) {
        for (kind, t) in &self.kinds {
            snapshot.ledger.insert(
                kind.clone(),
                KindCounts {
                    created: t.created,
                    deleted: t.released,
                },
            );
        }
        let mem = self.kinds.get("cl_mem").copied().unwrap_or_default();
        snapshot.metrics.insert(CL_MEM_BYTES.into(), mem.live_bytes);
        if self.version >= 2 {
            snapshot.cl_sites = Some(self.sites());
        }
    }

    /// The live objects by kind and creation site, symbolised and trimmed of the OpenCL
    /// wrappers' frames (see [`super::symbols`]): the [`MAX_CARRIED_SITES`] sites with the most
    /// live objects (the interposer lists them in that order).
    pub fn sites(&self) -> ClSites {
        ClSites {
            sites: self
                .sites
                .iter()
                .take(MAX_CARRIED_SITES)
                .map(|s| ClSiteLive {
                    kind: s.kind.clone(),
                    frames: s
                        .frames
                        .iter()
                        .map(|f| {
                            symbols::frame(&f.module, f.offset, f.symbol.as_deref(), f.address)
                        })
                        .filter(|f| !symbols::is_opencl_plumbing(f))
                        .skip_while(symbols::is_std_glue)
                        .collect(),
                    live: s.live,
                    live_bytes: s.live_bytes,
                })
                .collect(),
            unsited: self.unsited.sites_full + self.unsited.objects_full,
        }
    }
}

type SnapshotFn = unsafe extern "C" fn(*mut c_char, usize) -> isize;

/// The interposer loaded in this process, if any.
#[derive(Debug, Clone, Copy)]
pub struct LoadedInterposer {
    snapshot: SnapshotFn,
}

impl LoadedInterposer {
    /// Finds `leakloop_cl_snapshot` in this process: as a global symbol (preloaded) or in a
    /// library named by `OPENCL_DYLIB_PATH` that is already loaded. Never loads anything.
    pub fn find() -> Option<Self> {
        let symbol = c"leakloop_cl_snapshot";
        // SAFETY: dlsym with a NUL-terminated name on the global scope.
        let mut addr = unsafe { libc::dlsym(libc::RTLD_DEFAULT, symbol.as_ptr()) };
        if addr.is_null() {
            let paths = std::env::var("OPENCL_DYLIB_PATH").unwrap_or_default();
            for path in paths.split(';').filter(|p| !p.is_empty()) {
                let Ok(c) = CString::new(path) else { continue };
                // SAFETY: RTLD_NOLOAD only returns a handle to a library that is already loaded.
                let handle =
                    unsafe { libc::dlopen(c.as_ptr(), libc::RTLD_NOW | libc::RTLD_NOLOAD) };
                if handle.is_null() {
                    continue;
                }
                // SAFETY: as above, on that library's handle.
                addr = unsafe { libc::dlsym(handle, symbol.as_ptr()) };
                if !addr.is_null() {
                    break;
                }
            }
        }
        // SAFETY: the symbol is the interposer's `leakloop_cl_snapshot`, whose C signature is
        // `isize (char *buf, size_t cap)`.
        (!addr.is_null()).then(|| Self {
            snapshot: unsafe { std::mem::transmute::<*mut libc::c_void, SnapshotFn>(addr) },
        })
    }

    /// Reads the current totals.
    pub fn read(&self) -> Result<ClSnapshot, String> {
        let mut buf = vec![0 as c_char; 4096];
        for _ in 0..3 {
            // SAFETY: `buf` has `buf.len()` writable bytes.
            let len = unsafe { (self.snapshot)(buf.as_mut_ptr(), buf.len()) };
            let len = usize::try_from(len)
                .map_err(|_| "leakloop_cl_snapshot refused the buffer".to_owned())?;
            if len < buf.len() {
                // `c_char` is `i8` on some targets and `u8` on others (aarch64 Linux and Android).
                let bytes: Vec<u8> = buf[..len].iter().map(|c| c.to_ne_bytes()[0]).collect();
                return serde_json::from_slice(&bytes)
                    .map_err(|e| format!("leakloop_cl_snapshot returned bad JSON: {e}"));
            }
            buf.resize(len + 1, 0);
        }
        Err("leakloop_cl_snapshot kept growing".into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn env_sets_the_loader_paths_and_a_fixed_mmap_threshold() {
        let env: BTreeMap<_, _> = interposer_env(Path::new("/x/libcl_interposer.so"))
            .into_iter()
            .collect();
        assert_eq!(env["OPENCL_DYLIB_PATH"], "/x/libcl_interposer.so");
        assert!(env["LD_PRELOAD"].starts_with("/x/libcl_interposer.so"));
        assert!(env["GLIBC_TUNABLES"].starts_with(MMAP_THRESHOLD_TUNABLE));
    }

    #[test]
    fn preload_env_sets_the_preload_and_the_shim_folder_first() {
        let env: BTreeMap<_, _> = preload_env(Path::new("/x/libcl_interposer.so"), Path::new("/s"))
            .into_iter()
            .collect();
        assert_eq!(env.len(), 2);
        assert!(env["LD_PRELOAD"].starts_with("/x/libcl_interposer.so"));
        assert!(env["LD_LIBRARY_PATH"].starts_with("/s"));
    }

    #[test]
    fn snapshot_json_of_the_interposer_parses() {
        let json = r#"{"version":1,"kinds":{"cl_mem":{"created":3,"released":1,"live":2,
            "live_bytes":64,"retains":1,"releases":2}},"untracked_calls":0}"#;
        let s: ClSnapshot = serde_json::from_str(json).unwrap();
        assert_eq!(s.kinds["cl_mem"].live_bytes, 64);
    }

    #[test]
    fn snapshot_adds_kinds_and_live_buffer_bytes() {
        let json = r#"{"version":1,"kinds":{"cl_mem":{"created":3,"released":1,"live":2,
            "live_bytes":64,"retains":0,"releases":1},"cl_context":{"created":1,"released":1,
            "live":0,"live_bytes":0,"retains":0,"releases":1}},"untracked_calls":0}"#;
        let s: ClSnapshot = serde_json::from_str(json).unwrap();
        let mut snapshot = EngineSnapshot::default();
        s.add_to(&mut snapshot);
        assert_eq!(
            snapshot.ledger["cl_mem"],
            KindCounts {
                created: 3,
                deleted: 1
            }
        );
        assert_eq!(snapshot.ledger["cl_context"].live(), 0);
        assert_eq!(snapshot.metrics[CL_MEM_BYTES], 64);
    }

    #[test]
    fn an_unused_interposer_still_reports_zero_live_buffer_bytes() {
        let mut snapshot = EngineSnapshot::default();
        ClSnapshot::default().add_to(&mut snapshot);
        assert!(snapshot.ledger.is_empty());
        assert_eq!(snapshot.metrics[CL_MEM_BYTES], 0);
    }
}
