//! The object registry: every OpenCL object the application created through this library, with
//! its application-visible reference count and requested bytes, plus per-kind totals.
//!
//! Balance is judged per live object, not per call: `clRetainMemObject` followed by
//! `clReleaseMemObject` on a buffer is legal and leaves the buffer exactly as alive as before; only
//! when the application's own references reach zero does the object count as released. The
//! runtime's internal references (a kernel holding its program, a sub-buffer its parent) are not
//! the application's and are not counted.
//!
//! Every live object also keeps its creation site (the caller's stack, [`crate::sites`]), and
//! each site its live objects and bytes, so that a snapshot says where the live objects were
//! made. Both are bounded: at most [`MAX_SITES`] distinct sites and [`MAX_SITED_OBJECTS`] live
//! objects with a site; an object created past either cap is still counted in its kind's totals,
//! without a site, and the snapshot counts how many were.

use std::collections::BTreeMap;
use std::sync::Mutex;

use rustc_hash::FxHashMap;
use serde::{Deserialize, Serialize};

use crate::sites::{resolve, SiteFrame, Stack};

/// How many distinct creation sites (kind and caller's stack) the registry keeps; objects made
/// at a new site past it are counted without one.
pub const MAX_SITES: usize = 4096;
/// How many live objects keep their creation site; objects created while that many are alive
/// are counted without one.
pub const MAX_SITED_OBJECTS: usize = 1 << 20;

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
    /// The creation sites that hold live objects now, most live objects first (version 2).
    #[serde(default)]
    pub sites: Vec<SiteTotals>,
    /// Objects created without a site because a cap was reached (version 2).
    #[serde(default)]
    pub unsited: Unsited,
}

/// One creation site's live objects.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SiteTotals {
    /// The objects' kind (`cl_mem`, ...).
    pub kind: String,
    /// The caller's stack at the create call, innermost first.
    pub frames: Vec<SiteFrame>,
    /// Objects created here that are alive now.
    pub live: u64,
    /// Their requested bytes.
    pub live_bytes: u64,
    /// Objects created here since the library was loaded.
    pub created: u64,
}

/// Objects that were counted without a creation site, by the cap that stopped it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Unsited {
    /// Created at a new site while [`MAX_SITES`] sites were known.
    pub sites_full: u64,
    /// Created while [`MAX_SITED_OBJECTS`] objects with a site were alive.
    pub objects_full: u64,
}

/// Current layout version of [`Snapshot`] (2: creation sites).
pub const SNAPSHOT_VERSION: u32 = 2;

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
        /// Its creation site.
        site: Option<u32>,
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
    site: Option<u32>,
}

#[derive(Debug, Clone, Copy)]
struct Site {
    kind: Kind,
    stack: Stack,
    live: u64,
    live_bytes: u64,
    created: u64,
}

#[derive(Debug, Default)]
struct State {
    objects: FxHashMap<usize, Entry>,
    totals: [KindTotals; Kind::ALL.len()],
    untracked_calls: u64,
    site_ids: FxHashMap<(Kind, Stack), u32>,
    sites: Vec<Site>,
    sited_live: usize,
    unsited: Unsited,
}

impl State {
    /// The site for a new object of `kind` made from `stack`, or none past a cap (counted).
    fn site_for(&mut self, caps: (usize, usize), kind: Kind, stack: &Stack) -> Option<u32> {
        if self.sited_live >= caps.1 {
            self.unsited.objects_full += 1;
            return None;
        }
        let id = match self.site_ids.get(&(kind, *stack)) {
            Some(id) => *id,
            None if self.sites.len() >= caps.0 => {
                self.unsited.sites_full += 1;
                return None;
            }
            None => {
                let id = self.sites.len() as u32;
                self.sites.push(Site {
                    kind,
                    stack: *stack,
                    live: 0,
                    live_bytes: 0,
                    created: 0,
                });
                self.site_ids.insert((kind, *stack), id);
                id
            }
        };
        self.sites[id as usize].created += 1;
        Some(id)
    }

