//! The runner side: [`WorkerEngine`] implements [`Engine`] by forwarding every call to a worker
//! process and supervising it.
//!
//! Each call must be answered within the scenario's `engine.call_timeout`; past it the worker is
//! killed and reaped and the call fails as `Hung`. A worker that dies (a signal, an abort, an
//! exit) fails the call as `Crashed`, naming the signal; a reply that is not a valid message, or
//! not the answer to the call, fails it as `Protocol`. The worker's stderr is drained all the
//! time (its last lines are kept and quoted in these errors), so a chatty engine cannot block on
//! a full pipe. After such a failure the worker is gone and every later call fails the same way.

use std::collections::{BTreeMap, VecDeque};
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};
use tokio::runtime::Runtime;
use tokio::task::JoinHandle;

use crate::engine::opencl::OpenClNameShim;
use crate::engine::worker::protocol::{
    counts_went_down, decode_line, encode_line, excerpt, reply_problem, EngineConfig, Reply,
    Request, Response, WireError, MAX_LINE_BYTES, MAX_SNAPSHOT_ENTRIES, PROTOCOL_VERSION,
};
use crate::engine::{
    BackendInfo, Engine, EngineError, EngineErrorKind, EngineSnapshot, GenerateOutcome,
    GenerateRequest, KindCounts, Prompt, SessionId,
};
use crate::scenario::{Scenario, SessionOptions};

/// Environment variable naming the `leakloop` binary to run as the worker, where the current
/// executable is not `leakloop` (a test binary, a wrapper).
pub const WORKER_BIN_ENV: &str = "LEAKLOOP_BIN";

/// How many of the worker's last stderr lines (and stdout lines before its handshake) are kept;
/// earlier ones are counted.
const STDERR_TAIL_LINES: usize = 64;
/// Longest stderr line kept whole; longer ones are kept in pieces. Also the most bytes kept of a
/// stdout line before the handshake (the rest is counted), so the tail holds at most
/// 64 x 4 KiB whatever the worker prints.
const STDERR_LINE_BYTES: u64 = 4096;
/// Lines a worker may print on stdout before its handshake (a preloaded library's banner).
const MAX_NOISE_LINES: usize = 1000;
/// How long a worker that closed its pipes gets to exit before it is killed.
const EXIT_GRACE: Duration = Duration::from_secs(2);
/// How long a killed worker gets to be reaped.
const KILL_GRACE: Duration = Duration::from_secs(5);
/// How long to wait for the last stderr lines of a dead worker.
const STDERR_GRACE: Duration = Duration::from_secs(1);

/// An engine that runs in a supervised worker process (`leakloop worker`).
///
/// Its calls block the calling thread (it drives the pipes on a small runtime of its own), so it
/// must not be used from inside an async runtime. Dropping it closes the worker's stdin, which
/// ends the worker; one that has not ended after 2s is killed.
#[derive(Debug)]
pub struct WorkerEngine {
    runtime: Runtime,
    /// The pipes and process; `None` once the worker is gone.
    link: Option<Link>,
    pid: u32,
    call_timeout: Duration,
    backend: BackendInfo,
    clock_ms: Option<f64>,
    /// The failure that ended the worker, repeated to every later call.
    ended: Option<EngineError>,
    stderr: StderrTail,
    /// A folder the worker loads libraries from, removed only after the worker is gone (fields
    /// drop after `Drop::drop` has waited for it).
    shim: Option<OpenClNameShim>,
    /// The external driver's command line (`backend: exec`), reported with the backend.
    driver: Option<String>,
    /// The process id the worker gave in its handshake (the one it says holds the engine).
    reported_pid: u32,
    /// The call before the current one and the reply that answers it, to name a reply that
    /// came one call late.
    previous: Option<(&'static str, &'static str)>,
    current: Option<(&'static str, &'static str)>,
    /// The ledger counts of the last snapshot, which every later one must equal or exceed.
    last_ledger: BTreeMap<String, KindCounts>,
}

#[derive(Debug)]
struct Link {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    stderr_task: JoinHandle<()>,
}

/// The last lines of the worker's stderr, shared with the task that drains it: at most
/// [`STDERR_TAIL_LINES`] lines of at most [`STDERR_LINE_BYTES`] bytes each (plus a note of what
/// was cut), and a count of the lines that no longer fit.
#[derive(Debug, Clone, Default)]
struct StderrTail(Arc<Mutex<TailLines>>);

