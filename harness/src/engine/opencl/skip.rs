//! The guard every test that needs OpenCL goes through: it says plainly when no platform is
//! there, and turns that into a failure where the platform is required (CI).

use std::io::Write;

use crate::engine::opencl::runtime::probe_platform;

/// Environment variable that makes a missing OpenCL platform a test failure.
pub const REQUIRE_OPENCL_ENV: &str = "LEAKLOOP_REQUIRE_OPENCL";

/// Returns whether an OpenCL platform is usable. Without one it prints
/// `SKIPPED: no OpenCL platform (install pocl-opencl-icd)` with `test` and the reason and returns
/// false, or panics when `LEAKLOOP_REQUIRE_OPENCL=1`.
pub fn opencl_available_or_skip(test: &str) -> bool {
    match probe_platform() {
        Ok(_) => true,
        Err(why) => {
            if std::env::var(REQUIRE_OPENCL_ENV).is_ok_and(|v| v == "1") {
                panic!("{test}: no OpenCL platform ({why}) but {REQUIRE_OPENCL_ENV}=1");
            }
            // Written to the stderr handle, not with eprintln!, so that the test harness's output
            // capture does not hide it for a test that returns normally.
            let _ = writeln!(
                std::io::stderr(),
                "SKIPPED: no OpenCL platform (install pocl-opencl-icd): {test}: {why}"
            );
            false
        }
    }
}