    /// An object of `bytes` made at `site` became alive (`+1`) or went away (`-1`).
    fn site_live(&mut self, site: Option<u32>, bytes: u64, alive: bool) {
        let Some(site) = site.and_then(|id| self.sites.get_mut(id as usize)) else {
            return;
        };
        if alive {
            site.live += 1;
            site.live_bytes += bytes;
            self.sited_live += 1;
        } else {
            site.live -= 1;
            site.live_bytes -= bytes;
            self.sited_live -= 1;
        }
    }
}

/// The thread-safe registry of live objects.
#[derive(Debug)]
pub struct Registry {
    state: Mutex<Option<State>>,
    /// Distinct sites and live objects with a site, at most.
    caps: (usize, usize),
}

impl Default for Registry {
    fn default() -> Self {
        Self::new()
    }
}

impl Registry {
    /// An empty registry (const, so it can be a `static`).
    pub const fn new() -> Self {
        Self::with_caps(MAX_SITES, MAX_SITED_OBJECTS)
    }

    /// An empty registry that keeps at most `sites` distinct creation sites and `objects` live
    /// objects with a site (the process-wide one uses [`MAX_SITES`] and [`MAX_SITED_OBJECTS`]).
    pub const fn with_caps(sites: usize, objects: usize) -> Self {
        Self {
            state: Mutex::new(None),
            caps: (sites, objects),
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
        self.created_at(kind, handle, bytes, &Stack::default());
    }

    /// As [`Registry::created`], with the caller's stack at the create call as its site.
    pub fn created_at(&self, kind: Kind, handle: usize, bytes: u64, stack: &Stack) {
        if handle == 0 {
            return;
        }
        let caps = self.caps;
        self.with(|s| {
            if let Some(old) = s.objects.remove(&handle) {
                s.site_live(old.site, old.bytes, false);
                let t = &mut s.totals[old.kind.index()];
                t.released += 1;
                t.live -= 1;
                t.live_bytes -= old.bytes;
            }
            let site = s.site_for(caps, kind, stack);
            s.site_live(site, bytes, true);
            s.objects.insert(
                handle,
                Entry {
                    kind,
                    refs: 1,
                    bytes,
                    site,
                },
            );
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
            s.site_live(entry.site, entry.bytes, false);
            ReleaseToken::Removed {
                handle,
                kind,
                bytes: entry.bytes,
                site: entry.site,
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
                site,
            } => {
                s.objects.insert(
                    handle,
                    Entry {
                        kind,
                        refs: 1,
                        bytes,
                        site,
                    },
                );
                s.site_live(site, bytes, true);
                let t = &mut s.totals[kind.index()];
                t.releases -= 1;
                t.released -= 1;
                t.live += 1;
                t.live_bytes += bytes;
            }
        });
    }

    /// A consistent copy of the totals, with the sites that hold live objects (resolved after
    /// the lock is let go: `dladdr` takes the loader's lock, which a thread inside a create call
    /// made from a library constructor would hold while waiting for ours).
    pub fn snapshot(&self) -> Snapshot {
        let (mut snapshot, mut live_sites) = self.with(|s| {
            let snapshot = Snapshot {
                version: SNAPSHOT_VERSION,
                kinds: Kind::ALL
                    .iter()
                    .map(|k| (k.name().to_owned(), s.totals[k.index()]))
                    .collect(),
                untracked_calls: s.untracked_calls,
                sites: Vec::new(),
                unsited: s.unsited,
            };
            let live: Vec<Site> = s
                .sites
                .iter()
                .filter(|site| site.live > 0)
                .copied()
                .collect();
            (snapshot, live)
        });
        live_sites.sort_by(|a, b| b.live.cmp(&a.live).then(b.live_bytes.cmp(&a.live_bytes)));
        snapshot.sites = live_sites
            .iter()
            .map(|site| SiteTotals {
                kind: site.kind.name().to_owned(),
                frames: site.stack.addresses().iter().map(|a| resolve(*a)).collect(),
                live: site.live,
                live_bytes: site.live_bytes,
                created: site.created,
            })
            .collect();
        snapshot
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

    fn site(r: &Registry, kind: &str, first: usize) -> Option<SiteTotals> {
        r.snapshot()
            .sites
            .into_iter()
            .find(|s| s.kind == kind && s.frames.first().map(|f| f.address) == Some(first as u64))
    }

    #[test]
    fn a_site_holds_its_live_objects_until_their_last_release() {
        let r = Registry::new();
        let here = Stack::of(&[0x1111, 0x2222]);
        let there = Stack::of(&[0x3333]);
        r.created_at(Kind::Mem, 0x10, 100, &here);
        r.created_at(Kind::Mem, 0x20, 50, &here);
        r.created_at(Kind::Mem, 0x30, 7, &there);
        r.created_at(Kind::Kernel, 0x40, 0, &here);
        let s = site(&r, "cl_mem", 0x1111).unwrap();
        assert_eq!((s.live, s.live_bytes, s.created), (2, 150, 2));
        assert_eq!(s.frames.len(), 2);
        assert_eq!(
            site(&r, "cl_kernel", 0x1111).unwrap().live,
            1,
            "kinds apart"
        );
        // A retained object stays at its site until its last release.
        r.retained(Kind::Mem, 0x10);
        r.released(Kind::Mem, 0x10);
        assert_eq!(site(&r, "cl_mem", 0x1111).unwrap().live, 2);
        r.released(Kind::Mem, 0x10);
        let s = site(&r, "cl_mem", 0x1111).unwrap();
        assert_eq!((s.live, s.live_bytes), (1, 50));
        // A failed last release puts the object back at its site.
        let token = r.released(Kind::Mem, 0x20);
        assert!(
            site(&r, "cl_mem", 0x1111).is_none(),
            "a site with nothing live is not listed"
        );
        r.revert(token);
        assert_eq!(site(&r, "cl_mem", 0x1111).unwrap().live_bytes, 50);
        // Sites are listed most live objects first.
        r.created_at(Kind::Mem, 0x50, 1, &there);
        assert_eq!(r.snapshot().sites[0].frames[0].address, 0x3333);
    }

    #[test]
    fn past_the_site_cap_objects_are_counted_without_a_site() {
        let r = Registry::with_caps(2, 100);
        for i in 0..4usize {
            r.created_at(Kind::Mem, 0x100 + i, 10, &Stack::of(&[0x9000 + i]));
        }
        // A known site still takes new objects.
        r.created_at(Kind::Mem, 0x200, 10, &Stack::of(&[0x9000]));
        let s = r.snapshot();
        assert_eq!(s.sites.len(), 2);
        assert_eq!(
            s.unsited,
            Unsited {
                sites_full: 2,
                objects_full: 0
            }
        );
        assert_eq!(
            s.kinds["cl_mem"].live, 5,
            "the kind's totals count every object"
        );
        assert_eq!(s.sites.iter().map(|s| s.live).sum::<u64>(), 3);
    }

    #[test]
    fn past_the_object_cap_objects_are_counted_without_a_site_until_some_go() {
        let r = Registry::with_caps(10, 2);
        let here = Stack::of(&[0x7000]);
        for h in [0x1, 0x2, 0x3] {
            r.created_at(Kind::Mem, h, 1, &here);
        }
        assert_eq!(r.snapshot().unsited.objects_full, 1);
        // The unsited object's release touches no site; a sited one's frees room.
        r.released(Kind::Mem, 0x3);
        r.released(Kind::Mem, 0x1);
        r.created_at(Kind::Mem, 0x4, 1, &here);
        let s = r.snapshot();
        assert_eq!(s.sites[0].live, 2);
        assert_eq!(s.unsited.objects_full, 1);
        assert_eq!(s.kinds["cl_mem"].live, 2);
    }

    #[test]
    fn an_address_reused_without_release_leaves_its_old_site() {
        let r = Registry::new();
        r.created_at(Kind::Mem, 0x60, 8, &Stack::of(&[0xa]));
        r.created_at(Kind::Mem, 0x60, 9, &Stack::of(&[0xb]));
        assert!(site(&r, "cl_mem", 0xa).is_none());
        assert_eq!(site(&r, "cl_mem", 0xb).unwrap().live_bytes, 9);
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
