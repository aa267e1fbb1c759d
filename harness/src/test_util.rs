//! Helpers shared by the library's unit tests.

/// Runs the test `test_path` (e.g. `engine::sim::tests::some_check`, marked `#[ignore]`) alone
/// in a fresh copy of this test binary, with `env` set to `1` so that it knows it is the child,
/// and fails unless it passed. For checks of process-wide memory (RSS, the C heap), which tests
/// running in parallel threads of this process would disturb.
pub(crate) fn run_alone_in_child(test_path: &str, env: &str) {
    let exe = std::env::current_exe().unwrap();
    let output = std::process::Command::new(exe)
        .args([
            "--exact",
            test_path,
            "--include-ignored",
            "--test-threads=1",
            "--nocapture",
        ])
        .env(env, "1")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success() && stdout.contains("1 passed"),
        "child check failed:\n{stdout}\n{stderr}"
    );
}
