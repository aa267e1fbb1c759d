//! Finding `liblitert-lm.so` and its version.
//!
//! The library comes from LiteRT-LM's Python wheel (`ci/fetch-litert-lm.sh` unpacks it into
//! `target/litert-lm/<version>/`). The order of precedence is: an explicit path (the scenario's
//! `engine.lib` or `--lib`), then the `LITERT_LM_LIB` environment variable, then the newest
//! version folder under a `target/litert-lm/` that belongs to this binary: the one of the
//! workspace it was built in (where the fetch script puts libraries), then the one of the cargo
//! target folder that holds the running executable. Nothing else is searched: not the working
//! directory nor any folder above it, where anyone who can write there (`/tmp/target/...`) could
//! plant a library that would run inside leakloop. The version that ran goes into every report
//! with where the library came from, read from the wheel's metadata next to the library where
//! there is one, else from the folder name.

use std::cmp::Ordering;
use std::path::{Path, PathBuf};

/// Environment variable that points at a `liblitert-lm.so` (or a folder holding one).
pub const LIB_ENV: &str = "LITERT_LM_LIB";

/// File name of the library inside a fetched folder or an unpacked wheel: the macOS wheel ships
/// `litert_lm/liblitert-lm.dylib` (whose install name is still `@rpath/liblitert-lm.so`), the
/// Linux wheels `litert_lm/liblitert-lm.so`.
#[cfg(target_os = "macos")]
pub const LIB_FILE: &str = "liblitert-lm.dylib";
/// File name of the library inside a fetched folder or an unpacked wheel: the macOS wheel ships
/// `litert_lm/liblitert-lm.dylib` (whose install name is still `@rpath/liblitert-lm.so`), the
/// Linux wheels `litert_lm/liblitert-lm.so`.
#[cfg(not(target_os = "macos"))]
pub const LIB_FILE: &str = "liblitert-lm.so";

/// How to get the library, as printed whenever it is missing.
#[cfg(target_os = "macos")]
pub const FETCH_HINT: &str =
    "fetch it with `ci/fetch-litert-lm.sh [VERSION|nightly]`, or point `--lib`, `engine.lib` or \
     LITERT_LM_LIB at a liblitert-lm.dylib";
/// How to get the library, as printed whenever it is missing.
#[cfg(not(target_os = "macos"))]
pub const FETCH_HINT: &str =
    "fetch it with `ci/fetch-litert-lm.sh [VERSION|nightly]`, or point `--lib`, `engine.lib` or \
     LITERT_LM_LIB at a liblitert-lm.so";

/// Where a library was found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LibrarySource {
    /// Given explicitly (`--lib` or the scenario's `engine.lib`).
    Explicit,
    /// From the `LITERT_LM_LIB` environment variable.
    Environment,
    /// The newest folder under `target/litert-lm/` of the workspace this binary was built in.
    Workspace,
    /// The newest folder under `litert-lm/` of the cargo target folder holding this executable.
    Executable,
}

impl LibrarySource {
    /// A short word for reports.
    pub fn as_str(&self) -> &'static str {
        match self {
            LibrarySource::Explicit => "explicit",
            LibrarySource::Environment => "env",
            LibrarySource::Workspace => "workspace",
            LibrarySource::Executable => "executable",
        }
    }
}

/// A LiteRT-LM library on disk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LibraryLocation {
    /// Path of the shared library.
    pub path: PathBuf,
    /// Its version (from the wheel's metadata, else the folder name, else `unknown`).
    pub version: String,
    /// How it was found.
    pub source: LibrarySource,
}

/// The library could not be found.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("LiteRT-LM library not found: {reason}; {FETCH_HINT}")]
pub struct DiscoverError {
    /// What was looked at and why it did not do.
    pub reason: String,
}

/// Finds the library: `explicit` first, then `LITERT_LM_LIB`, then the newest fetched version in
/// a folder this binary owns (see the module's documentation).
pub fn discover_library(explicit: Option<&Path>) -> Result<LibraryLocation, DiscoverError> {
    let env = std::env::var_os(LIB_ENV).map(PathBuf::from);
    let exe = std::env::current_exe().ok();
    let roots = owned_roots(build_workspace(), exe.as_deref());
    discover_in(explicit, env.as_deref(), &roots)
}

