//! Interaction tests of the turn loop against a mocked engine: call order, release ordering on
//! every failure path, reloads, faults and sampling.

use std::collections::BTreeMap;
use std::time::Duration;

use mockall::predicate::{always, eq};
use mockall::Sequence;

use super::*;
use crate::engine::{
    BackendInfo, EngineErrorKind, EngineSnapshot, GenerateOutcome, KindCounts, Prompt,
};
use crate::scenario::{EngineSpec, Fault, PromptSpec, SessionOptions};

mockall::mock! {
    pub Eng {}
    impl Engine for Eng {
        fn describe(&self) -> BackendInfo;
        fn load(&mut self) -> Result<(), EngineError>;
        fn open_session(&mut self, turn: u32, options: &SessionOptions) -> Result<SessionId, EngineError>;
        fn send(&mut self, session: SessionId, prompt: &Prompt) -> Result<(), EngineError>;
        fn generate(&mut self, session: SessionId, request: &GenerateRequest) -> Result<GenerateOutcome, EngineError>;
        fn close_session(&mut self, session: SessionId) -> Result<(), EngineError>;
        fn unload(&mut self) -> Result<(), EngineError>;
        fn snapshot(&mut self) -> Result<EngineSnapshot, EngineError>;
        fn idle(&mut self, duration: Duration);
        fn simulated_clock_ms(&self) -> Option<f64>;
        fn process_id(&self) -> Option<u32>;
    }
}

fn scenario(turns: u32, steps: Vec<Step>) -> Scenario {
    Scenario {
        seed: 1,
        ..Scenario::new("runner-test", EngineSpec::sim("cpu-flat"), turns, steps)
    }
}

fn chat_turn() -> Vec<Step> {
    vec![
        Step::Open(SessionOptions::default()),
        Step::Send(PromptSpec::Text("hello there".into())),
        Step::Generate {
            max_output_tokens: 16,
        },
        Step::Close,
        Step::Idle(Duration::from_secs(8)),
    ]
}

/// An engine mock with the passive calls (describe, snapshot, clock, pid, idle) answered.
fn passive_engine() -> MockEng {
    let mut engine = MockEng::new();
    engine.expect_describe().return_const(BackendInfo {
        backend: "mock".into(),
        version: "0".into(),
        details: BTreeMap::new(),
    });
    engine.expect_snapshot().returning(|| {
        Ok(EngineSnapshot {
            ledger: BTreeMap::new(),
            metrics: BTreeMap::from([("rss".to_owned(), 100)]),
            ..Default::default()
        })
    });
    engine.expect_simulated_clock_ms().return_const(Some(0.0));
    engine.expect_process_id().return_const(None);
    engine.expect_idle().return_const(());
    engine
}

fn outcome() -> Result<GenerateOutcome, EngineError> {
    Ok(GenerateOutcome {
        tokens: 16,
        cancelled: false,
    })
}

/// Expects one chat turn, in order: open (answering session `turn`), send, generate, close.
fn expect_chat_turn(engine: &mut MockEng, seq: &mut Sequence, turn: u32) {
    let id = SessionId(u64::from(turn));
    engine
        .expect_open_session()
        .with(eq(turn), always())
        .times(1)
        .in_sequence(seq)
        .returning(move |_, _| Ok(id));
    engine
        .expect_send()
        .withf(move |session, p| *session == id && p.text == "hello there")
        .times(1)
        .in_sequence(seq)
        .returning(|_, _| Ok(()));
    engine
        .expect_generate()
        .withf(move |session, _| *session == id)
        .times(1)
        .in_sequence(seq)
        .returning(|_, _| outcome());
    engine
        .expect_close_session()
        .with(eq(id))
        .times(1)
        .in_sequence(seq)
        .returning(|_| Ok(()));
}

/// An engine that expects one load, `turns` chat turns in order, and one unload.
fn engine_for_chat_turns(turns: u32) -> MockEng {
    let mut engine = passive_engine();
    let mut seq = Sequence::new();
    engine
        .expect_load()
        .times(1)
        .in_sequence(&mut seq)
        .returning(|| Ok(()));
    for turn in 1..=turns {
        expect_chat_turn(&mut engine, &mut seq, turn);
    }
    engine
        .expect_unload()
        .times(1)
        .in_sequence(&mut seq)
        .returning(|| Ok(()));
    engine
}

