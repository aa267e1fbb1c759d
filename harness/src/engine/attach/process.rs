//! The processes of attach mode: the measured program (with `command:`) and a marker command
//! (`adb logcat ...`), started and stopped through [`crate::process`]; and the checks on a
//! process leakloop did not start (`pid:`).
//!
//! A started process leads its own process group, so a terminal's Ctrl-C reaches leakloop alone
//! (which then writes its partial report) rather than killing the program mid-turn; and it gets
//! SIGTERM when leakloop dies or is interrupted, so nothing outlives the run. Stopping sends
//! SIGTERM to the whole group (a shell wrapper's children too), waits the grace time, then sends
//! SIGKILL to the group.

use std::path::Path;
use std::process::{ChildStderr, ChildStdout, Command, ExitStatus, Stdio};
use std::time::Duration;

use crate::engine::{EngineError, EngineErrorKind};
use crate::process::{describe_exit, pid_alive, Process, Stopped};

/// A process leakloop started and must stop.
#[derive(Debug)]
pub(crate) struct Started(Process);

impl Started {
    /// Starts `argv` in `cwd` with `env` added to leakloop's environment and piped stdout and
    /// stderr, in its own process group.
    pub fn spawn(
        argv: &[String],
        cwd: &Path,
        env: &[(String, String)],
        what: &str,
    ) -> Result<Self, EngineError> {
        let (program, args) = argv.split_first().ok_or_else(|| {
            EngineError::new(EngineErrorKind::Unavailable, format!("the {what} is empty"))
        })?;
        let mut command = Command::new(program);
        command
            .args(args)
            .envs(env.iter().map(|(k, v)| (k, v)))
            .current_dir(cwd)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let process = Process::spawn(command, libc::SIGTERM).map_err(|e| {
            EngineError::new(
                EngineErrorKind::Unavailable,
                format!(
                    "cannot start the {what} `{}` (in {}): {e}",
                    crate::input::printable(program),
                    cwd.display()
                ),
            )
        })?;
        Ok(Self(process))
    }

    /// The process id.
    pub fn id(&self) -> u32 {
        self.0.id()
    }

    /// Its stdout and stderr, to be read (once).
    pub fn take_outputs(&mut self) -> (Option<ChildStdout>, Option<ChildStderr>) {
        (self.0.take_stdout(), self.0.take_stderr())
    }

    /// How the process ended, if it has. It is not reaped, so that its group can still be
    /// signalled.
    pub fn exited(&mut self) -> Option<ExitStatus> {
        self.0.exited()
    }

    /// Stops the process group: SIGTERM, then SIGKILL after `grace`. Returns how it ended, in
    /// words (`exited by itself (exit status 0)`, `stopped by SIGTERM`, `killed after 5s`).
    pub fn stop(&mut self, grace: Duration) -> String {
        match self.0.stop(grace) {
            Stopped::ByItself(status) => format!("exited by itself ({})", describe_exit(status)),
            Stopped::Terminated(status) => {
                format!("stopped by SIGTERM ({})", describe_exit(status))
            }
            Stopped::Killed => format!(
                "killed with SIGKILL: still running {} after SIGTERM",
                humantime::format_duration(grace)
            ),
        }
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
    fn a_process_that_exits_on_sigterm_is_stopped_by_it_in_words() {
        let argv = ["sleep", "30"].map(String::from);
        let mut started = Started::spawn(&argv, Path::new("."), &[], "program").unwrap();
        let how = started.stop(Duration::from_secs(5));
        assert_eq!(how, "stopped by SIGTERM (signal 15 (SIGTERM))");
        assert!(!pid_alive(started.id()));
    }
}
