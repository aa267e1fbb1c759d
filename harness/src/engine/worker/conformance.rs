//! `leakloop driver-check`: a short scripted session against an engine driver, through the same
//! [`WorkerEngine`] that runs it in a scenario, that notes every way the driver departs from
//! docs/protocol.md.
//!
//! A violation that ends the session (a crash, a hang, a malformed or wrong reply, ledger counts
//! that go down, which the worker engine refuses in any run) is the last step; the others (a close
//! of an unknown session that succeeds, a process id that is not the process started, a driver
//! that does not exit when its stdin closes or leaves a process holding its stdout) are noted and
//! the session goes on.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use crate::engine::worker::protocol::PROTOCOL_VERSION;
use crate::engine::worker::WorkerEngine;
use crate::engine::{
    Engine, EngineError, EngineErrorKind, EngineSnapshot, GenerateRequest, Prompt, SessionId,
};
use crate::scenario::{EngineSpec, ExecSpec, OptionValue, Scenario, SessionOptions, Step};

/// The id driver-check closes without having opened it.
const NEVER_OPENED: SessionId = SessionId(987_654_321);
/// Most tokens the scripted `generate` asks for.
const MAX_OUTPUT_TOKENS: u32 = 8;
/// How long the scripted `idle` waits.
const IDLE: Duration = Duration::from_millis(10);

/// What to check: the driver and what its handshake carries.
#[derive(Debug, Clone)]
pub struct DriverCheckPlan {
    /// The driver's command line.
    pub command: Vec<String>,
    /// Each call's timeout (the handshake's too).
    pub call_timeout: Duration,
    /// The model path sent in the handshake.
    pub model: Option<PathBuf>,
    /// Backend options sent in the handshake.
    pub options: BTreeMap<String, serde_json::Value>,
}

/// How one step of the session went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StepResult {
    /// As the protocol says; what the driver answered, in a few words.
    Ok(String),
    /// A departure from the protocol.
    Violation(String),
    /// A valid `failed` reply from the engine: not a protocol violation, but the session could
    /// not go on as scripted.
    EngineFailed(String),
}

/// One step of the scripted session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckStep {
    /// The call (or `exit`, for the end of the session).
    pub call: &'static str,
    /// How long it took.
    pub elapsed: Duration,
    /// How it went.
    pub result: StepResult,
}

/// Everything a driver check saw.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DriverCheckReport {
    /// The steps, in order.
    pub steps: Vec<CheckStep>,
}

impl DriverCheckReport {
    /// How many steps departed from the protocol.
    pub fn violations(&self) -> usize {
        self.steps
            .iter()
            .filter(|s| matches!(s.result, StepResult::Violation(_)))
            .count()
    }

    /// Whether the engine failed a call (with a valid reply) so that the check could not finish.
    pub fn engine_failed(&self) -> bool {
        self.steps
            .iter()
            .any(|s| matches!(s.result, StepResult::EngineFailed(_)))
    }

    fn push(&mut self, call: &'static str, started: Instant, result: StepResult) {
        self.steps.push(CheckStep {
            call,
            elapsed: started.elapsed(),
            result,
        });
    }

    /// Notes a failed call.
    fn failed(&mut self, call: &'static str, started: Instant, error: EngineError) {
        let result = match &error.kind {
            EngineErrorKind::Hung { .. } if call == "hello" => StepResult::Violation(format!(
                "slow handshake: no `hello` reply in time ({})",
                error.message
            )),
            EngineErrorKind::Unavailable => StepResult::EngineFailed(error.message),
            kind if kind.is_fatal() => StepResult::Violation(error.message),
            _ => StepResult::EngineFailed(format!(
                "the engine failed the call ({}): {}",
                kind_name(&error.kind),
                error.message
            )),
        };
        self.push(call, started, result);
    }
}

/// Runs the scripted session of docs/protocol.md ("A whole session") against the driver.
/// `Err` when it could not even be started (no such program, or its engine is unavailable).
pub fn check_driver(plan: &DriverCheckPlan) -> Result<DriverCheckReport, EngineError> {
    let scenario = plan_scenario(plan);
    let mut report = DriverCheckReport::default();
    let started = Instant::now();
    let mut driver = match WorkerEngine::spawn_driver(&scenario, &[]) {
        Ok(driver) => driver,
        Err(error) if error.kind == EngineErrorKind::Unavailable => return Err(error),
        Err(error) => {
            report.failed("hello", started, error);
            return Ok(report);
        }
    };
    let backend = driver.describe();
    let pid = driver.process_id().unwrap_or_default();
    let mut hello = format!(
        "{} {}, protocol version {PROTOCOL_VERSION}",
        backend.backend, backend.version
    );
    if driver.reported_pid() != pid {
        report.push(
            "hello",
            started,
            StepResult::Violation(format!(
                "it reported pid {} but the process started is {pid}: the engine must live in \
                 the process the runner starts and samples (a wrapper must `exec` the driver)",
                driver.reported_pid()
            )),
        );
    } else if backend.backend.trim().is_empty() {
        report.push(
            "hello",
            started,
            StepResult::Violation(
                "its `backend.backend` name is empty; it prefixes the driver's ledger kinds".into(),
            ),
        );
    } else {
        hello.push_str(&format!(", pid {pid}"));
        report.push("hello", started, StepResult::Ok(hello));
    }
    if session(&mut driver, &mut report) {
        let started = Instant::now();
        let result = match driver.finish() {
            Ok(()) => StepResult::Ok("exited with status 0 when its stdin closed".into()),
            Err(why) => StepResult::Violation(why),
        };
        report.push("exit", started, result);
    }
    Ok(report)
}

