//! The `--out` folder of a run: one run at a time, never another run's verdict next to this run's
//! samples.
//!
//! A run claims its folder before anything else happens: it takes an exclusive advisory lock
//! (`flock`) on `DIR/.leakloop.lock`, writes `running pid N` into that file (the in-progress
//! marker), and removes the previous run's report.json, junit.xml, plot.svg, summary.md and
//! samples.jsonl. When the run ends, whether its reports could be written or not, the marker is
//! emptied and the lock released. So a folder whose marker still says `running` while nobody holds
//! the lock belongs to a run that crashed or was killed; a second run, or a `leakloop report`,
//! that finds the lock held knows a run is still writing there. The lock file itself stays: an
//! advisory lock on a file that is deleted and re-created could be held by two processes at once.

use std::fs::{File, OpenOptions, TryLockError};
use std::io::{Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use crate::report::artifacts::{JUNIT_XML, PLOT_SVG, REPORT_JSON, SAMPLES_JSONL, SUMMARY_MD};
use crate::report::safe_path::contained;
use crate::report::ReportError;

/// The lock file and in-progress marker of an output folder.
pub const LOCK_FILE: &str = ".leakloop.lock";

/// What the marker says while a run is writing the folder.
const RUNNING: &str = "running";

/// Mode for every file leakloop creates in an output folder; the process umask applies, as it
/// does for any file a program creates.
pub(crate) const FILE_MODE: u32 = 0o666;

/// A run's claim on its output folder: held from before the engine starts until the run ends.
#[derive(Debug)]
pub struct OutDir {
    dir: PathBuf,
    lock: File,
}

impl OutDir {
    /// Claims `dir` (created if missing) for one run: locks it, marks the run as in progress and
    /// removes every artifact of the previous run. A folder locked by another leakloop process
    /// is refused with [`ReportError::Busy`].
    pub fn claim(dir: &Path) -> Result<Self, ReportError> {
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
        for name in [REPORT_JSON, JUNIT_XML, SUMMARY_MD, PLOT_SVG, SAMPLES_JSONL] {
            remove_if_present(&dir.join(name))?;
        }
        Ok(Self {
            dir: dir.to_owned(),
            lock,
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
    pub(crate) fn clear_entry(
        &self,
        name: &str,
        file: &Path,
        entry: &str,
    ) -> Result<PathBuf, ReportError> {
        let path = contained(&self.dir, name, file, entry)?;
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
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC);
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
