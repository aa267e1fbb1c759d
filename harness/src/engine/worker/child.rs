//! The worker side: builds the engine inside this (child) process and answers the runner's calls
//! one line at a time until its stdin closes.
//!
//! Faults that are about the process itself are made real here, whatever the engine: a `crash`
//! fault aborts the process and a `hang` fault blocks it forever when the faulted turn generates,
//! so the runner meets a genuine native crash and a genuine hang. The engine is built without
//! those faults so that it does not also simulate them.

use std::collections::btree_map::Entry;
use std::collections::BTreeMap;
use std::io::{BufRead, Read, Write};
use std::time::Duration;

use crate::engine::worker::protocol::{
    decode_line, encode_line, hello_version, Reply, Request, Response, MAX_LINE_BYTES,
    PROTOCOL_VERSION,
};
use crate::engine::{Engine, EngineError, EngineErrorKind, SessionId};
use crate::probe::native_heap_bytes;
use crate::scenario::{FaultKind, Scenario, Step};

/// Why a worker stopped serving before its stdin closed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum WorkerError {
    /// The pipes to the runner failed.
    #[error("worker pipe: {0}")]
    Io(#[from] std::io::Error),
    /// The runner sent something that is not a request.
    #[error(transparent)]
    Protocol(#[from] super::protocol::ProtocolError),
    /// A request line exceeded the limit.
    #[error("request line longer than {MAX_LINE_BYTES} bytes")]
    LineTooLong,
    /// The first request was not the handshake.
    #[error("the first request must be `hello`, got `{0}`")]
    NoHello(&'static str),
    /// Runner and worker speak different protocol versions.
    #[error("protocol version mismatch: the runner speaks {runner}, this worker speaks {worker}")]
    Version {
        /// The runner's version.
        runner: u32,
        /// Ours.
        worker: u32,
    },
    /// Neither the handshake nor the command line gave a scenario, or both did.
    #[error("{0}")]
    Scenario(&'static str),
    /// The engine could not be built.
    #[error("building the engine failed: {0}")]
    Build(EngineError),
}

/// Builds the engine for a scenario inside the worker.
pub(crate) type BuildEngine<'a> =
    dyn FnOnce(&Scenario) -> Result<Box<dyn Engine>, EngineError> + 'a;

/// Serves on this process's stdin and stdout. Stdout is moved aside for the protocol first and
/// fd 1 pointed at stderr, so that whatever the engine's native code prints cannot corrupt the
/// protocol.
pub(crate) fn serve_stdio(
    given: Option<Scenario>,
    build: Box<BuildEngine<'_>>,
) -> Result<(), WorkerError> {
    let output = take_stdout_for_protocol()?;
    serve(std::io::stdin().lock(), output, given, build)
}

#[cfg(unix)]
fn take_stdout_for_protocol() -> std::io::Result<std::fs::File> {
    use std::os::fd::AsFd;
    std::io::stdout().flush()?;
    // try_clone_to_owned duplicates with close-on-exec, so programs the engine starts do not
    // inherit the protocol pipe.
    let protocol = std::io::stdout().as_fd().try_clone_to_owned()?;
    // SAFETY: dup2 on two descriptors this process owns for its whole life (stderr and stdout);
    // it only repoints fd 1.
    if unsafe { libc::dup2(libc::STDERR_FILENO, libc::STDOUT_FILENO) } < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(std::fs::File::from(protocol))
}

#[cfg(not(unix))]
fn take_stdout_for_protocol() -> std::io::Result<std::io::Stdout> {
    Ok(std::io::stdout())
}

/// Serves requests from `input`, answering on `output`, until `input` ends.
pub(crate) fn serve(
    input: impl BufRead,
    output: impl Write,
    given: Option<Scenario>,
    build: Box<BuildEngine<'_>>,
) -> Result<(), WorkerError> {
    serve_built(input, output, |first| {
        let scenario = handshake(first, given)?;
        let faults = ProcessFaults::of(&scenario);
        let mut engine_scenario = scenario;
        engine_scenario
            .faults
            .retain(|f| !ProcessFaults::is_process_fault(f.kind));
        let engine = build(&engine_scenario).map_err(WorkerError::Build)?;
        Ok((engine, faults))
    })
}

/// Builds an engine driver's engine from the handshake's documented configuration (an
/// external driver never gets leakloop's scenario).
#[cfg(any(test, feature = "test-support"))]
pub(crate) type BuildDriver<'a> =
    dyn FnOnce(&super::protocol::EngineConfig) -> Result<Box<dyn Engine>, EngineError> + 'a;

/// Serves as an engine driver (`backend: exec`) on this process's stdin and stdout, stdout moved
/// aside as in [`serve_stdio`]: the engine is built from the `hello` request's `engine`
/// configuration, and no fault is struck here (a driver's faults are its own).
#[cfg(feature = "test-support")]
pub(crate) fn serve_driver_stdio(build: Box<BuildDriver<'_>>) -> Result<(), WorkerError> {
    let output = take_stdout_for_protocol()?;
    serve_driver(std::io::stdin().lock(), output, build)
}

/// `serve_driver_stdio` on any pipes.
#[cfg(any(test, feature = "test-support"))]
pub(crate) fn serve_driver(
    input: impl BufRead,
    output: impl Write,
    build: Box<BuildDriver<'_>>,
) -> Result<(), WorkerError> {
    serve_built(input, output, |first| {
        let (engine, _) = accept_hello(first)?;
        let engine = build(&engine).map_err(WorkerError::Build)?;
        Ok((engine, ProcessFaults::none()))
    })
}

/// The serving loop once `settle` has turned the first request into an engine: answers the
/// handshake (with the refusal or the build error when `settle` fails), then every call.
fn serve_built(
    mut input: impl BufRead,
    mut output: impl Write,
    settle: impl FnOnce(Request) -> Result<(Box<dyn Engine>, ProcessFaults), WorkerError>,
) -> Result<(), WorkerError> {
    let Some(first) = read_request(&mut input, &mut output)? else {
        return Ok(());
    };
    let (mut engine, faults) = match settle(first) {
        Ok(built) => built,
        Err(err) => {
            let refusal = match &err {
                WorkerError::Build(e) => failed(e.kind.clone(), e.message.clone()),
                other => failed(EngineErrorKind::Protocol, other.to_string()),
            };
            answer(&mut output, None, refusal)?;
            return Err(err);
        }
    };
    let hello = Response::Hello {
        version: PROTOCOL_VERSION,
        pid: std::process::id(),
        backend: engine.describe(),
        sites: None,
    };
    answer(&mut output, engine.simulated_clock_ms(), hello)?;

    let mut server = Server {
        engine: engine.as_mut(),
        faults,
        session_turns: BTreeMap::new(),
    };
    while let Some(request) = read_request(&mut input, &mut output)? {
        let body = server.call(request);
        answer(&mut output, server.engine.simulated_clock_ms(), body)?;
    }
    Ok(())
}

/// The first request as a handshake of this protocol version: what to build, and leakloop's own
/// scenario when the runner sent one.
#[allow(clippy::type_complexity)]
fn accept_hello(
    first: Request,
) -> Result<(Box<super::protocol::EngineConfig>, Option<Box<Scenario>>), WorkerError> {
    let Request::Hello {
        version,
        engine,
        scenario,
    } = first
    else {
        return Err(WorkerError::NoHello(first.name()));
    };
    if version != PROTOCOL_VERSION {
        return Err(WorkerError::Version {
            runner: version,
            worker: PROTOCOL_VERSION,
        });
    }
    Ok((engine, scenario))
}

/// Checks the handshake and settles which scenario to build.
fn handshake(first: Request, given: Option<Scenario>) -> Result<Scenario, WorkerError> {
    let (_, scenario) = accept_hello(first)?;
    match (scenario, given) {
        (Some(scenario), None) => Ok(*scenario),
        (None, Some(scenario)) => Ok(scenario),
        (None, None) => Err(WorkerError::Scenario(
            "no scenario: send one in the hello request or start the worker with --scenario",
        )),
        (Some(_), Some(_)) => Err(WorkerError::Scenario(
            "two scenarios: one in the hello request and one from --scenario",
        )),
    }
}

/// Reads one request; `None` at the end of input. A malformed line is answered with a protocol
/// error and ends serving, since the two sides no longer agree on where messages begin.
fn read_request(
    input: &mut impl BufRead,
    output: &mut impl Write,
) -> Result<Option<Request>, WorkerError> {
    let mut line = Vec::new();
    input
        .by_ref()
        .take(MAX_LINE_BYTES)
        .read_until(b'\n', &mut line)?;
    if line.is_empty() {
        return Ok(None);
    }
    if !line.ends_with(b"\n") && line.len() as u64 >= MAX_LINE_BYTES {
        answer(
            output,
            None,
            failed(
                EngineErrorKind::Protocol,
                WorkerError::LineTooLong.to_string(),
            ),
        )?;
        return Err(WorkerError::LineTooLong);
    }
    let text = String::from_utf8_lossy(&line);
    match decode_line::<Request>(&text) {
        Ok(request) => Ok(Some(request)),
        Err(_) if hello_version(&text).is_some_and(|v| v != PROTOCOL_VERSION) => {
            let err = WorkerError::Version {
                runner: hello_version(&text).unwrap_or_default(),
                worker: PROTOCOL_VERSION,
            };
            answer(
                output,
                None,
                failed(EngineErrorKind::Protocol, err.to_string()),
            )?;
            Err(err)
        }
        Err(err) => {
            answer(
                output,
                None,
                failed(EngineErrorKind::Protocol, err.to_string()),
            )?;
            Err(err.into())
        }
    }
}

fn answer(output: &mut impl Write, clock_ms: Option<f64>, body: Response) -> std::io::Result<()> {
    output.write_all(encode_line(&Reply { clock_ms, body }).as_bytes())?;
    output.flush()
}

fn failed(kind: EngineErrorKind, message: impl Into<String>) -> Response {
    Response::Failed {
        error: EngineError::new(kind, message).into(),
    }
}

/// The `crash` and `hang` faults of a scenario, by turn.
#[derive(Debug)]
struct ProcessFaults {
    at_turn: BTreeMap<u32, FaultKind>,
    /// A turn loop without generation strikes when the session opens instead.
    strike_at_open: bool,
}

impl ProcessFaults {
    /// No fault: an engine driver strikes none.
    #[cfg(any(test, feature = "test-support"))]
    fn none() -> Self {
        Self {
            at_turn: BTreeMap::new(),
            strike_at_open: false,
        }
    }

    fn is_process_fault(kind: FaultKind) -> bool {
        matches!(kind, FaultKind::Crash | FaultKind::Hang)
    }

    fn of(scenario: &Scenario) -> Self {
        let mut at_turn = BTreeMap::new();
        for fault in scenario.faults.iter().rev() {
            if Self::is_process_fault(fault.kind) {
                at_turn.insert(fault.at_turn, fault.kind);
            }
        }
        let generates = scenario
            .turn
            .iter()
            .any(|s| matches!(s, Step::Generate { .. } | Step::Cancel { .. }));
        Self {
            at_turn,
            strike_at_open: !generates,
        }
    }

    /// Aborts or blocks forever if a fault is due at `turn`.
    fn strike_if_due(&self, turn: u32) {
        let Some(kind) = self.at_turn.get(&turn) else {
            return;
        };
        match kind {
            FaultKind::Crash => {
                eprintln!("leakloop worker: injected crash fault at turn {turn}: aborting");
                no_core_dump();
                std::process::abort();
            }
            FaultKind::Hang => {
                eprintln!("leakloop worker: injected hang fault at turn {turn}: blocking");
                loop {
                    std::thread::sleep(Duration::from_secs(3600));
                }
            }
            FaultKind::GenerateError | FaultKind::SkipClose => {}
        }
    }
}

/// An injected crash is not worth a core file (one would land in the working directory).
fn no_core_dump() {
    #[cfg(unix)]
    {
        let zero = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: setrlimit reads the struct we pass and changes only this process's limit.
        unsafe { libc::setrlimit(libc::RLIMIT_CORE, &zero) };
    }
}

/// The engine and what the worker tracks around it.
struct Server<'e> {
    engine: &'e mut dyn Engine,
    faults: ProcessFaults,
    session_turns: BTreeMap<SessionId, u32>,
}

impl Server<'_> {
    fn call(&mut self, request: Request) -> Response {
        match self.dispatch(request) {
            Ok(response) => response,
            Err(error) => Response::Failed {
                error: error.into(),
            },
        }
    }

    fn dispatch(&mut self, request: Request) -> Result<Response, EngineError> {
        Ok(match request {
            Request::Hello { .. } => {
                return Err(EngineError::new(
                    EngineErrorKind::Protocol,
                    "a second `hello` after the handshake",
                ))
            }
            Request::Load => {
                self.engine.load()?;
                Response::Loaded {
                    backend: self.engine.describe(),
                }
            }
            Request::OpenSession { turn, options } => {
                if self.faults.strike_at_open {
                    self.faults.strike_if_due(turn);
                }
                let session = self.engine.open_session(turn, &options)?;
                self.session_turns.insert(session, turn);
                Response::Opened { session }
            }
            Request::Send { session, prompt } => {
                self.engine.send(session, &prompt)?;
                Response::Done
            }
            Request::Generate { session, request } => {
                if let Some(&turn) = self.session_turns.get(&session) {
                    self.faults.strike_if_due(turn);
                }
                Response::Generated {
                    outcome: self.engine.generate(session, &request)?,
                }
            }
            Request::CloseSession { session } => {
                self.engine.close_session(session)?;
                self.session_turns.remove(&session);
                Response::Done
            }
            Request::Unload => {
                self.engine.unload()?;
                Response::Done
            }
            Request::Snapshot => {
                let mut snapshot = self.engine.snapshot()?;
                // An engine that models its own native heap (the simulator), or that read it
                // itself, knows better than this process's allocator statistics, which are read
                // only when it did not (mallinfo2 walks every free block: about 18 µs a call
                // with LiteRT-LM loaded).
                if let Entry::Vacant(entry) = snapshot
                    .metrics
                    .entry(leakloop_metrics::names::NATIVE_HEAP.to_owned())
                {
                    if let Some(bytes) = native_heap_bytes() {
                        entry.insert(bytes);
                    }
                }
                Response::Snapshot {
                    snapshot,
                    sites: None,
                }
            }
            Request::Idle { duration_ms } => {
                self.engine.idle(Duration::from_millis(duration_ms));
                Response::Done
            }
            // The built-in worker offers no sites (heaptrack records its native heap), so the
            // runner never asks.
            Request::StartSites { .. } => {
                return Err(EngineError::new(
                    EngineErrorKind::Protocol,
                    "this worker records no allocation sites (its `hello` offered none)",
                ))
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use std::io::Cursor;

    use super::*;
    use crate::engine::worker::protocol::EngineConfig;
    use crate::engine::worker::test_engine::{scenario_with_faults, TinyEngine};
    use crate::engine::{GenerateRequest, Prompt};
    use crate::scenario::{Fault, SessionOptions};

    fn tiny(scenario: &Scenario) -> Result<Box<dyn Engine>, EngineError> {
        Ok(Box::new(TinyEngine::new(scenario)))
    }

    /// Runs the server over in-memory pipes and returns its replies and result.
    fn exchange(
        requests: &[Request],
        given: Option<Scenario>,
        build: Box<BuildEngine<'_>>,
    ) -> (Vec<Reply>, Result<(), WorkerError>) {
        let input: String = requests.iter().map(encode_line).collect();
        let mut output = Vec::new();
        let result = serve(Cursor::new(input), &mut output, given, build);
        let replies = String::from_utf8(output)
            .unwrap()
            .lines()
            .map(|l| decode_line::<Reply>(l).unwrap())
            .collect();
        (replies, result)
    }

    fn hello(scenario: Option<Scenario>) -> Request {
        let config = EngineConfig::of(&scenario_with_faults(vec![]));
        Request::Hello {
            version: PROTOCOL_VERSION,
            engine: Box::new(config),
            scenario: scenario.map(Box::new),
        }
    }

    #[test]
    fn serves_a_whole_turn_and_reports_its_native_heap() {
        let session = SessionId(1);
        let requests = [
            hello(Some(scenario_with_faults(vec![]))),
            Request::Load,
            Request::OpenSession {
                turn: 1,
                options: SessionOptions::default(),
            },
            Request::Send {
                session,
                prompt: Prompt {
                    text: "hi".into(),
                    tokens: 1,
                },
            },
            Request::Generate {
                session,
                request: GenerateRequest {
                    max_output_tokens: 5,
                    cancel_after_tokens: Some(2),
                },
            },
            Request::Snapshot,
            Request::CloseSession { session },
            Request::Unload,
        ];
        let (replies, result) = exchange(&requests, None, Box::new(tiny));
        result.unwrap();
        let bodies: Vec<_> = replies.into_iter().map(|r| r.body).collect();
        assert!(
            matches!(&bodies[0], Response::Hello { version: PROTOCOL_VERSION, pid, backend, .. }
            if *pid == std::process::id() && backend.backend == "tiny")
        );
        assert!(matches!(bodies[1], Response::Loaded { .. }));
        assert_eq!(bodies[2], Response::Opened { session });
        assert_eq!(bodies[3], Response::Done);
        assert!(matches!(
            &bodies[4],
            Response::Generated { outcome } if outcome.tokens == 2 && outcome.cancelled
        ));
        let Response::Snapshot { snapshot, .. } = &bodies[5] else {
            panic!("{:?}", bodies[5]);
        };
        assert_eq!(snapshot.ledger["conversation"].created, 1);
        if cfg!(all(target_os = "linux", target_env = "gnu")) {
            // The open session holds a live 4 MiB block on this process's heap.
            assert!(snapshot.metrics["native_heap"] >= 4 << 20, "{snapshot:?}");
        }
        assert_eq!(&bodies[6..], &[Response::Done, Response::Done]);
    }

    #[test]
    fn engine_errors_are_answered_and_serving_goes_on() {
        let requests = [
            hello(Some(scenario_with_faults(vec![]))),
            Request::Load,
            Request::CloseSession {
                session: SessionId(77),
            },
            Request::Snapshot,
        ];
        let (replies, result) = exchange(&requests, None, Box::new(tiny));
        result.unwrap();
        let Response::Failed { error } = &replies[2].body else {
            panic!("{:?}", replies[2]);
        };
        assert_eq!(error.kind, EngineErrorKind::Close);
        assert!(error.message.contains("77"), "{error:?}");
        assert!(matches!(replies[3].body, Response::Snapshot { .. }));
    }

    #[test]
    fn a_version_mismatch_is_refused_in_the_handshake() {
        let mut mismatched = hello(Some(scenario_with_faults(vec![])));
        if let Request::Hello { version, .. } = &mut mismatched {
            *version = PROTOCOL_VERSION + 1;
        }
        let requests = [mismatched];
        let (replies, result) = exchange(&requests, None, Box::new(tiny));
        assert!(matches!(result, Err(WorkerError::Version { .. })));
        let Response::Failed { error } = &replies[0].body else {
            panic!("{:?}", replies[0]);
        };
        assert_eq!(error.kind, EngineErrorKind::Protocol);
        assert!(error.message.contains("version mismatch"), "{error:?}");
    }

    #[test]
    fn a_first_request_other_than_hello_is_refused() {
        let (replies, result) = exchange(&[Request::Load], None, Box::new(tiny));
        assert!(matches!(result, Err(WorkerError::NoHello("load"))));
        assert_eq!(replies.len(), 1);
    }

    #[test]
    fn the_scenario_may_come_from_the_command_line_but_not_twice() {
        let (replies, result) = exchange(
            &[hello(None)],
            Some(scenario_with_faults(vec![])),
            Box::new(tiny),
        );
        result.unwrap();
        assert!(matches!(replies[0].body, Response::Hello { .. }));

        let (_, result) = exchange(&[hello(None)], None, Box::new(tiny));
        assert!(matches!(result, Err(WorkerError::Scenario(m)) if m.contains("no scenario")));
        let (_, result) = exchange(
            &[hello(Some(scenario_with_faults(vec![])))],
            Some(scenario_with_faults(vec![])),
            Box::new(tiny),
        );
        assert!(matches!(result, Err(WorkerError::Scenario(m)) if m.contains("two scenarios")));
    }

    #[test]
    fn a_failed_build_is_reported_with_the_engines_error() {
        let build = |_: &Scenario| -> Result<Box<dyn Engine>, EngineError> {
            Err(EngineError::new(
                EngineErrorKind::Unavailable,
                "liblitert-lm.so not found",
            ))
        };
        let (replies, result) = exchange(
            &[hello(Some(scenario_with_faults(vec![])))],
            None,
            Box::new(build),
        );
        assert!(matches!(result, Err(WorkerError::Build(_))));
        assert_eq!(
            replies[0].body,
            failed(EngineErrorKind::Unavailable, "liblitert-lm.so not found")
        );
    }

    #[test]
    fn garbage_after_the_handshake_is_a_protocol_error_that_ends_serving() {
        let input = format!(
            "{}this is not json\n{}",
            encode_line(&hello(Some(scenario_with_faults(vec![])))),
            encode_line(&Request::Load)
        );
        let mut output = Vec::new();
        let result = serve(Cursor::new(input), &mut output, None, Box::new(tiny));
        assert!(matches!(result, Err(WorkerError::Protocol(_))));
        let replies: Vec<Reply> = String::from_utf8(output)
            .unwrap()
            .lines()
            .map(|l| decode_line(l).unwrap())
            .collect();
        assert_eq!(replies.len(), 2, "no answer to the load after the garbage");
        assert!(
            matches!(&replies[1].body, Response::Failed { error } if error.message.contains("this is not json"))
        );
    }

    #[test]
    fn process_faults_are_taken_out_of_the_engines_scenario() {
        let seen = std::cell::RefCell::new(Vec::new());
        let build = |s: &Scenario| -> Result<Box<dyn Engine>, EngineError> {
            seen.borrow_mut().extend(s.faults.iter().map(|f| f.kind));
            Ok(Box::new(TinyEngine::new(s)))
        };
        let scenario = scenario_with_faults(vec![
            Fault {
                at_turn: 2,
                kind: FaultKind::Crash,
            },
            Fault {
                at_turn: 3,
                kind: FaultKind::GenerateError,
            },
            Fault {
                at_turn: 4,
                kind: FaultKind::Hang,
            },
        ]);
        let (_, result) = exchange(&[hello(Some(scenario))], None, Box::new(build));
        result.unwrap();
        assert_eq!(*seen.borrow(), vec![FaultKind::GenerateError]);
    }

    #[test]
    fn faults_strike_at_generate_or_at_open_when_nothing_generates() {
        let mut scenario = scenario_with_faults(vec![Fault {
            at_turn: 2,
            kind: FaultKind::Crash,
        }]);
        let faults = ProcessFaults::of(&scenario);
        assert!(!faults.strike_at_open);
        assert_eq!(faults.at_turn[&2], FaultKind::Crash);
        scenario
            .turn
            .retain(|s| !matches!(s, Step::Generate { .. } | Step::Cancel { .. }));
        assert!(ProcessFaults::of(&scenario).strike_at_open);
    }

    #[test]
    fn a_driver_builds_from_the_documented_configuration_without_a_scenario() {
        let seen = std::cell::RefCell::new(None);
        let build = |config: &EngineConfig| -> Result<Box<dyn Engine>, EngineError> {
            *seen.borrow_mut() = Some(config.clone());
            Ok(Box::new(TinyEngine::new(&scenario_with_faults(vec![]))))
        };
        let mut config = EngineConfig::of(&scenario_with_faults(vec![]));
        config
            .options
            .insert("threads".into(), serde_json::json!(2));
        let requests = [
            Request::Hello {
                version: PROTOCOL_VERSION,
                engine: Box::new(config.clone()),
                scenario: None,
            },
            Request::Load,
        ];
        let input: String = requests.iter().map(encode_line).collect();
        let mut output = Vec::new();
        serve_driver(Cursor::new(input), &mut output, Box::new(build)).unwrap();
        assert_eq!(seen.borrow().as_ref(), Some(&config));
        let replies: Vec<Reply> = String::from_utf8(output)
            .unwrap()
            .lines()
            .map(|l| decode_line(l).unwrap())
            .collect();
        assert!(
            matches!(&replies[0].body, Response::Hello { backend, .. } if backend.backend == "tiny")
        );
        assert!(matches!(replies[1].body, Response::Loaded { .. }));
    }

    #[test]
    fn a_driver_refuses_a_first_request_other_than_hello_and_reports_a_failed_build() {
        let input = encode_line(&Request::Load);
        let mut output = Vec::new();
        let result = serve_driver(
            Cursor::new(input),
            &mut output,
            Box::new(|_: &EngineConfig| -> Result<Box<dyn Engine>, EngineError> { unreachable!() }),
        );
        assert!(matches!(result, Err(WorkerError::NoHello("load"))));

        let input = encode_line(&hello(None));
        let mut output = Vec::new();
        let build = |_: &EngineConfig| -> Result<Box<dyn Engine>, EngineError> {
            Err(EngineError::new(
                EngineErrorKind::Unavailable,
                "option `x` is unknown",
            ))
        };
        let result = serve_driver(Cursor::new(input), &mut output, Box::new(build));
        assert!(matches!(result, Err(WorkerError::Build(_))));
        let reply: Reply = decode_line(std::str::from_utf8(&output).unwrap()).unwrap();
        assert_eq!(
            reply.body,
            failed(EngineErrorKind::Unavailable, "option `x` is unknown")
        );
    }
}
