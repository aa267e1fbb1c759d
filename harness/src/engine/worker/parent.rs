//! The runner side: [`WorkerEngine`] implements [`Engine`] by forwarding every call to a worker
//! process and supervising it.
//!
//! Each call must be answered within the scenario's `engine.call_timeout`; past it the worker is
//! killed and reaped and the call fails as `Hung`. A worker that dies (a signal, an abort, an
//! exit) fails the call as `Crashed`, naming the signal; a reply that is not a valid message, or
//! not the answer to the call, fails it as `Protocol`. The worker's stderr is drained all the
//! time (its last lines are kept and quoted in these errors), so a chatty engine cannot block on
//! a full pipe. After such a failure the worker is gone and every later call fails the same way.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::attribution::{
    offered_source, AttributionSource, DriverSites, SharedFeed, REQUESTED_FRAMES,
};
use crate::engine::opencl::OpenClNameShim;
use crate::engine::worker::protocol::{
    counts_went_down, decode_line, encode_line, excerpt, reply_problem, EngineConfig, Reply,
    Request, Response, WireError, MAX_LINE_BYTES, MAX_SNAPSHOT_ENTRIES, PROTOCOL_VERSION,
};
use crate::engine::{
    BackendInfo, Engine, EngineError, EngineErrorKind, EngineSnapshot, GenerateOutcome,
    GenerateRequest, KindCounts, Prompt, SessionId,
};
use crate::process::pipes::{Chunk, LineReader, LineWriter, WriteFailure};
use crate::process::tail::{Drain, StderrTail};
use crate::process::{describe_exit, Process, KILL_GRACE};
use crate::scenario::{Scenario, SessionOptions};

/// Environment variable naming the `leakloop` binary to run as the worker, where the current
/// executable is not `leakloop` (a test binary, a wrapper).
pub const WORKER_BIN_ENV: &str = "LEAKLOOP_BIN";

/// Lines a worker may print on stdout before its handshake (a preloaded library's banner).
const MAX_NOISE_LINES: usize = 1000;
/// How long a worker that closed its pipes gets to exit before it is killed.
const EXIT_GRACE: Duration = Duration::from_secs(2);
/// The most bytes a worker may write on stdout after its last reply that are read back (and
/// quoted) when its session ends.
const LATE_BYTES: usize = 4096;
/// How long to wait for the last stderr lines of a dead worker.
const STDERR_GRACE: Duration = Duration::from_secs(1);

/// An engine that runs in a supervised worker process (`leakloop worker`).
///
/// Its calls block the calling thread (threads of its own drive the pipes, see
/// [`crate::process`]). Dropping it closes the worker's stdin, which ends the worker; one that
/// has not ended after 2s is killed with its process group.
#[derive(Debug)]
pub struct WorkerEngine {
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
    /// The driver's offer to record allocation sites (its `hello` reply's `sites`).
    sites_offer: Option<serde_json::Value>,
    /// Where the sites of every `snapshot` reply go, once the driver was asked to record them.
    site_feed: Option<SharedFeed>,
}

/// The worker process and the threads that drive its pipes.
#[derive(Debug)]
struct Link {
    process: Process,
    /// `None` once closed, which asks the worker to end.
    stdin: Option<LineWriter>,
    stdout: LineReader,
    stderr: Drain,
}

