//! [`Process`]: a started child leading its own process group, whose exit a thread watches
//! without reaping it, and whose group is killed when it is dropped.
//!
//! A group is signalled only while its leader is not reaped: once reaped, its pid (the group's
//! id) may be given to an unrelated process. The watching thread sees the leader's exit without
//! reaping it (`waitid` with `WNOWAIT`), so the leader's zombie holds the pid while its group is
//! signalled, and it is reaped only after that.

use std::io;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Child, ChildStderr, ChildStdin, ChildStdout, Command, ExitStatus};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, TryRecvError};
use std::time::Duration;

use crate::process::group;

/// How long a process sent SIGKILL gets to be reaped (one stuck in a driver call dies only when
/// it leaves the kernel).
pub(crate) const KILL_GRACE: Duration = Duration::from_secs(5);

/// A child process leakloop started and must end.
#[derive(Debug)]
pub(crate) struct Process {
    child: Child,
    /// The exit the watching thread saw (the leader not reaped yet).
    exit: Receiver<ExitStatus>,
    /// How it ended, once seen.
    ended: Option<ExitStatus>,
    /// Whether the leader was reaped: from then on its pid may name another process, and
    /// nothing is signalled by it.
    reaped: bool,
    /// Whether it was sent SIGKILL and did not end within the grace time (stuck in the kernel):
    /// dropping it then does not wait again.
    stuck: bool,
}

/// How [`Process::stop`] ended a process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Stopped {
    /// It had exited before it was asked to.
    ByItself(ExitStatus),
    /// It ended on SIGTERM within the grace time.
    Terminated(ExitStatus),
    /// It was still running after the grace time and was sent SIGKILL.
    Killed,
}

impl Process {
    /// Starts `command` (its pipes as the caller set them) leading its own process group, and
    /// registers the group to be ended with `ending` if leakloop is interrupted; on Linux the
    /// process is also sent `ending` when the thread that started it goes away (a runner killed
    /// outright runs no destructor).
    pub fn spawn(mut command: Command, ending: libc::c_int) -> io::Result<Self> {
        command.process_group(0);
        die_with_parent(&mut command, ending);
        let mut child = command.spawn()?;
        let pid = child.id();
        group::register(pid, ending);
        let (sender, exit) = mpsc::channel();
        let watcher = std::thread::Builder::new()
            .name("leakloop-wait".into())
            .spawn(move || {
                if let Some(status) = wait_unreaped(pid) {
                    let _ = sender.send(status);
                }
            });
        if let Err(e) = watcher {
            group::signal_group(pid, libc::SIGKILL);
            group::forget(pid);
            let _ = child.kill();
            let _ = child.wait();
            return Err(e);
        }
        Ok(Self {
            child,
            exit,
            ended: None,
            reaped: false,
            stuck: false,
        })
    }

    /// The process id (also its group's id).
    pub fn id(&self) -> u32 {
        self.child.id()
    }

    /// Its stdin, if it was piped and not taken yet.
    pub fn take_stdin(&mut self) -> Option<ChildStdin> {
        self.child.stdin.take()
    }

    /// Its stdout, if it was piped and not taken yet.
    pub fn take_stdout(&mut self) -> Option<ChildStdout> {
        self.child.stdout.take()
    }

    /// Its stderr, if it was piped and not taken yet.
    pub fn take_stderr(&mut self) -> Option<ChildStderr> {
        self.child.stderr.take()
    }

    /// How the process ended, if it has (without waiting). It is not reaped, so that its group
    /// can still be signalled.
    pub fn exited(&mut self) -> Option<ExitStatus> {
        if self.ended.is_none() {
            match self.exit.try_recv() {
                Ok(status) => self.ended = Some(status),
                Err(TryRecvError::Empty) => {}
                Err(TryRecvError::Disconnected) => self.unwatched(),
            }
        }
        self.ended
    }

    /// Waits at most `timeout` for the process to end; how it ended, or `None` if it still
    /// runs. It is not reaped.
    pub fn wait_timeout(&mut self, timeout: Duration) -> Option<ExitStatus> {
        if self.ended.is_none() {
            match self.exit.recv_timeout(timeout) {
                Ok(status) => self.ended = Some(status),
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => self.unwatched(),
            }
        }
        self.ended
    }

