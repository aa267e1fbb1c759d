//! The object registry: every OpenCL object the application created through this library, with
//! its application-visible reference count and requested bytes, plus per-kind totals.
//!
//! Balance is judged per live object, not per call: `clRetainMemObject` followed by
//! `clReleaseMemObject` on a buffer is legal and leaves the buffer exactly as alive as before; only
//! when the application's own references reach zero does the object count as released. The
//! runtime's internal references (a kernel holding its program, a sub-buffer its parent) are not
//! the application's and are not counted.

use std::collections::BTreeMap;
use std::sync::Mutex;

use rustc_hash::FxHashMap;
use serde::{Deserialize, Serialize};

/// The kinds of OpenCL objects the registry tracks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kind {
    /// Buffers, sub-buffers, images and pipes (`cl_mem`).
    Mem,
    /// Shared virtual memory allocations (`clSVMAlloc`).
    Svm,
    /// Contexts.
    Context,
    /// Command queues.
    CommandQueue,
    /// Programs.
    Program,
    /// Kernels.
    Kernel,
}

impl Kind {
    /// Every kind, in report order.
    pub const ALL: [Kind; 6] = [
        Kind::Mem,
        Kind::Svm,
        Kind::Context,
        Kind::CommandQueue,
        Kind::Program,
        Kind::Kernel,
    ];

    /// The name used in snapshots and ledgers, e.g. `cl_mem`.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Mem => "cl_mem",
            Kind::Svm => "cl_svm",
            Kind::Context => "cl_context",
            Kind::CommandQueue => "cl_command_queue",
            Kind::Program => "cl_program",
            Kind::Kernel => "cl_kernel",
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// Totals of one kind since the library was loaded.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct KindTotals {
    /// Objects created.
    pub created: u64,
    /// Objects whose application references all went away.
    pub released: u64,
    /// Objects still alive (created minus released).
    pub live: u64,
    /// Requested bytes of the live objects.
    pub live_bytes: u64,
    /// Successful retain calls on tracked objects.
    pub retains: u64,
    /// Successful release calls on tracked objects (each object's last one included).
    pub releases: u64,
}

/// A point-in-time copy of the registry, as `leakloop_cl_snapshot` hands it out.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Snapshot {
    /// Layout version of this structure.
    pub version: u32,
    /// Totals per kind name (`cl_mem`, `cl_context`, ...).
    pub kinds: BTreeMap<String, KindTotals>,
    /// Retain or release calls on handles this library never saw created (objects made before
    /// it was loaded, or by entry points it does not track).
    pub untracked_calls: u64,
}

/// Current layout version of [`Snapshot`].
pub const SNAPSHOT_VERSION: u32 = 1;

/// What [`Registry::released`] did, so that a failed real release can be undone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReleaseToken {
    /// The handle was not a tracked object of that kind.
    Untracked,
    /// One of several references went away.
    Dropped {
        /// The object's kind.
        kind: Kind,
        /// The object.
        handle: usize,
    },
    /// The last reference went away and the object was removed.
    Removed {
        /// The object.
        handle: usize,
        /// The object's kind.
        kind: Kind,
        /// Its requested bytes.
        bytes: u64,
    },
}

impl ReleaseToken {
    /// Whether this release dropped the object's last application reference.
    pub fn was_last(&self) -> bool {
        matches!(self, ReleaseToken::Removed { .. })
    }
}

#[derive(Debug, Clone, Copy)]
struct Entry {
    kind: Kind,
    refs: u64,
    bytes: u64,
}

#[derive(Debug, Default)]
struct State {
    objects: FxHashMap<usize, Entry>,
    totals: [KindTotals; Kind::ALL.len()],
    untracked_calls: u64,
}

/// The thread-safe registry of live objects.
#[derive(Debug, Default)]
pub struct Registry {
    state: Mutex<Option<State>>,
}

impl Registry {
    /// An empty registry (const, so it can be a `static`).
    pub const fn new() -> Self {
        Self {
            state: Mutex::new(None),
        }
    }

    fn with<R>(&self, f: impl FnOnce(&mut State) -> R) -> R {
        // A panic while holding the lock cannot leave the counters half-updated in a way that
        // matters more than losing them, so a poisoned lock is used as is.
        let mut guard = self.state.lock().unwrap_or_else(|p| p.into_inner());
        f(guard.get_or_insert_with(State::default))
    }

    /// Records a newly created object of `kind` with `bytes` requested.
    ///
    /// A handle that is still registered (the runtime reused an address the application never
    /// released, which would be the runtime's bug) is replaced and the old entry counted as
    /// released, so the totals stay consistent.
    pub fn created(&self, kind: Kind, handle: usize, bytes: u64) {
        if handle == 0 {
            return;
        }
        self.with(|s| {
            if let Some(old) = s.objects.insert(
                handle,
                Entry {
                    kind,
                    refs: 1,
                    bytes,
                },
            ) {
                let t = &mut s.totals[old.kind.index()];
                t.released += 1;
                t.live -= 1;
                t.live_bytes -= old.bytes;
            }
            let t = &mut s.totals[kind.index()];
            t.created += 1;
            t.live += 1;
            t.live_bytes += bytes;
        });
    }

    /// Records a successful retain of `handle`.
    pub fn retained(&self, kind: Kind, handle: usize) {
        self.with(|s| match s.objects.get_mut(&handle) {
            Some(e) if e.kind == kind => {
                e.refs += 1;
                s.totals[kind.index()].retains += 1;
            }
            _ => s.untracked_calls += 1,
        });
    }

