//! Which scenario files a suite run takes: files as named, folders searched for `*.yaml` and
//! `*.yml` (recursively, skipping hidden entries), and glob patterns (`nightly/**/*.yaml`). Each
//! scenario gets its path relative to the suite root (the deepest folder holding them all,
//! written with `/`) and an output folder name derived from it, unique within the suite.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Component, Path, PathBuf};

use crate::cli::suite::partition::fnv1a64;
use crate::cli::CliError;

/// One scenario file of a suite.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SuiteFile {
    /// The file, as found (relative paths stay relative to the working folder).
    pub path: PathBuf,
    /// Its path relative to the suite root, `/` between folders.
    pub relative: String,
    /// Its output folder's name under `--out`.
    pub folder: String,
}

/// Whether a command-line argument is a glob pattern rather than a path: it has `*`, `?` or `[`
/// and names no existing file or folder (a file named `run[1].yaml` is that file).
pub(crate) fn is_pattern(arg: &Path) -> bool {
    arg.to_string_lossy().contains(['*', '?', '[']) && std::fs::symlink_metadata(arg).is_err()
}

/// Expands the arguments into the suite's scenario files, sorted by relative path, each once.
pub(crate) fn expand(args: &[PathBuf]) -> Result<Vec<SuiteFile>, CliError> {
    let mut found: BTreeMap<PathBuf, PathBuf> = BTreeMap::new();
    for arg in args {
        let before = found.len();
        if is_pattern(arg) {
            let pattern = arg.to_string_lossy();
            let paths = glob::glob(&pattern).map_err(|e| {
                CliError::bad_input(format!("`{pattern}` is not a valid pattern: {e}"))
            })?;
            for path in paths {
                let path = path.map_err(|e| CliError::bad_input(format!("{pattern}: {e}")))?;
                add(&path, &mut found, true)?;
            }
            if found.len() == before {
                return Err(CliError::bad_input(format!(
                    "`{pattern}` matches no scenario file"
                )));
            }
        } else {
            add(arg, &mut found, false)?;
            if found.len() == before && arg.is_dir() {
                return Err(CliError::bad_input(format!(
                    "{} holds no scenario file (*.yaml, *.yml)",
                    arg.display()
                )));
            }
        }
    }
    let root = common_root(found.keys());
    let mut files: Vec<SuiteFile> = found
        .into_iter()
        .map(|(absolute, path)| SuiteFile {
            relative: relative_text(&absolute, &root),
            path,
            folder: String::new(),
        })
        .collect();
    files.sort_by(|a, b| a.relative.cmp(&b.relative));
    assign_folders(&mut files);
    Ok(files)
}

/// Adds a file, or a folder's scenario files, keyed by absolute path so that a file named twice
/// runs once. A folder matched by a glob is searched like a named one.
fn add(
    path: &Path,
    found: &mut BTreeMap<PathBuf, PathBuf>,
    from_pattern: bool,
) -> Result<(), CliError> {
    let meta = std::fs::metadata(path).map_err(|e| {
        CliError::bad_input(format!("cannot read scenario {}: {e}", path.display()))
    })?;
    if meta.is_dir() {
        for file in scenario_files_under(path)? {
            found.entry(absolute(&file)).or_insert(file);
        }
    } else if !from_pattern || has_scenario_extension(path) {
        found
            .entry(absolute(path))
            .or_insert_with(|| path.to_owned());
    }
    Ok(())
}

fn has_scenario_extension(path: &Path) -> bool {
    matches!(
        path.extension().and_then(|e| e.to_str()),
        Some("yaml" | "yml")
    )
}

/// The `*.yaml` and `*.yml` files under `dir`, recursively, in name order; entries whose name
/// starts with `.` are skipped.
fn scenario_files_under(dir: &Path) -> Result<Vec<PathBuf>, CliError> {
    let mut out = Vec::new();
    let mut pending = vec![dir.to_owned()];
    while let Some(dir) = pending.pop() {
        let entries = std::fs::read_dir(&dir)
            .map_err(|e| CliError::bad_input(format!("cannot read {}: {e}", dir.display())))?;
        let mut paths: Vec<PathBuf> = entries
            .filter_map(Result::ok)
            .filter(|e| !e.file_name().to_string_lossy().starts_with('.'))
            .map(|e| e.path())
            .collect();
        paths.sort();
        for path in paths {
            if path.is_dir() {
                pending.push(path);
            } else if has_scenario_extension(&path) {
                out.push(path);
            }
        }
    }
    out.sort();
    Ok(out)
}

/// `path` made absolute against the working folder and cleaned of `.` and `..` without touching
/// the file system (symlinks are not resolved: the suite root is what the user wrote).
fn absolute(path: &Path) -> PathBuf {
    let joined = if path.is_absolute() {
        path.to_owned()
    } else {
        std::env::current_dir().unwrap_or_default().join(path)
    };
    let mut clean = PathBuf::new();
    for part in joined.components() {
        match part {
            Component::CurDir => {}
            Component::ParentDir => {
                clean.pop();
            }
            other => clean.push(other),
        }
    }
    clean
}

/// The deepest folder that holds every file.
fn common_root<'a>(files: impl Iterator<Item = &'a PathBuf>) -> PathBuf {
    let mut root: Option<PathBuf> = None;
    for file in files {
        let parent = file.parent().unwrap_or(Path::new("/")).to_owned();
        root = Some(match root {
            None => parent,
            Some(root) => root
                .components()
                .zip(parent.components())
                .take_while(|(a, b)| a == b)
                .map(|(a, _)| a)
                .collect(),
        });
    }
    root.unwrap_or_default()
}

