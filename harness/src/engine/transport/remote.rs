//! [`RemoteEngine`]: a worker on another machine or a device, driven over a command transport.
//!
//! The worker there is leakloop's own `worker --remote`, speaking the same protocol as a local
//! worker through `ssh`'s or `adb shell`'s pipes, so [`WorkerEngine`] supervises it unchanged
//! (call timeouts, crashes, protocol errors). What this adds: failures told apart (the remote
//! worker died, naming how; or the connection was lost) and named after the transport; memory
//! sampled on the target (the worker reads its own /proc there and reports it with each
//! snapshot, so no extra connection is opened per sample); and the remote worker stopped at the
//! end, after a failure or when the run is interrupted (the worker also ends itself when its
//! stdin hangs up, for a runner that was killed outright).

use std::path::Path;

use crate::engine::transport::command::{sh_quote, shown, Transport};
use crate::engine::transport::error::{BuildError, TargetError, TargetErrorKind};
use crate::engine::transport::stage::{
    ended_status, launch_script, stage, Staged, COMMAND_TIMEOUT,
};
use crate::engine::{
    BackendInfo, Engine, EngineError, EngineErrorKind, EngineSnapshot, GenerateOutcome,
    GenerateRequest, Prompt, SessionId, WorkerEngine,
};
use crate::process::describe_shell_status;
use crate::scenario::{AdbProcess, RemoteWorker, Scenario, SessionOptions, Target};

/// An engine whose worker runs on a target reached over ssh or adb.
#[derive(Debug)]
pub struct RemoteEngine {
    /// `None` once dropped (it must end before the remote clean-up runs).
    inner: Option<WorkerEngine>,
    transport: Transport,
    staged: Staged,
    /// The worker's process id on the target.
    peer_pid: u32,
    /// Whether the remote worker may still be running after a failure.
    must_stop: bool,
}

/// The transport and remote worker a scenario's target asks for, if its engine runs there.
pub(crate) fn remote_parts(scenario: &Scenario) -> Option<(Transport, &RemoteWorker)> {
    match &scenario.target {
        Target::Local => None,
        Target::Ssh(ssh) => Some((Transport::Ssh(ssh.clone()), &ssh.worker)),
        Target::Adb(adb) => match &adb.process {
            AdbProcess::Native(worker) => Some((Transport::Adb(adb.clone()), worker)),
            AdbProcess::Package(_) | AdbProcess::Pid(_) => None,
        },
    }
}

impl RemoteEngine {
    /// Checks the target, stages the worker there and starts it.
    pub(crate) fn launch(
        transport: Transport,
        worker: &RemoteWorker,
        scenario: &Scenario,
    ) -> Result<Self, BuildError> {
        transport.preflight(COMMAND_TIMEOUT)?;
        let staged = stage(&transport, worker, scenario)?;
        let script = launch_script(&staged, worker);
        let (program, args) = transport.argv(&script);
        let launched =
            WorkerEngine::launch_in(Path::new(&program), &args, &[], None, &staged.scenario);
        let mut engine = RemoteEngine {
            inner: None,
            transport,
            staged,
            peer_pid: 0,
            must_stop: false,
        };
        match launched {
            Ok(inner) => {
                engine.peer_pid = inner.reported_pid();
                engine.inner = Some(inner);
                Ok(engine)
            }
            // Dropping `engine` removes what was staged.
            Err(e) => Err(engine.explain_start(e)),
        }
    }

    /// The worker's process id on the target.
    pub fn peer_pid(&self) -> u32 {
        self.peer_pid
    }

    fn inner(&mut self) -> &mut WorkerEngine {
        self.inner.as_mut().expect("the worker lives until drop")
    }

    /// A failed handshake: the transport could not reach the target (its own message says so,
    /// with no end marker from the launch script), or the worker started and failed.
    fn explain_start(&self, e: EngineError) -> BuildError {
        let lines: Vec<String> = e
            .message
            .lines()
            .map(|l| l.trim_start_matches(['|', ' ']).to_owned())
            .collect();
        if let Some(status) = ended_status(&lines) {
            return BuildError::Engine(EngineError::new(
                e.kind,
                format!(
                    "the remote worker on {} ended with {} before it answered: {}",
                    self.transport.name(),
                    describe_shell_status(status),
                    e.message
                ),
            ));
        }
        if matches!(e.kind, EngineErrorKind::Crashed { .. }) {
            let bad = [
                "Could not resolve hostname",
                "Permission denied",
                "Host key verification failed",
                "' not found",
            ];
            let kind = if bad.iter().any(|b| e.message.contains(b)) {
                TargetErrorKind::BadTarget
            } else {
                TargetErrorKind::Unreachable
            };
            return BuildError::Target(TargetError::new(
                kind,
                self.transport.name(),
                format!("the worker could not be started there: {}", e.message),
            ));
        }
        BuildError::Engine(e)
    }

