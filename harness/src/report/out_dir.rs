//! The `--out` folder of a run: one run at a time, never another run's verdict next to this run's
//! samples.
//!
//! A run claims its folder before anything else happens: it takes an exclusive advisory lock
//! (`flock`) on `DIR/.leakloop.lock`, writes `running pid N` into that file (the in-progress
//! marker), and removes the previous run's report.json, junit.xml, plot.svg, summary.md and
//! samples (samples.parquet, or an older run's samples.jsonl). When the run ends, whether its reports could be written or not, the marker is
//! emptied and the lock released. So a folder whose marker still says `running` while nobody holds
//! the lock belongs to a run that crashed or was killed; a second run, or a `leakloop report`,
//! that finds the lock held knows a run is still writing there. The lock file itself stays: an
//! advisory lock on a file that is deleted and re-created could be held by two processes at once.
//!
//! Claims nest: a folder inside a folder another process holds (`run --out suite/x` while a suite
//! writes `suite/`) is refused as busy, naming the held folder, and so is a folder with a held
//! folder one or two levels inside it (a suite started over a running scenario's folder). Claims
//! this process holds itself (a suite's scenario folders, a bisect's run folders) are its own.

use std::fs::{File, OpenOptions, TryLockError};
use std::io::{Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};

use crate::report::artifacts::{
    JUNIT_XML, PLOT_SVG, REPORT_JSON, SAMPLES_CSV_ZST, SAMPLES_JSONL, SAMPLES_STORE, SAMPLES_TAIL,
    SUMMARY_MD,
};
use crate::report::ReportError;
use crate::walk::{walk, Deep, Kind, Limits};

/// The lock file and in-progress marker of an output folder.
pub const LOCK_FILE: &str = ".leakloop.lock";

/// What the marker says while a run is writing the folder.
const RUNNING: &str = "running";

/// Mode for every file leakloop creates in an output folder; the process umask applies, as it
/// does for any file a program creates.
pub(crate) const FILE_MODE: u32 = 0o666;

/// The folders this process holds claims on (canonical paths).
static HELD: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

/// A run's claim on its output folder: held from before the engine starts until the run ends.
#[derive(Debug)]
pub struct OutDir {
    dir: PathBuf,
    lock: File,
    /// The canonical path, as registered in [`HELD`].
    canonical: Option<PathBuf>,
}

impl Drop for OutDir {
    fn drop(&mut self) {
        // Unlocked explicitly rather than by closing: a child that another thread forked while
        // the claim was held shares the lock's open file description until it execs (the file
        // is close-on-exec), and closing this descriptor alone would leave the folder locked
        // until then. An unlock releases it for every descriptor of that description.
        let _ = self.lock.unlock();
        if let Some(canonical) = &self.canonical {
            let mut held = HELD.lock().unwrap_or_else(PoisonError::into_inner);
            if let Some(i) = held.iter().position(|p| p == canonical) {
                held.swap_remove(i);
            }
        }
    }
}

/// Whether another process holds the claim on `folder` (its lock file is locked, and not by this
/// process). A lock file that cannot be opened or locked is no claim.
fn held_elsewhere(folder: &Path) -> bool {
    let Ok(lock) = open_lock_file(&folder.join(LOCK_FILE), false) else {
        return false;
    };
    match lock.try_lock_shared() {
        Err(TryLockError::WouldBlock) => {
            let ours = folder.canonicalize().ok().is_some_and(|c| {
                HELD.lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .contains(&c)
            });
            !ours
        }
        _ => false,
    }
}