    /// Records a release of `handle` *before* the real release runs (once the real one has run,
    /// another thread may already have been handed the same address for a new object); the
    /// returned token undoes it through [`Registry::revert`] if the real release fails.
    pub fn released(&self, kind: Kind, handle: usize) -> ReleaseToken {
        self.with(|s| {
            let Some(e) = s.objects.get_mut(&handle).filter(|e| e.kind == kind) else {
                s.untracked_calls += 1;
                return ReleaseToken::Untracked;
            };
            e.refs -= 1;
            let entry = *e;
            let t = &mut s.totals[kind.index()];
            t.releases += 1;
            if entry.refs > 0 {
                return ReleaseToken::Dropped { kind, handle };
            }
            t.released += 1;
            t.live -= 1;
            t.live_bytes -= entry.bytes;
            s.objects.remove(&handle);
            ReleaseToken::Removed {
                handle,
                kind,
                bytes: entry.bytes,
            }
        })
    }

    /// Undoes a release whose real call failed.
    pub fn revert(&self, token: ReleaseToken) {
        self.with(|s| match token {
            ReleaseToken::Untracked => s.untracked_calls -= 1,
            ReleaseToken::Dropped { kind, handle } => {
                if let Some(e) = s.objects.get_mut(&handle) {
                    e.refs += 1;
                }
                s.totals[kind.index()].releases -= 1;
            }
            ReleaseToken::Removed {
                handle,
                kind,
                bytes,
            } => {
                s.objects.insert(
                    handle,
                    Entry {
                        kind,
                        refs: 1,
                        bytes,
                    },
                );
                let t = &mut s.totals[kind.index()];
                t.releases -= 1;
                t.released -= 1;
                t.live += 1;
                t.live_bytes += bytes;
            }
        });
    }

    /// A consistent copy of the totals.
    pub fn snapshot(&self) -> Snapshot {
        self.with(|s| Snapshot {
            version: SNAPSHOT_VERSION,
            kinds: Kind::ALL
                .iter()
                .map(|k| (k.name().to_owned(), s.totals[k.index()]))
                .collect(),
            untracked_calls: s.untracked_calls,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mem(r: &Registry) -> KindTotals {
        r.snapshot().kinds["cl_mem"]
    }

    #[test]
    fn a_legal_retain_release_pair_is_not_a_leak() {
        let r = Registry::new();
        r.created(Kind::Mem, 0x10, 4096);
        r.retained(Kind::Mem, 0x10);
        assert!(!r.released(Kind::Mem, 0x10).was_last());
        assert_eq!(mem(&r).live, 1);
        assert_eq!(mem(&r).live_bytes, 4096);
        assert!(r.released(Kind::Mem, 0x10).was_last());
        let t = mem(&r);
        assert_eq!((t.created, t.released, t.live, t.live_bytes), (1, 1, 0, 0));
        assert_eq!((t.retains, t.releases), (1, 2));
    }

    #[test]
    fn a_retain_without_its_release_keeps_the_object_and_its_bytes_alive() {
        let r = Registry::new();
        r.created(Kind::Mem, 0x20, 16 << 20);
        r.retained(Kind::Mem, 0x20);
        r.released(Kind::Mem, 0x20);
        let t = mem(&r);
        assert_eq!(
            (t.created, t.released, t.live, t.live_bytes),
            (1, 0, 1, 16 << 20)
        );
    }

    #[test]
    fn kinds_are_kept_apart_and_unknown_handles_are_counted_not_trusted() {
        let r = Registry::new();
        r.created(Kind::Context, 0x30, 0);
        assert_eq!(
            r.released(Kind::Mem, 0x30),
            ReleaseToken::Untracked,
            "a context is not a buffer"
        );
        r.retained(Kind::Kernel, 0x99);
        let s = r.snapshot();
        assert_eq!(s.untracked_calls, 2);
        assert_eq!(s.kinds["cl_context"].live, 1);
        assert_eq!(s.kinds["cl_mem"], KindTotals::default());
    }

    #[test]
    fn an_address_reused_after_release_is_a_new_object() {
        let r = Registry::new();
        r.created(Kind::Mem, 0x40, 100);
        r.released(Kind::Mem, 0x40);
        r.created(Kind::Mem, 0x40, 200);
        let t = mem(&r);
        assert_eq!(
            (t.created, t.released, t.live, t.live_bytes),
            (2, 1, 1, 200)
        );
    }

    #[test]
    fn a_failed_release_is_undone_exactly() {
        let r = Registry::new();
        r.created(Kind::Mem, 0x50, 64);
        let before = r.snapshot();
        let token = r.released(Kind::Mem, 0x50);
        assert!(token.was_last());
        r.revert(token);
        assert_eq!(r.snapshot(), before);
        r.retained(Kind::Mem, 0x50);
        let before = r.snapshot();
        let token = r.released(Kind::Mem, 0x50);
        r.revert(token);
        assert_eq!(r.snapshot(), before);
        let token = r.released(Kind::Kernel, 0x51);
        r.revert(token);
        assert_eq!(r.snapshot(), before);
    }

    #[test]
    fn null_handles_from_failed_creates_are_ignored() {
        let r = Registry::new();
        r.created(Kind::Mem, 0, 100);
        assert_eq!(mem(&r), KindTotals::default());
    }

    #[test]
    fn snapshot_lists_every_kind_even_when_unused() {
        let names: Vec<String> = Registry::new().snapshot().kinds.into_keys().collect();
        assert_eq!(
            names,
            [
                "cl_command_queue",
                "cl_context",
                "cl_kernel",
                "cl_mem",
                "cl_program",
                "cl_svm"
            ]
        );
    }
}