/// What went wrong in one exchange of request and reply.
enum ExchangeFailure {
    /// The worker closed its stdout or its stdin (it is dying or dead).
    Closed(String),
    /// The worker said something that is not a reply.
    Malformed(String),
    /// The call's time ran out (writing the request or waiting for the reply).
    TimedOut,
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
        let mut command = Command::new(program);
        command
            .args(args)
            .envs(env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        if let Some(cwd) = cwd {
            command.current_dir(cwd);
        }
        // Its own process group, so that whatever it starts (a wrapper's children, helpers) is
        // ended with it, whichever way it ends; SIGKILL if the runner dies first, so that a hung
        // worker never outlives an interrupted run.
        let mut process = Process::spawn(command, libc::SIGKILL).map_err(|e| {
            EngineError::new(
                EngineErrorKind::Unavailable,
                format!("cannot start the worker `{}`: {e}", program.display()),
            )
        })?;
        let pid = process.id();
        let stderr = StderrTail::default();
        let pipes = (
            process.take_stdin(),
            process.take_stdout(),
            process.take_stderr(),
        );
        let (Some(stdin), Some(stdout), Some(child_stderr)) = pipes else {
            unreachable!("all three pipes were requested");
        };
        let stderr_drain = stderr.drain(child_stderr);
        let threads = LineWriter::start(stdin)
            .and_then(|stdin| Ok((stdin, LineReader::start(stdout, MAX_LINE_BYTES)?)));
        let (stdin, stdout) = threads.map_err(|e| {
            EngineError::new(
                EngineErrorKind::Unavailable,
                format!("cannot start the threads that talk to the worker: {e}"),
            )
        })?;
        let mut worker = WorkerEngine {
            link: Some(Link {
                process,
                stdin: Some(stdin),
                stdout,
                stderr: stderr_drain,
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
            sites_offer: None,
            site_feed: None,
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
                sites,
            } => {
                worker.reported_pid = pid;
                worker.sites_offer = sites;
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
            mut process,
            stdin,
            mut stdout,
            stderr,
        } = link;
        drop(stdin);
        // One grace time for both: reading what is left on stdout until it closes (so that a
        // child writing at exit is not stopped by a full pipe), then the exit. A driver that
        // exited while a process it started still holds its stdout is told apart from one that
        // did not exit.
        let deadline = Instant::now() + EXIT_GRACE;
        let mut late = Vec::new();
        let mut closed = false;
        while late.len() < LATE_BYTES {
            match stdout.next(deadline) {
                Some(Chunk::Line(bytes)) => late.extend(bytes),
                Some(Chunk::Closed(_)) => {
                    closed = true;
                    break;
                }
                None => break,
            }
        }
        late.truncate(LATE_BYTES);
        let exited = process.wait_timeout(deadline.saturating_duration_since(Instant::now()));
        let status = match exited {
            Some(seen) => process.end_group().unwrap_or(seen),
            None => {
                process.kill(KILL_GRACE);
                stderr.finish(STDERR_GRACE);
                return Err(format!(
                    "it did not exit within {} after its stdin closed, so it and the processes \
                     it started were killed",
                    humanize(EXIT_GRACE)
                ));
            }
        };
        stderr.finish(STDERR_GRACE);
        if !closed && late.len() < LATE_BYTES {
            return Err(format!(
                "it exited with {} after its stdin closed, but a process it started still held \
                 its stdout open {} later (it was killed); a driver must end what it starts, or \
                 not hand it its stdout",
                describe_exit(status),
                humanize(EXIT_GRACE)
            ));
        }
        if !late.is_empty() {
            return Err(format!(
                "it wrote on stdout after its last reply: `{}`",
                excerpt(&String::from_utf8_lossy(&late))
            ));
        }
        if status.success() {
            Ok(())
        } else {
            Err(format!(
                "it ended with {} after its stdin closed (expected exit status 0){}",
                describe_exit(status),
                self.stderr_block()
            ))
        }
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
        let outcome = exchange(
            link,
            &line,
            handshake,
            &self.stderr,
            deadline_after(timeout),
        );
        match outcome {
            Ok(reply) => {
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
            Err(ExchangeFailure::TimedOut) => {
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
            Err(ExchangeFailure::Closed(cause)) => {
                let how = self.reap();
                Err(self.end(
                    EngineErrorKind::Crashed { how: how.clone() },
                    format!(
                        "the worker (pid {}) died during `{name}` ({cause}): {how}",
                        self.pid
                    ),
                ))
            }
            Err(ExchangeFailure::Malformed(what)) => {
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
        let error = EngineError::new(kind, format!("{message}{}", self.stderr_block()));
        self.ended = Some(error.clone());
        error
    }

    /// Kills the worker and reaps it, then collects its last stderr lines. Says how that went,
    /// for the error message.
    fn kill(&mut self) -> &'static str {
        let Some(link) = self.link.take() else {
            return "it was already gone";
        };
        let Link {
            mut process,
            stderr,
            ..
        } = link;
        let reaped = process.kill(KILL_GRACE).is_some();
        stderr.finish(STDERR_GRACE);
        if reaped {
            "it was killed"
        } else {
            "it was sent SIGKILL but had not ended after 5s (stuck in the kernel?)"
        }
    }

    /// Waits for a worker whose pipes closed to exit (killing it if it lingers) and says how it
    /// ended.
    fn reap(&mut self) -> String {
        let Some(link) = self.link.take() else {
            return "already gone".into();
        };
        let Link {
            mut process,
            stdin,
            stderr,
            ..
        } = link;
        drop(stdin);
        let how = match process.wait_timeout(EXIT_GRACE) {
            Some(seen) => describe_exit(process.end_group().unwrap_or(seen)),
            None => {
                process.kill(KILL_GRACE);
                format!(
                    "it closed its pipes but did not exit within {}, so it was killed",
                    humanize(EXIT_GRACE)
                )
            }
        };
        stderr.finish(STDERR_GRACE);
        how
    }

    /// The stderr tail as a block for error messages, or nothing.
    fn stderr_block(&self) -> String {
        self.stderr.render("the worker's stderr")
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
                mut process, stdin, ..
            } = link;
            // Closing stdin asks the worker to end; one that does not is killed. Its stderr is
            // not waited for.
            drop(stdin);
            match process.wait_timeout(EXIT_GRACE) {
                Some(_) => {
                    process.end_group();
                }
                None => {
                    process.kill(KILL_GRACE);
                }
            }
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
            Response::Snapshot { snapshot, .. }
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
            Response::Snapshot { snapshot, sites } => {
                if let Some(why) = counts_went_down(&self.last_ledger, &snapshot.ledger) {
                    return Err(self.fail_protocol(format!("at `snapshot`: {why}")));
                }
                self.last_ledger.clone_from(&snapshot.ledger);
                // The sites are the attribution's alone: whatever is wrong with them stops the
                // feed (named in the run's warnings), never the sample.
                if let Some(feed) = &self.site_feed {
                    feed.lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .take(sites.as_ref());
                }
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

    /// Asks a driver whose `hello` offered `sites` to start recording them (`start_sites`); a
    /// driver without the offer is never asked, and gets native attribution only.
    fn start_sites(&mut self) -> Result<Option<Box<dyn AttributionSource>>, String> {
        let Some(offer) = &self.sites_offer else {
            return Ok(None);
        };
        let name = offered_source(offer)
            .map_err(|why| format!("the driver's `hello` offered sites, but {why}"))?;
        let request = Request::StartSites {
            frames: REQUESTED_FRAMES,
        };
        match self.call(request, self.call_timeout) {
            Ok(Response::Done) => {}
            Ok(other) => return Err(self.unexpected("start_sites", &other).message),
            Err(e) => return Err(format!("the driver failed `start_sites`: {}", e.message)),
        }
        let feed = SharedFeed::default();
        self.site_feed = Some(feed.clone());
        Ok(Some(Box::new(DriverSites::new(name, feed))))
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
            mut process,
            stdin,
            stdout,
            stderr,
        } = link;
        drop(stdin);
        let status = match process.wait_timeout(EXIT_GRACE) {
            Some(seen) => Some(process.end_group().unwrap_or(seen)),
            None => {
                process.kill(KILL_GRACE);
                None
            }
        };
        drop(stdout);
        stderr.finish(STDERR_GRACE);
        match status {
            Some(status) if !status.success() => {
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
fn exchange(
    link: &mut Link,
    line: &str,
    handshake: bool,
    noise: &StderrTail,
    deadline: Instant,
) -> Result<Reply, ExchangeFailure> {
    let Some(stdin) = &mut link.stdin else {
        return Err(ExchangeFailure::Closed("its stdin was closed".into()));
    };
    match stdin.write(line.as_bytes(), deadline) {
        Ok(()) => {}
        Err(WriteFailure::TimedOut) => return Err(ExchangeFailure::TimedOut),
        Err(WriteFailure::Failed(e)) => {
            return Err(ExchangeFailure::Closed(format!("writing its stdin: {e}")))
        }
    }
    let mut skipped = 0;
    loop {
        let buf = match link.stdout.next(deadline) {
            None => return Err(ExchangeFailure::TimedOut),
            Some(Chunk::Closed(None)) => {
                return Err(ExchangeFailure::Closed("its stdout closed".into()))
            }
            Some(Chunk::Closed(Some(e))) => {
                return Err(ExchangeFailure::Closed(format!("reading its stdout: {e}")))
            }
            Some(Chunk::Line(buf))
                if !buf.ends_with(b"\n") && buf.len() as u64 >= MAX_LINE_BYTES =>
            {
                return Err(ExchangeFailure::Malformed(format!(
                    "a reply longer than {MAX_LINE_BYTES} bytes"
                )))
            }
            Some(Chunk::Line(buf)) => buf,
        };
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

/// The instant `timeout` from now (far in the future for a timeout too long to add).
fn deadline_after(timeout: Duration) -> Instant {
    let now = Instant::now();
    now.checked_add(timeout)
        .unwrap_or_else(|| now + Duration::from_secs(100 * 365 * 24 * 3600))
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

#[cfg(test)]
mod tests;
