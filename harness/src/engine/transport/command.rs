//! The command transports: a POSIX shell command line run on the target through `ssh [options]
//! HOST COMMAND` or `adb [-s SERIAL] shell COMMAND`, either long-lived (the worker, speaking the
//! protocol on its stdin and stdout) or one-shot (making a folder, copying a file, `dumpsys`,
//! stopping a process), each bounded in time.

use std::ffi::OsString;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::engine::transport::adb::classify_adb;
use crate::engine::transport::error::{TargetError, TargetErrorKind};
use crate::process::output::{run_capped, Finished, RunError};
use crate::scenario::{AdbTarget, SshTarget};

/// Environment variable naming the `ssh` program (default: `ssh` on PATH).
pub const SSH_PROGRAM_ENV: &str = "LEAKLOOP_SSH";
/// Environment variable naming the `adb` program (default: `adb` on PATH).
pub const ADB_PROGRAM_ENV: &str = "LEAKLOOP_ADB";

/// The longest output of a one-shot command that is kept (a `dumpsys meminfo` is ~10 KiB).
const MAX_OUTPUT_BYTES: usize = 4 << 20;

/// How leakloop runs commands on a target.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Transport {
    /// `ssh [options] HOST COMMAND`.
    Ssh(SshTarget),
    /// `adb [-s SERIAL] shell COMMAND`.
    Adb(AdbTarget),
}

/// What a one-shot command printed.
#[derive(Debug)]
pub(crate) struct Ran {
    /// Its standard output.
    pub stdout: String,
}

impl Transport {
    /// The transport's name in messages: `ssh user@host:port`, `adb -s SERIAL`.
    pub(crate) fn name(&self) -> String {
        match self {
            Transport::Ssh(ssh) => {
                let user = ssh
                    .user
                    .as_deref()
                    .map(|u| format!("{u}@"))
                    .unwrap_or_default();
                let port = ssh.port.map(|p| format!(":{p}")).unwrap_or_default();
                format!("ssh {user}{}{port}", ssh.host)
            }
            Transport::Adb(adb) => match &adb.serial {
                Some(serial) => format!("adb -s {serial}"),
                None => "adb (the only attached device)".into(),
            },
        }
    }

    /// The program and arguments that run `script` (a POSIX shell command line) on the target.
    /// The script is handed to `sh -c` there, whatever the remote login shell is.
    pub(crate) fn argv(&self, script: &str) -> (OsString, Vec<OsString>) {
        let wrapped = format!("sh -c {}", sh_quote(script));
        let (program, mut args) = self.base();
        match self {
            Transport::Ssh(ssh) => {
                args.push("--".into());
                args.push(ssh.host.clone().into());
            }
            Transport::Adb(_) => args.push("shell".into()),
        }
        args.push(wrapped.into());
        (program, args)
    }

    /// The program and its arguments before the command: options, user, key, serial.
    fn base(&self) -> (OsString, Vec<OsString>) {
        match self {
            Transport::Ssh(ssh) => {
                let program = std::env::var_os(SSH_PROGRAM_ENV).unwrap_or_else(|| "ssh".into());
                // BatchMode: never stop to ask for a password or a host key; -T: no terminal,
                // so the protocol's bytes pass untouched.
                let mut args: Vec<OsString> =
                    vec!["-T".into(), "-o".into(), "BatchMode=yes".into()];
                if let Some(port) = ssh.port {
                    args.extend(["-p".into(), port.to_string().into()]);
                }
                if let Some(user) = &ssh.user {
                    args.extend(["-l".into(), user.into()]);
                }
                if let Some(identity) = &ssh.identity {
                    args.extend(["-i".into(), identity.into()]);
                }
                for option in &ssh.options {
                    args.extend(["-o".into(), option.into()]);
                }
                (program, args)
            }
            Transport::Adb(adb) => {
                let program = std::env::var_os(ADB_PROGRAM_ENV).unwrap_or_else(|| "adb".into());
                let mut args = Vec::new();
                if let Some(serial) = &adb.serial {
                    args.extend(["-s".into(), serial.into()]);
                }
                (program, args)
            }
        }
    }

    /// Runs `script` on the target, feeding it `stdin` (a local file) if given, within
    /// `timeout`. A command that cannot reach the target is a [`TargetError`] of the kind its
    /// message shows; one that ran and failed is [`TargetErrorKind::Command`].
    pub(crate) fn run(
        &self,
        script: &str,
        stdin: Option<&Path>,
        timeout: Duration,
    ) -> Result<Ran, TargetError> {
        let (program, args) = self.argv(script);
        self.run_argv(&program, &args, stdin, timeout, script)
    }