#[test]
fn a_clean_run_loads_once_runs_every_turn_in_order_and_unloads_last() {
    let mut engine = engine_for_chat_turns(3);

    let record = run_scenario(&scenario(3, chat_turn()), &mut engine, &mut NoObserver);
    assert_eq!(record.outcome, RunOutcome::Completed);
    assert_eq!(record.turns_completed, 3);
    let phases: Vec<_> = record.samples.iter().map(|s| (s.turn, s.phase)).collect();
    assert_eq!(
        phases,
        [
            (0, Phase::Load),
            (1, Phase::Close),
            (2, Phase::Close),
            (3, Phase::Close)
        ]
    );
    assert!(record.ledger.imbalances().is_empty());
    assert_eq!(
        record.ledger.totals["runner/session"],
        KindCounts {
            created: 3,
            deleted: 3
        }
    );
}

#[test]
fn a_generate_error_still_closes_the_session_and_the_run_goes_on() {
    let mut engine = passive_engine();
    engine.expect_load().returning(|| Ok(()));
    engine
        .expect_open_session()
        .times(2)
        .returning(|turn, _| Ok(SessionId(u64::from(turn))));
    engine.expect_send().times(2).returning(|_, _| Ok(()));
    engine.expect_generate().times(2).returning(|id, _| {
        if id.0 == 1 {
            Err(EngineError::new(EngineErrorKind::Generate, "boom"))
        } else {
            outcome()
        }
    });
    engine
        .expect_close_session()
        .with(eq(SessionId(1)))
        .times(1)
        .returning(|_| Ok(()));
    engine
        .expect_close_session()
        .with(eq(SessionId(2)))
        .times(1)
        .returning(|_| Ok(()));
    engine.expect_unload().times(1).returning(|| Ok(()));

    let record = run_scenario(&scenario(2, chat_turn()), &mut engine, &mut NoObserver);
    assert_eq!(record.outcome, RunOutcome::Completed);
    assert_eq!(record.engine_errors.len(), 1);
    assert_eq!(record.engine_errors[0].0, 1);
    assert_eq!(record.engine_errors[0].1, "generate");
    assert!(record.ledger.imbalances().is_empty());
}

#[test]
fn a_failed_open_skips_the_work_and_the_close_of_that_turn() {
    let mut engine = passive_engine();
    engine.expect_load().returning(|| Ok(()));
    engine
        .expect_open_session()
        .times(1)
        .returning(|_, _| Err(EngineError::new(EngineErrorKind::Open, "no memory")));
    engine.expect_send().never();
    engine.expect_generate().never();
    engine.expect_close_session().never();
    engine.expect_unload().times(1).returning(|| Ok(()));

    let record = run_scenario(&scenario(1, chat_turn()), &mut engine, &mut NoObserver);
    assert_eq!(record.outcome, RunOutcome::Completed);
    assert_eq!(record.engine_errors[0].1, "open");
    // The post-close sample is still taken so the series has a value for the turn.
    assert_eq!(record.samples.len(), 2);
}

#[test]
fn cancel_passes_the_token_limit_and_the_session_is_closed_after_it() {
    let mut engine = passive_engine();
    let mut seq = Sequence::new();
    engine.expect_load().returning(|| Ok(()));
    engine
        .expect_open_session()
        .returning(|_, _| Ok(SessionId(7)));
    engine.expect_send().returning(|_, _| Ok(()));
    engine
        .expect_generate()
        .withf(|_, r| r.cancel_after_tokens == Some(4) && r.max_output_tokens == 64)
        .times(1)
        .in_sequence(&mut seq)
        .returning(|_, _| {
            Ok(GenerateOutcome {
                tokens: 4,
                cancelled: true,
            })
        });
    engine
        .expect_close_session()
        .times(1)
        .in_sequence(&mut seq)
        .returning(|_| Ok(()));
    engine
        .expect_unload()
        .times(1)
        .in_sequence(&mut seq)
        .returning(|| Ok(()));
    let steps = vec![
        Step::Open(SessionOptions::default()),
        Step::Send(PromptSpec::Tokens(vec![32])),
        Step::Cancel {
            after_tokens: 4,
            max_output_tokens: 64,
        },
        Step::Close,
    ];
    let record = run_scenario(&scenario(1, steps), &mut engine, &mut NoObserver);
    assert_eq!(record.outcome, RunOutcome::Completed);
}

