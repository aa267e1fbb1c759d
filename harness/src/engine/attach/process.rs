//! Starting, watching and stopping the processes of attach mode: the measured program (with
//! `command:`) and a marker command (`adb logcat ...`).
//!
//! A started process gets its own process group, so a terminal's Ctrl-C reaches leakloop alone
//! (which then writes its partial report) rather than killing the program mid-turn; and, on
//! Linux, SIGTERM when leakloop itself dies, so nothing outlives an interrupted run. Stopping
//! sends SIGTERM to the whole group (a shell wrapper's children too), waits the grace time, then
//! sends SIGKILL to the group.
//!
//! A group is signalled only while its leader is not reaped: once reaped, its pid (the group's
//! id) may be given to an unrelated process. On Linux the leader's exit is seen without reaping
//! it (`waitid` with `WNOWAIT`), so its zombie holds the pid while the group is signalled, and it
//! is reaped only after that; elsewhere a reaped leader's group is left alone.

use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use crate::engine::{EngineError, EngineErrorKind};

/// A process leakloop started and must stop.
#[derive(Debug)]
pub(crate) struct Started {
    child: Child,
    /// How it ended, once known.
    ended: Option<ExitStatus>,
    /// Whether the child was reaped: from then on its pid may name another process, and
    /// nothing is signalled by it.
    reaped: bool,
}

impl Started {
    /// Starts `argv` in `cwd` with piped stdout and stderr, in its own process group.
    pub fn spawn(argv: &[String], cwd: &Path, what: &str) -> Result<Self, EngineError> {
        let (program, args) = argv.split_first().ok_or_else(|| {
            EngineError::new(EngineErrorKind::Unavailable, format!("the {what} is empty"))
        })?;
        let mut command = Command::new(program);
        command
            .args(args)
            .current_dir(cwd)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        own_group_dying_with_parent(&mut command);
        let child = command.spawn().map_err(|e| {
            EngineError::new(
                EngineErrorKind::Unavailable,
                format!(
                    "cannot start the {what} `{}` (in {}): {e}",
                    crate::input::printable(program),
                    cwd.display()
                ),
            )
        })?;
        Ok(Self {
            child,
            ended: None,
            reaped: false,
        })
    }

    /// The process id.
    pub fn id(&self) -> u32 {
        self.child.id()
    }

    /// The child's handle, to take its pipes.
    pub fn child_mut(&mut self) -> &mut Child {
        &mut self.child
    }

    /// How the process ended, if it has. It is not reaped where that can be avoided (Linux), so
    /// that its group can still be signalled.
    pub fn exited(&mut self) -> Option<ExitStatus> {
        if self.ended.is_none() && !self.reaped {
            if let Some((status, reaped)) = peek_exit(&mut self.child) {
                self.ended = Some(status);
                self.reaped = reaped;
            }
        }
        self.ended
    }

    /// Signals the process group, unless its leader was reaped (its pid may be someone
    /// else's now).
    fn signal_group(&self, signal: libc::c_int) {
        if !self.reaped {
            signal_group(self.child.id(), signal);
        }
    }

    /// Waits for the ended (or killed) leader, after which its pid is never used again.
    fn reap(&mut self) {
        if !self.reaped {
            if let Ok(status) = self.child.wait() {
                self.ended.get_or_insert(status);
            }
            self.reaped = true;
        }
    }