    /// Copies the local file `from` to `to` on the target (`adb push`, or `cat >` over ssh).
    pub(crate) fn push(&self, from: &Path, to: &str, timeout: Duration) -> Result<(), TargetError> {
        match self {
            Transport::Ssh(_) => {
                let script = format!("cat > {0} && chmod 700 -- {0}", sh_quote(to));
                self.run(&script, Some(from), timeout).map(drop)
            }
            Transport::Adb(_) => {
                // adb opens the file itself: it is checked first, as ssh's copy checks it, so
                // that a FIFO cannot hang `adb push`.
                crate::input::open_regular(from).map_err(|e| {
                    TargetError::new(
                        TargetErrorKind::BadTarget,
                        self.name(),
                        format!("cannot copy {e}"),
                    )
                })?;
                let (program, mut args) = self.base();
                // `--`: a local file named like an option (`-n`) stays a file.
                args.extend(["push".into(), "--".into(), from.into(), to.into()]);
                let what = format!("push {} {to}", from.display());
                self.run_argv(&program, &args, None, timeout, &what)?;
                self.run(&format!("chmod 700 -- {}", sh_quote(to)), None, timeout)
                    .map(drop)
            }
        }
    }

    /// Checks that the target answers before anything is started there (adb: `get-state`,
    /// whose errors name the device's state; ssh: a command that prints nothing).
    pub(crate) fn preflight(&self, timeout: Duration) -> Result<(), TargetError> {
        match self {
            Transport::Ssh(_) => self.run("true", None, timeout).map(drop),
            Transport::Adb(_) => {
                let (program, mut args) = self.base();
                args.push("get-state".into());
                let ran = self.run_argv(&program, &args, None, timeout, "get-state")?;
                match ran.stdout.trim() {
                    "device" => Ok(()),
                    state => Err(classify_adb(self, &format!("device is {state}"), None)),
                }
            }
        }
    }

    fn run_argv(
        &self,
        program: &OsString,
        args: &[OsString],
        stdin: Option<&Path>,
        timeout: Duration,
        what: &str,
    ) -> Result<Ran, TargetError> {
        let input = match stdin {
            // Only a regular file, opened without blocking: a FIFO named as the model would
            // otherwise hang the open (and `/dev/zero` would stream for ever).
            Some(path) => Stdio::from(crate::input::open_regular(path).map_err(|e| {
                TargetError::new(
                    TargetErrorKind::BadTarget,
                    self.name(),
                    format!("cannot copy {e}"),
                )
            })?),
            None => Stdio::null(),
        };
        let mut command = Command::new(program);
        command.args(args).stdin(input);
        let finished = match run_capped(command, timeout, MAX_OUTPUT_BYTES) {
            Ok(finished) => finished,
            Err(RunError::Start(e)) => {
                return Err(TargetError::new(
                    TargetErrorKind::Unreachable,
                    self.name(),
                    format!("cannot start `{}`: {e}", Path::new(program).display()),
                ))
            }
            Err(RunError::TimedOut(_)) => {
                return Err(TargetError::new(
                    TargetErrorKind::Lost,
                    self.name(),
                    format!(
                        "`{}` did not finish within {}",
                        shown(what),
                        humantime::format_duration(timeout)
                    ),
                ))
            }
        };
        let Finished {
            status,
            stdout,
            stderr,
        } = finished;
        if status.success() {
            return Ok(Ran { stdout });
        }
        Err(self.failure(what, status.code(), &stderr))
    }

    /// Turns a failed one-shot command into the error its transport's message shows.
    fn failure(&self, what: &str, code: Option<i32>, stderr: &str) -> TargetError {
        match self {
            Transport::Adb(_) => classify_adb(self, stderr, Some(what)),
            Transport::Ssh(_) if code == Some(255) => classify_ssh(self, stderr),
            Transport::Ssh(_) => TargetError::new(
                TargetErrorKind::Command,
                self.name(),
                format!(
                    "`{}` failed on the target ({}){}",
                    shown(what),
                    code.map_or("killed by a signal".into(), |c| format!("exit status {c}")),
                    last_line(stderr)
                ),
            ),
        }
    }
}