#[derive(Debug, Default)]
struct TailLines {
    lines: VecDeque<String>,
    /// Lines pushed out of the tail.
    dropped: u64,
}

impl StderrTail {
    /// Keeps `prefix` and `line` (at most [`STDERR_LINE_BYTES`] of it), pushing out the oldest
    /// line when the tail is full.
    fn push(&self, prefix: &str, line: &[u8]) {
        let cap = STDERR_LINE_BYTES as usize;
        let line = line.strip_suffix(b"\n").unwrap_or(line);
        let mut kept = format!(
            "{prefix}{}",
            String::from_utf8_lossy(&line[..line.len().min(cap)]).trim_end()
        );
        if line.len() > cap {
            kept.push_str(&format!(" [... {} more bytes]", line.len() - cap));
        }
        let mut tail = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if tail.lines.len() == STDERR_TAIL_LINES {
            tail.lines.pop_front();
            tail.dropped += 1;
        }
        tail.lines.push_back(kept);
    }

    fn lines(&self) -> Vec<String> {
        let tail = self.0.lock().unwrap_or_else(|e| e.into_inner());
        tail.lines.iter().cloned().collect()
    }

    fn dropped(&self) -> u64 {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).dropped
    }

    /// The tail as an indented block for error messages, or nothing.
    fn render(&self) -> String {
        let lines = self.lines();
        if lines.is_empty() {
            return String::new();
        }
        let mut text = String::from("\nlast lines of the worker's stderr:");
        let dropped = self.dropped();
        if dropped > 0 {
            text.push_str(&format!("\n  | [... {dropped} earlier lines not kept]"));
        }
        for line in lines {
            text.push_str("\n  | ");
            text.push_str(&line);
        }
        text
    }
}

/// What went wrong in one exchange of request and reply.
enum ExchangeFailure {
    /// The worker closed its stdout or its stdin (it is dying or dead).
    Closed(String),
    /// The worker said something that is not a reply.
    Malformed(String),
}

impl WorkerEngine {
    /// Starts a worker for `scenario`: this `leakloop` binary (or the one [`WORKER_BIN_ENV`]
    /// names) re-executed as `leakloop worker`, with `env` added to its environment (how a
    /// preload library is injected), and waits for its engine to be built.
    pub fn spawn(scenario: &Scenario, env: &[(String, String)]) -> Result<Self, EngineError> {
        let program = worker_binary()?;
        Self::spawn_program(&program, scenario, env)
    }

    /// Like [`WorkerEngine::spawn`], with the `leakloop` binary given (integration tests pass
    /// `env!("CARGO_BIN_EXE_leakloop")`).
    pub fn spawn_program(
        program: &Path,
        scenario: &Scenario,
        env: &[(String, String)],
    ) -> Result<Self, EngineError> {
        Self::launch(program, &[OsString::from("worker")], env, scenario)
    }

    /// Starts `program args...` as a worker speaking the protocol and performs the handshake.
    ///
    /// Any program may serve: `leakloop worker`, or a test binary that re-executes itself and
    /// serves from inside one of its tests (`leakloop::testing`, feature `test-support`).
    pub fn launch(
        program: &Path,
        args: &[OsString],
        env: &[(String, String)],
        scenario: &Scenario,
    ) -> Result<Self, EngineError> {
        Self::launch_in(program, args, env, None, scenario)
    }

