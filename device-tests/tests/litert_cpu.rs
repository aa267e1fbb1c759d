//! The real LiteRT-LM engine on its CPU backend: driven in this process through the FFI engine,
//! and (module `scenarios`) through the committed scenarios in a worker process, as `leakloop run`
//! runs them.
//!
//! Each test needs `liblitert-lm.so` (`ci/fetch-litert-lm.sh`) and a committed tiny model; without
//! them it prints `SKIPPED: ...`, and fails when `LEAKLOOP_REQUIRE_ENGINE=1`. Tests that measure
//! this process's memory take [`memory_lock`] so that they run one at a time.

use device_tests::{chat_scenario, growth, memory_lock, require_litert};
use leakloop::engine::LitertLmEngine;
use leakloop::engine::{Engine, GenerateRequest, Prompt};
use leakloop::probe::probe_process;
use leakloop::scenario::SessionOptions;

const MODEL: &str = "tiny-qwen2-f32.litertlm";
const TURNS: u32 = 30;

fn rss() -> u64 {
    probe_process(std::process::id()).expect("own /proc")["rss"]
}

/// One turn: open, send, generate (or cancel after K), and close unless `keep_open`.
fn turn(engine: &mut LitertLmEngine, n: u32, cancel_after: Option<u32>, keep_open: bool) -> u32 {
    let session = engine
        .open_session(n, &SessionOptions::default())
        .expect("open");
    engine
        .send(
            session,
            &Prompt {
                text: format!("Turn {n}: summarize the notes about the engine and the cache."),
                tokens: 12,
            },
        )
        .expect("send");
    let outcome = engine
        .generate(
            session,
            &GenerateRequest {
                max_output_tokens: if cancel_after.is_some() { 32 } else { 16 },
                cancel_after_tokens: cancel_after,
            },
        )
        .expect("generate");
    if !keep_open {
        engine.close_session(session).expect("close");
    }
    outcome.tokens
}

fn live(engine: &mut LitertLmEngine, kind: &str) -> i64 {
    engine
        .snapshot()
        .unwrap()
        .ledger
        .get(kind)
        .map(|c| c.live())
        .unwrap_or(0)
}

/// Post-close RSS per turn (turn 0 = after load), in bytes.
fn run_chat(engine: &mut LitertLmEngine, cancel_after: Option<u32>, keep_open: bool) -> Vec<u64> {
    engine.load().expect("load");
    let mut series = vec![rss()];
    for n in 1..=TURNS {
        turn(engine, n, cancel_after, keep_open);
        series.push(rss());
    }
    series
}

fn report(label: &str, series: &[u64]) -> f64 {
    let points: Vec<(u64, u64)> = series
        .iter()
        .enumerate()
        .map(|(t, v)| (t as u64, *v))
        .collect();
    let per_turn = growth(&points, 5).bytes_per_turn;
    eprintln!(
        "{label}: rss after load {} KiB, after turn 1 {} KiB, after turn {TURNS} {} KiB, \
         growth after turn 5: {:.0} B/turn",
        series[0] / 1024,
        series[1] / 1024,
        series[TURNS as usize] / 1024,
        per_turn
    );
    per_turn
}

/// Issue 15: with `isolate: false` the harness's own records (a string-keyed map per sample, the
/// per-turn ledger) read as +1.3-1.5 KiB/turn of growth of this clean engine. Run by the runner
/// in this process, its C heap and RSS must now stay flat per turn.
#[test]
fn in_process_runs_do_not_count_the_harness_records_as_engine_growth() {
    use leakloop::testing::ScenarioTest;
    let test = "in_process_runs_do_not_count_the_harness_records_as_engine_growth";
    let Some((_, model)) = require_litert(test, MODEL) else {
        return;
    };
    let _lock = memory_lock();
    let run = ScenarioTest::new(chat_scenario("in-process", &model, 180, None))
        .warmup_turns(20)
        .configure(|s| s.watch = vec!["native_heap".into(), "rss".into(), "anon_rss".into()])
        .run();
    assert_eq!(
        run.record().outcome,
        leakloop::runner::RunOutcome::Completed
    );
    for metric in ["native_heap", "rss", "anon_rss"] {
        let per_turn = run.growth(metric).expect(metric).bytes_per_turn;
        eprintln!("in process, {metric}: {per_turn:+.1} B/turn over turns 21..200");
        assert!(per_turn.abs() < 256.0, "{metric}: {per_turn:+.1} B/turn");
    }
}

