//! Helpers shared by the modules of this test binary.

use std::path::{Path, PathBuf};

/// The workspace root (the repository), where fixtures, docs and golden snapshots live.
pub(crate) fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("harness sits in the workspace")
        .to_owned()
}