    /// [`WorkerEngine::launch`] in `cwd` (or this process's folder).
    pub(crate) fn launch_in(
        program: &Path,
        args: &[OsString],
        env: &[(String, String)],
        cwd: Option<&Path>,
        scenario: &Scenario,
    ) -> Result<Self, EngineError> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("leakloop-worker-io")
            .enable_all()
            .build()
            .map_err(|e| {
                EngineError::new(
                    EngineErrorKind::Unavailable,
                    format!("cannot start the worker's I/O runtime: {e}"),
                )
            })?;
        let mut command = Command::new(program);
        command
            .args(args)
            .envs(env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        if let Some(cwd) = cwd {
            command.current_dir(cwd);
        }
        // Its own process group, so that whatever it starts (a wrapper's children, helpers) is
        // ended with it (`end_group`), whichever way it ends.
        command.process_group(0);
        die_with_parent(&mut command);
        let mut child = {
            let _context = runtime.enter();
            command.spawn().map_err(|e| {
                EngineError::new(
                    EngineErrorKind::Unavailable,
                    format!("cannot start the worker `{}`: {e}", program.display()),
                )
            })?
        };
        let pid = child.id().unwrap_or_default();
        live_groups().push(pid);
        let stderr = StderrTail::default();
        let pipes = (child.stdin.take(), child.stdout.take(), child.stderr.take());
        let (Some(stdin), Some(stdout), Some(child_stderr)) = pipes else {
            unreachable!("all three pipes were requested");
        };
        let stderr_task = runtime.spawn(drain(child_stderr, stderr.clone()));
        let mut worker = WorkerEngine {
            runtime,
            link: Some(Link {
                child,
                stdin,
                stdout: BufReader::new(stdout),
                stderr_task,
            }),
            pid,
            call_timeout: scenario.engine.call_timeout,
            backend: BackendInfo {
                backend: scenario.engine.backend.as_str().to_owned(),
                version: String::new(),
                details: Default::default(),
            },
            clock_ms: None,
            ended: None,
            stderr,
            shim: None,
            driver: None,
            reported_pid: 0,
            previous: None,
            current: None,
            last_ledger: BTreeMap::new(),
        };
        let hello = Request::Hello {
            version: PROTOCOL_VERSION,
            engine: Box::new(EngineConfig::of(scenario)),
            // leakloop's own scenario is for the built-in worker only: an external driver gets
            // the documented configuration above.
            scenario: scenario
                .engine
                .exec
                .is_none()
                .then(|| Box::new(scenario.clone())),
        };
        let answer = match worker.call(hello, worker.call_timeout) {
            Ok(answer) => answer,
            // A valid `failed` reply: the program runs and speaks the protocol, but its engine
            // could not be built as configured (an unknown option, a missing model).
            Err(error) if worker.ended.is_none() => {
                let who = if scenario.engine.exec.is_some() {
                    "driver"
                } else {
                    "worker"
                };
                return Err(EngineError::new(
                    error.kind,
                    format!(
                        "the {who} (pid {}) started but refused its configuration: it answered \
                         `hello` with `failed`: {}",
                        worker.pid, error.message
                    ),
                ));
            }
            Err(error) => return Err(error),
        };
        match answer {
            Response::Hello {
                version: PROTOCOL_VERSION,
                pid,
                backend,
            } => {
                worker.reported_pid = pid;
                worker.set_backend(backend);
                Ok(worker)
            }
            Response::Hello { version, .. } => Err(worker.fail_protocol(format!(
                "by speaking version {version} (this runner speaks {PROTOCOL_VERSION})"
            ))),
            other => Err(worker.unexpected("hello", &other)),
        }
    }

    /// Keeps `shim` (the folder its environment puts on `LD_LIBRARY_PATH`) until the worker has
    /// ended, then removes it.
    pub fn keeping_until_exit(mut self, shim: OpenClNameShim) -> Self {
        self.shim = Some(shim);
        self
    }

    /// The worker's last stderr lines (at most 64), oldest first.
    pub fn stderr_tail(&self) -> Vec<String> {
        self.stderr.lines()
    }

    /// The process id the worker reported in its handshake; the process started is
    /// [`Engine::process_id`]. They differ when a wrapper forked the engine instead of `exec`ing
    /// it, and then the runner would sample the wrong process.
    pub(crate) fn reported_pid(&self) -> u32 {
        self.reported_pid
    }