#[test]
fn reload_every_k_turns_unloads_after_the_close_and_samples_the_new_epoch() {
    let mut engine = passive_engine();
    let mut seq = Sequence::new();
    engine
        .expect_load()
        .times(1)
        .in_sequence(&mut seq)
        .returning(|| Ok(()));
    for turn in 1..=5u32 {
        expect_chat_turn(&mut engine, &mut seq, turn);
        if turn == 2 || turn == 4 {
            engine
                .expect_unload()
                .times(1)
                .in_sequence(&mut seq)
                .returning(|| Ok(()));
            engine
                .expect_load()
                .times(1)
                .in_sequence(&mut seq)
                .returning(|| Ok(()));
        }
    }
    engine
        .expect_unload()
        .times(1)
        .in_sequence(&mut seq)
        .returning(|| Ok(()));
    let mut s = scenario(5, chat_turn());
    s.reload_every = 2;
    let record = run_scenario(&s, &mut engine, &mut NoObserver);
    assert_eq!(record.outcome, RunOutcome::Completed);
    let reloads: Vec<_> = record
        .samples
        .iter()
        .filter(|s| s.phase == Phase::Reload)
        .map(|s| (s.turn, s.epoch))
        .collect();
    assert_eq!(reloads, [(2, 2), (4, 3)]);
    assert_eq!(
        record.ledger.totals["runner/engine"],
        KindCounts {
            created: 3,
            deleted: 3
        }
    );
}

#[test]
fn a_crash_ends_the_run_at_once_and_keeps_every_sample_taken() {
    let mut engine = passive_engine();
    engine.expect_load().returning(|| Ok(()));
    engine
        .expect_open_session()
        .times(3)
        .returning(|turn, _| Ok(SessionId(u64::from(turn))));
    engine.expect_send().returning(|_, _| Ok(()));
    engine.expect_generate().times(3).returning(|id, _| {
        if id.0 == 3 {
            Err(EngineError::new(
                EngineErrorKind::Crashed {
                    how: "signal 11 (SIGSEGV)".into(),
                },
                "worker died",
            ))
        } else {
            outcome()
        }
    });
    // The dead engine is never called again: no close of the crashed session, no unload.
    engine.expect_close_session().times(2).returning(|_| Ok(()));
    engine.expect_unload().never();

    let record = run_scenario(&scenario(10, chat_turn()), &mut engine, &mut NoObserver);
    match &record.outcome {
        RunOutcome::EngineFailed { turn, step, error } => {
            assert_eq!((*turn, step.as_str()), (3, "generate"));
            assert!(matches!(error.kind, EngineErrorKind::Crashed { .. }));
        }
        other => panic!("expected an engine failure, got {other:?}"),
    }
    assert_eq!(record.turns_completed, 2);
    assert_eq!(
        record.samples.len(),
        3,
        "baseline and two post-close samples"
    );
}

#[test]
fn a_load_failure_is_reported_as_turn_zero() {
    let mut engine = passive_engine();
    engine.expect_load().returning(|| {
        Err(EngineError::new(
            EngineErrorKind::Unavailable,
            "library not found",
        ))
    });
    engine.expect_open_session().never();
    engine.expect_unload().never();
    let record = run_scenario(&scenario(3, chat_turn()), &mut engine, &mut NoObserver);
    assert!(matches!(
        record.outcome,
        RunOutcome::EngineFailed { turn: 0, ref step, .. } if step == "load"
    ));
    assert!(record.samples.is_empty());
}