    /// Stops the process group: SIGTERM, then SIGKILL after `grace`. Returns how it ended, in
    /// words (`exited by itself (exit status 0)`, `stopped by SIGTERM`, `killed after 5s`).
    pub fn stop(&mut self, grace: Duration) -> String {
        if let Some(status) = self.exited() {
            self.signal_group(libc::SIGKILL); // leftovers of a wrapper script
            self.reap();
            return format!("exited by itself ({})", describe_exit(status));
        }
        self.signal_group(libc::SIGTERM);
        let deadline = Instant::now() + grace;
        while Instant::now() < deadline {
            if let Some(status) = self.exited() {
                self.signal_group(libc::SIGKILL);
                self.reap();
                return format!("stopped by SIGTERM ({})", describe_exit(status));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        self.signal_group(libc::SIGKILL);
        if !self.reaped {
            let _ = self.child.kill();
        }
        self.reap();
        format!(
            "killed with SIGKILL: still running {} after SIGTERM",
            humantime::format_duration(grace)
        )
    }
}

impl Drop for Started {
    fn drop(&mut self) {
        if !self.reaped {
            self.signal_group(libc::SIGKILL);
            let _ = self.child.kill();
            self.reap();
        }
    }
}

/// How `child` ended, if it has, and whether finding out reaped it. On Linux it is left a
/// zombie (`waitid` with `WNOWAIT`), which keeps its pid from being reused.
#[cfg(any(target_os = "linux", target_os = "android"))]
fn peek_exit(child: &mut Child) -> Option<(ExitStatus, bool)> {
    use std::os::unix::process::ExitStatusExt;
    // SAFETY: an all-zero siginfo_t is a valid value of this plain C struct.
    let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
    // SAFETY: waitid only writes into `info`, which outlives the call.
    let rc = unsafe {
        libc::waitid(
            libc::P_PID,
            child.id(),
            &mut info,
            libc::WEXITED | libc::WNOHANG | libc::WNOWAIT,
        )
    };
    // SAFETY: waitid filled a SIGCHLD siginfo, whose pid and status fields are these.
    let (pid, status) = unsafe { (info.si_pid(), info.si_status()) };
    if rc != 0 || pid == 0 {
        return None; // still running (or not ours to wait for)
    }
    // The wait(2) status encoding, which `ExitStatus` wraps.
    let raw = match info.si_code {
        libc::CLD_EXITED => (status & 0xff) << 8,
        libc::CLD_KILLED => status & 0x7f,
        libc::CLD_DUMPED => (status & 0x7f) | 0x80,
        _ => return None,
    };
    Some((ExitStatus::from_raw(raw), false))
}

#[cfg(not(any(target_os = "linux", target_os = "android")))]
fn peek_exit(child: &mut Child) -> Option<(ExitStatus, bool)> {
    child.try_wait().ok().flatten().map(|status| (status, true))
}

/// `exit status 3` or `signal 9 (SIGKILL)`.
pub(crate) fn describe_exit(status: ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("exit status {code}"),
        (None, Some(sig)) => match nix::sys::signal::Signal::try_from(sig) {
            Ok(name) => format!("signal {sig} ({})", name.as_str()),
            Err(_) => format!("signal {sig}"),
        },
        (None, None) => "an unknown status".to_owned(),
    }
}

fn signal_group(pid: u32, signal: libc::c_int) {
    if let Ok(pid) = libc::pid_t::try_from(pid) {
        // SAFETY: kill(2) with a negative pid signals the group this process created for the
        // child; it touches no memory.
        unsafe {
            libc::kill(-pid, signal);
        }
    }
}

/// The child leads its own process group and, on Linux, gets SIGTERM when leakloop dies.
fn own_group_dying_with_parent(command: &mut Command) {
    use std::os::unix::process::CommandExt;
    command.process_group(0);
    #[cfg(any(target_os = "linux", target_os = "android"))]
    // SAFETY: the closure runs between fork and exec and only calls prctl, which is
    // async-signal-safe.
    unsafe {
        command.pre_exec(|| {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM) == -1 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

/// Whether a process leakloop did not start can be measured: it exists, is not a zombie, and
/// its memory maps are readable by this user.
pub(crate) fn check_pid(pid: u32) -> Result<(), EngineError> {
    let unavailable = |message: String| EngineError::new(EngineErrorKind::Unavailable, message);
    if !pid_alive(pid) {
        return Err(unavailable(format!(
            "there is no process with pid {pid} to attach to"
        )));
    }
    #[cfg(any(target_os = "linux", target_os = "android"))]
    if let Err(e) = std::fs::File::open(format!("/proc/{pid}/smaps_rollup")) {
        if e.kind() == std::io::ErrorKind::PermissionDenied {
            return Err(unavailable(format!(
                "process {pid} is not ours to read: /proc/{pid}/smaps_rollup: {e} (run leakloop as \
                 the process's user, or as root)"
            )));
        }
    }
    Ok(())
}

/// Whether `pid` names a live process (not a zombie).
pub(crate) fn pid_alive(pid: u32) -> bool {
    #[cfg(any(target_os = "linux", target_os = "android"))]
    {
        // The state is the field after the command name's closing parenthesis.
        match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
            Ok(stat) => !matches!(
                stat.rsplit_once(')')
                    .map(|(_, rest)| rest.trim_start().chars().next()),
                Some(Some('Z' | 'X'))
            ),
            Err(_) => false,
        }
    }
    #[cfg(not(any(target_os = "linux", target_os = "android")))]
    {
        let Ok(pid) = libc::pid_t::try_from(pid) else {
            return false;
        };
        // SAFETY: signal 0 only checks that the process exists.
        unsafe { libc::kill(pid, 0) == 0 }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pid_that_does_not_exist_is_unavailable() {
        // Above the kernel's pid_max (at most 2^22), so never a live process.
        let err = check_pid(i32::MAX as u32).unwrap_err();
        assert_eq!(err.kind, EngineErrorKind::Unavailable);
        assert!(err.message.contains("no process with pid"), "{err}");
    }

    #[test]
    fn this_process_is_alive_and_readable() {
        check_pid(std::process::id()).unwrap();
    }

    #[test]
    fn a_process_that_ignores_sigterm_is_killed_after_the_grace_time() {
        let argv = ["sh", "-c", "trap '' TERM; echo ready; sleep 30"].map(String::from);
        let mut started = Started::spawn(&argv, Path::new("."), "program").unwrap();
        // Wait until the trap is set.
        let mut out = started.child_mut().stdout.take().unwrap();
        let mut first = [0u8; 6];
        std::io::Read::read_exact(&mut out, &mut first).unwrap();
        let how = started.stop(Duration::from_millis(200));
        assert!(how.starts_with("killed with SIGKILL"), "{how}");
        assert!(!pid_alive(started.id()));
    }

    /// Issue 20: a leader that exited is seen without being reaped, so its group (a wrapper's
    /// leftover child) is signalled while the leader's zombie still holds the group's id.
    #[test]
    #[cfg(target_os = "linux")]
    fn a_wrapper_that_exited_is_not_reaped_before_its_leftovers_are_killed() {
        let argv = ["sh", "-c", "sleep 30 & echo $!; exit 0"].map(String::from);
        let mut started = Started::spawn(&argv, Path::new("."), "program").unwrap();
        let out = started.child_mut().stdout.take().unwrap();
        let mut line = String::new();
        std::io::BufRead::read_line(&mut std::io::BufReader::new(out), &mut line).unwrap();
        let leftover: u32 = line.trim().parse().unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        while started.exited().is_none() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        assert!(started.exited().is_some(), "the wrapper did not exit");
        assert!(!started.reaped);
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", started.id())).unwrap();
        assert!(stat.contains(") Z"), "the leader was reaped early: {stat}");
        assert!(pid_alive(leftover));
        assert_eq!(
            started.stop(Duration::from_secs(5)),
            "exited by itself (exit status 0)"
        );
        assert!(started.reaped);
        let deadline = Instant::now() + Duration::from_secs(10);
        while pid_alive(leftover) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        assert!(
            !pid_alive(leftover),
            "the wrapper's leftover child outlived stop()"
        );
    }

    #[test]
    fn a_process_that_exits_on_sigterm_is_stopped_by_it() {
        let argv = ["sleep", "30"].map(String::from);
        let mut started = Started::spawn(&argv, Path::new("."), "program").unwrap();
        let how = started.stop(Duration::from_secs(5));
        assert_eq!(how, "stopped by SIGTERM (signal 15 (SIGTERM))");
    }
}