#[test]
fn per_turn_chat_is_flat_and_balanced() {
    let Some((_, model)) = require_litert("per_turn_chat_is_flat_and_balanced", MODEL) else {
        return;
    };
    let _lock = memory_lock();
    let mut engine =
        LitertLmEngine::from_scenario(&chat_scenario("chat", &model, TURNS, None)).expect("engine");
    let series = run_chat(&mut engine, None, false);
    let per_turn = report("chat", &series);
    engine.unload().expect("unload");

    let ledger = engine.snapshot().unwrap().ledger;
    for kind in [
        "settings",
        "engine",
        "session_config",
        "conversation_config",
        "conversation",
        "response",
    ] {
        let c = ledger
            .get(kind)
            .unwrap_or_else(|| panic!("kind {kind} never counted: {ledger:?}"));
        assert_eq!(c.created, c.deleted, "{kind}: {c:?}");
        assert!(c.created >= 1, "{kind}: {c:?}");
    }
    assert_eq!(ledger["conversation"].created, u64::from(TURNS));
    assert_eq!(ledger["response"].created, u64::from(TURNS));
    // A clean engine: well under the ~1 KiB-per-token KV cache a kept conversation would cost.
    assert!(
        per_turn < 32.0 * 1024.0,
        "rss grows {per_turn:.0} B/turn: {series:?}"
    );
}

#[test]
fn conversations_kept_open_show_in_the_ledger_and_in_rss() {
    let Some((_, model)) = require_litert(
        "conversations_kept_open_show_in_the_ledger_and_in_rss",
        MODEL,
    ) else {
        return;
    };
    let _lock = memory_lock();
    let mut engine =
        LitertLmEngine::from_scenario(&chat_scenario("skip-close", &model, TURNS, None))
            .expect("engine");
    let series = run_chat(&mut engine, None, true);
    let per_turn = report("skip-close", &series);
    assert_eq!(live(&mut engine, "conversation"), i64::from(TURNS));
    // The kept conversations hold the engine: unloading cannot delete it yet.
    engine.unload().expect("unload");
    assert_eq!(live(&mut engine, "engine"), 1);
    assert!(
        per_turn > 32.0 * 1024.0,
        "kept conversations should cost memory: {series:?}"
    );
    drop(engine);
}

#[test]
fn cancel_after_k_tokens_stops_the_stream_and_the_session_still_closes() {
    let Some((_, model)) = require_litert("cancel_after_k_tokens", MODEL) else {
        return;
    };
    let _lock = memory_lock();
    let mut engine = LitertLmEngine::from_scenario(&chat_scenario("cancel", &model, 5, Some(4)))
        .expect("engine");
    engine.load().expect("load");
    let mut cancelled = 0;
    for n in 1..=5 {
        let session = engine.open_session(n, &SessionOptions::default()).unwrap();
        engine
            .send(
                session,
                &Prompt {
                    text: "Tell a long story about the cache.".into(),
                    tokens: 8,
                },
            )
            .unwrap();
        let out = engine
            .generate(
                session,
                &GenerateRequest {
                    max_output_tokens: 32,
                    cancel_after_tokens: Some(4),
                },
            )
            .unwrap();
        eprintln!(
            "cancel turn {n}: {} tokens, cancelled {}",
            out.tokens, out.cancelled
        );
        assert!(out.tokens <= 32, "{out:?}");
        cancelled += u32::from(out.cancelled);
        engine.close_session(session).unwrap();
    }
    engine.unload().unwrap();
    assert_eq!(live(&mut engine, "conversation"), 0);
    assert!(cancelled > 0, "no generation was cancelled");
}

#[test]
fn reload_releases_the_engine_each_time() {
    let Some((_, model)) = require_litert("reload_releases_the_engine_each_time", MODEL) else {
        return;
    };
    let _lock = memory_lock();
    let mut engine =
        LitertLmEngine::from_scenario(&chat_scenario("reload", &model, 3, None)).expect("engine");
    let mut after_load = Vec::new();
    for _ in 0..5 {
        engine.load().unwrap();
        after_load.push(rss());
        for n in 1..=3 {
            turn(&mut engine, n, None, false);
        }
        engine.unload().unwrap();
        assert_eq!(live(&mut engine, "engine"), 0);
    }
    eprintln!(
        "reload: rss after each load (KiB): {:?}",
        after_load.iter().map(|b| b / 1024).collect::<Vec<_>>()
    );
    // From the second load on (the first one settles the allocator), each reload may keep
    // less than 1 MiB more than the one before.
    let kept = after_load[4].saturating_sub(after_load[1]);
    assert!(
        kept < 3 * 1024 * 1024,
        "three reloads kept {kept} B more (1 MiB or more each): {after_load:?}"
    );
}

