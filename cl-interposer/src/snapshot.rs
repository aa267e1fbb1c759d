//! `leakloop_cl_snapshot`: the C entry point a process calls (through `dlsym`) at every turn
//! boundary to read the registry's totals as JSON.
//!
//! It is read while the process runs, not at exit: a teardown releases objects that were leaked
//! but still referenced, and a count taken after it looks clean.

use std::ffi::c_char;

use crate::REGISTRY;

/// Writes the current totals as UTF-8 JSON (a [`crate::Snapshot`]) into `buf`, NUL-terminated.
///
/// Returns the JSON's length in bytes without the NUL. When that length is `cap` or more nothing
/// is written and the caller retries with a buffer of at least the returned length plus one.
/// Returns -1 if `buf` is NULL while `cap` is not 0.
///
/// # Safety
/// `buf` must point to `cap` writable bytes (or be NULL with `cap` 0, to ask for the length).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn leakloop_cl_snapshot(buf: *mut c_char, cap: usize) -> isize {
    if buf.is_null() && cap != 0 {
        return -1;
    }
    let json = snapshot_json();
    if json.len() < cap {
        // SAFETY: `buf` holds `cap` > json.len() bytes.
        unsafe {
            std::ptr::copy_nonoverlapping(json.as_ptr(), buf.cast::<u8>(), json.len());
            *buf.add(json.len()) = 0;
        }
    }
    json.len() as isize
}

/// The registry's totals as JSON text.
pub fn snapshot_json() -> String {
    // Serialising plain integers and strings into a String cannot fail.
    serde_json::to_string(&REGISTRY.snapshot()).unwrap_or_else(|_| String::from("{}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_small_buffer_gets_the_length_and_no_bytes() {
        let needed = unsafe { leakloop_cl_snapshot(std::ptr::null_mut(), 0) };
        assert!(needed > 10);
        let mut small = [7 as c_char; 4];
        let again = unsafe { leakloop_cl_snapshot(small.as_mut_ptr(), small.len()) };
        assert_eq!(again, needed);
        assert_eq!(small, [7; 4]);
    }

    #[test]
    fn a_large_buffer_gets_parseable_json() {
        let mut buf = vec![0 as c_char; 4096];
        let len = unsafe { leakloop_cl_snapshot(buf.as_mut_ptr(), buf.len()) } as usize;
        let bytes: Vec<u8> = buf[..len].iter().map(|c| *c as u8).collect();
        assert_eq!(buf[len], 0);
        let parsed: crate::Snapshot = serde_json::from_slice(&bytes).expect("valid JSON");
        assert_eq!(parsed.version, crate::registry::SNAPSHOT_VERSION);
        assert!(parsed.kinds.contains_key("cl_mem"));
    }

    #[test]
    fn null_buffer_with_a_capacity_is_refused() {
        assert_eq!(unsafe { leakloop_cl_snapshot(std::ptr::null_mut(), 8) }, -1);
    }
}
