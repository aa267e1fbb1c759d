//! The remote worker's guard against outliving its runner: a runner that is killed, or a
//! connection that drops, closes the worker's stdin (sshd and adbd close the pipe), but a worker
//! busy in a long or hung engine call would not read it. This thread waits for that hang-up
//! without reading (poll with no events reports only hang-ups and errors), gives the worker a
//! moment to end on its own, then ends the process.

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
            wait_for_hangup(libc::STDIN_FILENO);
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

/// Blocks until `fd`'s other end hangs up (or `fd` is invalid).
#[cfg(any(target_os = "linux", target_os = "android"))]
pub(crate) fn wait_for_hangup(fd: libc::c_int) {
    loop {
        let mut pollfd = libc::pollfd {
            fd,
            events: libc::POLLRDHUP,
            revents: 0,
        };
        // SAFETY: one valid pollfd, for the duration of the call.
        let ready = unsafe { libc::poll(&mut pollfd, 1, -1) };
        if ready < 0 {
            if std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return;
        }
        if pollfd.revents & (libc::POLLHUP | libc::POLLRDHUP | libc::POLLERR | libc::POLLNVAL) != 0
        {
            return;
        }
    }
}

#[cfg(all(test, any(target_os = "linux", target_os = "android")))]
mod tests {
    use std::os::fd::AsRawFd;
    use std::time::Instant;

    use super::*;

    #[test]
    fn a_pipe_whose_writer_closes_is_a_hangup_even_with_unread_data() {
        let (reader, mut writer) = std::io::pipe().unwrap();
        std::io::Write::write_all(&mut writer, b"an unread request\n").unwrap();
        let fd = reader.as_raw_fd();
        let waiter = std::thread::spawn(move || {
            let started = Instant::now();
            wait_for_hangup(fd);
            started.elapsed()
        });
        std::thread::sleep(Duration::from_millis(200));
        assert!(!waiter.is_finished(), "unread data alone is not a hang-up");
        drop(writer);
        let waited = waiter.join().unwrap();
        assert!(waited >= Duration::from_millis(200), "{waited:?}");
        drop(reader);
    }
}
