//! Which scenario files a suite run takes: files as named, folders searched for `*.yaml` and
//! `*.yml` (recursively, skipping hidden entries), and glob patterns (`nightly/**/*.yaml`). Each
//! scenario gets its path relative to the suite root (the deepest folder holding them all,
//! written with `/`) and an output folder name derived from it, unique within the suite.
//!
//! Folders are searched by the one bounded walk (`crate::walk`): a symlinked folder is never
//! entered (a link to a scenario file is taken), at most [`MAX_DEPTH`] levels deep and
//! [`MAX_ENTRIES`] entries per argument, beyond which the suite is refused (exit 2, naming the
//! limit and the folder). A file reached twice (named twice, through a link, by a folder and a
//! glob) is one scenario: files are told apart by device and inode. Every refusal is an
//! [`InputsError`] naming the argument.

use std::collections::{BTreeMap, HashSet};
use std::os::unix::fs::MetadataExt;
use std::path::{Component, Path, PathBuf};

use crate::report::safe_path::{slug, slug_char, unique_names};
use crate::report::{JUNIT_XML, LOCK_FILE, REPORT_JSON, SUMMARY_MD};
use crate::walk::{walk, Deep, Kind, Limits, WalkError};

/// Folder levels searched under a folder argument.
pub(crate) const MAX_DEPTH: usize = 32;

/// Entries (files, folders, links) looked at under one folder argument.
pub(crate) const MAX_ENTRIES: usize = 100_000;