#[test]
fn skip_close_fault_leaves_sessions_open_from_its_turn_and_the_ledger_sees_it() {
    let mut engine = passive_engine();
    engine.expect_load().returning(|| Ok(()));
    engine
        .expect_open_session()
        .times(4)
        .returning(|turn, _| Ok(SessionId(u64::from(turn))));
    engine.expect_send().returning(|_, _| Ok(()));
    engine.expect_generate().returning(|_, _| outcome());
    engine
        .expect_close_session()
        .withf(|id| id.0 < 3)
        .times(2)
        .returning(|_| Ok(()));
    engine.expect_unload().times(1).returning(|| Ok(()));
    let mut s = scenario(4, chat_turn());
    s.faults = vec![Fault {
        at_turn: 3,
        kind: FaultKind::SkipClose,
    }];
    let record = run_scenario(&s, &mut engine, &mut NoObserver);
    let imbalances = record.ledger.imbalances();
    assert_eq!(imbalances.len(), 1);
    assert_eq!(imbalances[0].kind, "runner/session");
    assert_eq!((imbalances[0].created, imbalances[0].deleted), (4, 2));
    assert_eq!(imbalances[0].first_turn, Some(3));
    assert_eq!(
        record.samples.len(),
        5,
        "post-close samples are still taken"
    );
}

#[test]
fn backend_ledger_counts_are_attributed_to_the_turn_they_changed_in() {
    let mut engine = MockEng::new();
    engine.expect_describe().return_const(BackendInfo {
        backend: "mock".into(),
        version: "0".into(),
        details: BTreeMap::new(),
    });
    engine.expect_simulated_clock_ms().return_const(None);
    engine.expect_process_id().return_const(None);
    engine.expect_idle().return_const(());
    let opened = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    let seen = opened.clone();
    engine.expect_snapshot().returning(move || {
        Ok(EngineSnapshot {
            ledger: BTreeMap::from([(
                "conversation".to_owned(),
                KindCounts {
                    created: seen.load(std::sync::atomic::Ordering::SeqCst),
                    deleted: 0,
                },
            )]),
            metrics: BTreeMap::new(),
            ..Default::default()
        })
    });
    engine.expect_load().returning(|| Ok(()));
    engine.expect_open_session().returning(move |turn, _| {
        opened.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        Ok(SessionId(u64::from(turn)))
    });
    engine.expect_send().returning(|_, _| Ok(()));
    engine.expect_generate().returning(|_, _| outcome());
    engine.expect_close_session().returning(|_| Ok(()));
    engine.expect_unload().returning(|| Ok(()));
    let record = run_scenario(&scenario(3, chat_turn()), &mut engine, &mut NoObserver);
    let imbalance = &record.ledger.imbalances()[0];
    assert_eq!(imbalance.kind, "mock/conversation");
    assert_eq!((imbalance.created, imbalance.deleted), (3, 0));
    assert_eq!(imbalance.first_turn, Some(1));
}

/// An engine that answers every call and expects exactly `settles` idles of 500 ms (the settle
/// time) and `idles` of 8 s (the chat turn's idle step).
fn engine_counting_idles(settles: usize, idles: usize) -> MockEng {
    let mut engine = passive_engine();
    engine.checkpoint();
    engine.expect_describe().return_const(BackendInfo {
        backend: "mock".into(),
        version: "0".into(),
        details: BTreeMap::new(),
    });
    engine
        .expect_snapshot()
        .returning(|| Ok(EngineSnapshot::default()));
    engine.expect_simulated_clock_ms().return_const(Some(0.0));
    engine.expect_process_id().return_const(None);
    engine
        .expect_idle()
        .with(eq(Duration::from_millis(500)))
        .times(settles)
        .return_const(());
    engine
        .expect_idle()
        .with(eq(Duration::from_secs(8)))
        .times(idles)
        .return_const(());
    engine.expect_load().returning(|| Ok(()));
    engine
        .expect_open_session()
        .returning(|_, _| Ok(SessionId(1)));
    engine.expect_send().returning(|_, _| Ok(()));
    engine.expect_generate().returning(|_, _| outcome());
    engine.expect_close_session().returning(|_| Ok(()));
    engine.expect_unload().returning(|| Ok(()));
    engine
}

#[test]
fn settle_time_is_waited_before_every_sample() {
    let mut engine = engine_counting_idles(3, 2);
    let mut s = scenario(2, chat_turn());
    s.sample.settle = Duration::from_millis(500);
    let record = run_scenario(&s, &mut engine, &mut NoObserver);
    assert_eq!(record.samples.len(), 3);
}