    /// Ends the session as a runner does (closes the worker's stdin) and says how the worker
    /// ended: `Ok` if it exited with status 0 within the grace time and wrote nothing more on
    /// stdout, else what went wrong.
    pub(crate) fn finish(mut self) -> Result<(), String> {
        let Some(link) = self.link.take() else {
            return Err("it was already gone".into());
        };
        let Link {
            mut child,
            stdin,
            mut stdout,
            stderr_task,
        } = link;
        let tail = self.stderr.clone();
        let pid = self.pid;
        self.runtime.block_on(async {
            drop(stdin);
            let mut late = Vec::new();
            // One grace time for both, awaited side by side: reading what is left on stdout until
            // it closes, and the exit. A driver that exited while a process it started still holds
            // its stdout is told apart from one that did not exit.
            let deadline = tokio::time::Instant::now() + EXIT_GRACE;
            let mut rest = (&mut stdout).take(4096);
            let (read, exited) = tokio::join!(
                tokio::time::timeout_at(deadline, rest.read_to_end(&mut late)),
                tokio::time::timeout_at(deadline, child.wait()),
            );
            if exited.is_ok() {
                end_group(pid);
            } else {
                kill_and_reap(&mut child).await;
            }
            finish_stderr(stderr_task).await;
            let status = match exited {
                Ok(Ok(status)) => status,
                Ok(Err(e)) => return Err(format!("its exit status is unknown ({e})")),
                Err(_) => {
                    return Err(format!(
                        "it did not exit within {} after its stdin closed, so it and the \
                         processes it started were killed",
                        humanize(EXIT_GRACE)
                    ))
                }
            };
            match read {
                Err(_) => {
                    return Err(format!(
                        "it exited with {} after its stdin closed, but a process it started \
                         still held its stdout open {} later (it was killed); a driver must \
                         end what it starts, or not hand it its stdout",
                        describe_exit(status),
                        humanize(EXIT_GRACE)
                    ))
                }
                Ok(Ok(n)) if n > 0 => {
                    return Err(format!(
                        "it wrote on stdout after its last reply: `{}`",
                        excerpt(&String::from_utf8_lossy(&late))
                    ));
                }
                Ok(_) => {}
            }
            if status.success() {
                Ok(())
            } else {
                Err(format!(
                    "it ended with {} after its stdin closed (expected exit status 0){}",
                    describe_exit(status),
                    tail.render()
                ))
            }
        })
    }

    /// Records the external driver's command line, reported with the backend from now on.
    pub(crate) fn note_driver(&mut self, command: &[String]) {
        self.driver = Some(command.join(" "));
        let backend = self.backend.clone();
        self.set_backend(backend);
    }

    fn set_backend(&mut self, mut backend: BackendInfo) {
        backend
            .details
            .insert("isolation".into(), "worker process".into());
        if let Some(driver) = &self.driver {
            backend.details.insert("driver".into(), driver.clone());
        }
        self.backend = backend;
    }

    /// Sends one request and waits for its reply, supervising the worker.
    fn call(&mut self, request: Request, timeout: Duration) -> Result<Response, EngineError> {
        if let Some(ended) = &self.ended {
            return Err(EngineError::new(
                ended.kind.clone(),
                format!("the worker is gone: {}", ended.message),
            ));
        }
        let name = request.name();
        self.previous = self.current.replace((name, request.reply_name()));
        let handshake = matches!(request, Request::Hello { .. });
        let Some(link) = self.link.as_mut() else {
            // Only reachable if a failure forgot to record itself; say so rather than panic.
            return Err(EngineError::new(
                EngineErrorKind::Protocol,
                format!("the worker (pid {}) is gone", self.pid),
            ));
        };
        let line = encode_line(&request);
        let started = Instant::now();
        let stderr = &self.stderr;
        let outcome = self.runtime.block_on(async {
            tokio::time::timeout(timeout, exchange(link, &line, handshake, stderr)).await
        });
        match outcome {
            Ok(Ok(reply)) => {
                self.clock_ms = reply.clock_ms;
                match reply.body {
                    // These are the runner's verdicts about the process; a worker that claims
                    // them would be taken for dead while it runs on.
                    Response::Failed { error }
                        if matches!(
                            error.kind,
                            EngineErrorKind::Crashed { .. } | EngineErrorKind::Hung { .. }
                        ) =>
                    {
                        Err(self.fail_protocol(format!(
                            "during `{name}`: it failed the call with `{}`, a kind only the \
                             runner gives (\"{}\")",
                            if matches!(error.kind, EngineErrorKind::Hung { .. }) {
                                "hung"
                            } else {
                                "crashed"
                            },
                            excerpt(&error.message)
                        )))
                    }
                    Response::Failed { error }
                        if error.kind == EngineErrorKind::Protocol
                            && !handshake
                            && self.driver.is_some() =>
                    {
                        Err(fatal_kind_answered(name, error))
                    }
                    Response::Failed { error } => Err(error.into()),
                    body => Ok(body),
                }
            }
            Err(_elapsed) => {
                let waited_ms = started.elapsed().as_millis() as u64;
                let killed = self.kill();
                Err(self.end(
                    EngineErrorKind::Hung { waited_ms },
                    format!(
                        "the worker (pid {}) did not answer `{name}` within {}; {killed}",
                        self.pid,
                        humanize(timeout)
                    ),
                ))
            }
            Ok(Err(ExchangeFailure::Closed(cause))) => {
                let how = self.reap();
                Err(self.end(
                    EngineErrorKind::Crashed { how: how.clone() },
                    format!(
                        "the worker (pid {}) died during `{name}` ({cause}): {how}",
                        self.pid
                    ),
                ))
            }
            Ok(Err(ExchangeFailure::Malformed(what))) => {
                Err(self.fail_protocol(format!("during `{name}`: {what}")))
            }
        }
    }