/// [`discover_library`] with the environment and the search roots given, for tests.
pub(crate) fn discover_in(
    explicit: Option<&Path>,
    env: Option<&Path>,
    roots: &[(PathBuf, LibrarySource)],
) -> Result<LibraryLocation, DiscoverError> {
    if let Some(path) = explicit {
        return resolve_given(path, LibrarySource::Explicit, "the given library path");
    }
    if let Some(path) = env.filter(|p| !p.as_os_str().is_empty()) {
        return resolve_given(path, LibrarySource::Environment, LIB_ENV);
    }
    let mut looked = Vec::new();
    for (root, source) in roots {
        looked.push(root.display().to_string());
        if let Some((path, version)) = newest_in(root) {
            return Ok(LibraryLocation {
                path,
                version,
                source: *source,
            });
        }
    }
    Err(DiscoverError {
        reason: format!(
            "no --lib, no {LIB_ENV}, and no version folder holding {LIB_FILE} under {}",
            if looked.is_empty() {
                "this build's target/litert-lm/".to_owned()
            } else {
                looked.join(", ")
            }
        ),
    })
}

fn resolve_given(
    path: &Path,
    source: LibrarySource,
    what: &str,
) -> Result<LibraryLocation, DiscoverError> {
    let file = if path.is_dir() {
        path.join(LIB_FILE)
    } else {
        path.to_path_buf()
    };
    if !file.is_file() {
        return Err(DiscoverError {
            reason: format!("{what} `{}` is not a file", file.display()),
        });
    }
    Ok(LibraryLocation {
        version: version_of(&file),
        path: file,
        source,
    })
}

/// The workspace this binary was built in (the harness crate's parent folder).
fn build_workspace() -> Option<&'static Path> {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent()
}

/// How many folders above the executable its cargo target folder may be
/// (`target/<triple>/<profile>/deps/<test binary>`).
const EXE_TARGET_DEPTH: usize = 4;

/// The fetch folders this binary owns, in order: `<workspace>/target/litert-lm` of the workspace
/// it was built in, then `<target>/litert-lm` of the folder named `target` that holds `exe`
/// (within [`EXE_TARGET_DEPTH`] levels). Only folders that exist are listed.
fn owned_roots(workspace: Option<&Path>, exe: Option<&Path>) -> Vec<(PathBuf, LibrarySource)> {
    let mut roots: Vec<(PathBuf, LibrarySource)> = Vec::new();
    let mut add = |dir: PathBuf, source| {
        if dir.is_dir() && !roots.iter().any(|(d, _)| same_dir(d, &dir)) {
            roots.push((dir, source));
        }
    };
    if let Some(workspace) = workspace {
        add(
            workspace.join("target").join("litert-lm"),
            LibrarySource::Workspace,
        );
    }
    if let Some(target) = exe.and_then(|exe| {
        exe.ancestors()
            .skip(1)
            .take(EXE_TARGET_DEPTH)
            .find(|d| d.file_name().is_some_and(|n| n == "target"))
    }) {
        add(target.join("litert-lm"), LibrarySource::Executable);
    }
    roots
}

/// Every fetched version (one per version, from the first folder that holds it), oldest first:
/// the builds `leakloop bisect` can run without fetching.
pub fn fetched_libraries() -> Vec<LibraryLocation> {
    let exe = std::env::current_exe().ok();
    let mut found: Vec<LibraryLocation> = Vec::new();
    for (root, source) in owned_roots(build_workspace(), exe.as_deref()) {
        let Ok(entries) = std::fs::read_dir(&root) else {
            continue;
        };
        for name in entries
            .filter_map(Result::ok)
            .filter(|e| e.path().join(LIB_FILE).is_file())
            .filter_map(|e| e.file_name().into_string().ok())
        {
            let path = root.join(&name).join(LIB_FILE);
            let version = metadata_version(&root.join(&name)).unwrap_or(name);
            if !found.iter().any(|l| l.version == version) {
                found.push(LibraryLocation {
                    path,
                    version,
                    source,
                });
            }
        }
    }
    found.sort_by(|a, b| compare_versions(&a.version, &b.version));
    found
}

/// Whether two paths name the same folder (through links and `..`).
fn same_dir(a: &Path, b: &Path) -> bool {
    match (a.canonicalize(), b.canonicalize()) {
        (Ok(a), Ok(b)) => a == b,
        _ => a == b,
    }
}

