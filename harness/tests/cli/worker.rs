//! `leakloop worker`: the real binary serving engines to a [`WorkerEngine`] over its pipes.

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use leakloop::engine::{Engine, EngineErrorKind, GenerateRequest, Prompt, SessionId, WorkerEngine};
use leakloop::probe::probe_process;
use leakloop::scenario::{
    EngineSpec, Fault, FaultKind, PromptSpec, Scenario, SessionOptions, Step,
};

use crate::common::{leakloop_command, LEAKLOOP};

fn sim_scenario(faults: Vec<Fault>, call_timeout: Duration) -> Scenario {
    Scenario {
        faults,
        seed: 7,
        ..Scenario::new(
            "worker-sim",
            EngineSpec {
                call_timeout,
                isolate: true,
                ..EngineSpec::sim("cpu-flat")
            },
            4,
            vec![
                Step::Open(SessionOptions::default()),
                Step::Send(PromptSpec::Text("Summarize the notes.".into())),
                Step::Generate {
                    max_output_tokens: 32,
                },
                Step::Close,
            ],
        )
    }
}

fn spawn(scenario: &Scenario) -> WorkerEngine {
    WorkerEngine::spawn_program(Path::new(LEAKLOOP), scenario, &[])
        .unwrap_or_else(|e| panic!("the sim worker did not start: {e}"))
}

fn one_turn(
    engine: &mut dyn Engine,
    turn: u32,
) -> Result<SessionId, leakloop::engine::EngineError> {
    let session = engine.open_session(turn, &SessionOptions::default())?;
    engine.send(
        session,
        &Prompt {
            text: "Summarize the notes.".into(),
            tokens: 4,
        },
    )?;
    engine.generate(
        session,
        &GenerateRequest {
            max_output_tokens: 32,
            cancel_after_tokens: None,
        },
    )?;
    engine.close_session(session)?;
    Ok(session)
}

fn is_gone(pid: u32) -> bool {
    !Path::new(&format!("/proc/{pid}")).exists()
}

/// Starts `leakloop worker`, writes `input` to it, closes its stdin and returns its first stdout
/// line and exit code.
fn raw_worker(args: &[&str], input: &str) -> (String, Option<i32>, String) {
    let mut child = leakloop_command()
        .arg("worker")
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let output = child.wait_with_output().unwrap();
    (
        line,
        output.status.code(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[test]
fn the_worker_refuses_another_protocol_version() {
    let (line, code, _) = raw_worker(
        &[],
        "{\"call\":\"hello\",\"version\":999,\"shape\":\"of another version\"}\n",
    );
    let reply: serde_json::Value = serde_json::from_str(&line).unwrap();
    assert_eq!(reply["reply"], "failed", "{reply}");
    assert_eq!(reply["error"]["kind"], "protocol", "{reply}");
    let message = reply["error"]["message"].as_str().unwrap();
    assert!(message.contains("version mismatch"), "{message}");
    assert_eq!(code, Some(2));
}

#[test]
fn the_worker_answers_garbage_with_a_protocol_error() {
    let (line, code, stderr) = raw_worker(&[], "hello?\n");
    let reply: serde_json::Value = serde_json::from_str(&line).unwrap();
    assert_eq!(reply["error"]["kind"], "protocol", "{reply}");
    assert!(
        stderr.contains("malformed protocol line `hello?`"),
        "{stderr}"
    );
    assert_eq!(code, Some(2));
}

#[test]
fn the_worker_ends_quietly_when_its_runner_goes_away_before_the_handshake() {
    let (line, code, stderr) = raw_worker(&[], "");
    assert_eq!((line.as_str(), code, stderr.as_str()), ("", Some(0), ""));
}

#[test]
fn a_missing_scenario_file_is_bad_input() {
    let (_, code, stderr) = raw_worker(&["--scenario", "/nonexistent/scenario.json"], "");
    assert_eq!(code, Some(2));
    assert!(stderr.contains("/nonexistent/scenario.json"), "{stderr}");
}

#[test]
fn the_worker_subcommand_is_hidden_from_help() {
    let output = leakloop_command().arg("--help").output().unwrap();
    let help = String::from_utf8_lossy(&output.stdout);
    assert!(help.contains("run"), "{help}");
    assert!(!help.contains("worker"), "{help}");
}

#[test]
fn the_sim_runs_in_a_worker_that_is_probed_from_outside() {
    let mut engine = spawn(&sim_scenario(vec![], Duration::from_secs(30)));
    let pid = engine.process_id().expect("a worker has a process");
    assert_ne!(pid, std::process::id());
    assert_eq!(engine.describe().backend, "sim");
    engine.load().unwrap();
    for turn in 1..=3 {
        one_turn(&mut engine, turn).unwrap();
    }
    let snapshot = engine.snapshot().unwrap();
    assert!(snapshot.metrics.contains_key("native_heap"), "{snapshot:?}");
    let process = probe_process(pid).unwrap();
    assert!(process["rss"] > 0, "{process:?}");
    engine.unload().unwrap();
    drop(engine);
    assert!(is_gone(pid));
}

#[test]
fn a_crash_fault_aborts_the_sim_worker_and_the_runner_survives() {
    let mut engine = spawn(&sim_scenario(
        vec![Fault {
            at_turn: 2,
            kind: FaultKind::Crash,
        }],
        Duration::from_secs(30),
    ));
    let pid = engine.process_id().unwrap();
    engine.load().unwrap();
    one_turn(&mut engine, 1).unwrap();
    let err = one_turn(&mut engine, 2).unwrap_err();
    assert_eq!(
        err.kind,
        EngineErrorKind::Crashed {
            how: "signal 6 (SIGABRT)".into()
        },
        "{err}"
    );
    assert!(
        err.message.contains("injected crash fault at turn 2"),
        "{err}"
    );
    assert!(is_gone(pid));
    assert_eq!(engine.process_id(), None);
}

#[test]
fn a_hang_fault_in_the_sim_worker_is_hung_after_the_call_timeout() {
    let mut engine = spawn(&sim_scenario(
        vec![Fault {
            at_turn: 1,
            kind: FaultKind::Hang,
        }],
        Duration::from_millis(500),
    ));
    let pid = engine.process_id().unwrap();
    engine.load().unwrap();
    let err = one_turn(&mut engine, 1).unwrap_err();
    assert!(matches!(err.kind, EngineErrorKind::Hung { .. }), "{err:?}");
    assert!(is_gone(pid), "the hung worker is killed and reaped");
}