/// Counts snapshot calls of a run of `steps` sampled after `after`.
fn snapshots_of_run(steps: Vec<Step>, after: Vec<SamplePoint>, turns: u32) -> usize {
    let mut s = scenario(turns, steps);
    s.sample.after = after;
    let mut engine = passive_engine();
    engine.checkpoint();
    let calls = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counted = calls.clone();
    engine.expect_describe().return_const(BackendInfo {
        backend: "mock".into(),
        version: "0".into(),
        details: BTreeMap::new(),
    });
    engine.expect_snapshot().returning(move || {
        counted.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Ok(EngineSnapshot::default())
    });
    engine.expect_simulated_clock_ms().return_const(Some(0.0));
    engine.expect_process_id().return_const(None);
    engine.expect_idle().return_const(());
    engine.expect_load().returning(|| Ok(()));
    engine.expect_unload().returning(|| Ok(()));
    engine
        .expect_open_session()
        .returning(|turn, _| Ok(SessionId(u64::from(turn))));
    engine.expect_send().returning(|_, _| Ok(()));
    engine.expect_generate().returning(|_, _| outcome());
    engine.expect_close_session().returning(|_| Ok(()));
    let record = run_scenario(&s, &mut engine, &mut NoObserver);
    assert_eq!(record.outcome, RunOutcome::Completed);
    calls.load(std::sync::atomic::Ordering::Relaxed)
}

/// Issue 15: the sample after close already brought the engine's counts; a second snapshot at
/// the end of the turn was one more worker round trip per turn for nothing.
#[test]
fn a_turn_sampled_after_its_last_call_takes_no_second_snapshot() {
    let mut steps = chat_turn();
    steps.pop(); // no idle after the close
    let n = snapshots_of_run(steps, vec![SamplePoint::Load, SamplePoint::Close], 5);
    // The load sample, one per turn, and one after the final unload.
    assert_eq!(n, 1 + 5 + 1);
    // An idle after the close sample may move counts on: the turn end still takes its snapshot.
    let n = snapshots_of_run(chat_turn(), vec![SamplePoint::Load, SamplePoint::Close], 5);
    assert_eq!(n, 1 + 5 * 2 + 1);
    // Without a close sample, the turn end is where the ledger learns the turn's counts.
    let n = snapshots_of_run(chat_turn(), vec![SamplePoint::Load], 5);
    assert_eq!(n, 1 + 5 + 1);
}

/// Set in the fresh process that runs the harness-growth check.
const GROWTH_CHILD_ENV: &str = "LEAKLOOP_HARNESS_GROWTH_CHILD";

/// The simulator really allocating its native heap, reporting the process's C heap (glibc's
/// statistics) as `native_heap`, as an in-process real engine does.
struct HeapFromAllocator(crate::engine::SimEngine);

impl Engine for HeapFromAllocator {
    fn describe(&self) -> BackendInfo {
        self.0.describe()
    }
    fn load(&mut self) -> Result<(), EngineError> {
        self.0.load()
    }
    fn open_session(&mut self, turn: u32, o: &SessionOptions) -> Result<SessionId, EngineError> {
        self.0.open_session(turn, o)
    }
    fn send(&mut self, session: SessionId, prompt: &Prompt) -> Result<(), EngineError> {
        self.0.send(session, prompt)
    }
    fn generate(
        &mut self,
        session: SessionId,
        request: &GenerateRequest,
    ) -> Result<GenerateOutcome, EngineError> {
        self.0.generate(session, request)
    }
    fn close_session(&mut self, session: SessionId) -> Result<(), EngineError> {
        self.0.close_session(session)
    }
    fn unload(&mut self) -> Result<(), EngineError> {
        self.0.unload()
    }
    fn snapshot(&mut self) -> Result<EngineSnapshot, EngineError> {
        let mut snapshot = self.0.snapshot()?;
        let heap = crate::probe::native_heap_bytes().unwrap();
        snapshot.metrics.insert("native_heap".to_owned(), heap);
        Ok(snapshot)
    }
    fn idle(&mut self, duration: Duration) {
        self.0.idle(duration);
    }
    fn simulated_clock_ms(&self) -> Option<f64> {
        self.0.simulated_clock_ms()
    }
    fn process_id(&self) -> Option<u32> {
        Some(std::process::id())
    }
}

