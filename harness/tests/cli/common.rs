//! Helpers shared by the modules of this test binary.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

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

/// Runs the leakloop binary with `args` (colours off) and waits for it.
pub(crate) fn leakloop(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_leakloop"))
        .args(args)
        .env("NO_COLOR", "1")
        .output()
        .expect("the leakloop binary runs")
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
