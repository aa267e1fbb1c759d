//! Tests of `parent.rs`.

use rstest::rstest;

use super::*;
use crate::engine::worker::test_engine::{
    scenario_with_faults, test_worker_args, SESSION_BYTES, TEST_WORKER_ENV,
};
use crate::probe::probe_process;
use crate::process::tail::{STDERR_LINE_BYTES, STDERR_TAIL_LINES};
use crate::scenario::{Fault, FaultKind};

/// A valid handshake answer, for shell workers.
const HELLO: &str =
    r#"{"reply":"hello","version":2,"pid":1,"backend":{"backend":"sh","version":"0"}}"#;

fn scenario(call_timeout: Duration) -> Scenario {
    let mut scenario = scenario_with_faults(vec![]);
    scenario.engine.call_timeout = call_timeout;
    scenario
}

/// A worker that is a shell script; `$HELLO` holds a valid handshake answer.
fn shell_worker(script: &str, call_timeout: Duration) -> Result<WorkerEngine, EngineError> {
    WorkerEngine::launch(
        Path::new("sh"),
        &["-c".into(), format!("ulimit -c 0; {script}").into()],
        &[("HELLO".into(), HELLO.into())],
        &scenario(call_timeout),
    )
}

/// A worker that is this test binary serving the tiny engine.
fn tiny_worker(scenario: &Scenario) -> WorkerEngine {
    let exe = std::env::current_exe().unwrap();
    WorkerEngine::launch(
        &exe,
        &test_worker_args(),
        &[(TEST_WORKER_ENV.into(), "1".into())],
        scenario,
    )
    .unwrap()
}

/// Whether a process id is gone for good: no `/proc` entry (a zombie would still have one).
fn is_gone(pid: u32) -> bool {
    !Path::new(&format!("/proc/{pid}")).exists()
}

fn one_turn(worker: &mut WorkerEngine, turn: u32) -> Result<(), EngineError> {
    let session = worker.open_session(turn, &SessionOptions::default())?;
    worker.send(
        session,
        &Prompt {
            text: "hi".into(),
            tokens: 1,
        },
    )?;
    worker.generate(
        session,
        &GenerateRequest {
            max_output_tokens: 16,
            cancel_after_tokens: None,
        },
    )?;
    worker.close_session(session)
}

#[rstest]
#[case::abort("kill -ABRT $$", "signal 6 (SIGABRT)")]
#[case::segfault("kill -SEGV $$", "signal 11 (SIGSEGV)")]
#[case::killed("kill -KILL $$", "signal 9 (SIGKILL)")]
#[case::exit_code("exit 3", "exit status 3")]
fn a_dying_worker_is_crashed_naming_how(#[case] death: &str, #[case] how: &str) {
    let script = format!("read hello; echo 'engine: about to die' >&2; {death}");
    let err = shell_worker(&script, Duration::from_secs(10)).unwrap_err();
    assert_eq!(err.kind, EngineErrorKind::Crashed { how: how.into() });
    assert!(err.message.contains("during `hello`"), "{err}");
    assert!(err.message.contains(how), "{err}");
    assert!(err.message.contains("| engine: about to die"), "{err}");
}

#[test]
fn a_crash_after_the_handshake_fails_that_call_and_every_later_one() {
    let mut worker = shell_worker(
        r#"read hello; echo "$HELLO"; read load; kill -ABRT $$"#,
        Duration::from_secs(10),
    )
    .unwrap();
    let pid = worker.process_id().unwrap();
    let err = worker.load().unwrap_err();
    assert_eq!(
        err.kind,
        EngineErrorKind::Crashed {
            how: "signal 6 (SIGABRT)".into()
        }
    );
    assert!(err.message.contains("during `load`"), "{err}");
    assert_eq!(worker.process_id(), None);
    assert!(is_gone(pid));
    let again = worker.snapshot().unwrap_err();
    assert_eq!(again.kind, err.kind);
    assert!(again.message.starts_with("the worker is gone"), "{again}");
}