/// A folder that another process holds, above `dir` or up to two levels inside it.
fn claimed_nearby(dir: &Path) -> Option<PathBuf> {
    let existing = dir.ancestors().find_map(|a| {
        let a = if a.as_os_str().is_empty() {
            Path::new(".")
        } else {
            a
        };
        a.canonicalize().ok()
    })?;
    let ancestors = existing.ancestors().filter(|a| *a != dir);
    if let Some(held) = ancestors.into_iter().find(|a| held_elsewhere(a)) {
        return Some(held.to_owned());
    }
    // Inside: only the first two levels (a suite's scenario folders, a bisect's run folders),
    // and only as far as a cheap look goes.
    let limits = Limits {
        max_depth: 2,
        max_entries: 10_000,
        deep: Deep::Stop,
    };
    let inside = walk(dir, limits, |name| name.to_string_lossy().starts_with('.')).ok()?;
    inside
        .into_iter()
        .filter(|f| f.kind == Kind::Dir)
        .map(|f| f.path)
        .find(|f| held_elsewhere(f))
}

impl OutDir {
    /// Claims `dir` (created if missing) for one run: locks it, marks the run as in progress and
    /// removes every artifact of the previous run. A folder locked by another leakloop process
    /// is refused with [`ReportError::Busy`].
    pub fn claim(dir: &Path) -> Result<Self, ReportError> {
        if let Some(held) = claimed_nearby(dir) {
            return Err(ReportError::Busy { dir: held });
        }
        create_folder(dir)?;
        let lock_path = dir.join(LOCK_FILE);
        let write_error = |source| ReportError::Write {
            path: lock_path.clone(),
            source,
        };
        let mut lock = open_lock_file(&lock_path, true).map_err(write_error)?;
        match lock.try_lock() {
            Ok(()) => {}
            Err(TryLockError::WouldBlock) => {
                return Err(ReportError::Busy {
                    dir: dir.to_owned(),
                })
            }
            Err(TryLockError::Error(source)) => return Err(write_error(source)),
        }
        lock.set_len(0).map_err(write_error)?;
        lock.write_all(format!("{RUNNING} pid {}\n", std::process::id()).as_bytes())
            .map_err(write_error)?;
        lock.sync_all().map_err(write_error)?;
        // The report first: whatever happens next, no verdict of the previous run is left.
        for name in [
            REPORT_JSON,
            JUNIT_XML,
            SUMMARY_MD,
            PLOT_SVG,
            SAMPLES_STORE,
            SAMPLES_TAIL,
            SAMPLES_CSV_ZST,
            SAMPLES_JSONL,
        ] {
            remove_if_present(&dir.join(name))?;
        }
        let canonical = dir.canonicalize().ok();
        if let Some(c) = &canonical {
            HELD.lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push(c.clone());
        }
        Ok(Self {
            dir: dir.to_owned(),
            lock,
            canonical,
        })
    }

    /// The folder.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Clears the way for `name` inside the claimed folder (`merge` replacing a scenario folder):
    /// removes what `DIR/name` holds, a folder with everything in it or a file or a link (never
    /// followed), and returns the path. `name` was read from `file`'s `entry`; it must be one
    /// plain name (`safe_path::check_name`), so nothing outside the claimed folder, and not its
    /// lock, can ever be removed through it.
    #[cfg(feature = "cli")]
    pub(crate) fn clear_entry(
        &self,
        name: &str,
        file: &Path,
        entry: &str,
    ) -> Result<PathBuf, ReportError> {
        let path = crate::report::safe_path::contained(&self.dir, name, file, entry)?;
        let removed = match std::fs::symlink_metadata(&path) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(e),
            // Removes the folder's entries without following a link in it.
            Ok(meta) if meta.is_dir() => std::fs::remove_dir_all(&path),
            Ok(_) => std::fs::remove_file(&path),
        };
        removed.map_err(|source| ReportError::Write {
            path: path.clone(),
            source,
        })?;
        Ok(path)
    }

    /// Marks the run as ended (its reports written, or not: a failed write is the caller's
    /// warning to give) and releases the folder. Emptying the marker frees space rather than
    /// using it, so it works on a full disk.
    pub fn release(self) -> Result<(), ReportError> {
        self.lock.set_len(0).map_err(|source| ReportError::Write {
            path: self.dir.join(LOCK_FILE),
            source,
        })
    }
}

