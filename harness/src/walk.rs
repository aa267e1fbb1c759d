//! The one folder walk: every recursive search of a folder (a suite's scenario folders, a build's
//! report.json files, a merged scenario folder) goes through [`walk`], so that none can run for
//! ever or wander out of its folder.
//!
//! - Symbolic links are never followed: a link is reported as [`Kind::Symlink`] and the caller
//!   decides (follow a link to a file, refuse it, pass it over). So `self -> .`, two links to each
//!   other or a link to `/` cost one entry each.
//! - A folder reached a second time (by device and inode: a bind mount, the walk's root met
//!   again) is not entered twice.
//! - Depth and count are bounded ([`Limits`]): past the depth, the walk stops there or refuses
//!   ([`Deep`]); past the count of entries, it refuses. Each refusal says which limit and where.
//! - Nothing is opened but folders, so a FIFO or a device under the root never blocks the walk.

use std::collections::HashSet;
use std::ffi::OsStr;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// What a walk does at a folder deeper than its limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Deep {
    /// The walk refuses with [`WalkError::TooDeep`]: the caller wants every file.
    Refuse,
    /// The folder is not entered (a search that documents how deep it looks).
    Stop,
}

/// The bounds of one walk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Levels of folders under the root that are entered (the root's own entries are level 1).
    pub max_depth: usize,
    /// Entries (files, folders, links, anything) seen in all, the root's excluded.
    pub max_entries: usize,
    /// What happens past `max_depth`.
    pub deep: Deep,
}

/// What an entry is, as read without following a link.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A regular file.
    File,
    /// A folder.
    Dir,
    /// A symbolic link (never followed by the walk).
    Symlink,
    /// A FIFO, socket or device.
    Other,
}

/// One entry under the root.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found {
    /// The root joined with the entry's path under it.
    pub path: PathBuf,
    /// Its level: 1 for the root's own entries.
    pub depth: usize,
    /// What it is.
    pub kind: Kind,
}

/// Why a walk stopped.
#[derive(Debug, thiserror::Error)]
pub enum WalkError {
    /// A folder could not be read.
    #[error("cannot read {}: {source}", path.display())]
    Read {
        /// The folder.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// A folder lies deeper under the root than the walk goes.
    #[error(
        "{} is nested more than {limit} folders deep under {}: leakloop searches no deeper \
         (is a folder inside itself, or is this the wrong folder?)",
        dir.display(),
        root.display()
    )]
    TooDeep {
        /// Where the walk started.
        root: PathBuf,
        /// The folder past the limit.
        dir: PathBuf,
        /// The depth limit.
        limit: usize,
    },
    /// The root holds more entries than the walk looks at.
    #[error(
        "{} holds more than {limit} files and folders (at {}): leakloop searches no further \
         (is this the wrong folder?)",
        root.display(),
        at.display()
    )]
    TooMany {
        /// Where the walk started.
        root: PathBuf,
        /// The entry that went past the limit.
        at: PathBuf,
        /// The count limit.
        limit: usize,
    },
}

