//! The guard every test that needs OpenCL goes through: it says plainly when no platform is
//! there, and turns that into a failure where the platform is required (CI).

use crate::engine::opencl::probe_platform;
use crate::engine::skip_or_require;

/// Environment variable that makes a missing OpenCL platform a test failure.
pub const REQUIRE_OPENCL_ENV: &str = "LEAKLOOP_REQUIRE_OPENCL";

/// Returns whether an OpenCL platform is usable. Without one it prints
/// `SKIPPED: no OpenCL platform (install pocl-opencl-icd)` with `test` and the reason and returns
/// false, or panics when `LEAKLOOP_REQUIRE_OPENCL=1`.
pub fn opencl_available_or_skip(test: &str) -> bool {
    match probe_platform() {
        Ok(_) => true,
        Err(why) => {
            skip_or_require(
                REQUIRE_OPENCL_ENV,
                &format!("no OpenCL platform (install pocl-opencl-icd): {test}: {why}"),
            );
            false
        }
    }
}