/// What an output folder's marker and lock say about the run that wrote it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunState {
    /// The folder has no lock file: written by an older leakloop, or by hand.
    Unknown,
    /// The last run ended (its reports were written unless a write failed).
    Ended,
    /// The last run never ended: it crashed or was killed.
    Unfinished,
    /// A run holds the lock: it is still writing the folder.
    InProgress,
}

/// A reader's view of an output folder: its [`RunState`], and a shared lock (when the folder
/// allows one) that keeps a new run from clearing the folder while the reader uses it.
#[derive(Debug)]
pub struct FolderView {
    /// What the last run left.
    pub state: RunState,
    _lock: Option<File>,
}

/// Looks at an output folder for `leakloop report`. Works on a read-only folder.
pub fn inspect_out_dir(dir: &Path) -> Result<FolderView, ReportError> {
    let lock_path = dir.join(LOCK_FILE);
    let read_error = |source| ReportError::Read {
        path: lock_path.clone(),
        source,
    };
    let mut lock = match open_lock_file(&lock_path, false) {
        Ok(file) => file,
        // No such folder, or not a folder: not an output folder of any run (the caller says so).
        Err(e)
            if matches!(
                e.kind(),
                std::io::ErrorKind::NotFound | std::io::ErrorKind::NotADirectory
            ) =>
        {
            return Ok(FolderView {
                state: RunState::Unknown,
                _lock: None,
            })
        }
        Err(e) => return Err(read_error(e)),
    };
    match lock.try_lock_shared() {
        Ok(()) => {}
        Err(TryLockError::WouldBlock) => {
            return Ok(FolderView {
                state: RunState::InProgress,
                _lock: None,
            })
        }
        Err(TryLockError::Error(e)) => return Err(read_error(e)),
    }
    let mut marker = String::new();
    Read::by_ref(&mut lock)
        .take(256)
        .read_to_string(&mut marker)
        .map_err(read_error)?;
    let state = if marker.starts_with(RUNNING) {
        RunState::Unfinished
    } else {
        RunState::Ended
    };
    Ok(FolderView {
        state,
        _lock: Some(lock),
    })
}

/// Opens the lock file without following a symlink planted in its place (`O_NOFOLLOW`); creates
/// it (mode 0666 less the umask) when `create`. A reader opens it read-only, which also works in a
/// read-only folder.
fn open_lock_file(path: &Path, create: bool) -> std::io::Result<File> {
    let mut options = OpenOptions::new();
    options
        .read(true)
        .write(create)
        .create(create)
        .mode(FILE_MODE)
        // A reader never blocks on a FIFO planted as the lock file (no effect on a regular file).
        .custom_flags(
            libc::O_NOFOLLOW | libc::O_CLOEXEC | if create { 0 } else { libc::O_NONBLOCK },
        );
    options.open(path)
}

/// Creates `dir` and its parents if missing.
pub(crate) fn create_folder(dir: &Path) -> Result<(), ReportError> {
    std::fs::create_dir_all(dir).map_err(|source| ReportError::Write {
        path: dir.to_owned(),
        source,
    })
}