    /// Kills the worker for speaking out of protocol.
    fn fail_protocol(&mut self, what: String) -> EngineError {
        let killed = self.kill();
        self.end(
            EngineErrorKind::Protocol,
            format!(
                "the worker (pid {}) broke the protocol {what}; {killed}",
                self.pid
            ),
        )
    }

    fn unexpected(&mut self, call: &str, reply: &Response) -> EngineError {
        let line = encode_line(reply);
        let late = match self.previous {
            Some((previous, answer)) if answer == reply.name() => format!(
                ": that is the answer to the call before, `{previous}` (did it answer that call \
                 twice?)"
            ),
            _ => String::new(),
        };
        self.fail_protocol(format!(
            "by answering `{call}` with `{}` (`{}`){late}",
            reply.name(),
            excerpt(&line)
        ))
    }

    /// Records the failure that ended the worker (with its stderr tail) and returns it.
    fn end(&mut self, kind: EngineErrorKind, message: String) -> EngineError {
        let error = EngineError::new(kind, format!("{message}{}", self.stderr.render()));
        self.ended = Some(error.clone());
        error
    }

    /// Kills the worker and reaps it, then collects its last stderr lines. Says how that went,
    /// for the error message.
    fn kill(&mut self) -> &'static str {
        let Some(mut link) = self.link.take() else {
            return "it was already gone";
        };
        self.runtime.block_on(async {
            let reaped = kill_and_reap(&mut link.child).await;
            finish_stderr(link.stderr_task).await;
            if reaped {
                "it was killed"
            } else {
                "it was sent SIGKILL but had not ended after 5s (stuck in the kernel?)"
            }
        })
    }

    /// Waits for a worker whose pipes closed to exit (killing it if it lingers) and says how it
    /// ended.
    fn reap(&mut self) -> String {
        let Some(mut link) = self.link.take() else {
            return "already gone".into();
        };
        let pid = self.pid;
        self.runtime.block_on(async {
            drop(link.stdin);
            let how = match tokio::time::timeout(EXIT_GRACE, link.child.wait()).await {
                Ok(Ok(status)) => {
                    end_group(pid);
                    describe_exit(status)
                }
                Ok(Err(e)) => {
                    end_group(pid);
                    format!("exit status unknown ({e})")
                }
                Err(_) => {
                    kill_and_reap(&mut link.child).await;
                    format!(
                        "it closed its pipes but did not exit within {}, so it was killed",
                        humanize(EXIT_GRACE)
                    )
                }
            };
            finish_stderr(link.stderr_task).await;
            how
        })
    }

    fn expect_done(&mut self, request: Request) -> Result<(), EngineError> {
        let name = request.name();
        match self.call(request, self.call_timeout)? {
            Response::Done => Ok(()),
            other => Err(self.unexpected(name, &other)),
        }
    }
}

impl Drop for WorkerEngine {
    fn drop(&mut self) {
        if let Some(link) = self.link.take() {
            let Link {
                mut child,
                stdin,
                stderr_task,
                ..
            } = link;
            let pid = self.pid;
            self.runtime.block_on(async {
                // Closing stdin asks the worker to end; one that does not is killed.
                drop(stdin);
                match tokio::time::timeout(EXIT_GRACE, child.wait()).await {
                    Ok(_) => end_group(pid),
                    Err(_) => {
                        kill_and_reap(&mut child).await;
                    }
                }
                stderr_task.abort();
            });
        }
    }
}

