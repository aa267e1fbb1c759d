//! Tests of a test's own engine ([`ScenarioTest::engine`]) and of an engine served as a driver
//! ([`serve_driver`]), with an engine written as a user would: its counts in process globals.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crate::scenario::{EngineSpec, ExecSpec, PromptSpec, Scenario, Step};
use crate::testing::*;

/// Conversations created and deleted by every [`GlobalCountsEngine`] of this process, kept
/// where a binding over a C library would keep them.
static CREATED: AtomicU64 = AtomicU64::new(0);
static DELETED: AtomicU64 = AtomicU64::new(0);

/// Bytes a session holds, touched so that they count in the process's resident set.
const SESSION_BYTES: usize = 1 << 20;

/// Ledger kind of the engine's conversations.
const CONVERSATION: &str = "global-counts/conversation";

/// Set in the environment of this test binary started as [`driver_entry`]'s driver.
const DRIVER_ENV: &str = "LEAKLOOP_TEST_OWN_DRIVER";

/// An engine as an outside crate writes it: only leakloop's public types, its counts in
/// globals; `leak` keeps each closed session's memory and never counts its delete.
#[derive(Debug, Default)]
struct GlobalCountsEngine {
    leak: bool,
    next: u64,
    sessions: BTreeMap<SessionId, Vec<u8>>,
    kept: Vec<Vec<u8>>,
}

impl GlobalCountsEngine {
    fn leaking() -> Self {
        Self {
            leak: true,
            ..Self::default()
        }
    }
}

impl Engine for GlobalCountsEngine {
    fn describe(&self) -> BackendInfo {
        BackendInfo {
            backend: "global-counts".into(),
            version: "1".into(),
            details: BTreeMap::new(),
        }
    }

    fn load(&mut self) -> Result<(), EngineError> {
        Ok(())
    }

    fn open_session(&mut self, _turn: u32, _: &SessionOptions) -> Result<SessionId, EngineError> {
        self.next += 1;
        self.sessions
            .insert(SessionId(self.next), vec![7; SESSION_BYTES]);
        CREATED.fetch_add(1, Ordering::SeqCst);
        Ok(SessionId(self.next))
    }

    fn send(&mut self, _: SessionId, _: &Prompt) -> Result<(), EngineError> {
        Ok(())
    }

    fn generate(
        &mut self,
        _: SessionId,
        request: &GenerateRequest,
    ) -> Result<GenerateOutcome, EngineError> {
        Ok(GenerateOutcome {
            tokens: request.max_output_tokens,
            cancelled: false,
        })
    }

    fn close_session(&mut self, session: SessionId) -> Result<(), EngineError> {
        let Some(memory) = self.sessions.remove(&session) else {
            return Err(EngineError::new(
                EngineErrorKind::Close,
                format!("no open session {}", session.0),
            ));
        };
        if self.leak {
            self.kept.push(memory);
        } else {
            DELETED.fetch_add(1, Ordering::SeqCst);
        }
        Ok(())
    }

    fn unload(&mut self) -> Result<(), EngineError> {
        Ok(())
    }

    fn snapshot(&mut self) -> Result<EngineSnapshot, EngineError> {
        let counts = KindCounts {
            created: CREATED.load(Ordering::SeqCst),
            deleted: DELETED.load(Ordering::SeqCst),
        };
        Ok(EngineSnapshot {
            ledger: BTreeMap::from([("conversation".to_owned(), counts)]),
            metrics: BTreeMap::new(),
            ..Default::default()
        })
    }
}

/// 2 warm-up and 16 measured chat turns; balanced, and at most 256 KiB of resident growth
/// per turn (a leaking engine keeps 1 MiB).
fn chat(name: &str, engine: EngineSpec) -> ScenarioTest {
    let turn = vec![
        Step::Open(SessionOptions::default()),
        Step::Send(PromptSpec::Text("hi".into())),
        Step::Generate {
            max_output_tokens: 4,
        },
        Step::Close,
    ];
    ScenarioTest::new(Scenario::new(name, engine, 16, turn))
        .warmup_turns(2)
        .expect_balanced()
        .expect_max_growth_per_turn("rss", 256 << 10)
}

/// Hang guard only: every call of these runs answers in milliseconds.
const CALL_TIMEOUT: Duration = Duration::from_secs(60);

fn own_engine_spec() -> EngineSpec {
    EngineSpec {
        call_timeout: CALL_TIMEOUT,
        ..EngineSpec::exec(ExecSpec::new(["own-engine"]))
    }
}

/// Issue 21: in-process, one test's ledger counted another's sessions through the engine's
/// globals. Here this process's globals hold 5 conversations that are not the run's (as if
/// another test's engine had opened them), and the run's ledger counts its 18 alone.
#[test]
fn an_own_engine_runs_in_its_worker_with_a_ledger_of_its_own() {
    if std::env::var_os(SERVE_ENV).is_none() {
        CREATED.fetch_add(5, Ordering::SeqCst);
    }
    let run = chat("own-flat", own_engine_spec())
        .engine(GlobalCountsEngine::default)
        .run();
    run.assert_pass();
    let counts = run.record().ledger.totals[CONVERSATION];
    assert_eq!((counts.created, counts.deleted), (18, 18), "{counts:?}");
    let backend = &run.record().backend;
    assert_eq!(backend.backend, "global-counts");
    assert_eq!(backend.details["isolation"], "worker process");
}

