//! The Python-binding driver (`drivers/litert_lm_python.py`) under its own tests
//! (`drivers/tests/`), run from `cargo test`: the protocol checks always, the tiny model through
//! LiteRT-LM's Python package when `litert_lm` is installed. A missing `python3` or package shows
//! as `SKIPPED: ...`, and fails the test with `LEAKLOOP_REQUIRE_ENGINE=1` (CI installs both).

use std::process::Command;

use device_tests::{repo_root, REQUIRE_ENV};
use leakloop::engine::skip_or_require;

const INSTALL: &str = "python3 -m pip install litert-lm-api==0.18.1";

#[test]
fn the_driver_passes_its_own_tests() {
    let root = repo_root();
    let run = Command::new("python3")
        .args(["-m", "unittest", "discover", "-s", "drivers/tests", "-v"])
        .current_dir(&root)
        .output();
    let out = match run {
        Ok(out) => out,
        Err(e) => {
            skip_or_require(
                REQUIRE_ENV,
                &format!("the_driver_passes_its_own_tests: cannot run python3 ({e}); install Python 3.11"),
            );
            return;
        }
    };
    // unittest reports on stderr; the library's own log lines are left out of the message.
    let report: String = String::from_utf8_lossy(&out.stderr)
        .lines()
        .filter(|l| {
            !l.starts_with(['I', 'W', 'E']) || l.starts_with("ERROR") || l.contains(" ... ")
        })
        .collect::<Vec<_>>()
        .join("\n");
    assert!(
        out.status.success(),
        "drivers/tests failed ({}):\n{report}",
        out.status
    );
    let ran = report
        .lines()
        .find_map(|l| {
            l.strip_prefix("Ran ")?
                .split(' ')
                .next()?
                .parse::<u32>()
                .ok()
        })
        .unwrap_or(0);
    assert!(
        ran >= 10,
        "expected the driver's tests to run, saw {ran}:\n{report}"
    );
    if let Some(reason) = report
        .lines()
        .find_map(|l| l.split("skipped 'SKIPPED: ").nth(1))
    {
        // Only reached without LEAKLOOP_REQUIRE_ENGINE=1: with it the tests fail instead.
        skip_or_require(
            REQUIRE_ENV,
            &format!(
                "drivers/tests engine checks: {} ({INSTALL})",
                reason
                    .trim_end_matches('\'')
                    .split(" (")
                    .next()
                    .unwrap_or(reason)
            ),
        );
    }
}