/// The calls after the handshake; whether the session got to its end.
fn session(driver: &mut WorkerEngine, report: &mut DriverCheckReport) -> bool {
    macro_rules! step {
        ($call:literal, $body:expr) => {{
            let started = Instant::now();
            match $body {
                Ok(value) => (started, value),
                Err(error) => {
                    report.failed($call, started, error);
                    return false;
                }
            }
        }};
    }
    let (started, first) = step!("snapshot", driver.snapshot());
    report.push("snapshot", started, StepResult::Ok(describe_counts(&first)));
    let (started, ()) = step!("load", driver.load());
    let backend = driver.describe();
    report.push(
        "load",
        started,
        StepResult::Ok(format!("{} {}", backend.backend, backend.version)),
    );
    let (started, session) = step!(
        "open_session",
        driver.open_session(1, &SessionOptions::default())
    );
    report.push(
        "open_session",
        started,
        StepResult::Ok(format!("session {}", session.0)),
    );
    let prompt = Prompt {
        text: "hello there".into(),
        tokens: 2,
    };
    let (started, ()) = step!("send", driver.send(session, &prompt));
    report.push("send", started, StepResult::Ok("done".into()));
    let request = GenerateRequest {
        max_output_tokens: MAX_OUTPUT_TOKENS,
        cancel_after_tokens: None,
    };
    let (started, outcome) = step!("generate", driver.generate(session, &request));
    let result = if outcome.tokens > MAX_OUTPUT_TOKENS {
        StepResult::Violation(format!(
            "it generated {} tokens, more than the {MAX_OUTPUT_TOKENS} asked for",
            outcome.tokens
        ))
    } else {
        StepResult::Ok(format!("{} tokens", outcome.tokens))
    };
    report.push("generate", started, result);
    let (started, ()) = step!("close_session", driver.close_session(session));
    report.push("close_session", started, StepResult::Ok("done".into()));

    // A close of a session that was never opened must fail (with `close`), not succeed.
    let started = Instant::now();
    match driver.close_session(NEVER_OPENED) {
        Ok(()) => report.push(
            "close_session",
            started,
            StepResult::Violation(format!(
                "it accepted closing session {}, which it never opened (expected `failed` with \
                 kind `close`)",
                NEVER_OPENED.0
            )),
        ),
        Err(error) if !error.kind.is_fatal() => report.push(
            "close_session",
            started,
            StepResult::Ok(format!(
                "an unknown session is refused ({})",
                kind_name(&error.kind)
            )),
        ),
        Err(error) => {
            report.failed("close_session", started, error);
            return false;
        }
    }
    let started = Instant::now();
    driver.idle(IDLE);
    // `idle` cannot fail; a driver lost in it shows at the next call.
    report.push("idle", started, StepResult::Ok("done".into()));
    // Every snapshot from here on must show counts no lower than the one before; the worker
    // engine checks that for any run, and ends the session where they go down.
    let (started, second) = step!("snapshot", driver.snapshot());
    report.push(
        "snapshot",
        started,
        StepResult::Ok(describe_counts(&second)),
    );
    let (started, ()) = step!("unload", driver.unload());
    report.push("unload", started, StepResult::Ok("done".into()));
    // Counts are cumulative across a reload too (a scenario's `reload_every`): a driver that
    // keeps them in its engine object restarts them at zero here.
    let (started, unloaded) = step!("snapshot", driver.snapshot());
    report.push(
        "snapshot",
        started,
        StepResult::Ok(format!("after unload: {}", describe_counts(&unloaded))),
    );
    let (started, ()) = step!("load", driver.load());
    report.push("load", started, StepResult::Ok("loaded again".into()));
    let (started, reloaded) = step!("snapshot", driver.snapshot());
    report.push(
        "snapshot",
        started,
        StepResult::Ok(format!("after reload: {}", describe_counts(&reloaded))),
    );
    let (started, ()) = step!("unload", driver.unload());
    report.push("unload", started, StepResult::Ok("done".into()));
    true
}

fn describe_counts(snapshot: &EngineSnapshot) -> String {
    if snapshot.ledger.is_empty() && snapshot.metrics.is_empty() {
        return "no counts yet".into();
    }
    let kinds: Vec<String> = snapshot
        .ledger
        .iter()
        .map(|(kind, c)| format!("{kind} {}/{}", c.created, c.deleted))
        .collect();
    let metrics: Vec<&str> = snapshot.metrics.keys().map(String::as_str).collect();
    format!(
        "ledger (created/deleted): {}; metrics: {}",
        if kinds.is_empty() {
            "none".into()
        } else {
            kinds.join(", ")
        },
        if metrics.is_empty() {
            "none".into()
        } else {
            metrics.join(", ")
        }
    )
}

fn kind_name(kind: &EngineErrorKind) -> String {
    serde_json::to_value(kind)
        .ok()
        .and_then(|v| v["kind"].as_str().map(str::to_owned))
        .unwrap_or_default()
}

/// The scenario whose engine is the driver: only its engine and timeout matter here.
fn plan_scenario(plan: &DriverCheckPlan) -> Scenario {
    let exec = ExecSpec {
        options: plan
            .options
            .iter()
            .map(|(key, value)| (key.clone(), OptionValue::from_json(value.clone())))
            .collect(),
        ..ExecSpec::new(plan.command.iter().cloned())
    };
    Scenario::new(
        "driver-check",
        EngineSpec {
            model: plan.model.clone(),
            call_timeout: plan.call_timeout,
            ..EngineSpec::exec(exec)
        },
        1,
        vec![Step::Open(SessionOptions::default()), Step::Close],
    )
}
