//! An OpenCL call interposer that counts every object an application creates, retains and
//! releases, so that a leak shows up as live objects and bytes per kind at the API level.
//!
//! Built as a shared library (`libcl_interposer.so`) it exports the whole OpenCL entry-point set:
//! the create/retain/release calls are counted in a [`Registry`] and forwarded to the real
//! library (see [`real`] for how it is found); everything else jumps straight through. A process
//! loads it either
//! - in place of `libOpenCL.so.1` (e.g. `OPENCL_DYLIB_PATH` for programs built on `opencl3`, or
//!   installed under the name `libOpenCL.so` with `LEAKLOOP_CL_REAL_LIB` naming the real one), or
//! - with `LD_PRELOAD`, for programs linked against `libOpenCL`.
//!
//! The process reads the totals whenever it wants through `leakloop_cl_snapshot` (C ABI, JSON),
//! typically at every turn boundary of a leak test.
#![warn(missing_docs)]

mod extensions;
mod forward;
pub mod real;
mod registry;
pub mod sites;
mod snapshot;
mod symbols;
mod tracked;

pub use registry::{
    Kind, KindTotals, Registry, ReleaseToken, SiteTotals, Snapshot, Unsited, MAX_SITED_OBJECTS,
    MAX_SITES, SNAPSHOT_VERSION,
};
pub use snapshot::{leakloop_cl_snapshot, snapshot_json};

/// The process-wide registry behind the exported entry points.
pub static REGISTRY: Registry = Registry::new();

/// The exported C symbol that returns a snapshot, for callers that look it up with `dlsym`.
pub const SNAPSHOT_SYMBOL: &str = "leakloop_cl_snapshot";
