//! A folder that makes a program which opens OpenCL by name load the interposer instead.
//!
//! An engine that calls `dlopen("libOpenCL.so")` and looks its functions up on that handle
//! (LiteRT-LM does, on Linux and Android) bypasses `LD_PRELOAD`: lookups on a handle search only
//! that library. With this folder first on `LD_LIBRARY_PATH`, the name resolves to a symbolic
//! link to the interposer. When the interposer is also preloaded, the dynamic loader sees the
//! same file (same device and inode) and hands back the preloaded copy, so all OpenCL calls are
//! counted in one place. Only `libOpenCL.so` is linked: the interposer itself finds the real
//! library as `libOpenCL.so.1`, which must not resolve to it.

use std::path::{Path, PathBuf};

/// The name engines open OpenCL by.
pub const OPENCL_SONAME: &str = "libOpenCL.so";

/// Returns a folder holding `libOpenCL.so` as a symbolic link to `interposer`, creating or
/// refreshing it under the system's temporary folder (one per interposer path and user).
pub fn opencl_name_shim(interposer: &Path) -> Result<PathBuf, String> {
    let target = interposer
        .canonicalize()
        .map_err(|e| format!("cannot resolve {}: {e}", interposer.display()))?;
    let dir = std::env::temp_dir().join(format!(
        "leakloop-clshim-{}-{:016x}",
        // SAFETY: getuid has no preconditions and cannot fail.
        unsafe { libc::getuid() },
        fnv1a(target.as_os_str().as_encoded_bytes())
    ));
    std::fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let link = dir.join(OPENCL_SONAME);
    if std::fs::read_link(&link).is_ok_and(|t| t == target) {
        return Ok(dir);
    }
    // Made under a unique name and renamed over the old link, so that concurrent runs never
    // see a missing or half-made link.
    let staging = dir.join(format!(".{OPENCL_SONAME}.{}", std::process::id()));
    let _ = std::fs::remove_file(&staging);
    std::os::unix::fs::symlink(&target, &staging)
        .map_err(|e| format!("cannot link {}: {e}", staging.display()))?;
    std::fs::rename(&staging, &link)
        .map_err(|e| format!("cannot move the link to {}: {e}", link.display()))?;
    Ok(dir)
}

/// A stable 64-bit hash of a path (FNV-1a), so the folder's name does not change between runs
/// or Rust versions.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shim_links_the_opencl_name_to_the_interposer_and_is_reused() {
        let dir = tempfile::tempdir().unwrap();
        let lib = dir.path().join("libcl_interposer.so");
        std::fs::write(&lib, b"not really a library").unwrap();
        let shim = opencl_name_shim(&lib).unwrap();
        let link = shim.join(OPENCL_SONAME);
        assert_eq!(
            std::fs::read_link(&link).unwrap(),
            lib.canonicalize().unwrap()
        );
        assert_eq!(opencl_name_shim(&lib).unwrap(), shim);
        assert!(!shim.join("libOpenCL.so.1").exists());
        std::fs::remove_dir_all(shim).unwrap();
    }

    #[test]
    fn a_missing_interposer_is_an_error_naming_it() {
        let err = opencl_name_shim(Path::new("/nonexistent/libcl_interposer.so")).unwrap_err();
        assert!(err.contains("/nonexistent/libcl_interposer.so"), "{err}");
    }
}