/// The committed scenarios the way `leakloop run` runs them: parsed, run in a worker process that
/// serves the engine (sampled from outside), and judged by the analyzer. The worker is this test
/// binary itself (`leakloop::testing`).
mod scenarios {
    use super::*;

    use device_tests::repo_root;
    use leakloop::analyze::VerdictStatus;
    use leakloop::engine::EngineErrorKind;
    use leakloop::report::{read_report, read_samples, SAMPLES_STORE};
    use leakloop::runner::{Phase, RunOutcome, Sample};
    use leakloop::testing::{ScenarioTest, TestRun};

    fn scenario_path(file: &str) -> std::path::PathBuf {
        repo_root().join("fixtures/scenarios").join(file)
    }

    fn scenario(file: &str) -> ScenarioTest {
        let test = ScenarioTest::from_file(scenario_path(file)).unwrap_or_else(|e| panic!("{e}"));
        assert!(
            test.scenario().engine.isolate,
            "{file}: a real engine runs in a worker process by default"
        );
        test
    }

    fn run(file: &str) -> Option<TestRun> {
        require_litert(file, MODEL)?;
        let _lock = memory_lock();
        let run = scenario(file).run();
        assert_eq!(run.record().outcome, RunOutcome::Completed, "{file}");
        eprintln!(
            "{file} on LiteRT-LM {}:\n{}",
            run.record().backend.version,
            run.table()
        );
        Some(run)
    }

    /// Growth per turn of the post-close RSS after warm-up, as the analyzer fitted it.
    fn rss_growth(run: &TestRun) -> f64 {
        run.growth("rss").expect("rss analysed").bytes_per_turn
    }

    #[test]
    fn chat_scenario_is_balanced_and_flat() {
        let Some(run) = run("litert-cpu-chat.yaml") else {
            return;
        };
        let ledger = &run.record().ledger;
        assert!(ledger.imbalances().is_empty(), "{:?}", ledger.imbalances());
        assert!(ledger.totals.contains_key("litert-lm/conversation"));
        assert!(rss_growth(&run) < 64.0 * 1024.0);
        run.assert_pass();
        for metric in ["rss", "anon_rss", "native_heap"] {
            assert!(run.growth(metric).is_some(), "{metric} not analysed");
        }
    }

    #[test]
    fn skip_close_scenario_fails_on_the_ledger_and_on_growth() {
        let Some(run) = run("litert-cpu-skip-close.yaml") else {
            return;
        };
        let imbalances = run.record().ledger.imbalances();
        let conv = imbalances
            .iter()
            .find(|i| i.kind == "litert-lm/conversation")
            .unwrap_or_else(|| panic!("no conversation imbalance: {imbalances:?}"));
        assert_eq!(conv.first_turn, Some(3), "{conv:?}");
        assert!(rss_growth(&run) > 64.0 * 1024.0);

        run.assert_fail();
        for name in [
            "balanced.litert-lm/conversation",
            "balanced.runner/session",
            "rss.max_growth_per_turn",
            "native_heap.max_growth_per_turn",
        ] {
            run.assert_check_failed(name);
        }
        // The growth limit is judged on the interval's upper bound, which lies beyond it.
        let check = run.check("rss.max_growth_per_turn").unwrap();
        let (_, high) = check.growth.unwrap().interval.unwrap();
        assert!(high > check.limit.unwrap(), "{check:?}");
    }

    /// The value of `metric` in a sample.
    fn value(sample: &Sample, metric: &str) -> u64 {
        *sample
            .metrics
            .get(metric)
            .unwrap_or_else(|| panic!("no {metric} at turn {}: {sample:?}", sample.turn))
    }