    /// The watching thread could not wait for the process (waitid failed): asks the ordinary
    /// way, which reaps it if it has ended.
    fn unwatched(&mut self) {
        if let Ok(Some(status)) = self.child.try_wait() {
            group::forget(self.id());
            self.ended = Some(status);
            self.reaped = true;
        }
    }

    /// Sends `signal` to the process group, unless its leader was reaped (its pid may be
    /// someone else's now).
    pub fn signal_group(&self, signal: libc::c_int) {
        if !self.reaped {
            group::signal_group(self.id(), signal);
        }
    }

    /// For a process that has ended: kills what is left of its group (a wrapper's children,
    /// helpers holding its pipes) and reaps it. Its exit status; `None` if it has not ended.
    pub fn end_group(&mut self) -> Option<ExitStatus> {
        self.exited()?;
        if !self.reaped {
            self.signal_group(libc::SIGKILL);
            group::forget(self.id());
            if let Ok(status) = self.child.wait() {
                // The status the kernel reaped is the exact one.
                self.ended = Some(status);
            }
            self.reaped = true;
        }
        self.ended
    }

    /// Sends SIGKILL to the process and its group and waits at most `grace` until it has ended,
    /// then reaps it so that no zombie is left. Its status; `None` if it had not ended in time
    /// (stuck in the kernel).
    pub fn kill(&mut self, grace: Duration) -> Option<ExitStatus> {
        if !self.reaped {
            self.signal_group(libc::SIGKILL);
            // An error here means it already exited.
            let _ = self.child.kill();
        }
        if self.wait_timeout(grace).is_none() {
            self.stuck = true;
            return None;
        }
        self.end_group()
    }

    /// Stops the process group: SIGTERM, then SIGKILL after `grace`, and reaps the leader.
    pub fn stop(&mut self, grace: Duration) -> Stopped {
        if let Some(status) = self.end_group() {
            return Stopped::ByItself(status);
        }
        self.signal_group(libc::SIGTERM);
        if self.wait_timeout(grace).is_some() {
            if let Some(status) = self.end_group() {
                return Stopped::Terminated(status);
            }
        }
        self.kill(KILL_GRACE);
        Stopped::Killed
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        if self.stuck {
            self.signal_group(libc::SIGKILL);
        } else if !self.reaped {
            self.kill(KILL_GRACE);
        }
    }
}

/// Blocks until process `pid` (a child of this process) has ended and returns how, leaving it
/// a zombie (`WNOWAIT`), which keeps its pid from being reused. `None` if it cannot be waited
/// for.
fn wait_unreaped(pid: u32) -> Option<ExitStatus> {
    loop {
        // SAFETY: an all-zero siginfo_t is a valid value of this plain C struct.
        let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
        // SAFETY: waitid only writes into `info`, which outlives the call.
        let rc = unsafe {
            libc::waitid(
                libc::P_PID,
                pid as libc::id_t,
                &mut info,
                libc::WEXITED | libc::WNOWAIT,
            )
        };
        if rc != 0 {
            if io::Error::last_os_error().kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return None;
        }
        // SAFETY: waitid filled a SIGCHLD siginfo, whose status field is this.
        let status = unsafe { info.si_status() };
        // The wait(2) status encoding, which `ExitStatus` wraps.
        let raw = match info.si_code {
            libc::CLD_EXITED => (status & 0xff) << 8,
            libc::CLD_KILLED => status & 0x7f,
            libc::CLD_DUMPED => (status & 0x7f) | 0x80,
            // Stopped or continued (not asked for with WEXITED alone): wait on.
            _ => continue,
        };
        return Some(ExitStatus::from_raw(raw));
    }
}

/// On Linux the kernel sends `signal` to the child when the thread that started it goes away.
#[cfg(any(target_os = "linux", target_os = "android"))]
fn die_with_parent(command: &mut Command, signal: libc::c_int) {
    // SAFETY: the closure runs between fork and exec and only calls prctl, which is
    // async-signal-safe.
    unsafe {
        command.pre_exec(move || {
            if libc::prctl(libc::PR_SET_PDEATHSIG, signal) == -1 {
                return Err(io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

#[cfg(not(any(target_os = "linux", target_os = "android")))]
fn die_with_parent(_command: &mut Command, _signal: libc::c_int) {}

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
pub(super) mod tests;