impl Engine for WorkerEngine {
    fn describe(&self) -> BackendInfo {
        self.backend.clone()
    }

    fn load(&mut self) -> Result<(), EngineError> {
        match self.call(Request::Load, self.call_timeout)? {
            Response::Loaded { backend } => {
                self.set_backend(backend);
                Ok(())
            }
            other => Err(self.unexpected("load", &other)),
        }
    }

    fn open_session(
        &mut self,
        turn: u32,
        options: &SessionOptions,
    ) -> Result<SessionId, EngineError> {
        let request = Request::OpenSession {
            turn,
            options: options.clone(),
        };
        match self.call(request, self.call_timeout)? {
            Response::Opened { session } => Ok(session),
            other => Err(self.unexpected("open_session", &other)),
        }
    }

    fn send(&mut self, session: SessionId, prompt: &Prompt) -> Result<(), EngineError> {
        self.expect_done(Request::Send {
            session,
            prompt: prompt.clone(),
        })
    }

    fn generate(
        &mut self,
        session: SessionId,
        request: &GenerateRequest,
    ) -> Result<GenerateOutcome, EngineError> {
        let request = Request::Generate {
            session,
            request: *request,
        };
        match self.call(request, self.call_timeout)? {
            Response::Generated { outcome } => Ok(outcome),
            other => Err(self.unexpected("generate", &other)),
        }
    }

    fn close_session(&mut self, session: SessionId) -> Result<(), EngineError> {
        self.expect_done(Request::CloseSession { session })
    }

    fn unload(&mut self) -> Result<(), EngineError> {
        self.expect_done(Request::Unload)
    }

    fn snapshot(&mut self) -> Result<EngineSnapshot, EngineError> {
        match self.call(Request::Snapshot, self.call_timeout)? {
            Response::Snapshot { snapshot }
                if snapshot.ledger.len() > MAX_SNAPSHOT_ENTRIES
                    || snapshot.metrics.len() > MAX_SNAPSHOT_ENTRIES =>
            {
                Err(self.fail_protocol(format!(
                    "with a snapshot of {} ledger kinds and {} metrics (at most \
                     {MAX_SNAPSHOT_ENTRIES} of each)",
                    snapshot.ledger.len(),
                    snapshot.metrics.len()
                )))
            }
            Response::Snapshot { snapshot } => {
                if let Some(why) = counts_went_down(&self.last_ledger, &snapshot.ledger) {
                    return Err(self.fail_protocol(format!("at `snapshot`: {why}")));
                }
                self.last_ledger.clone_from(&snapshot.ledger);
                Ok(snapshot)
            }
            other => Err(self.unexpected("snapshot", &other)),
        }
    }

    /// Asks the worker's engine to idle; the call may take the idle time plus the call timeout.
    /// `Engine::idle` cannot fail, so a worker lost here surfaces at the next call.
    fn idle(&mut self, duration: Duration) {
        let timeout = self.call_timeout.saturating_add(duration);
        let _ = self.call(Request::idle(duration), timeout);
    }

    fn simulated_clock_ms(&self) -> Option<f64> {
        self.clock_ms
    }

    fn process_id(&self) -> Option<u32> {
        self.link.as_ref().map(|_| self.pid)
    }

    /// Closes the worker's stdin and waits for it to exit (killing it after the grace time, as
    /// dropping does). A worker that dies by a signal or exits non-zero after its last reply
    /// fails as `Crashed`; one that lingers and is killed is not reported here (`driver-check`
    /// flags it).
    fn shut_down(&mut self) -> Result<(), EngineError> {
        let Some(link) = self.link.take() else {
            return Ok(());
        };
        let Link {
            mut child,
            stdin,
            stdout,
            stderr_task,
        } = link;
        let pid = self.pid;
        let status = self.runtime.block_on(async {
            drop(stdin);
            let status = tokio::time::timeout(EXIT_GRACE, child.wait()).await;
            if status.is_err() {
                kill_and_reap(&mut child).await;
            } else {
                end_group(pid);
            }
            drop(stdout);
            finish_stderr(stderr_task).await;
            status
        });
        match status {
            Ok(Ok(status)) if !status.success() => {
                let how = describe_exit(status);
                let who = if self.driver.is_some() {
                    "driver"
                } else {
                    "worker"
                };
                let what = if how.starts_with("signal") {
                    "crashed"
                } else {
                    "failed"
                };
                let message = format!(
                    "the {who} (pid {}) {what} at exit with {how}, after its last reply",
                    self.pid
                );
                Err(self.end(EngineErrorKind::Crashed { how }, message))
            }
            _ => Ok(()),
        }
    }
}