fn relative_text(file: &Path, root: &Path) -> String {
    let relative = file.strip_prefix(root).unwrap_or(file);
    relative
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect::<Vec<_>>()
        .join("/")
}

/// Gives each file an output folder name: its relative path without the extension, folders
/// joined by `--`, characters other than letters, digits, `.`, `_` and `-` replaced by `_`.
/// Names that would clash (also when only their case differs, for case-insensitive file
/// systems) each get `-` and 8 hex digits of their path's hash. Decided over the whole suite,
/// so that every partition names a scenario's folder the same way.
fn assign_folders(files: &mut [SuiteFile]) {
    let base: Vec<String> = files.iter().map(|f| folder_base(&f.relative)).collect();
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    for name in &base {
        *seen.entry(name.to_lowercase()).or_default() += 1;
    }
    let mut taken = BTreeSet::new();
    for (file, name) in files.iter_mut().zip(base) {
        file.folder = if seen[&name.to_lowercase()] > 1 {
            format!(
                "{name}-{:08x}",
                fnv1a64(file.relative.as_bytes()) & 0xffff_ffff
            )
        } else {
            name
        };
        taken.insert(file.folder.to_lowercase());
    }
    debug_assert_eq!(taken.len(), files.len(), "folder names are unique");
}

fn folder_base(relative: &str) -> String {
    let stem = relative
        .strip_suffix(".yaml")
        .or_else(|| relative.strip_suffix(".yml"))
        .unwrap_or(relative);
    let name: String = stem
        .split('/')
        .map(|part| {
            part.chars()
                .map(|c| {
                    if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                        c
                    } else {
                        '_'
                    }
                })
                .collect::<String>()
        })
        .collect::<Vec<_>>()
        .join("--");
    // `.` and `..` would be no folder of their own.
    if name.trim_matches('.').is_empty() {
        format!("_{name}")
    } else {
        name
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn touch(root: &Path, relative: &str) {
        let path = root.join(relative);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, "name: x\n").unwrap();
    }

    fn relatives(files: &[SuiteFile]) -> Vec<(&str, &str)> {
        files
            .iter()
            .map(|f| (f.relative.as_str(), f.folder.as_str()))
            .collect()
    }

    #[test]
    fn folders_are_searched_recursively_for_yaml_files_only() {
        let dir = tempfile::tempdir().unwrap();
        for f in [
            "a.yaml",
            "sub/b.yml",
            "sub/notes.txt",
            ".hidden/c.yaml",
            "sub/.d.yaml",
        ] {
            touch(dir.path(), f);
        }
        let files = expand(&[dir.path().to_owned()]).unwrap();
        assert_eq!(
            relatives(&files),
            [("a.yaml", "a"), ("sub/b.yml", "sub--b")]
        );
    }

    #[test]
    fn files_globs_and_folders_join_into_one_sorted_list_without_repeats() {
        let dir = tempfile::tempdir().unwrap();
        for f in ["x/one.yaml", "x/two.yaml", "y/three.yaml", "y/readme.md"] {
            touch(dir.path(), f);
        }
        let files = expand(&[
            dir.path().join("y"),
            dir.path().join("x/one.yaml"),
            dir.path().join("*/*"),
        ])
        .unwrap();
        assert_eq!(
            relatives(&files),
            [
                ("x/one.yaml", "x--one"),
                ("x/two.yaml", "x--two"),
                ("y/three.yaml", "y--three")
            ]
        );
    }

    #[test]
    fn clashing_folder_names_get_their_path_hash() {
        let dir = tempfile::tempdir().unwrap();
        for f in ["a b.yaml", "a_b.yaml", "A_B.yml", "c.yaml"] {
            touch(dir.path(), f);
        }
        let files = expand(&[dir.path().to_owned()]).unwrap();
        let folders: Vec<&str> = files.iter().map(|f| f.folder.as_str()).collect();
        assert_eq!(folders.len(), 4);
        assert_eq!(folders[3], "c");
        let unique: BTreeSet<String> = folders.iter().map(|f| f.to_lowercase()).collect();
        assert_eq!(unique.len(), 4, "{folders:?}");
        for f in &folders[..3] {
            assert!(f.to_lowercase().starts_with("a_b-"), "{folders:?}");
        }
    }

    #[test]
    fn a_file_whose_name_looks_like_a_pattern_is_that_file() {
        let dir = tempfile::tempdir().unwrap();
        touch(dir.path(), "run[1].yaml");
        touch(dir.path(), "run1.yaml");
        let named = dir.path().join("run[1].yaml");
        assert!(!is_pattern(&named));
        assert!(is_pattern(&dir.path().join("run[0-9].yaml")));
        let files = expand(&[named]).unwrap();
        assert_eq!(relatives(&files), [("run[1].yaml", "run_1_")]);
    }

    #[test]
    fn what_matches_nothing_is_refused_by_name() {
        let dir = tempfile::tempdir().unwrap();
        let err = expand(&[dir.path().join("*.yaml")]).unwrap_err();
        assert!(
            err.to_string().contains("matches no scenario file"),
            "{err}"
        );
        let err = expand(&[dir.path().to_owned()]).unwrap_err();
        assert!(err.to_string().contains("holds no scenario file"), "{err}");
        let err = expand(&[dir.path().join("gone.yaml")]).unwrap_err();
        assert!(err.to_string().contains("gone.yaml"), "{err}");
        assert_eq!(err.exit(), crate::cli::Exit::BadInput);
    }
}