#[test]
fn an_own_engine_that_leaks_fails_on_its_ledger_and_its_memory() {
    let run = chat("own-leaking", own_engine_spec())
        .engine(GlobalCountsEngine::leaking)
        .run();
    run.assert_fail()
        .assert_check_failed(&format!("balanced.{CONVERSATION}"))
        .assert_check_failed("rss.max_growth_per_turn");
    std::fs::remove_dir_all(run.keep_reports()).unwrap();
}

/// Issue 21: without `--quiet`, libtest writes `test NAME ... ` on stdout, the protocol's pipe,
/// without a newline; the worker ends that line before its handshake reply.
#[test]
fn an_own_engine_serves_from_a_worker_started_without_quiet() {
    let mut worker = this_test_worker().unwrap();
    worker.args.retain(|a| a != "--quiet");
    assert!(worker.args.iter().any(|a| a == "--test-threads=1"));
    chat("own-noisy", own_engine_spec())
        .engine(GlobalCountsEngine::default)
        .worker(worker)
        .run()
        .assert_pass();
}

/// This test binary as an engine driver serving [`GlobalCountsEngine`], its `leak` option
/// from the scenario; `quiet` as the worker is started.
fn driver_spec(leak: bool, quiet: bool) -> EngineSpec {
    let program = std::env::current_exe().unwrap().display().to_string();
    let mut command = vec![
        program,
        "testing::own_engine::tests::driver_entry".to_owned(),
        "--exact".to_owned(),
        "--include-ignored".to_owned(),
        "--nocapture".to_owned(),
        "--test-threads=1".to_owned(),
    ];
    if quiet {
        command.push("--quiet".to_owned());
    }
    let mut exec = ExecSpec::new(command);
    exec.env.insert(DRIVER_ENV.to_owned(), "1".to_owned());
    exec.options
        .insert("leak".to_owned(), OptionValue::from(leak));
    EngineSpec {
        call_timeout: CALL_TIMEOUT,
        ..EngineSpec::exec(exec)
    }
}

#[test]
fn serve_driver_makes_an_own_engine_an_exec_driver() {
    chat("driver-flat", driver_spec(false, true))
        .run()
        .assert_pass();
    let run = chat("driver-leaking", driver_spec(true, true)).run();
    run.assert_fail()
        .assert_check_failed(&format!("balanced.{CONVERSATION}"));
    std::fs::remove_dir_all(run.keep_reports()).unwrap();
}

/// Issue 21: the same reply glued onto libtest's `test NAME ... ` was skipped as noise until
/// the call timed out (60 s); it is refused at once, naming both parts.
#[test]
fn a_hello_glued_to_the_test_frameworks_output_is_named_at_once() {
    let err = chat("driver-noisy", driver_spec(false, false))
        .try_run()
        .unwrap_err()
        .to_string();
    assert!(
        err.contains(
            "`test testing::own_engine::tests::driver_entry ...` before `{\"reply\":\"hello\""
        ),
        "{err}"
    );
    assert!(err.contains("--quiet"), "{err}");
}

/// Not a test: the body of the driver the tests above start (see [`driver_spec`]). Without
/// [`DRIVER_ENV`] it returns at once.
#[test]
#[ignore = "entry point of the engine driver that other tests start"]
fn driver_entry() {
    if std::env::var_os(DRIVER_ENV).is_none() {
        return;
    }
    let result = serve_driver_with(|config| {
        let leak = config.option("leak").and_then(OptionValue::as_bool);
        match leak {
            Some(leak) => Ok(GlobalCountsEngine {
                leak,
                ..GlobalCountsEngine::default()
            }),
            None => Err(EngineError::new(
                EngineErrorKind::Unavailable,
                "option `leak` must be a boolean",
            )),
        }
    });
    if let Err(err) = &result {
        eprintln!("test driver: {err}");
    }
    std::process::exit(if result.is_ok() { 0 } else { 2 });
}

#[test]
fn reports_of_two_test_binaries_or_two_tests_never_share_a_folder() {
    let label = |binary, test| crate::testing::outcome::run_label(binary, test, "flat");
    let a = label(
        Some("memory-0123abcd"),
        Some("tests::a_clean_engine_passes"),
    );
    assert_eq!(a, "memory-0123abcd-tests-a_clean_engine_passes-flat");
    assert_ne!(
        a,
        label(
            Some("memory-4567ef01"),
            Some("tests::a_clean_engine_passes")
        )
    );
    assert_ne!(a, label(Some("memory-0123abcd"), Some("tests::other")));
    assert_eq!(label(None, Some("main")), "flat");
}

#[test]
fn the_worker_of_an_own_engine_asks_for_it_quietly() {
    let command = crate::testing::worker::this_test_worker_for_own_engine().unwrap();
    assert_eq!(
        command.env,
        [(SERVE_ENV.to_owned(), SERVE_OWN_ENGINE.to_owned())]
    );
    assert!(command.args.contains(&OsString::from("--quiet")));
}

/// An engine in this process with real memory (as a user's would be, run in-process) is
/// measured here, so such runs take turns; the simulator and a worker are not.
#[test]
fn only_an_engine_with_real_memory_in_this_process_is_measured_here() {
    use crate::testing::scenario_test::measured_here;
    assert!(measured_here(&GlobalCountsEngine::default()));
    let sim = crate::engine::build_in_process(chat("sim", EngineSpec::sim("cpu-flat")).scenario())
        .unwrap();
    assert!(!measured_here(sim.as_ref()));
}