    #[test]
    fn reload_scenario_returns_memory_at_each_reload() {
        let Some(run) = run("litert-cpu-reload.yaml") else {
            return;
        };
        let record = run.record();
        assert!(
            record.ledger.imbalances().is_empty(),
            "{:?}",
            record.ledger.imbalances()
        );
        assert!(record.ledger.totals["litert-lm/engine"].created >= 6);
        // The verdict judges growth per epoch (between reloads), which is what matters here: a
        // slope over the whole run would count the allocator's one-time settling as growth.
        run.assert_pass();

        let baseline = record
            .samples
            .iter()
            .find(|s| s.phase == Phase::Load)
            .expect("a load sample");
        let reloads: Vec<Sample> = record
            .samples
            .iter()
            .filter(|s| s.phase == Phase::Reload)
            .collect();
        // 31 turns, a reload after every 5th but the last: turns 5, 10, ..., 30.
        assert_eq!(
            reloads.iter().map(|s| s.turn).collect::<Vec<_>>(),
            [5, 10, 15, 20, 25, 30]
        );
        let over_baseline = |metric: &str| -> Vec<i64> {
            let base = value(&baseline, metric) as i64;
            let after: Vec<i64> = reloads
                .iter()
                .map(|s| value(s, metric) as i64 - base)
                .collect();
            eprintln!("reload: {metric} after each reload minus after the first load: {after:?} B");
            after
        };

        // The C heap comes all the way back: what five turns allocated (about 1 MiB above the
        // load, see the close samples) is freed by each unload.
        for (sample, delta) in reloads.iter().zip(over_baseline("native_heap")) {
            assert!(
                delta.abs() < NATIVE_HEAP_SLACK,
                "native_heap did not come back at the reload after turn {}: {delta:+} B against \
                 the first load",
                sample.turn
            );
        }
        // RSS keeps what the allocator holds on to, which settles within the first reloads
        // (measured: +3 to +6 MiB by the third, then flat within 72 KiB). After that, every reload
        // must land where the one before did; a leak that survives unloading would climb here by
        // what five turns leak (five kept conversations are about 2.5 MiB).
        let rss = over_baseline("rss");
        let settled = &rss[rss.len() / 2..];
        let spread = settled.iter().max().unwrap() - settled.iter().min().unwrap();
        assert!(
            spread < RSS_SETTLED_SPREAD,
            "rss still climbs from reload to reload after the allocator settled: {rss:?}"
        );
        assert!(
            rss.iter().all(|d| *d < 16 << 20),
            "rss holds more than the scenario's warm-up budget after a reload: {rss:?}"
        );
    }

    /// How far from the first load the native heap may be after a reload.
    const NATIVE_HEAP_SLACK: i64 = 256 << 10;
    /// How far apart the RSS after the last half of the reloads may be.
    const RSS_SETTLED_SPREAD: i64 = 1 << 20;

    /// A crash of the worker that serves the engine is an engine failure that keeps every
    /// sample taken before it on disk.
    #[test]
    fn worker_crash_is_an_engine_failure_with_a_kept_record() {
        if require_litert(
            "worker_crash_is_an_engine_failure_with_a_kept_record",
            MODEL,
        )
        .is_none()
        {
            return;
        }
        // In the worker, serve before making a folder that its exit would leave behind.
        leakloop::testing::serve_worker_if_requested();
        let out = tempfile::tempdir().unwrap();
        let run = scenario("litert-cpu-crash.yaml")
            .reports_in(out.path())
            .run();
        eprintln!("{}", run.table());
        run.assert_status(VerdictStatus::EngineFailed);

        // Streamed while the run went: the load and turns 1-2, nothing of turn 3.
        let streamed = read_samples(&out.path().join(SAMPLES_STORE)).unwrap();
        assert!(!streamed.torn_last_line);
        let streamed = streamed.samples.to_vec();
        let turns = |samples: &[Sample]| {
            samples
                .iter()
                .map(|s| (s.turn, s.phase))
                .collect::<Vec<_>>()
        };
        let expected = vec![(0, Phase::Load), (1, Phase::Close), (2, Phase::Close)];
        assert_eq!(turns(&streamed), expected);
        assert!(streamed.iter().all(|s| value(s, "rss") > 0));

        let report = read_report(&out.path().join("report.json")).unwrap();
        let record = &report.record;
        assert_eq!(record.samples, streamed);
        assert_eq!(record.turns_completed, 2);
        match &record.outcome {
            RunOutcome::EngineFailed { turn, error, .. } => {
                assert_eq!(*turn, 3, "{error}");
                assert!(
                    matches!(error.kind, EngineErrorKind::Crashed { .. }),
                    "{error:?}"
                );
            }
            other => panic!("expected an engine failure, got {other:?}"),
        }
        assert_eq!(report.verdict.status, VerdictStatus::EngineFailed);
    }
}

