//! The reference OpenCL engine (backend `opencl`): a real, small decoder-like workload whose
//! OpenCL objects are counted by the engine itself and, when loaded, by the OpenCL interposer.
//!
//! OpenCL is loaded at run time (`opencl3`'s dynamic loading), so leakloop runs on machines
//! without it; `OPENCL_DYLIB_PATH` can point the engine at the interposer instead of
//! `libOpenCL.so.1` (see [`interposer_env`]).

mod engine;
mod interposer;
mod kernels;
mod profile;
mod runtime;
mod shim;
mod skip;
#[cfg(test)]
mod tests;
mod workload;

pub use engine::{kinds, OpenClEngine, CL_MEM_BYTES, ENGINE_BUFFER_BYTES};
pub use interposer::{
    find_interposer, interposer_env, preload_env, ClKindTotals, ClSnapshot, LoadedInterposer,
    INTERPOSER_ENV, INTERPOSER_FILE, MMAP_THRESHOLD_TUNABLE,
};
pub use profile::OpenClProfile;
pub use runtime::probe_platform;
pub use shim::{opencl_name_shim, OpenClNameShim, OPENCL_SONAME};
pub use skip::{opencl_available_or_skip, REQUIRE_OPENCL_ENV};
