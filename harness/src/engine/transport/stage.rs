//! Putting a worker on a target: a folder there (a fresh one, or the one the scenario names), the
//! leakloop binary (copied, or the one already there), the engine files the scenario pushes, and
//! the scenario as the remote worker must see it (pushed files at their remote paths).

use std::path::PathBuf;
use std::time::Duration;

use crate::engine::transport::command::{sh_quote, Transport};
use crate::engine::transport::error::{TargetError, TargetErrorKind};
use crate::scenario::{PushItem, RemoteWorker, Scenario, Target};

/// Environment variable naming the leakloop binary copied to a target whose `leakloop` is not
/// given (an Android build for a device); this binary (or `LEAKLOOP_BIN`) when unset.
pub const TARGET_BIN_ENV: &str = "LEAKLOOP_TARGET_BIN";

/// How long a command that makes or checks something on the target may take.
pub(crate) const COMMAND_TIMEOUT: Duration = Duration::from_secs(30);
/// How long copying one file may take (a model can be gigabytes).
const PUSH_TIMEOUT: Duration = Duration::from_secs(30 * 60);

/// A worker ready to start on the target.
#[derive(Debug)]
pub(crate) struct Staged {
    /// The worker's folder on the target.
    pub dir: String,
    /// Whether leakloop made `dir` (and removes it at the end).
    pub ours: bool,
    /// The leakloop binary on the target.
    pub binary: String,
    /// The scenario the remote worker is given.
    pub scenario: Scenario,
}

/// Makes the folder, copies what is to be copied and rewrites the scenario's paths. On failure,
/// a folder leakloop made is removed again.
pub(crate) fn stage(
    transport: &Transport,
    worker: &RemoteWorker,
    scenario: &Scenario,
) -> Result<Staged, TargetError> {
    let (dir, ours) = match &worker.dir {
        Some(dir) => {
            transport.run(
                &format!("mkdir -p -- {}", sh_quote(dir)),
                None,
                COMMAND_TIMEOUT,
            )?;
            (dir.clone(), false)
        }
        None => {
            let base = match transport {
                Transport::Ssh(_) => "/tmp",
                Transport::Adb(_) => "/data/local/tmp",
            };
            let made = transport.run(
                &format!("mktemp -d {base}/leakloop.XXXXXX"),
                None,
                COMMAND_TIMEOUT,
            )?;
            let dir = made.stdout.trim().to_owned();
            if !dir.starts_with(base) {
                return Err(TargetError::new(
                    TargetErrorKind::Command,
                    transport.name(),
                    format!("mktemp printed no folder under {base}"),
                ));
            }
            (dir, true)
        }
    };
    let mut staged = Staged {
        dir,
        ours,
        binary: String::new(),
        scenario: scenario.clone(),
    };
    match fill(transport, worker, &mut staged) {
        Ok(()) => Ok(staged),
        Err(e) => {
            if staged.ours {
                let _ = transport.run(
                    &format!("rm -rf -- {}", sh_quote(&staged.dir)),
                    None,
                    COMMAND_TIMEOUT,
                );
            }
            Err(e)
        }
    }
}

fn fill(
    transport: &Transport,
    worker: &RemoteWorker,
    staged: &mut Staged,
) -> Result<(), TargetError> {
    staged.binary = match &worker.leakloop {
        Some(path) => {
            // `command -v` finds a name on the target's PATH as well as a path.
            transport
                .run(
                    &format!("command -v -- {}", sh_quote(path)),
                    None,
                    COMMAND_TIMEOUT,
                )
                .map_err(|e| TargetError {
                    message: format!(
                        "the leakloop binary `{path}` is not on the target ({})",
                        e.message
                    ),
                    ..e
                })?;
            path.clone()
        }
        None => {
            let local = local_binary(transport)?;
            let remote = format!("{}/leakloop", staged.dir);
            transport.push(&local, &remote, PUSH_TIMEOUT)?;
            remote
        }
    };
    staged.scenario.target = Target::Local;
    for item in &worker.push {
        let slot = match item {
            PushItem::Model => &mut staged.scenario.engine.model,
            PushItem::Lib => &mut staged.scenario.engine.lib,
        };
        // Validation made sure the scenario names the file it pushes.
        let Some(local) = slot.clone() else { continue };
        let name = local
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "file".into());
        let remote = format!("{}/{name}", staged.dir);
        transport.push(&local, &remote, PUSH_TIMEOUT)?;
        *slot = Some(PathBuf::from(remote));
    }
    Ok(())
}

/// The binary to copy: [`TARGET_BIN_ENV`], else the one a local worker would run.
fn local_binary(transport: &Transport) -> Result<PathBuf, TargetError> {
    if let Some(path) = std::env::var_os(TARGET_BIN_ENV) {
        return Ok(PathBuf::from(path));
    }
    crate::engine::worker::worker_binary().map_err(|e| {
        TargetError::new(TargetErrorKind::BadTarget, transport.name(), format!(
            "no leakloop binary to copy to the target ({}); set {TARGET_BIN_ENV} or the target's `leakloop`",
            e.message
        ))
    })
}

/// The command line that runs the worker in `staged.dir` with `env`, and says on stderr how it
/// ended, so that a worker that died there is told apart from a connection that was lost.
pub(crate) fn launch_script(staged: &Staged, worker: &RemoteWorker) -> String {
    let env: String = worker
        .env
        .iter()
        .map(|(k, v)| format!("{k}={} ", sh_quote(v)))
        .collect();
    format!(
        "cd {dir} || exit 97\n{env}{bin} worker --remote\ns=$?\necho \"{MARKER} $s\" >&2\nexit $s",
        dir = sh_quote(&staged.dir),
        bin = sh_quote(&staged.binary),
    )
}

/// The line the launch script writes when the worker has ended, followed by its status.
pub(crate) const MARKER: &str = "leakloop-remote: the worker ended with status";

/// The status the launch script reported, if the worker ended (rather than the connection).
pub(crate) fn ended_status(stderr: &[String]) -> Option<i32> {
    stderr
        .iter()
        .rev()
        .find_map(|line| line.trim().strip_prefix(MARKER)?.trim().parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_end_marker_gives_the_workers_status() {
        let lines = vec!["engine says hi".to_owned(), format!("{MARKER} 137")];
        assert_eq!(ended_status(&lines), Some(137));
        assert_eq!(
            crate::process::describe_shell_status(137),
            "signal 9 (SIGKILL)"
        );
        assert_eq!(ended_status(&["ssh: connect to host".to_owned()]), None);
    }

    #[test]
    fn the_launch_script_quotes_what_the_scenario_gave() {
        let staged = Staged {
            dir: "/tmp/a b".into(),
            ours: true,
            binary: "/tmp/a b/leakloop".into(),
            scenario: Scenario::new("s", crate::scenario::EngineSpec::sim("cpu-flat"), 1, vec![]),
        };
        let worker = RemoteWorker {
            env: [("LITERT_LM_LIB".to_owned(), "/x/it's.so".to_owned())].into(),
            ..Default::default()
        };
        let script = launch_script(&staged, &worker);
        assert!(script.starts_with("cd '/tmp/a b' || exit 97\nLITERT_LM_LIB='/x/it'\\''s.so' '/tmp/a b/leakloop' worker --remote\n"), "{script}");
    }
}