    /// Names the transport in a fatal error and tells a remote crash from a lost connection.
    fn explain(&mut self, e: EngineError) -> EngineError {
        if !e.kind.is_fatal() {
            return e;
        }
        self.must_stop = true;
        let transport = self.transport.name();
        let peer = self.peer_pid;
        let tail = self
            .inner
            .as_ref()
            .map(WorkerEngine::stderr_tail)
            .unwrap_or_default();
        // The runner's own words name the local client's pid as "the worker"; say what it is.
        let seen = e
            .message
            .replacen("the worker (pid", "its local client (pid", 1);
        match (&e.kind, ended_status(&tail)) {
            (EngineErrorKind::Crashed { .. }, Some(status)) => EngineError::new(
                EngineErrorKind::Crashed {
                    how: format!("{} on {transport}", describe_shell_status(status)),
                },
                format!("the remote worker (pid {peer}) died; {seen}"),
            ),
            (EngineErrorKind::Crashed { .. }, None) => {
                let stopped = self.stop_remote();
                EngineError::new(
                    EngineErrorKind::Crashed {
                        how: format!("transport {transport}: the connection was lost"),
                    },
                    format!("the remote worker (pid {peer}) {stopped}; {seen}"),
                )
            }
            _ => {
                let stopped = self.stop_remote();
                EngineError::new(
                    e.kind.clone(),
                    format!("on {transport}: {seen}; the remote worker (pid {peer}) {stopped}"),
                )
            }
        }
    }

    /// Kills the remote worker through a new command if it is still running, and says how that
    /// went.
    fn stop_remote(&mut self) -> String {
        if self.peer_pid == 0 {
            return "was never started".into();
        }
        self.must_stop = false;
        let script = stop_script(self.peer_pid);
        match self.transport.run(&script, None, COMMAND_TIMEOUT) {
            Ok(ran) if ran.stdout.contains("stopped") => {
                "was still running and has been killed".into()
            }
            Ok(_) => "has ended".into(),
            Err(e) => format!(
                "could not be stopped ({}); it ends itself once its input hangs up",
                shown(&e.message)
            ),
        }
    }

    fn call<T>(
        &mut self,
        f: impl FnOnce(&mut WorkerEngine) -> Result<T, EngineError>,
    ) -> Result<T, EngineError> {
        let result = f(self.inner());
        result.map_err(|e| self.explain(e))
    }
}

/// Kills `pid` if it is still leakloop's remote worker (a reused pid is left alone).
fn stop_script(pid: u32) -> String {
    format!(
        "if grep -q -- --remote /proc/{pid}/cmdline 2>/dev/null; then kill -KILL {pid} && echo stopped; else echo gone; fi"
    )
}

impl Drop for RemoteEngine {
    fn drop(&mut self) {
        // Closing the worker's stdin ends it; one that does not end is killed locally (the ssh
        // or adb client), after which the remote side hangs up on it.
        drop(self.inner.take());
        let mut script = String::new();
        if self.must_stop && self.peer_pid != 0 {
            script.push_str(&stop_script(self.peer_pid));
            script.push('\n');
        }
        if self.staged.ours {
            script.push_str(&format!("rm -rf -- {}", sh_quote(&self.staged.dir)));
        }
        if !script.is_empty() {
            // Best effort: a target that is gone cannot be cleaned, and the run's result stands.
            let _ = self.transport.run(&script, None, COMMAND_TIMEOUT);
        }
    }
}

impl Engine for RemoteEngine {
    fn describe(&self) -> BackendInfo {
        let mut backend = self
            .inner
            .as_ref()
            .expect("the worker lives until drop")
            .describe();
        backend
            .details
            .insert("target".into(), self.transport.name());
        backend
    }

    fn load(&mut self) -> Result<(), EngineError> {
        self.call(|w| w.load())
    }

    fn open_session(
        &mut self,
        turn: u32,
        options: &SessionOptions,
    ) -> Result<SessionId, EngineError> {
        self.call(|w| w.open_session(turn, options))
    }

    fn send(&mut self, session: SessionId, prompt: &Prompt) -> Result<(), EngineError> {
        self.call(|w| w.send(session, prompt))
    }

    fn generate(
        &mut self,
        session: SessionId,
        request: &GenerateRequest,
    ) -> Result<GenerateOutcome, EngineError> {
        self.call(|w| w.generate(session, request))
    }

    fn close_session(&mut self, session: SessionId) -> Result<(), EngineError> {
        self.call(|w| w.close_session(session))
    }

    fn unload(&mut self) -> Result<(), EngineError> {
        self.call(|w| w.unload())
    }

    fn snapshot(&mut self) -> Result<EngineSnapshot, EngineError> {
        self.call(|w| w.snapshot())
    }

    fn idle(&mut self, duration: std::time::Duration) {
        self.inner().idle(duration);
    }

    fn simulated_clock_ms(&self) -> Option<f64> {
        self.inner
            .as_ref()
            .and_then(WorkerEngine::simulated_clock_ms)
    }

    /// The worker is on another machine: no local probe may read a process of this one.
    fn process_id(&self) -> Option<u32> {
        None
    }
}
