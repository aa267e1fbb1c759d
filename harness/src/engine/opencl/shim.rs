//! A folder that makes a program which opens OpenCL by name load the interposer instead.
//!
//! An engine that calls `dlopen("libOpenCL.so")` and looks its functions up on that handle
//! (LiteRT-LM does, on Linux and Android) bypasses `LD_PRELOAD`: lookups on a handle search only
//! that library. With this folder first on `LD_LIBRARY_PATH`, the name resolves to a symbolic
//! link to the interposer. When the interposer is also preloaded, the dynamic loader sees the
//! same file (same device and inode) and hands back the preloaded copy, so all OpenCL calls are
//! counted in one place. Only `libOpenCL.so` is linked: the interposer itself finds the real
//! library as `libOpenCL.so.1`, which must not resolve to it.
//!
//! Whatever this folder holds is loaded into the worker before any system library, so it is
//! private: a fresh folder with an unpredictable name, made with mode 0700 for each worker and
//! removed when the worker is gone. A folder at a known name could be made first by another
//! local user and filled with their own `librt.so.1`.

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;

/// The name engines open OpenCL by.
pub const OPENCL_SONAME: &str = "libOpenCL.so";

/// A private folder holding `libOpenCL.so` as a symbolic link to the interposer; removed when
/// dropped, so it must outlive the process that uses it.
#[derive(Debug)]
pub struct OpenClNameShim {
    dir: tempfile::TempDir,
}

impl OpenClNameShim {
    /// The folder to put first on `LD_LIBRARY_PATH`.
    pub fn path(&self) -> &Path {
        self.dir.path()
    }
}

/// Makes a fresh private folder (mode 0700, under the system's temporary folder) holding
/// `libOpenCL.so` as a symbolic link to `interposer`.
pub fn opencl_name_shim(interposer: &Path) -> Result<OpenClNameShim, String> {
    let target = interposer
        .canonicalize()
        .map_err(|e| format!("cannot resolve {}: {e}", interposer.display()))?;
    let dir = tempfile::Builder::new()
        .prefix("leakloop-clshim-")
        .permissions(std::fs::Permissions::from_mode(0o700))
        .tempdir()
        .map_err(|e| {
            format!(
                "cannot create a private folder under {}: {e}",
                std::env::temp_dir().display()
            )
        })?;
    check_private(dir.path())?;
    let link = dir.path().join(OPENCL_SONAME);
    std::os::unix::fs::symlink(&target, &link)
        .map_err(|e| format!("cannot link {}: {e}", link.display()))?;
    Ok(OpenClNameShim { dir })
}

/// Refuses a folder that is not a directory owned by this user with mode 0700 (what was just
/// made must be exactly that; anything else means the folder is not ours).
fn check_private(dir: &Path) -> Result<(), String> {
    let meta = std::fs::symlink_metadata(dir)
        .map_err(|e| format!("cannot inspect {}: {e}", dir.display()))?;
    // SAFETY: geteuid has no preconditions and cannot fail.
    let uid = unsafe { libc::geteuid() };
    let mode = meta.mode() & 0o777;
    if !meta.is_dir() || meta.uid() != uid || mode != 0o700 {
        return Err(format!(
            "{} is not a private folder of this user (owner {}, mode {mode:03o}); refusing to \
             load libraries from it",
            dir.display(),
            meta.uid()
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fake_interposer() -> (tempfile::TempDir, std::path::PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let lib = dir.path().join("libcl_interposer.so");
        std::fs::write(&lib, b"not really a library").unwrap();
        (dir, lib)
    }

    #[test]
    fn the_shim_links_the_opencl_name_to_the_interposer_in_a_private_folder() {
        let (_keep, lib) = fake_interposer();
        let shim = opencl_name_shim(&lib).unwrap();
        let link = shim.path().join(OPENCL_SONAME);
        assert_eq!(
            std::fs::read_link(&link).unwrap(),
            lib.canonicalize().unwrap()
        );
        assert!(!shim.path().join("libOpenCL.so.1").exists());
        let meta = std::fs::metadata(shim.path()).unwrap();
        assert_eq!(meta.mode() & 0o777, 0o700);
        // SAFETY: geteuid has no preconditions and cannot fail.
        assert_eq!(meta.uid(), unsafe { libc::geteuid() });
        // The folder holds the link and nothing else.
        let names: Vec<_> = std::fs::read_dir(shim.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, [OPENCL_SONAME]);
    }

    #[test]
    fn each_shim_is_a_fresh_folder_removed_when_dropped() {
        let (_keep, lib) = fake_interposer();
        let first = opencl_name_shim(&lib).unwrap();
        let second = opencl_name_shim(&lib).unwrap();
        assert_ne!(first.path(), second.path());
        let path = first.path().to_owned();
        drop(first);
        assert!(!path.exists(), "{} was left behind", path.display());
        assert!(second.path().is_dir());
    }

    /// Regression: the folder used to be `$TMPDIR/leakloop-clshim-<uid>-<hash of the
    /// interposer's path>`, reused if it existed whoever had made it; a `librt.so.1` planted
    /// there ran in the worker.
    #[test]
    fn a_folder_planted_at_the_old_predictable_path_is_not_used() {
        let (_keep, lib) = fake_interposer();
        let target = lib.canonicalize().unwrap();
        let old_hash = target
            .as_os_str()
            .as_encoded_bytes()
            .iter()
            .fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
                (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3)
            });
        // SAFETY: getuid has no preconditions and cannot fail.
        let uid = unsafe { libc::getuid() };
        let planted = std::env::temp_dir().join(format!("leakloop-clshim-{uid}-{old_hash:016x}"));
        std::fs::create_dir_all(&planted).unwrap();
        let planted_lib = planted.join("librt.so.1");
        std::fs::write(&planted_lib, b"planted").unwrap();

        let result = opencl_name_shim(&lib);
        let _ = std::fs::remove_file(&planted_lib);
        let _ = std::fs::remove_file(planted.join(OPENCL_SONAME));
        let _ = std::fs::remove_dir(&planted);

        let shim = result.unwrap();
        assert_ne!(shim.path(), planted);
        assert!(!shim.path().join("librt.so.1").exists());
    }

    #[test]
    fn a_folder_that_is_not_private_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
        let err = check_private(dir.path()).unwrap_err();
        assert!(err.contains("mode 777"), "{err}");
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
        check_private(dir.path()).unwrap();
    }

    #[test]
    fn a_missing_interposer_is_an_error_naming_it() {
        let err = opencl_name_shim(Path::new("/nonexistent/libcl_interposer.so")).unwrap_err();
        assert!(err.contains("/nonexistent/libcl_interposer.so"), "{err}");
    }
}
