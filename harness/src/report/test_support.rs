//! Helpers for the report module's tests.

use std::path::{Path, PathBuf};

/// What a planted symlink points at: a file that must stay untouched.
pub(crate) const PRECIOUS: &str = "precious";

/// Plants `folder/name` as a symlink to a victim file (created beside `folder`, holding
/// [`PRECIOUS`]) and returns the victim's path.
pub(crate) fn plant_symlink(folder: &Path, name: &str) -> PathBuf {
    let parent = folder.parent().expect("a folder with a parent");
    let victim = parent.join(format!("victim-{name}"));
    std::fs::write(&victim, PRECIOUS).unwrap();
    std::fs::create_dir_all(folder).unwrap();
    std::os::unix::fs::symlink(&victim, folder.join(name)).unwrap();
    victim
}