/// The newest version folder under `root` that holds the library.
fn newest_in(root: &Path) -> Option<(PathBuf, String)> {
    let entries = std::fs::read_dir(root).ok()?;
    entries
        .filter_map(Result::ok)
        .filter(|e| e.path().join(LIB_FILE).is_file())
        .filter_map(|e| e.file_name().into_string().ok())
        .max_by(|a, b| compare_versions(a, b))
        .map(|name| {
            let path = root.join(&name).join(LIB_FILE);
            let version = metadata_version(path.parent()?).unwrap_or(name);
            Some((path, version))
        })?
}

/// The version of a library file: the wheel metadata beside it, else its folder's name when that
/// looks like a version, else `unknown`.
fn version_of(file: &Path) -> String {
    let Some(dir) = file.parent() else {
        return "unknown".into();
    };
    if let Some(v) = metadata_version(dir) {
        return v;
    }
    // An unpacked wheel: <root>/litert_lm/liblitert-lm.so next to <root>/*.dist-info/METADATA.
    if let Some(v) = dir.parent().and_then(dist_info_version) {
        return v;
    }
    match dir.file_name().and_then(|n| n.to_str()) {
        Some(name) if name.starts_with(|c: char| c.is_ascii_digit()) => name.to_owned(),
        _ => "unknown".into(),
    }
}

/// `Version:` from a `METADATA` file in `dir` (as the fetch script leaves it).
fn metadata_version(dir: &Path) -> Option<String> {
    let text = std::fs::read_to_string(dir.join("METADATA")).ok()?;
    parse_metadata_version(&text)
}

fn dist_info_version(root: &Path) -> Option<String> {
    std::fs::read_dir(root)
        .ok()?
        .filter_map(Result::ok)
        .filter(|e| {
            e.file_name()
                .to_str()
                .is_some_and(|n| n.starts_with("litert_lm") && n.ends_with(".dist-info"))
        })
        .find_map(|e| metadata_version(&e.path()))
}

pub(crate) fn parse_metadata_version(text: &str) -> Option<String> {
    text.lines()
        .find_map(|l| l.strip_prefix("Version:"))
        .map(|v| v.trim().to_owned())
        .filter(|v| !v.is_empty())
}

/// Orders version folder names the way Python versions order: release numbers compared
/// numerically, a `.devN` build before the release it leads to; names that are not versions sort
/// first.
pub fn compare_versions(a: &str, b: &str) -> Ordering {
    version_key(a).cmp(&version_key(b))
}

