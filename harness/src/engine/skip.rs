//! How a test that needs an engine, a library or a platform it does not find says so: a
//! `SKIPPED: ...` line that a plain `cargo test` shows, or a failure where the resource is
//! required (CI sets the `LEAKLOOP_REQUIRE_*` variables).

use std::io::Write;

/// Reports that a test cannot run for want of a resource: panics when the environment variable
/// `require_env` is `1`, else prints `SKIPPED: {message}`.
///
/// The line is written to the stderr handle, not with `eprintln!`: the test harness captures
/// what the print macros write and shows it only for failing tests, which would hide the skip
/// of a test that returns normally.
pub fn skip_or_require(require_env: &str, message: &str) {
    if std::env::var(require_env).is_ok_and(|v| v == "1") {
        panic!("SKIPPED: {message}; {require_env}=1 forbids skipping");
    }
    let _ = writeln!(std::io::stderr(), "SKIPPED: {message}");
}