#[test]
fn kv_heavy_model_loads_and_answers() {
    let model_file = "kv-heavy-qwen2-q8.litertlm";
    let Some((_, model)) = require_litert("kv_heavy_model_loads_and_answers", model_file) else {
        return;
    };
    let _lock = memory_lock();
    let mut scenario = chat_scenario("kv-heavy", &model, 3, None);
    scenario.engine.max_tokens = 4096;
    let mut engine = LitertLmEngine::from_scenario(&scenario).expect("engine");
    engine.load().expect("load");
    let before = rss();
    for n in 1..=3 {
        turn(&mut engine, n, None, true);
    }
    eprintln!(
        "kv-heavy: 3 kept conversations cost {} KiB",
        (rss().saturating_sub(before)) / 1024
    );
    assert_eq!(live(&mut engine, "conversation"), 3);
}

/// Regression: the skip was printed with `eprintln!`, which the test harness captures and shows
/// only for failing tests, so in a plain `cargo test` a device test without its library showed
/// `ok` and no `SKIPPED` line. This runs one device test in a child of this test binary, without
/// `--nocapture`, with the library pointed at nothing.
#[test]
fn a_missing_library_shows_a_skip_in_a_plain_cargo_test_and_fails_where_required() {
    let test = "per_turn_chat_is_flat_and_balanced";
    let run = |require: Option<&str>| {
        let mut command = std::process::Command::new(std::env::current_exe().unwrap());
        command
            .args(["--exact", test, "--test-threads", "1"])
            .env("LITERT_LM_LIB", "/nonexistent/liblitert-lm.so")
            .env_remove(device_tests::REQUIRE_ENV);
        if let Some(value) = require {
            command.env(device_tests::REQUIRE_ENV, value);
        }
        let out = command.output().expect("the test binary runs");
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        (out.status.success(), text)
    };

    let (passed, text) = run(None);
    assert!(passed, "{text}");
    assert!(text.contains(&format!("test {test} ... ok")), "{text}");
    let skip = format!("SKIPPED: {test}: ");
    assert!(text.contains(&skip), "no visible skip line:\n{text}");
    assert!(text.contains("/nonexistent/liblitert-lm.so"), "{text}");

    let (passed, text) = run(Some("1"));
    assert!(
        !passed,
        "a required engine that is missing must fail:\n{text}"
    );
    assert!(
        text.contains("LEAKLOOP_REQUIRE_ENGINE=1 forbids skipping"),
        "{text}"
    );
}

/// The threads of this process that carry the calling thread's name: the engine's CPU pool
/// threads are started by the thread that loads it and inherit its name.
fn threads_named_like_this_one() -> usize {
    let me = std::fs::read_to_string("/proc/thread-self/comm").expect("own comm");
    std::fs::read_dir("/proc/self/task")
        .expect("own tasks")
        .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
        .filter(|comm| *comm == me)
        .count()
}

/// `engine.threads` reaches the library's settings: a pool of 3 starts threads that one of 1
/// does not, and the engine's details say how many it was given.
#[test]
fn engine_threads_set_the_cpu_pool() {
    let Some((_, model)) = require_litert("engine_threads_set_the_cpu_pool", MODEL) else {
        return;
    };
    let _lock = memory_lock();
    let started_by = |threads: u32| {
        let mut scenario = chat_scenario("threads", &model, 1, None);
        scenario.engine.threads = Some(threads);
        let mut engine = LitertLmEngine::from_scenario(&scenario).expect("engine");
        let before = threads_named_like_this_one();
        engine.load().expect("load");
        let started = threads_named_like_this_one().saturating_sub(before);
        assert!(turn(&mut engine, 1, None, false) > 0, "no reply");
        assert_eq!(
            engine.describe().details.get("threads"),
            Some(&threads.to_string())
        );
        engine.unload().expect("unload");
        started
    };
    let (one, three) = (started_by(1), started_by(3));
    eprintln!("engine threads: 1 started {one} pool threads, 3 started {three}");
    assert!(three >= one + 2, "1: {one} pool threads, 3: {three}");
}
