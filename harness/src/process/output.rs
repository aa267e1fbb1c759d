//! Running a command to its end, bounded: within a timeout, with each output capped (what is past
//! the cap is read and dropped, so the command never blocks on a full pipe). For one-shot
//! commands on a target (`ssh`, `adb`) and scripts that fetch builds.

use std::io::Read;
use std::process::{Command, ExitStatus, Stdio};
use std::sync::mpsc::{self, Receiver};
use std::time::Duration;

use crate::process::{Process, KILL_GRACE};

/// How long the output of a command that has ended may take to arrive (a process it started
/// and that left its group may hold the pipes open).
const OUTPUT_GRACE: Duration = Duration::from_secs(1);

/// What a command that ran to its end printed, and how it ended.
#[derive(Debug)]
pub struct Finished {
    /// How it ended.
    pub status: ExitStatus,
    /// Its standard output, at most the cap, invalid UTF-8 replaced.
    pub stdout: String,
    /// Its standard error, likewise.
    pub stderr: String,
}

/// Why a command did not run to its end.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// It could not be started.
    #[error("cannot start it: {0}")]
    Start(#[source] std::io::Error),
    /// It was still running at the timeout; it and its process group were killed.
    #[error("it did not finish within {}", humantime::format_duration(*.0))]
    TimedOut(Duration),
}

/// Runs `command` (its stdin as the caller set it; stdout and stderr are piped here) in its own
/// process group, waiting at most `timeout`, and keeps at most `max_output` bytes of each
/// output. A command still running at the timeout is killed with its group.
pub fn run_capped(
    mut command: Command,
    timeout: Duration,
    max_output: usize,
) -> Result<Finished, RunError> {
    command.stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut process = Process::spawn(command, libc::SIGKILL).map_err(RunError::Start)?;
    let (Some(out), Some(err)) = (process.take_stdout(), process.take_stderr()) else {
        unreachable!("both pipes were requested");
    };
    // Both pipes are drained on their own threads so that neither can fill and block.
    let stdout = read_capped(out, max_output);
    let stderr = read_capped(err, max_output);
    if process.wait_timeout(timeout).is_none() {
        process.kill(KILL_GRACE);
        return Err(RunError::TimedOut(timeout));
    }
    // Ends what the command left behind, which would otherwise hold its pipes open.
    let status = process
        .end_group()
        .expect("wait_timeout saw the command end");
    let output = |read: Receiver<String>| read.recv_timeout(OUTPUT_GRACE).unwrap_or_default();
    Ok(Finished {
        status,
        stdout: output(stdout),
        stderr: output(stderr),
    })
}

/// Reads at most `max` bytes of `reader` in a thread, then drains the rest.
fn read_capped(mut reader: impl Read + Send + 'static, max: usize) -> Receiver<String> {
    let (sender, read) = mpsc::channel();
    let started = std::thread::Builder::new()
        .name("leakloop-output".into())
        .spawn(move || {
            let mut buf = Vec::new();
            let _ = (&mut reader).take(max as u64).read_to_end(&mut buf);
            // What is past the cap is drained so that the command is not blocked on a full pipe.
            let _ = std::io::copy(&mut reader, &mut std::io::sink());
            let _ = sender.send(String::from_utf8_lossy(&buf).into_owned());
        });
    // Without a thread the output is lost, and the command may block on its full pipe until
    // the timeout; it is not worth failing for.
    drop(started);
    read
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sh(script: &str) -> Command {
        let mut command = Command::new("sh");
        command.args(["-c", script]).stdin(Stdio::null());
        command
    }

    #[test]
    fn a_command_that_ends_gives_its_status_and_capped_output() {
        let done = run_capped(
            sh("head -c 100000 /dev/zero | tr '\\0' x; echo oops >&2; exit 3"),
            Duration::from_secs(60),
            1000,
        )
        .unwrap();
        assert_eq!(done.status.code(), Some(3));
        assert_eq!(done.stdout, "x".repeat(1000));
        assert_eq!(done.stderr, "oops\n");
    }

    #[test]
    fn a_timeout_is_a_typed_error_and_the_group_is_killed() {
        let dir = tempfile::tempdir().unwrap();
        let pid_file = dir.path().join("grandchild");
        // The grandchild holds the pipes; it must be killed with the group, not waited for.
        let script = format!("sleep 300 & echo $! > {}; wait", pid_file.display());
        let err = run_capped(sh(&script), Duration::from_secs(3), 1000).unwrap_err();
        assert!(matches!(err, RunError::TimedOut(_)), "{err:?}");
        assert_eq!(err.to_string(), "it did not finish within 3s");
        let grandchild: u32 = std::fs::read_to_string(&pid_file)
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        assert!(crate::process::child::tests::gone_soon(grandchild));
    }

    #[test]
    fn a_program_that_is_not_there_cannot_start() {
        let err = run_capped(
            Command::new("/nonexistent/leakloop-test"),
            Duration::from_secs(5),
            10,
        )
        .unwrap_err();
        assert!(matches!(err, RunError::Start(_)), "{err:?}");
    }
}
