//! The native heap of the current process: bytes the C allocator has handed out and not yet had
//! back (glibc's `mallinfo2().uordblks + hblkhd`). Engines in a worker process report it through
//! their own counters, since it can only be read from inside.

/// Bytes in use on the C heap of this process, where the platform can tell.
pub fn native_heap_bytes() -> Option<u64> {
    imp::in_use()
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
mod imp {
    pub(super) fn in_use() -> Option<u64> {
        // SAFETY: mallinfo2 only reads allocator statistics and has no preconditions.
        let info = unsafe { libc::mallinfo2() };
        Some((info.uordblks + info.hblkhd) as u64)
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
mod imp {
    pub(super) fn in_use() -> Option<u64> {
        None
    }
}

#[cfg(all(test, target_os = "linux", target_env = "gnu"))]
mod tests {
    use super::*;

    #[test]
    fn counts_a_live_c_allocation() {
        let before = native_heap_bytes().unwrap();
        // SAFETY: plain malloc/free of a block we own.
        let block = unsafe { libc::malloc(8 << 20) };
        assert!(!block.is_null());
        let during = native_heap_bytes().unwrap();
        unsafe { libc::free(block) };
        assert!(during >= before + (8 << 20), "{before} -> {during}");
    }
}