/// Removes `path` (a symlink is removed, never followed); a missing file is fine.
pub(crate) fn remove_if_present(path: &Path) -> Result<(), ReportError> {
    match std::fs::remove_file(path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(source) => Err(ReportError::Write {
            path: path.to_owned(),
            source,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::test_support::{plant_symlink, PRECIOUS};

    fn names(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    #[test]
    fn claiming_removes_the_previous_runs_artifacts_and_keeps_other_files() {
        let dir = tempfile::tempdir().unwrap();
        for name in [
            REPORT_JSON,
            JUNIT_XML,
            PLOT_SVG,
            SUMMARY_MD,
            SAMPLES_STORE,
            SAMPLES_TAIL,
            SAMPLES_CSV_ZST,
            SAMPLES_JSONL,
            "notes.txt",
        ] {
            std::fs::write(dir.path().join(name), "old").unwrap();
        }
        let claim = OutDir::claim(dir.path()).unwrap();
        assert_eq!(names(dir.path()), [LOCK_FILE, "notes.txt"]);
        assert_eq!(
            inspect_out_dir(dir.path()).unwrap().state,
            RunState::InProgress
        );
        claim.release().unwrap();
        assert_eq!(inspect_out_dir(dir.path()).unwrap().state, RunState::Ended);
    }

    #[test]
    fn a_claimed_folder_is_busy_for_a_second_claim() {
        let dir = tempfile::tempdir().unwrap();
        let first = OutDir::claim(dir.path()).unwrap();
        let err = OutDir::claim(dir.path()).unwrap_err();
        assert!(matches!(err, ReportError::Busy { .. }), "{err}");
        assert!(err.to_string().contains("another leakloop"), "{err}");
        first.release().unwrap();
        OutDir::claim(dir.path()).unwrap().release().unwrap();
    }

    #[test]
    fn a_folder_inside_or_around_one_held_by_another_process_is_busy() {
        let dir = tempfile::tempdir().unwrap();
        let suite = dir.path().join("suite");
        // Another process's claim: the lock taken on a descriptor this process never registered.
        std::fs::create_dir_all(&suite).unwrap();
        let other = open_lock_file(&suite.join(LOCK_FILE), true).unwrap();
        other.try_lock().unwrap();
        let err = OutDir::claim(&suite.join("x")).unwrap_err();
        assert!(
            matches!(&err, ReportError::Busy { dir } if dir.ends_with("suite")),
            "{err}"
        );
        assert!(
            !suite.join("x").exists(),
            "nothing is created in a held folder"
        );
        let err = OutDir::claim(dir.path()).unwrap_err();
        assert!(
            matches!(&err, ReportError::Busy { dir } if dir.ends_with("suite")),
            "{err}"
        );
        drop(other);
        // This process's own claim: its folders inside are its own to claim.
        let own = OutDir::claim(&suite).unwrap();
        OutDir::claim(&suite.join("x")).unwrap().release().unwrap();
        own.release().unwrap();
    }

    #[test]
    fn a_fifo_planted_as_a_parents_lock_file_does_not_block_a_claim() {
        let dir = tempfile::tempdir().unwrap();
        let made = std::process::Command::new("mkfifo")
            .arg(dir.path().join(LOCK_FILE))
            .status()
            .unwrap();
        assert!(made.success());
        OutDir::claim(&dir.path().join("out"))
            .unwrap()
            .release()
            .unwrap();
    }

    #[test]
    fn a_claim_that_is_never_released_leaves_an_unfinished_folder() {
        let dir = tempfile::tempdir().unwrap();
        // Dropped without release: what a killed process leaves (the lock dies with the file).
        drop(OutDir::claim(dir.path()).unwrap());
        assert_eq!(
            inspect_out_dir(dir.path()).unwrap().state,
            RunState::Unfinished
        );
        let marker = std::fs::read_to_string(dir.path().join(LOCK_FILE)).unwrap();
        assert_eq!(marker, format!("running pid {}\n", std::process::id()));
    }

    #[test]
    fn a_folder_without_a_lock_file_is_unknown() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(
            inspect_out_dir(dir.path()).unwrap().state,
            RunState::Unknown
        );
    }

    #[test]
    fn a_symlink_planted_as_the_lock_file_is_refused_and_its_target_untouched() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("out");
        let victim = plant_symlink(&out, LOCK_FILE);
        let err = OutDir::claim(&out).unwrap_err();
        assert!(err.to_string().contains(LOCK_FILE), "{err}");
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), PRECIOUS);
    }
}