/// (is a version, release numbers, dev: None sorts after Some).
fn version_key(name: &str) -> (bool, Vec<u64>, DevRank) {
    let mut release = Vec::new();
    let mut dev = DevRank::Release;
    for part in name.split('.') {
        if let Ok(n) = part.parse::<u64>() {
            if dev == DevRank::Release {
                release.push(n);
            }
        } else if let Some(n) = part.strip_prefix("dev") {
            dev = DevRank::Dev(n.parse().unwrap_or(0));
        } else {
            break;
        }
    }
    (!release.is_empty(), release, dev)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum DevRank {
    Dev(u64),
    Release,
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;

    #[rstest]
    #[case::numeric_not_lexical("0.9.0", "0.18.1", Ordering::Less)]
    #[case::nightly_after_older_release("0.19.0.dev20261026", "0.18.1", Ordering::Greater)]
    #[case::nightly_before_its_release("0.19.0.dev20261026", "0.19.0", Ordering::Less)]
    #[case::later_nightly("0.19.0.dev20261027", "0.19.0.dev20261026", Ordering::Greater)]
    #[case::junk_first("notes", "0.1.0", Ordering::Less)]
    fn versions_order_like_python(#[case] a: &str, #[case] b: &str, #[case] want: Ordering) {
        assert_eq!(compare_versions(a, b), want);
    }

    fn fake_lib(dir: &Path, metadata: Option<&str>) -> PathBuf {
        std::fs::create_dir_all(dir).unwrap();
        let lib = dir.join(LIB_FILE);
        std::fs::write(&lib, b"not really elf").unwrap();
        if let Some(v) = metadata {
            std::fs::write(dir.join("METADATA"), format!("Name: x\nVersion: {v}\n")).unwrap();
        }
        lib
    }

    #[test]
    fn picks_the_newest_fetched_folder_and_its_metadata_version() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("litert-lm");
        fake_lib(&root.join("0.9.0"), None);
        let want = fake_lib(&root.join("0.18.1"), Some("0.18.1"));
        std::fs::create_dir_all(root.join("0.99.0")).unwrap(); // no library inside: skipped
        let found = discover_in(None, None, &[(root, LibrarySource::Workspace)]).unwrap();
        assert_eq!(found.path, want);
        assert_eq!(found.version, "0.18.1");
        assert_eq!(found.source, LibrarySource::Workspace);
    }

    #[test]
    fn explicit_beats_environment_beats_fetched() {
        let tmp = tempfile::tempdir().unwrap();
        let root = (tmp.path().join("litert-lm"), LibrarySource::Workspace);
        fake_lib(&root.0.join("0.18.1"), None);
        let env_lib = fake_lib(&tmp.path().join("env/0.17.0"), None);
        let explicit = fake_lib(&tmp.path().join("mine"), Some("0.20.0"));

        let found =
            discover_in(Some(&explicit), Some(&env_lib), std::slice::from_ref(&root)).unwrap();
        assert_eq!(
            (found.source, found.version.as_str()),
            (LibrarySource::Explicit, "0.20.0")
        );

        let found = discover_in(None, Some(&env_lib), std::slice::from_ref(&root)).unwrap();
        assert_eq!(
            (found.source, found.version.as_str()),
            (LibrarySource::Environment, "0.17.0")
        );

        // A folder works as well as the file inside it.
        let found = discover_in(Some(&tmp.path().join("mine")), None, &[root]).unwrap();
        assert_eq!(found.path, explicit);
    }

    #[test]
    fn unpacked_wheel_reports_its_dist_info_version() {
        let tmp = tempfile::tempdir().unwrap();
        let lib = fake_lib(&tmp.path().join("litert_lm"), None);
        let info = tmp.path().join("litert_lm_api-0.18.1.dist-info");
        std::fs::create_dir_all(&info).unwrap();
        std::fs::write(info.join("METADATA"), "Version: 0.18.1\n").unwrap();
        assert_eq!(version_of(&lib), "0.18.1");
    }

    #[test]
    fn missing_library_says_how_to_fetch_it() {
        let tmp = tempfile::tempdir().unwrap();
        let root = (tmp.path().join("litert-lm"), LibrarySource::Workspace);
        let err = discover_in(None, None, &[root]).unwrap_err();
        let text = err.to_string();
        assert!(text.contains("ci/fetch-litert-lm.sh"), "{text}");
        assert!(text.contains("LITERT_LM_LIB"), "{text}");

        let err = discover_in(Some(Path::new("/nowhere/lib.so")), None, &[]).unwrap_err();
        assert!(err.to_string().contains("/nowhere/lib.so"), "{err}");
    }

    /// Regression: `target/litert-lm/` of every folder above the working directory was searched
    /// first, so a library planted in `/tmp/target/litert-lm/<version>/` ran in a leakloop
    /// started anywhere under /tmp, reported as `fetched`.
    #[test]
    fn only_the_build_workspace_and_the_executables_target_folder_are_searched() {
        let tmp = tempfile::tempdir().unwrap();
        let workspace = tmp.path().join("checkout");
        let exe = workspace.join("target/debug/deps/leakloop-0123");
        std::fs::create_dir_all(workspace.join("target/litert-lm")).unwrap();
        let roots = owned_roots(Some(&workspace), Some(&exe));
        // The workspace's target folder is also the executable's: listed once, as the workspace.
        assert_eq!(
            roots,
            [(workspace.join("target/litert-lm"), LibrarySource::Workspace)]
        );

        // A binary copied out of its build with its target folder beside it.
        let moved = tmp.path().join("moved/target");
        std::fs::create_dir_all(moved.join("litert-lm")).unwrap();
        let roots = owned_roots(
            Some(&tmp.path().join("gone")),
            Some(&moved.join("release/leakloop")),
        );
        assert_eq!(
            roots,
            [(moved.join("litert-lm"), LibrarySource::Executable)]
        );

        // An installed binary has no target folder above it: the `target/litert-lm` planted
        // next to it (or anywhere above it) is not searched.
        let bin = tmp.path().join("bin");
        std::fs::create_dir_all(tmp.path().join("target/litert-lm")).unwrap();
        assert!(owned_roots(None, Some(&bin.join("leakloop"))).is_empty());
    }
}