#[test]
fn a_silent_worker_is_hung_after_the_timeout_then_killed_and_reaped() {
    let mut worker = shell_worker(
        r#"read hello; echo "$HELLO"; echo 'engine: working' >&2; exec sleep 100"#,
        Duration::from_millis(300),
    )
    .unwrap();
    let pid = worker.process_id().unwrap();
    let err = worker.load().unwrap_err();
    let EngineErrorKind::Hung { waited_ms } = err.kind else {
        panic!("{err:?}");
    };
    assert!(waited_ms >= 300, "{waited_ms}");
    assert!(
        err.message.contains("did not answer `load` within 300ms"),
        "{err}"
    );
    assert!(err.message.contains("| engine: working"), "{err}");
    assert!(is_gone(pid), "the hung worker {pid} is still there");
}

#[rstest]
#[case::garbage("echo 'segfault handler says hi'", "segfault handler says hi")]
#[case::wrong_reply(r#"echo '{"reply":"done"}'"#, "answering `load` with")]
#[case::unknown_reply(r#"echo '{"reply":"maybe"}'"#, "unknown variant `maybe`")]
fn a_malformed_reply_is_a_protocol_error_and_the_worker_is_killed(
    #[case] reply: &str,
    #[case] quoted: &str,
) {
    let script = format!(r#"read hello; echo "$HELLO"; read load; {reply}; exec sleep 100"#);
    let mut worker = shell_worker(&script, Duration::from_secs(10)).unwrap();
    let pid = worker.process_id().unwrap();
    let err = worker.load().unwrap_err();
    assert_eq!(err.kind, EngineErrorKind::Protocol, "{err}");
    assert!(err.message.contains(quoted), "{err}");
    assert!(is_gone(pid));
}

#[test]
fn stdout_noise_before_the_handshake_is_kept_with_stderr() {
    let worker = shell_worker(
        r#"echo 'interposer 1.0 loaded'; read hello; echo "$HELLO"; exec sleep 100"#,
        Duration::from_secs(10),
    )
    .unwrap();
    assert_eq!(worker.stderr_tail(), ["(stdout) interposer 1.0 loaded"]);
    assert_eq!(worker.describe().backend, "sh");
    assert_eq!(worker.describe().details["isolation"], "worker process");
}

/// Issue 20: 100 lines of 1 MiB before the handshake cost the tail 64 lines of 4 KiB, and the
/// lines pushed out are counted.
#[test]
fn long_stdout_lines_before_the_handshake_are_cut_and_counted() {
    let worker = shell_worker(
        r#"i=0; while [ $i -lt 100 ]; do head -c 1048576 /dev/zero | tr '\0' x; echo; i=$((i+1)); done;
           read hello; echo "$HELLO"; exec sleep 100"#,
        Duration::from_secs(60),
    )
    .unwrap();
    let tail = worker.stderr_tail();
    assert_eq!(tail.len(), STDERR_TAIL_LINES);
    let expected = format!(
        "(stdout) {} [... {} more bytes]",
        "x".repeat(STDERR_LINE_BYTES as usize),
        (1 << 20) - STDERR_LINE_BYTES
    );
    assert!(
        tail.iter().all(|line| *line == expected),
        "{:?}",
        &tail[0][..40]
    );
    assert_eq!(worker.stderr.dropped(), 100 - STDERR_TAIL_LINES as u64);
    assert!(worker
        .stderr_block()
        .contains("[... 36 earlier lines not kept]"));
}

#[test]
fn a_worker_that_is_not_there_is_unavailable() {
    let err = WorkerEngine::spawn_program(
        Path::new("/nonexistent/leakloop"),
        &scenario(Duration::from_secs(1)),
        &[],
    )
    .unwrap_err();
    assert_eq!(err.kind, EngineErrorKind::Unavailable);
    assert!(err.message.contains("/nonexistent/leakloop"), "{err}");
}

#[rstest]
#[case::env_wins(Some("/opt/leakloop"), "/usr/bin/whatever", Ok("/opt/leakloop"))]
#[case::leakloop_itself(None, "/usr/bin/leakloop", Ok("/usr/bin/leakloop"))]
#[case::another_program(None, "/tmp/cli-0123abcd", Err("not leakloop"))]
fn the_worker_binary_is_leakloop_or_named_explicitly(
    #[case] from_env: Option<&str>,
    #[case] exe: &str,
    #[case] expected: Result<&str, &str>,
) {
    let chosen = choose_worker_binary(from_env.map(OsString::from), Ok(PathBuf::from(exe)));
    match (chosen, expected) {
        (Ok(path), Ok(want)) => assert_eq!(path, Path::new(want)),
        (Err(err), Err(want)) => {
            assert_eq!(err.kind, EngineErrorKind::Unavailable);
            assert!(err.message.contains(want), "{err}");
            assert!(err.message.contains(WORKER_BIN_ENV), "{err}");
        }
        (chosen, want) => panic!("{chosen:?} but expected {want:?}"),
    }
}

#[test]
fn the_environment_given_reaches_the_worker() {
    let err = WorkerEngine::launch(
        Path::new("sh"),
        &[
            "-c".into(),
            "read hello; echo \"preload=$LD_PRELOAD_TEST\" >&2; exit 1".into(),
        ],
        &[("LD_PRELOAD_TEST".into(), "/opt/libcount.so".into())],
        &scenario(Duration::from_secs(10)),
    )
    .unwrap_err();
    assert!(err.message.contains("| preload=/opt/libcount.so"), "{err}");
}

#[test]
fn a_real_worker_serves_every_call_and_counts_its_own_heap() {
    let mut worker = tiny_worker(&scenario_with_faults(vec![]));
    let pid = worker.process_id().unwrap();
    assert_ne!(pid, std::process::id());
    assert_eq!(worker.describe().details["loaded"], "false");
    worker.load().unwrap();
    assert_eq!(worker.describe().details["loaded"], "true");
    // The drain reads stderr concurrently with the reply, so give it a moment.
    let logged = |w: &WorkerEngine| {
        w.stderr_tail()
            .contains(&"tiny engine: native log line on stdout".to_owned())
    };
    for _ in 0..500 {
        if logged(&worker) {
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(
        logged(&worker),
        "what the engine writes to fd 1 lands in stderr, not in the protocol: {:?}",
        worker.stderr_tail()
    );
    let session = worker.open_session(1, &SessionOptions::default()).unwrap();
    let outcome = worker
        .generate(
            session,
            &GenerateRequest {
                max_output_tokens: 16,
                cancel_after_tokens: Some(4),
            },
        )
        .unwrap();
    assert_eq!((outcome.tokens, outcome.cancelled), (4, true));
    let snapshot = worker.snapshot().unwrap();
    assert_eq!(snapshot.ledger["conversation"].created, 1);
    if cfg!(all(target_os = "linux", target_env = "gnu")) {
        assert!(snapshot.metrics["native_heap"] >= SESSION_BYTES as u64);
    }
    worker.close_session(session).unwrap();
    let err = worker.close_session(session).unwrap_err();
    assert_eq!(
        err.kind,
        EngineErrorKind::Close,
        "engine errors pass through"
    );
    worker.idle(Duration::from_secs(1));
    worker.unload().unwrap();
    assert_eq!(worker.process_id(), Some(pid), "still alive after errors");
    drop(worker);
    assert!(is_gone(pid), "dropping the engine ends its worker");
}

#[test]
fn the_workers_memory_is_probed_from_outside() {
    let mut worker = tiny_worker(&scenario_with_faults(vec![]));
    let pid = worker.process_id().unwrap();
    worker.load().unwrap();
    let before = probe_process(pid).unwrap();
    let sessions: Vec<_> = (1..=8)
        .map(|turn| {
            worker
                .open_session(turn, &SessionOptions::default())
                .unwrap()
        })
        .collect();
    let during = probe_process(pid).unwrap();
    for session in sessions {
        worker.close_session(session).unwrap();
    }
    let after = probe_process(pid).unwrap();
    let held = 8 * SESSION_BYTES as u64;
    assert!(
        during["rss"] >= before["rss"] + held * 3 / 4,
        "{before:?} -> {during:?}"
    );
    if cfg!(target_os = "linux") {
        assert!(during["anon_rss"] >= before["anon_rss"] + held * 3 / 4);
        assert!(during.contains_key("pss") && during.contains_key("swap"));
    }
    assert!(
        after["rss"] + held / 2 <= during["rss"],
        "{during:?} -> {after:?}"
    );
}

#[test]
fn a_crash_fault_really_aborts_the_worker_at_that_turns_generate() {
    let mut worker = tiny_worker(&scenario_with_faults(vec![Fault {
        at_turn: 2,
        kind: FaultKind::Crash,
    }]));
    let pid = worker.process_id().unwrap();
    worker.load().unwrap();
    one_turn(&mut worker, 1).unwrap();
    let err = one_turn(&mut worker, 2).unwrap_err();
    assert_eq!(
        err.kind,
        EngineErrorKind::Crashed {
            how: "signal 6 (SIGABRT)".into()
        }
    );
    assert!(err.message.contains("during `generate`"), "{err}");
    assert!(
        err.message.contains("injected crash fault at turn 2"),
        "{err}"
    );
    assert!(is_gone(pid));
}

#[test]
fn a_hang_fault_really_blocks_the_worker_until_the_timeout_kills_it() {
    let mut scenario = scenario_with_faults(vec![Fault {
        at_turn: 1,
        kind: FaultKind::Hang,
    }]);
    scenario.engine.call_timeout = Duration::from_millis(500);
    let mut worker = tiny_worker(&scenario);
    let pid = worker.process_id().unwrap();
    worker.load().unwrap();
    let err = one_turn(&mut worker, 1).unwrap_err();
    assert!(matches!(err.kind, EngineErrorKind::Hung { .. }), "{err:?}");
    assert!(err.message.contains("`generate`"), "{err}");
    assert!(
        err.message.contains("injected hang fault at turn 1"),
        "{err}"
    );
    assert!(is_gone(pid));
}

#[test]
fn an_external_driver_gets_the_documented_handshake_not_the_internal_scenario() {
    let mut exec =
        crate::scenario::ExecSpec::new(["sh", "-c", "read hello; echo \"got $hello\" >&2; exit 1"]);
    exec.options.insert(
        "grow_kib".into(),
        crate::scenario::OptionValue::from(64_u64),
    );
    let scenario = Scenario {
        seed: 11,
        ..Scenario::new(
            "driver",
            crate::scenario::EngineSpec {
                call_timeout: Duration::from_secs(10),
                ..crate::scenario::EngineSpec::exec(exec)
            },
            1,
            vec![],
        )
    };
    let err = WorkerEngine::spawn_driver(&scenario, &[]).unwrap_err();
    let got = err
        .message
        .lines()
        .find_map(|l| l.strip_prefix("  | got "))
        .unwrap_or_else(|| panic!("{err}"));
    let hello: serde_json::Value = serde_json::from_str(got).unwrap();
    assert_eq!(hello["call"], "hello");
    assert_eq!(hello["version"], PROTOCOL_VERSION);
    assert_eq!(hello["engine"]["backend"], "exec");
    assert_eq!(hello["engine"]["seed"], 11);
    assert_eq!(hello["engine"]["options"]["grow_kib"], 64);
    assert!(hello.get("scenario").is_none(), "{hello}");
}