/// ssh's own failures (exit status 255): a name that does not resolve, a key that is refused or
/// a bad option say the target as written is wrong; a refused or timed-out connection says the
/// machine is not there now.
fn classify_ssh(transport: &Transport, stderr: &str) -> TargetError {
    const BAD_TARGET: &[&str] = &[
        "Could not resolve hostname",
        "Permission denied",
        "Host key verification failed",
        "Bad configuration option",
        "command-line line",
        "no argument after keyword",
        "Bad port",
        "Too many authentication failures",
    ];
    let kind = if BAD_TARGET.iter().any(|m| stderr.contains(m)) {
        TargetErrorKind::BadTarget
    } else {
        TargetErrorKind::Unreachable
    };
    TargetError::new(
        kind,
        transport.name(),
        format!("ssh failed{}", last_line(stderr)),
    )
}

/// `text` quoted for a POSIX shell: one word, whatever it holds.
pub(crate) fn sh_quote(text: &str) -> String {
    format!("'{}'", text.replace('\'', r"'\''"))
}

/// `: LAST LINE` of a command's stderr, shortened and escaped, or nothing.
pub(crate) fn last_line(stderr: &str) -> String {
    match stderr.lines().rev().find(|l| !l.trim().is_empty()) {
        Some(line) => format!(": {}", shown(line.trim())),
        None => String::new(),
    }
}

/// Text from a command or a target, safe and short for a message.
pub(crate) fn shown(text: &str) -> String {
    crate::input::shorten(&crate::input::printable(text), 160).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoting_keeps_one_word_whatever_it_holds() {
        assert_eq!(sh_quote("a b"), "'a b'");
        assert_eq!(sh_quote("it's $HOME"), r"'it'\''s $HOME'");
        let out = Command::new("sh")
            .arg("-c")
            .arg(format!("printf %s {}", sh_quote("x'; echo pwned; '$(id)")))
            .output()
            .unwrap();
        assert_eq!(
            String::from_utf8_lossy(&out.stdout),
            "x'; echo pwned; '$(id)"
        );
    }

    fn args_of(transport: Transport, script: &str) -> Vec<String> {
        let (_, args) = transport.argv(script);
        args.iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect()
    }

    #[test]
    fn ssh_argv_puts_options_before_the_host_and_ends_them() {
        let ssh = SshTarget {
            host: "box".into(),
            port: Some(2222),
            user: Some("ci".into()),
            identity: Some("/k/id".into()),
            options: vec!["StrictHostKeyChecking=no".into()],
            worker: Default::default(),
        };
        assert_eq!(
            args_of(Transport::Ssh(ssh), "echo hi"),
            [
                "-T",
                "-o",
                "BatchMode=yes",
                "-p",
                "2222",
                "-l",
                "ci",
                "-i",
                "/k/id",
                "-o",
                "StrictHostKeyChecking=no",
                "--",
                "box",
                "sh -c 'echo hi'"
            ]
        );
    }

    /// Issue 20: a FIFO named as the file to copy is refused before ssh or adb starts, never
    /// opened for a blocking read (no writer ever comes).
    #[test]
    fn a_fifo_to_copy_is_refused_without_blocking() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("model.bin");
        let c_path = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a valid NUL-terminated path; mkfifo only creates the file.
        assert_eq!(unsafe { libc::mkfifo(c_path.as_ptr(), 0o600) }, 0);
        let ssh = Transport::Ssh(SshTarget {
            host: "box".into(),
            port: None,
            user: None,
            identity: None,
            options: vec![],
            worker: Default::default(),
        });
        let adb = Transport::Adb(AdbTarget {
            serial: None,
            process: crate::scenario::AdbProcess::Pid(1),
        });
        for transport in [ssh, adb] {
            let err = transport
                .push(&fifo, "/data/local/tmp/model.bin", Duration::from_secs(5))
                .unwrap_err();
            assert_eq!(err.kind, TargetErrorKind::BadTarget);
            assert!(
                err.message
                    .ends_with("a named pipe (FIFO), not a regular file"),
                "{err}"
            );
        }
    }

    #[test]
    fn adb_argv_names_the_serial() {
        let adb = AdbTarget {
            serial: Some("emulator-5554".into()),
            process: crate::scenario::AdbProcess::Pid(1),
        };
        assert_eq!(
            args_of(Transport::Adb(adb), "dumpsys meminfo 1"),
            ["-s", "emulator-5554", "shell", "sh -c 'dumpsys meminfo 1'"]
        );
    }
}
