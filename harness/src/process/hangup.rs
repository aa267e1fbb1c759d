//! Waiting for the other end of a pipe to hang up without reading it: how a remote worker sees
//! that its runner is gone while its engine is busy (`engine::transport`'s watchdog).

/// Blocks until `fd`'s other end hangs up (or `fd` is invalid). Unread data is no hang-up: poll
/// with no read events reports only hang-ups and errors.
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

#[cfg(test)]
mod tests {
    use std::os::fd::AsRawFd;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    use std::time::Duration;

    use super::*;

    #[test]
    fn a_pipe_whose_writer_closes_is_a_hangup_even_with_unread_data() {
        let (reader, mut writer) = std::io::pipe().unwrap();
        std::io::Write::write_all(&mut writer, b"an unread request\n").unwrap();
        let fd = reader.as_raw_fd();
        // What the waiter sees when it returns, not how long it waited: a loaded machine may
        // start the thread late, so no clock is involved.
        let closed = Arc::new(AtomicBool::new(false));
        let waiter = std::thread::spawn({
            let closed = Arc::clone(&closed);
            move || {
                wait_for_hangup(fd);
                closed.load(Ordering::SeqCst)
            }
        });
        std::thread::sleep(Duration::from_millis(200));
        assert!(!waiter.is_finished(), "unread data alone is not a hang-up");
        closed.store(true, Ordering::SeqCst);
        drop(writer);
        assert!(
            waiter.join().unwrap(),
            "the waiter returned before the writer closed"
        );
        drop(reader);
    }
}