/// Writes a request and reads its reply. During the handshake, stdout lines that are not a reply
/// (a preloaded library's banner, a test framework's header) are kept with the stderr tail.
async fn exchange(
    link: &mut Link,
    line: &str,
    handshake: bool,
    noise: &StderrTail,
) -> Result<Reply, ExchangeFailure> {
    let write = async {
        link.stdin.write_all(line.as_bytes()).await?;
        link.stdin.flush().await
    };
    if let Err(e) = write.await {
        return Err(ExchangeFailure::Closed(format!("writing its stdin: {e}")));
    }
    let mut skipped = 0;
    loop {
        let mut buf = Vec::new();
        let read = (&mut link.stdout)
            .take(MAX_LINE_BYTES)
            .read_until(b'\n', &mut buf)
            .await;
        match read {
            Err(e) => return Err(ExchangeFailure::Closed(format!("reading its stdout: {e}"))),
            Ok(0) => return Err(ExchangeFailure::Closed("its stdout closed".into())),
            Ok(_) if !buf.ends_with(b"\n") && buf.len() as u64 >= MAX_LINE_BYTES => {
                return Err(ExchangeFailure::Malformed(format!(
                    "a reply longer than {MAX_LINE_BYTES} bytes"
                )))
            }
            Ok(_) => {}
        }
        let text = String::from_utf8_lossy(&buf);
        if let Ok(reply) = decode_line::<Reply>(&text) {
            return Ok(reply);
        }
        // A line meant as a reply is judged at once, naming what is wrong with it; only other
        // lines are banner noise, and only before the handshake is answered.
        match reply_problem(&text) {
            None if handshake && skipped < MAX_NOISE_LINES => {
                skipped += 1;
                noise.push("(stdout) ", &buf);
            }
            Some(why) => return Err(ExchangeFailure::Malformed(why)),
            None => {
                let why = decode_line::<Reply>(&text).err().map(|e| e.to_string());
                return Err(ExchangeFailure::Malformed(why.unwrap_or_default()));
            }
        }
    }
}

/// A `failed` reply of the fatal kind `protocol` ends the run, which an external driver may not
/// have meant (issue 23: a close of an unknown session answered with `protocol`): the error says the
/// rule, with the non-fatal kind that fits the call.
fn fatal_kind_answered(call: &str, error: WireError) -> EngineError {
    let fitting = match call {
        "load" => "load",
        "open_session" => "open",
        "send" => "send",
        "generate" => "generate",
        "unload" => "unload",
        _ => "close",
    };
    EngineError::new(
        EngineErrorKind::Protocol,
        format!(
            "{} (it failed `{call}` with the fatal kind `protocol`, which ends the session; a \
             recoverable error must use a non-fatal kind such as `{fitting}`)",
            error.message
        ),
    )
}

/// Keeps the last lines of the worker's stderr until it closes.
async fn drain(stderr: impl AsyncRead + Unpin, tail: StderrTail) {
    let mut reader = BufReader::new(stderr);
    loop {
        let mut buf = Vec::new();
        match (&mut reader)
            .take(STDERR_LINE_BYTES)
            .read_until(b'\n', &mut buf)
            .await
        {
            Ok(0) | Err(_) => return,
            Ok(_) => tail.push("", &buf),
        }
    }
}

/// Sends SIGKILL to the process and its process group and waits (bounded: a process stuck in a
/// driver call dies only when it leaves the kernel) until the process is reaped, so that no
/// zombie is left. Whether it was reaped.
async fn kill_and_reap(child: &mut Child) -> bool {
    // Not reaped yet (`id` is `None` once it is), so its pid still names its group.
    if let Some(pid) = child.id() {
        end_group(pid);
    }
    // An error here means it already exited; it is reaped all the same below.
    let _ = child.start_kill();
    matches!(
        tokio::time::timeout(KILL_GRACE, child.wait()).await,
        Ok(Ok(_))
    )
}

