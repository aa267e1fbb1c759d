//! The remote worker's guard against outliving its runner: a runner that is killed, or a
//! connection that drops, closes the worker's stdin (sshd and adbd close the pipe), but a worker
//! busy in a long or hung engine call would not read it. This thread waits for that hang-up
//! without reading it (`process::wait_for_hangup`), gives the worker a moment to end on its own,
//! then ends the process.

use std::time::Duration;

/// How long a worker whose stdin hung up may take to end by itself.
pub(crate) const HANGUP_GRACE: Duration = Duration::from_secs(3);

/// The exit status of a worker ended by the watchdog.
#[cfg(any(target_os = "linux", target_os = "android"))]
pub(crate) const HANGUP_EXIT: i32 = 75;

/// Starts the watchdog thread (a no-op where poll's hang-up report is not available).
pub(crate) fn exit_on_hangup(grace: Duration) {
    #[cfg(any(target_os = "linux", target_os = "android"))]
    std::thread::Builder::new()
        .name("leakloop-hangup".into())
        .spawn(move || {
            crate::process::wait_for_hangup(libc::STDIN_FILENO);
            std::thread::sleep(grace);
            eprintln!("leakloop worker: the runner hung up; ending");
            // SAFETY: _exit ends the process at once; nothing of this thread is used after it.
            unsafe { libc::_exit(HANGUP_EXIT) }
        })
        .map(drop)
        .unwrap_or_else(|e| eprintln!("leakloop worker: no hang-up watchdog: {e}"));
    #[cfg(not(any(target_os = "linux", target_os = "android")))]
    let _ = grace;
}