/// Issue 15: with `isolate: false` the harness's own records (a string-keyed map per sample,
/// the per-turn ledger) lived in the measured process and read as +1.3-1.5 KiB/turn of "growth"
/// of a clean engine. A clean engine, really allocating and freeing its per-turn memory, must
/// read ~0 B/turn on the C heap and in RSS, whatever the harness keeps.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[test]
fn the_harness_own_records_do_not_read_as_engine_growth() {
    crate::test_util::run_alone_in_child(
        "runner::run_loop::tests::harness_growth_check",
        GROWTH_CHILD_ENV,
    );
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[test]
#[ignore = "runs alone in a fresh process, started by the_harness_own_records_do_not_read_as_engine_growth"]
fn harness_growth_check() {
    if std::env::var_os(GROWTH_CHILD_ENV).is_none() {
        return the_harness_own_records_do_not_read_as_engine_growth();
    }
    let mut s = scenario(3000, chat_turn());
    s.engine.profile = Some("clean-real".into());
    s.engine.inline_profiles.insert(
        "clean-real".into(),
        serde_yaml::from_str("native_base: 64MiB\nactivations: 64MiB\nactivations_on: native")
            .unwrap(),
    );
    s.sample.after = vec![SamplePoint::Load, SamplePoint::Generate, SamplePoint::Close];
    s.watch = vec!["native_heap".into(), "rss".into(), "anon_rss".into()];
    let mut engine =
        HeapFromAllocator(crate::engine::SimEngine::with_real_allocation(&s, 64).unwrap());
    let record = run_scenario(&s, &mut engine, &mut NoObserver);
    assert_eq!(record.outcome, RunOutcome::Completed);
    for metric in ["native_heap", "rss"] {
        let series = record.post_close_series(metric);
        // Past the first turns' one-time rises: the per-turn slope over the rest.
        let (t0, v0) = series[100];
        let (t1, v1) = *series.last().unwrap();
        let per_turn = (v1 as f64 - v0 as f64) / f64::from(t1 - t0);
        eprintln!("{metric}: {per_turn:+.2} B/turn over turns {t0}..{t1} ({v0} -> {v1})");
        assert!(per_turn.abs() < 8.0, "{metric} grew {per_turn:+.2} B/turn");
    }
}

#[test]
fn baseline_samples_are_taken_after_load_and_each_reload_with_the_settle_time_between() {
    // 3 after load + 4 after close + 3 after the reload at turn 2; four 8 s idle steps.
    let mut engine = engine_counting_idles(10, 4);
    let mut s = scenario(4, chat_turn());
    s.reload_every = 2;
    s.sample.settle = Duration::from_millis(500);
    s.sample.baseline = 3;
    let record = run_scenario(&s, &mut engine, &mut NoObserver);
    let baselines: Vec<_> = record
        .samples
        .iter()
        .filter(|s| matches!(s.phase, Phase::Load | Phase::Reload))
        .map(|s| (s.turn, s.phase, s.epoch))
        .collect();
    assert_eq!(
        baselines,
        [
            (0, Phase::Load, 1),
            (0, Phase::Load, 1),
            (0, Phase::Load, 1),
            (2, Phase::Reload, 2),
            (2, Phase::Reload, 2),
            (2, Phase::Reload, 2),
        ]
    );
    // The buffer reserved before the load holds them all: no growth of the harness's own
    // records mid-run (issue 15), baseline samples included.
    assert_eq!(record.samples.len(), expected_samples(&s));
    assert_eq!(
        record.ledger.totals["runner/engine"],
        KindCounts {
            created: 2,
            deleted: 2
        }
    );
}

/// Looks after turn `at` and stops there; remembers how many turns it was shown.
struct StopAt {
    at: u32,
    seen: Vec<u32>,
}

impl StopRule for StopAt {
    fn wants_look(&self, turn: u32) -> bool {
        turn == self.at
    }

    fn look(&mut self, so_far: &RunRecord) -> Option<String> {
        self.seen.push(so_far.turns_completed);
        Some(format!("decided after {} samples", so_far.samples.len()))
    }
}

#[test]
fn a_stop_rule_ends_the_run_after_its_look_without_the_reload_due_and_unloads() {
    let mut engine = engine_for_chat_turns(3);
    let mut s = scenario(10, chat_turn());
    s.reload_every = 3;
    let mut rule = StopAt {
        at: 3,
        seen: Vec::new(),
    };
    let record = run_scenario_until(&s, &mut engine, &mut NoObserver, &mut rule);
    assert_eq!(rule.seen, [3]);
    assert_eq!(record.turns_completed, 3);
    assert_eq!(record.outcome, RunOutcome::Completed);
    assert_eq!(
        record.early_stop,
        Some(EarlyStop {
            turn: 3,
            max_turns: 10,
            reason: "decided after 4 samples".to_owned(),
        })
    );
    assert_eq!(
        record.ledger.totals["runner/engine"],
        KindCounts {
            created: 1,
            deleted: 1
        }
    );
}

#[test]
fn a_stop_rule_is_not_asked_after_the_last_turn() {
    let mut engine = engine_for_chat_turns(2);
    let mut rule = StopAt {
        at: 2,
        seen: Vec::new(),
    };
    let record = run_scenario_until(
        &scenario(2, chat_turn()),
        &mut engine,
        &mut NoObserver,
        &mut rule,
    );
    assert!(rule.seen.is_empty());
    assert_eq!(record.early_stop, None);
    assert_eq!(record.turns_completed, 2);
}

/// A device whose one probe reads `.0` samples, then finds the device gone.
#[derive(Debug)]
struct VanishingDevice(u32);

#[derive(Debug)]
struct VanishingProbe(u32);

impl crate::probe::Probe for VanishingProbe {
    fn kind(&self) -> leakloop_metrics::ProbeKind {
        leakloop_metrics::ProbeKind::Dumpsys
    }

    fn read(&mut self, pid: u32, out: &mut dyn FnMut(&'static str, u64)) -> Result<(), ProbeError> {
        if self.0 == 0 {
            let how = "the device went away".to_owned();
            return Err(ProbeError {
                pid,
                cause: how.clone(),
                fatal: Some(EngineError::new(EngineErrorKind::Crashed { how }, "gone")),
            });
        }
        self.0 -= 1;
        out("pss", 42);
        Ok(())
    }
}

impl Target for VanishingDevice {
    fn platform(&self) -> leakloop_metrics::Platform {
        leakloop_metrics::Platform::Android
    }
    fn offers(&self, kind: leakloop_metrics::ProbeKind) -> bool {
        kind == leakloop_metrics::ProbeKind::Dumpsys
    }
    fn open(
        &self,
        _kind: leakloop_metrics::ProbeKind,
        _metrics: &[&'static leakloop_metrics::Metric],
    ) -> Option<Box<dyn crate::probe::Probe>> {
        Some(Box::new(VanishingProbe(self.0)))
    }
    fn measured_process(&self, _engine_pid: Option<u32>) -> Option<u32> {
        Some(0)
    }
    fn describe(&self) -> Option<String> {
        Some("a fake device".into())
    }
}

#[test]
fn a_target_that_fails_while_sampling_ends_the_run_keeping_its_samples() {
    let mut s = scenario(5, chat_turn());
    s.watch = vec!["pss".into()];
    let mut engine = crate::engine::SimEngine::from_scenario(&s).unwrap();
    let record = run_scenario_on(
        &VanishingDevice(3),
        &s,
        &mut engine,
        &mut NoObserver,
        &mut RunAllTurns,
    );
    // The app's process is the one measured, although the engine (its driver) has none here.
    assert_eq!(record.samples.len(), 3, "{:?}", record.samples);
    assert!(record
        .samples
        .iter()
        .all(|s| s.metrics.get("pss") == Some(&42)));
    match &record.outcome {
        RunOutcome::EngineFailed { step, error, .. } => {
            assert_eq!(step, "sample");
            assert!(
                matches!(&error.kind, EngineErrorKind::Crashed { how } if how == "the device went away"),
                "{error}"
            );
        }
        other => panic!("the run must end with the device: {other:?}"),
    }
    assert_eq!(
        record.backend.details.get("target").map(String::as_str),
        Some("a fake device")
    );
}
