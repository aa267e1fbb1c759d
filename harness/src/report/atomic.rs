//! Atomic file writes: an artifact is written to a temporary file in the same folder, synced, and
//! renamed over its final name, so a crash or a kill never leaves half a report behind. The rename
//! replaces whatever has that name, a planted symlink included, without following it, and the
//! file is created with mode 0666 less the umask, like every file leakloop writes.
//!
//! A temporary still being written is registered until it is renamed or dropped, so that a
//! signal that ends the process (`cli/interrupt.rs`) can remove it first
//! ([`discard_pending_writes`]): SIGTERM during `history --out` leaves no `.tmp` file.

use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};

/// The temporaries being written now, by every thread.
static PENDING: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

/// Removes every temporary of an atomic write still in progress. Called by the thread that is
/// about to end the process on a signal: it keeps the registry locked, so no write can create
/// a new temporary between this and the exit.
#[cfg(feature = "cli")]
pub(crate) fn discard_pending_writes() {
    let pending = PENDING.lock().unwrap_or_else(PoisonError::into_inner);
    remove_temporaries(pending.iter());
    // The process ends while the registry is locked: a writer waiting on it never creates one.
    std::mem::forget(pending);
}

/// Removes these temporaries; one already renamed or gone is fine.
#[cfg(any(feature = "cli", test))]
fn remove_temporaries<'a>(paths: impl Iterator<Item = &'a PathBuf>) {
    for path in paths {
        let _ = std::fs::remove_file(path);
    }
}

/// Unregisters a temporary once it was renamed or removed.
fn unregister(path: &Path) {
    let mut pending = PENDING.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(i) = pending.iter().position(|p| p == path) {
        pending.swap_remove(i);
    }
}

use crate::report::out_dir::FILE_MODE;

use crate::report::ReportError;

/// Writes `contents` to `path` atomically (the folder must exist).
pub fn write_atomic(path: &Path, contents: &[u8]) -> Result<(), ReportError> {
    write_atomic_with(path, |out| {
        out.write_all(contents)
            .map_err(|source| ReportError::Write {
                path: path.to_owned(),
                source,
            })
    })
}

/// Streams what `write` produces into `path` atomically (the folder must exist): nothing of it
/// needs to be in memory at once, and an error leaves `path` as it was.
pub fn write_atomic_with(
    path: &Path,
    write: impl FnOnce(&mut dyn Write) -> Result<(), ReportError>,
) -> Result<(), ReportError> {
    let error = |source| ReportError::Write {
        path: path.to_owned(),
        source,
    };
    let dir = match path.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent,
        _ => Path::new("."),
    };
    let file_name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    // Created and registered under the registry's lock: a signal's clean-up sees every one.
    let mut temp = {
        let mut pending = PENDING.lock().unwrap_or_else(PoisonError::into_inner);
        let temp = tempfile::Builder::new()
            .prefix(&format!(".{file_name}."))
            .suffix(".tmp")
            .permissions(std::fs::Permissions::from_mode(FILE_MODE))
            .tempfile_in(dir)
            .map_err(error)?;
        pending.push(temp.path().to_owned());
        temp
    };
    let temp_path = temp.path().to_owned();
    let written = (|| {
        {
            let mut buffered = std::io::BufWriter::new(temp.as_file_mut());
            write(&mut buffered)?;
            buffered.flush().map_err(error)?;
        }
        temp.as_file().sync_all().map_err(error)?;
        temp.persist(path).map_err(|e| error(e.error))?;
        Ok(())
    })();
    unregister(&temp_path);
    written
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::test_support::{plant_symlink, PRECIOUS};

    #[test]
    fn replaces_the_file_and_leaves_no_temporary_behind() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("summary.md");
        write_atomic(&path, b"first").unwrap();
        write_atomic(&path, b"second").unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "second");
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, ["summary.md"]);
    }

    #[test]
    fn a_planted_symlink_is_replaced_not_followed() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("out");
        let victim = plant_symlink(&out, "report.json");
        let path = out.join("report.json");
        write_atomic(&path, b"{}").unwrap();
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), PRECIOUS);
        assert!(!std::fs::symlink_metadata(&path).unwrap().is_symlink());
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "{}");
    }

    #[test]
    fn a_signal_during_a_write_leaves_no_temporary() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("history.txt");
        let mut seen = Vec::new();
        // What the signal thread does while a write is half done (without ending the process,
        // so the registry is unlocked again by hand).
        let result = write_atomic_with(&path, |out| {
            out.write_all(b"half").unwrap();
            seen = std::fs::read_dir(dir.path())
                .unwrap()
                .count()
                .to_string()
                .into_bytes();
            let pending = PENDING.lock().unwrap();
            remove_temporaries(pending.iter().filter(|p| p.starts_with(dir.path())));
            Ok(())
        });
        assert_eq!(seen, b"1", "the temporary existed while being written");
        assert!(result.is_err(), "the rename of a removed temporary fails");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
        assert!(PENDING
            .lock()
            .unwrap()
            .iter()
            .all(|p| !p.starts_with(dir.path())));
    }

    #[test]
    fn a_missing_folder_is_an_error_that_names_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("missing").join("report.json");
        let err = write_atomic(&path, b"{}").unwrap_err();
        assert!(err.to_string().contains("missing/report.json"), "{err}");
    }
}
