//! Process groups: signalling one, and the registry of the groups leakloop started and has not
//! yet ended, so that a runner that exits without dropping its processes (an interrupted run)
//! still ends what they started.

use std::sync::{Mutex, MutexGuard, PoisonError};

/// A live group: its leader's pid (the group's id) and the signal that ends it.
type Live = (u32, libc::c_int);

fn live() -> MutexGuard<'static, Vec<Live>> {
    static LIVE: Mutex<Vec<Live>> = Mutex::new(Vec::new());
    LIVE.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Records the group `pid` leads, ended by `signal` on interrupt.
pub(super) fn register(pid: u32, signal: libc::c_int) {
    live().push((pid, signal));
}

/// Forgets the group `pid` leads: it was ended, or its leader is about to be reaped (after which
/// its pid may name an unrelated process).
pub(super) fn forget(pid: u32) {
    live().retain(|(p, _)| *p != pid);
}

/// Ends the process group of every process started and not yet ended: for a runner about to
/// exit without dropping its engines (SIGINT, SIGTERM). The leaders would die with it
/// (`PR_SET_PDEATHSIG`), but not the processes they started.
#[cfg(feature = "cli")]
pub(crate) fn end_live_groups() {
    let live = std::mem::take(&mut *live());
    for (pid, signal) in live {
        signal_group(pid, signal);
    }
}

/// Sends `signal` to the process group `pid` leads. Called only while its leader is not reaped
/// (then the group's id stays taken while any member lives, and a group with no members left
/// gets ESRCH).
pub(super) fn signal_group(pid: u32, signal: libc::c_int) {
    if let Ok(pid) = libc::pid_t::try_from(pid) {
        if pid > 0 {
            // SAFETY: kill(2) with a negative pid signals a process group; it touches no memory.
            unsafe {
                libc::kill(-pid, signal);
            }
        }
    }
}