/// Every entry under `root` (the root itself followed if it is a link, since the user named it;
/// nothing under it followed), in depth-first order with each folder's entries sorted by name.
/// Entries whose name `skip` accepts are passed over (not counted, not entered).
pub fn walk(
    root: &Path,
    limits: Limits,
    skip: impl Fn(&OsStr) -> bool,
) -> Result<Vec<Found>, WalkError> {
    let read_error = |path: &Path, source| WalkError::Read {
        path: path.to_owned(),
        source,
    };
    let meta = std::fs::metadata(root).map_err(|e| read_error(root, e))?;
    let mut visited: HashSet<(u64, u64)> = HashSet::new();
    visited.insert((meta.dev(), meta.ino()));
    let mut found = Vec::new();
    let mut seen = 0usize;
    // (folder, its depth): the root is level 0.
    let mut pending = vec![(root.to_owned(), 0usize)];
    while let Some((dir, depth)) = pending.pop() {
        let mut entries = Vec::new();
        for entry in std::fs::read_dir(&dir).map_err(|e| read_error(&dir, e))? {
            let entry = entry.map_err(|e| read_error(&dir, e))?;
            if skip(&entry.file_name()) {
                continue;
            }
            seen += 1;
            if seen > limits.max_entries {
                return Err(WalkError::TooMany {
                    root: root.to_owned(),
                    at: entry.path(),
                    limit: limits.max_entries,
                });
            }
            let file_type = entry
                .file_type()
                .map_err(|e| read_error(&entry.path(), e))?;
            let kind = if file_type.is_symlink() {
                Kind::Symlink
            } else if file_type.is_dir() {
                Kind::Dir
            } else if file_type.is_file() {
                Kind::File
            } else {
                Kind::Other
            };
            entries.push(Found {
                path: entry.path(),
                depth: depth + 1,
                kind,
            });
        }
        entries.sort_by(|a, b| a.path.cmp(&b.path));
        let mut folders = Vec::new();
        for entry in entries {
            if entry.kind == Kind::Dir {
                folders.push((entry.path.clone(), entry.depth));
            }
            found.push(entry);
        }
        // Reversed onto the stack: the first folder by name is entered first.
        for (folder, level) in folders.into_iter().rev() {
            if level >= limits.max_depth {
                match limits.deep {
                    Deep::Stop => continue,
                    Deep::Refuse => {
                        return Err(WalkError::TooDeep {
                            root: root.to_owned(),
                            dir: folder,
                            limit: limits.max_depth,
                        })
                    }
                }
            }
            let meta = std::fs::symlink_metadata(&folder).map_err(|e| read_error(&folder, e))?;
            if visited.insert((meta.dev(), meta.ino())) {
                pending.push((folder, level));
            }
        }
    }
    Ok(found)
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::symlink;

    use super::*;

    const WIDE: Limits = Limits {
        max_depth: 16,
        max_entries: 1000,
        deep: Deep::Refuse,
    };

    fn relative(root: &Path, found: &[Found]) -> Vec<String> {
        found
            .iter()
            .map(|f| f.path.strip_prefix(root).unwrap().display().to_string())
            .collect()
    }

    #[test]
    fn walks_depth_first_in_name_order_and_skips_what_it_is_told() {
        let dir = tempfile::tempdir().unwrap();
        for f in ["b/x", "a/y", "a/c/z", ".hidden/w", "top"] {
            let path = dir.path().join(f);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, "").unwrap();
        }
        let found = walk(dir.path(), WIDE, |n| n.to_string_lossy().starts_with('.')).unwrap();
        assert_eq!(
            relative(dir.path(), &found),
            ["a", "b", "top", "a/c", "a/y", "a/c/z", "b/x"]
        );
        assert_eq!(found[5].depth, 3);
    }

    #[test]
    fn links_to_itself_to_each_other_and_to_the_root_of_the_file_system_are_not_followed() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("sub")).unwrap();
        symlink(".", dir.path().join("self")).unwrap();
        symlink("/", dir.path().join("sub/root")).unwrap();
        symlink("b", dir.path().join("a")).unwrap();
        symlink("a", dir.path().join("b")).unwrap();
        let found = walk(dir.path(), WIDE, |_| false).unwrap();
        assert_eq!(
            relative(dir.path(), &found),
            ["a", "b", "self", "sub", "sub/root"]
        );
        assert!(found
            .iter()
            .filter(|f| f.path.file_name() != Some(OsStr::new("sub")))
            .all(|f| f.kind == Kind::Symlink));
    }

    #[test]
    fn a_root_given_as_a_link_is_followed_once() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("real")).unwrap();
        std::fs::write(dir.path().join("real/f"), "").unwrap();
        symlink("real", dir.path().join("link")).unwrap();
        let found = walk(&dir.path().join("link"), WIDE, |_| false).unwrap();
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].kind, Kind::File);
    }

    #[test]
    fn the_depth_limit_refuses_or_stops_and_says_where() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("1/2/3/4")).unwrap();
        std::fs::write(dir.path().join("1/2/3/4/deep"), "").unwrap();
        let limits = Limits {
            max_depth: 3,
            ..WIDE
        };
        let err = walk(dir.path(), limits, |_| false).unwrap_err();
        assert!(matches!(err, WalkError::TooDeep { limit: 3, .. }), "{err}");
        assert!(
            err.to_string()
                .contains("1/2/3 is nested more than 3 folders"),
            "{err}"
        );
        let stopped = walk(
            dir.path(),
            Limits {
                deep: Deep::Stop,
                ..limits
            },
            |_| false,
        )
        .unwrap();
        assert_eq!(relative(dir.path(), &stopped), ["1", "1/2", "1/2/3"]);
    }

    #[test]
    fn the_count_limit_refuses_and_says_where() {
        let dir = tempfile::tempdir().unwrap();
        for i in 0..10 {
            std::fs::write(dir.path().join(format!("f{i}")), "").unwrap();
        }
        let limits = Limits {
            max_entries: 9,
            ..WIDE
        };
        let err = walk(dir.path(), limits, |_| false).unwrap_err();
        assert!(matches!(err, WalkError::TooMany { limit: 9, .. }), "{err}");
        assert!(
            err.to_string().contains("more than 9 files and folders"),
            "{err}"
        );
        assert_eq!(walk(dir.path(), WIDE, |_| false).unwrap().len(), 10);
    }

    #[test]
    fn a_fifo_is_listed_without_being_opened() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("pipe");
        let made = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap();
        assert!(made.success());
        let found = walk(dir.path(), WIDE, |_| false).unwrap();
        assert_eq!(found[0].kind, Kind::Other);
    }
}
