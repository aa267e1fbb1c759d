//! Atomic file writes: an artifact is written to a temporary file in the same folder, synced, and
//! renamed over its final name, so a crash or a kill never leaves half a report behind. The rename
//! replaces whatever has that name, a planted symlink included, without following it, and the
//! file is created with mode 0666 less the umask, like every file leakloop writes.

use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

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
    let mut temp = tempfile::Builder::new()
        .prefix(&format!(".{file_name}."))
        .suffix(".tmp")
        .permissions(std::fs::Permissions::from_mode(FILE_MODE))
        .tempfile_in(dir)
        .map_err(error)?;
    {
        let mut buffered = std::io::BufWriter::new(temp.as_file_mut());
        write(&mut buffered)?;
        buffered.flush().map_err(error)?;
    }
    temp.as_file().sync_all().map_err(error)?;
    temp.persist(path).map_err(|e| error(e.error))?;
    Ok(())
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
    fn a_missing_folder_is_an_error_that_names_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("missing").join("report.json");
        let err = write_atomic(&path, b"{}").unwrap_err();
        assert!(err.to_string().contains("missing/report.json"), "{err}");
    }
}
