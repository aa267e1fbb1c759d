//! The reference OpenCL engine (backend `opencl`): a real, small decoder-like workload whose
//! OpenCL objects are counted by the engine itself and, when loaded, by the OpenCL interposer.
//!
//! OpenCL is loaded at run time (`opencl3`'s dynamic loading), so leakloop runs on machines
//! without it; `OPENCL_DYLIB_PATH` can point the engine at the interposer instead of
//! `libOpenCL.so.1` (see [`interposer_env`]).
//!
//! Android builds leave the engine out: `opencl3`'s loader (`dlopen2` 0.9) does not compile for
//! Android, so there the backend answers that it is unavailable (see [`probe_platform`]).

#[cfg(not(target_os = "android"))]
mod engine;
mod interposer;
#[cfg(not(target_os = "android"))]
mod kernels;
mod names;
mod profile;
#[cfg(not(target_os = "android"))]
mod runtime;
mod shim;
mod skip;
mod symbols;
#[cfg(all(test, not(target_os = "android")))]
mod tests;
#[cfg(not(target_os = "android"))]
mod workload;

#[cfg(not(target_os = "android"))]
pub use engine::OpenClEngine;
pub use interposer::{
    find_interposer, interposer_env, preload_env, ClKindTotals, ClSiteFrame, ClSiteTotals,
    ClSnapshot, ClUnsited, LoadedInterposer, INTERPOSER_ENV, INTERPOSER_FILE,
    MMAP_THRESHOLD_TUNABLE,
};
pub use names::{kinds, CL_MEM_BYTES, ENGINE_BUFFER_BYTES};
pub use profile::OpenClProfile;
#[cfg(not(target_os = "android"))]
pub use runtime::probe_platform;
pub use shim::{opencl_name_shim, OpenClNameShim, OPENCL_SONAME};
pub use skip::{opencl_available_or_skip, REQUIRE_OPENCL_ENV};

/// Why the reference OpenCL engine is not in this build.
#[cfg(target_os = "android")]
pub const NOT_BUILT: &str = "the reference OpenCL engine is not built for Android: its OpenCL \
                             loader (the dlopen2 crate, 0.9) does not compile there";

/// Whether an OpenCL platform is usable: never in an Android build, which has no engine.
#[cfg(target_os = "android")]
pub fn probe_platform() -> Result<String, String> {
    Err(NOT_BUILT.to_string())
}
