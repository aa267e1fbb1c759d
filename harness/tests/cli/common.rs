//! Helpers shared by the modules of this test binary.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

/// The leakloop binary that cargo built for this test run.
pub(crate) const LEAKLOOP: &str = env!("CARGO_BIN_EXE_leakloop");

/// The workspace root (the repository), where fixtures, docs and golden snapshots live.
pub(crate) fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("harness sits in the workspace")
        .to_owned()
}

/// A finished command's stdout followed by its stderr, as text (for assertions and messages).
pub(crate) fn stdout_and_stderr(output: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

/// A finished command's stdout and stderr, as text, apart.
pub(crate) fn streams(output: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

/// A command that starts the leakloop binary with colours off; the caller adds arguments,
/// environment and pipes (a test that wants colours removes `NO_COLOR` again).
pub(crate) fn leakloop_command() -> Command {
    let mut command = Command::new(LEAKLOOP);
    command.env("NO_COLOR", "1");
    command
}

/// Runs `leakloop driver-check --model MODEL --option OPTION -- python3 DRIVER` from the
/// workspace and checks that the driver refused the option: exit 3 (bad input) with `message`.
pub(crate) fn assert_driver_refuses_option(model: &str, driver: &str, option: &str, message: &str) {
    let output = leakloop_command()
        .args(["driver-check", "--model", model, "--option", option])
        .args(["--", "python3", driver])
        .current_dir(workspace())
        .output()
        .expect("leakloop runs");
    let shown = stdout_and_stderr(&output);
    assert_eq!(output.status.code(), Some(3), "{shown}");
    assert!(shown.contains(message), "{shown}");
}

/// Runs the leakloop binary with `args` (colours off) and waits for it.
pub(crate) fn leakloop(args: &[&str]) -> Output {
    leakloop_command()
        .args(args)
        .output()
        .expect("the leakloop binary runs")
}

/// Polls `condition` every 20 ms until it holds (true) or `timeout` has passed (false).
///
/// The timeout is a hang guard for waits on another process, never a timing assertion: choose
/// one far above the expected wait.
pub(crate) fn poll(timeout: Duration, mut condition: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    loop {
        if condition() {
            return true;
        }
        if Instant::now() > deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// [`poll`]s `condition` and fails the test, naming `what` it waited for, when it has not held
/// within `timeout` (a hang guard, not a timing assertion).
pub(crate) fn wait_until(what: &str, timeout: Duration, condition: impl FnMut() -> bool) {
    assert!(
        poll(timeout, condition),
        "gave up after {timeout:?} waiting for {what}"
    );
}

/// Where the report.json at `path` departs from docs/report.schema.json (empty when it is valid).
pub(crate) fn report_schema_errors(path: &Path) -> Vec<String> {
    let read_json = |path: &Path| -> serde_json::Value {
        let text =
            std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
    };
    let schema = read_json(&workspace().join("docs/report.schema.json"));
    let validator = jsonschema::validator_for(&schema).expect("the report schema compiles");
    let written = read_json(path);
    validator
        .iter_errors(&written)
        .map(|e| e.to_string())
        .collect()
}

/// How many samples the run folder `out` has streamed into its sample store so far (0 while it
/// has none).
pub(crate) fn streamed_samples(out: &Path) -> usize {
    leakloop::report::read_folder_samples(out)
        .ok()
        .flatten()
        .map_or(0, |s| s.samples.len())
}