/// Sends SIGKILL to the process group that worker `pid` leads (it was spawned leading its own):
/// the processes it started and left behind. Called with the worker not yet reaped, or just
/// after it was reaped; then the group id stays taken while any member lives, and a group with
/// no members left gets ESRCH (its number would only be reused after the kernel's pid counter
/// wrapped around).
fn end_group(pid: u32) {
    live_groups().retain(|p| *p != pid);
    signal_group(pid);
}

/// The process groups of workers started and not yet ended, so that a runner that exits
/// without dropping its engines (an interrupted run) still ends what they started.
fn live_groups() -> std::sync::MutexGuard<'static, Vec<u32>> {
    static LIVE: Mutex<Vec<u32>> = Mutex::new(Vec::new());
    LIVE.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Ends the process group of every worker not yet ended: for a runner about to exit without
/// dropping its engines (SIGINT, SIGTERM). The workers themselves would die with it
/// (`PR_SET_PDEATHSIG`), but not the processes they started.
#[cfg(feature = "cli")]
pub(crate) fn end_live_groups() {
    let live = std::mem::take(&mut *live_groups());
    for pid in live {
        signal_group(pid);
    }
}

/// SIGKILL to the process group `pid` leads.
fn signal_group(pid: u32) {
    if let Ok(pid) = libc::pid_t::try_from(pid) {
        if pid > 0 {
            // SAFETY: kill(2) with a negative pid signals a process group; it touches no memory.
            unsafe {
                libc::kill(-pid, libc::SIGKILL);
            }
        }
    }
}

/// Lets the stderr drain take in a dead worker's last lines (bounded: a grandchild may hold the
/// pipe open).
async fn finish_stderr(mut task: JoinHandle<()>) {
    if tokio::time::timeout(STDERR_GRACE, &mut task).await.is_err() {
        task.abort();
    }
}

/// How a process ended, e.g. `signal 6 (SIGABRT)` or `exit status 3`.
pub(crate) fn describe_exit(status: ExitStatus) -> String {
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt;
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
    }
    match status.code() {
        Some(code) => format!("exit status {code}"),
        None => status.to_string(),
    }
}

/// The `leakloop` binary to run as the worker.
pub(crate) fn worker_binary() -> Result<PathBuf, EngineError> {
    choose_worker_binary(std::env::var_os(WORKER_BIN_ENV), std::env::current_exe())
}

/// [`WORKER_BIN_ENV`] if set, else the current executable if it is `leakloop`. Any other program
/// (a test binary, an application embedding the library) would not understand `worker`, and a
/// test binary would even run its own tests again, so it must name the binary.
fn choose_worker_binary(
    from_env: Option<OsString>,
    current_exe: std::io::Result<PathBuf>,
) -> Result<PathBuf, EngineError> {
    if let Some(path) = from_env {
        return Ok(PathBuf::from(path));
    }
    let unavailable = |why: String| {
        EngineError::new(
            EngineErrorKind::Unavailable,
            format!(
                "{why}; set {WORKER_BIN_ENV} to the leakloop binary to run engines in a worker, \
                 or let a test binary serve as its own worker (leakloop::testing)"
            ),
        )
    };
    let exe = current_exe.map_err(|e| unavailable(format!("cannot find this executable: {e}")))?;
    if exe.file_stem().is_some_and(|stem| stem == "leakloop") {
        Ok(exe)
    } else {
        Err(unavailable(format!(
            "this program ({}) is not leakloop and cannot serve as the worker",
            exe.display()
        )))
    }
}

fn humanize(duration: Duration) -> humantime::FormattedDuration {
    humantime::format_duration(duration)
}

/// A killed runner (SIGKILL, OOM killer) runs no destructor, so `kill_on_drop` cannot reap its
/// worker; on Linux the kernel kills the worker when the thread that spawned it goes away, so a
/// hung worker never outlives an interrupted run.
#[cfg(any(target_os = "linux", target_os = "android"))]
fn die_with_parent(command: &mut Command) {
    // SAFETY: the closure runs between fork and exec and only calls prctl, which is
    // async-signal-safe.
    unsafe {
        command.pre_exec(|| {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) == -1 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

#[cfg(not(any(target_os = "linux", target_os = "android")))]
fn die_with_parent(_command: &mut Command) {}

#[cfg(test)]
mod tests;