/// Why a suite's arguments name no usable list of scenario files (bad input: the CLI exits 2).
/// The messages are whole sentences, so no field is a `source`: a chain printer would repeat it.
#[derive(Debug, thiserror::Error)]
pub(crate) enum InputsError {
    /// A glob pattern matched no scenario file.
    #[error("`{pattern}` matches no scenario file")]
    NoMatch {
        /// The pattern as given.
        pattern: String,
    },
    /// A folder holds no `*.yaml` or `*.yml` file.
    #[error("{} holds no scenario file (*.yaml, *.yml)", dir.display())]
    EmptyFolder {
        /// The folder as given.
        dir: PathBuf,
    },
    /// A pattern that does not parse.
    #[error("`{pattern}` is not a valid pattern: {error}")]
    BadPattern {
        /// The pattern as given.
        pattern: String,
        /// What the glob parser said.
        error: glob::PatternError,
    },
    /// A file or folder that cannot be read.
    #[error("cannot read scenario {}: {error}", path.display())]
    Unreadable {
        /// The path as given.
        path: PathBuf,
        /// The file system's error.
        error: std::io::Error,
    },
    /// The bounded walk refused a folder (too deep, too many entries, unreadable); `pattern` is
    /// the glob whose search it was, if any.
    #[error("suite: {}{error}", pattern.as_ref().map(|p| format!("{p}: ")).unwrap_or_default())]
    Walk {
        /// The glob being searched, if the walk was for one.
        pattern: Option<String>,
        /// Why the walk stopped.
        error: WalkError,
    },
}

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
pub(crate) fn expand(args: &[PathBuf]) -> Result<Vec<SuiteFile>, InputsError> {
    let mut found = Found::default();
    for arg in args {
        let before = found.len();
        found.repeated = false;
        if is_pattern(arg) {
            let pattern = arg.to_string_lossy();
            for path in pattern_matches(&pattern)? {
                add(&path, &mut found, true)?;
            }
            if found.len() == before && !found.repeated {
                return Err(InputsError::NoMatch {
                    pattern: pattern.into_owned(),
                });
            }
        } else {
            found.repeated = false;
            add(arg, &mut found, false)?;
            if found.len() == before && !found.repeated && arg.is_dir() {
                return Err(InputsError::EmptyFolder { dir: arg.clone() });
            }
        }
    }
    let root = common_root(found.files.keys());
    let mut files: Vec<SuiteFile> = found
        .files
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

/// The paths that match a glob pattern, found by the bounded walk from the pattern's literal
/// start (`nightly/` of `nightly/**/*.yaml`): links to folders are not entered (so `**` cannot
/// loop), a `*` never crosses a `/`, and a pattern without `**` looks no deeper than its own
/// number of parts.
fn pattern_matches(pattern: &str) -> Result<Vec<PathBuf>, InputsError> {
    let invalid = |error| InputsError::BadPattern {
        pattern: pattern.to_owned(),
        error,
    };
    let matcher = glob::Pattern::new(pattern).map_err(invalid)?;
    let path = Path::new(pattern);
    let is_literal = |part: &std::ffi::OsStr| !part.to_string_lossy().contains(['*', '?', '[']);
    let literal: PathBuf = path
        .components()
        .take_while(|c| is_literal(c.as_os_str()))
        .collect();
    let rest = path.components().count() - literal.components().count();
    let (root, shown_root) = if literal.as_os_str().is_empty() {
        (PathBuf::from("."), false)
    } else {
        (literal, true)
    };
    let limits = Limits {
        max_depth: if pattern.contains("**") {
            MAX_DEPTH
        } else {
            rest
        },
        max_entries: MAX_ENTRIES,
        deep: if pattern.contains("**") {
            Deep::Refuse
        } else {
            Deep::Stop
        },
    };
    let options = glob::MatchOptions {
        case_sensitive: true,
        require_literal_separator: true,
        require_literal_leading_dot: false,
    };
    if !root.is_dir() {
        return Ok(Vec::new());
    }
    let found = walk(&root, limits, |_| false).map_err(|error| InputsError::Walk {
        pattern: Some(pattern.to_owned()),
        error,
    })?;
    Ok(found
        .into_iter()
        .map(|f| {
            if shown_root {
                f.path
            } else {
                f.path
                    .strip_prefix(".")
                    .map(Path::to_owned)
                    .unwrap_or(f.path)
            }
        })
        .filter(|p| matcher.matches_path_with(p, options))
        .collect())
}

/// The scenario files found so far, each once.
#[derive(Default)]
struct Found {
    /// By absolute path: the file as found.
    files: BTreeMap<PathBuf, PathBuf>,
    /// Device and inode of every file taken.
    ids: HashSet<(u64, u64)>,
    /// Whether the argument being expanded reached a file already taken.
    repeated: bool,
}

impl Found {
    fn len(&self) -> usize {
        self.files.len()
    }

    /// Takes `path` unless the same file (device and inode) was taken before.
    fn insert(&mut self, path: &Path, meta: &std::fs::Metadata) {
        if self.ids.insert((meta.dev(), meta.ino())) {
            self.files
                .entry(absolute(path))
                .or_insert_with(|| path.to_owned());
        } else {
            self.repeated = true;
        }
    }
}

/// Adds a file, or a folder's scenario files, so that a file named twice runs once. A folder
/// matched by a glob is searched like a named one.
fn add(path: &Path, found: &mut Found, from_pattern: bool) -> Result<(), InputsError> {
    let meta = std::fs::metadata(path).map_err(|error| InputsError::Unreadable {
        path: path.to_owned(),
        error,
    })?;
    if meta.is_dir() {
        for file in scenario_files_under(path)? {
            // A link whose target vanished is no scenario: passed over like a non-YAML file.
            if let Ok(meta) = std::fs::metadata(&file) {
                if meta.is_file() {
                    found.insert(&file, &meta);
                }
            }
        }
    } else if !from_pattern || has_scenario_extension(path) {
        found.insert(path, &meta);
    }
    Ok(())
}

fn has_scenario_extension(path: &Path) -> bool {
    matches!(
        path.extension().and_then(|e| e.to_str()),
        Some("yaml" | "yml")
    )
}

/// The `*.yaml` and `*.yml` files (and links to them) under `dir`, recursively through folders
/// that are not links, in path order; entries whose name starts with `.` are skipped.
fn scenario_files_under(dir: &Path) -> Result<Vec<PathBuf>, InputsError> {
    let limits = Limits {
        max_depth: MAX_DEPTH,
        max_entries: MAX_ENTRIES,
        deep: Deep::Refuse,
    };
    let found =
        walk(dir, limits, |name| name.to_string_lossy().starts_with('.')).map_err(|error| {
            InputsError::Walk {
                pattern: None,
                error,
            }
        })?;
    let mut out: Vec<PathBuf> = found
        .into_iter()
        .filter(|f| matches!(f.kind, Kind::File | Kind::Symlink) && has_scenario_extension(&f.path))
        .map(|f| f.path)
        .collect();
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
/// systems, or with the suite's own files) each get `-` and 8 hex digits of their path's hash
/// (`report::safe_path::unique_names`). Decided over the whole suite, so that every partition
/// names a scenario's folder the same way.
fn assign_folders(files: &mut [SuiteFile]) {
    let relatives: Vec<String> = files.iter().map(|f| f.relative.clone()).collect();
    let reserved = [REPORT_JSON, SUMMARY_MD, JUNIT_XML, LOCK_FILE];
    let folders = unique_names(relatives.iter().map(String::as_str), folder_base, &reserved);
    for (file, folder) in files.iter_mut().zip(folders) {
        file.folder = folder;
    }
}

fn folder_base(relative: &str) -> String {
    let stem = relative
        .strip_suffix(".yaml")
        .or_else(|| relative.strip_suffix(".yml"))
        .unwrap_or(relative);
    let name: String = stem
        .split('/')
        .map(|part| part.chars().map(slug_char).collect::<String>())
        .collect::<Vec<_>>()
        .join("--");
    // `.`, `..` and hidden names are no scenario's folder, and a name has a length limit.
    slug(&name)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

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
        assert!(matches!(err, InputsError::NoMatch { .. }), "{err:?}");
        assert!(
            err.to_string().contains("matches no scenario file"),
            "{err}"
        );
        let err = expand(&[dir.path().to_owned()]).unwrap_err();
        assert!(matches!(err, InputsError::EmptyFolder { .. }), "{err:?}");
        assert!(err.to_string().contains("holds no scenario file"), "{err}");
        let err = expand(&[dir.path().join("gone.yaml")]).unwrap_err();
        assert!(matches!(err, InputsError::Unreadable { .. }), "{err:?}");
        assert!(
            err.to_string().starts_with("cannot read scenario ")
                && err.to_string().contains("gone.yaml"),
            "{err}"
        );
        let err = expand(&[dir.path().join("[.yaml")]).unwrap_err();
        assert!(err.to_string().contains("is not a valid pattern"), "{err}");
    }

    #[test]
    fn links_to_folders_are_not_entered_and_a_file_reached_twice_runs_once() {
        let dir = tempfile::tempdir().unwrap();
        touch(dir.path(), "a.yaml");
        std::os::unix::fs::symlink(".", dir.path().join("self")).unwrap();
        std::os::unix::fs::symlink(".", dir.path().join("self2")).unwrap();
        std::os::unix::fs::symlink("/", dir.path().join("root")).unwrap();
        std::os::unix::fs::symlink("a.yaml", dir.path().join("link.yaml")).unwrap();
        let files = expand(&[
            dir.path().to_owned(),
            dir.path().join("a.yaml"),
            dir.path().join("self/a.yaml"),
            dir.path().join("*.yaml"),
            dir.path().join("**/*.yaml"),
        ])
        .unwrap();
        assert_eq!(relatives(&files), [("a.yaml", "a")]);
    }

    #[test]
    fn a_folder_nested_past_the_limit_is_refused_by_name() {
        let dir = tempfile::tempdir().unwrap();
        let deep: Vec<String> = (0..=MAX_DEPTH).map(|i| format!("d{i}")).collect();
        touch(dir.path(), &format!("{}/x.yaml", deep.join("/")));
        let err = expand(&[dir.path().to_owned()]).unwrap_err();
        assert!(
            matches!(err, InputsError::Walk { pattern: None, .. }),
            "{err:?}"
        );
        assert!(err.to_string().starts_with("suite: "), "{err}");
        assert!(
            err.to_string()
                .contains(&format!("nested more than {MAX_DEPTH} folders deep")),
            "{err}"
        );
    }
}
