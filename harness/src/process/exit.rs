//! How a process ended, in words: the one formatter for every exit leakloop reports (a worker's,
//! a driver's, an attached program's, a remote worker's shell status).

use std::os::unix::process::ExitStatusExt;
use std::process::ExitStatus;

/// How a process ended, e.g. `signal 6 (SIGABRT)`, `signal 11 (SIGSEGV), core dumped` or
/// `exit status 3`.
pub(crate) fn describe_exit(status: ExitStatus) -> String {
    if let Some(signal) = status.signal() {
        let name = nix::sys::signal::Signal::try_from(signal)
            .map(|s| s.as_str())
            .unwrap_or("unknown signal");
        let core = if status.core_dumped() {
            ", core dumped"
        } else {
            ""
        };
        return format!("signal {signal} ({name}){core}");
    }
    match status.code() {
        Some(code) => format!("exit status {code}"),
        None => status.to_string(),
    }
}

/// How a status a POSIX shell reported (`$?`) reads: 128 + N is signal N (`signal 9 (SIGKILL)`),
/// anything else an exit status.
pub(crate) fn describe_shell_status(status: i32) -> String {
    // The wait(2) encoding `ExitStatus` wraps: a signal in the low bits, an exit code above them.
    let raw = if status > 128 && status < 128 + 65 {
        status - 128
    } else {
        (status & 0xff) << 8
    };
    describe_exit(ExitStatus::from_raw(raw))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_exit_code_and_a_signal_are_named() {
        assert_eq!(describe_exit(ExitStatus::from_raw(3 << 8)), "exit status 3");
        assert_eq!(describe_exit(ExitStatus::from_raw(0)), "exit status 0");
        assert_eq!(
            describe_exit(ExitStatus::from_raw(libc::SIGKILL)),
            "signal 9 (SIGKILL)"
        );
        // The core-dump flag (0x80) of the wait(2) status.
        assert_eq!(
            describe_exit(ExitStatus::from_raw(libc::SIGSEGV | 0x80)),
            "signal 11 (SIGSEGV), core dumped"
        );
    }

    #[test]
    fn a_real_childs_exit_and_signal_are_named() {
        let exited = std::process::Command::new("sh")
            .args(["-c", "exit 7"])
            .status()
            .unwrap();
        assert_eq!(describe_exit(exited), "exit status 7");
        let killed = std::process::Command::new("sh")
            .args(["-c", "kill -TERM $$"])
            .status()
            .unwrap();
        assert_eq!(describe_exit(killed), "signal 15 (SIGTERM)");
    }

    #[test]
    fn a_shell_status_above_128_is_a_signal() {
        assert_eq!(describe_shell_status(137), "signal 9 (SIGKILL)");
        assert_eq!(describe_shell_status(3), "exit status 3");
        assert_eq!(describe_shell_status(128), "exit status 128");
    }
}
