//! Helpers shared by the modules of this test binary.

use std::path::{Path, PathBuf};
use std::process::Output;

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
