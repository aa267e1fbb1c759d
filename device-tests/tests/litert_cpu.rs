//! The real LiteRT-LM engine on its CPU backend, driven in this process through the FFI engine.
//!
//! Each test needs `liblitert-lm.so` (`ci/fetch-litert-lm.sh`) and a committed tiny model; without
//! them it prints `SKIPPED: ...`, and fails when `LEAKLOOP_REQUIRE_ENGINE=1`. Tests that measure
//! this process's memory take [`memory_lock`] so that they run one at a time.

use device_tests::{chat_scenario, memory_lock, require_litert, slope};
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
    let tail: Vec<(f64, f64)> = series
        .iter()
        .enumerate()
        .skip(5)
        .map(|(t, v)| (t as f64, *v as f64))
        .collect();
    let per_turn = slope(&tail);
    eprintln!(
        "{label}: rss after load {} KiB, after turn 1 {} KiB, after turn {TURNS} {} KiB, \
         slope over turns 5..={TURNS}: {:.0} B/turn",
        series[0] / 1024,
        series[1] / 1024,
        series[TURNS as usize] / 1024,
        per_turn
    );
    per_turn
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
    let pts: Vec<(f64, f64)> = after_load
        .iter()
        .enumerate()
        .skip(1)
        .map(|(i, v)| (i as f64, *v as f64))
        .collect();
    assert!(
        slope(&pts) < 1024.0 * 1024.0,
        "each reload keeps > 1 MiB: {after_load:?}"
    );
}

/// The committed scenarios through the library API: parser, factory, runner. They need the DSL
/// parser and the runner, which land separately; until then they are ignored, with the reason.
mod scenarios {
    use super::*;
    use device_tests::repo_root;
    use leakloop::engine::build_engine;
    use leakloop::runner::{run_scenario, NoObserver, RunOutcome, RunRecord};
    use leakloop::scenario::load_scenario;

    fn run(file: &str) -> Option<RunRecord> {
        require_litert(file, MODEL)?;
        let _lock = memory_lock();
        let path = repo_root().join("fixtures/scenarios").join(file);
        let scenario = load_scenario(&path).unwrap_or_else(|e| panic!("{e}"));
        let mut engine = build_engine(&scenario).unwrap_or_else(|e| panic!("{file}: {e}"));
        let record = run_scenario(&scenario, engine.as_mut(), &mut NoObserver);
        assert_eq!(record.outcome, RunOutcome::Completed, "{file}");
        Some(record)
    }

    /// Slope of the post-close RSS after the warm-up turns, in bytes per turn.
    fn rss_slope(record: &RunRecord) -> f64 {
        let warmup = record.scenario.warmup_turns;
        let pts: Vec<(f64, f64)> = record
            .post_close_series("rss")
            .into_iter()
            .filter(|(t, _)| *t > warmup)
            .map(|(t, v)| (t as f64, v as f64))
            .collect();
        slope(&pts)
    }

    #[test]
    #[ignore = "needs the scenario parser and the runner (remove once merged)"]
    fn chat_scenario_is_balanced_and_flat() {
        let Some(record) = run("litert-cpu-chat.yaml") else {
            return;
        };
        assert!(
            record.ledger.imbalances().is_empty(),
            "{:?}",
            record.ledger.imbalances()
        );
        assert!(record.ledger.totals.contains_key("litert-lm/conversation"));
        assert!(rss_slope(&record) < 64.0 * 1024.0);
    }

    #[test]
    #[ignore = "needs the scenario parser and the runner (remove once merged)"]
    fn skip_close_scenario_fails_on_the_ledger_and_on_growth() {
        let Some(record) = run("litert-cpu-skip-close.yaml") else {
            return;
        };
        let imbalances = record.ledger.imbalances();
        let conv = imbalances
            .iter()
            .find(|i| i.kind == "litert-lm/conversation")
            .unwrap_or_else(|| panic!("no conversation imbalance: {imbalances:?}"));
        assert_eq!(conv.first_turn, Some(3), "{conv:?}");
        assert!(rss_slope(&record) > 64.0 * 1024.0);
    }

    #[test]
    #[ignore = "needs the scenario parser and the runner (remove once merged)"]
    fn reload_scenario_returns_memory_at_each_reload() {
        let Some(record) = run("litert-cpu-reload.yaml") else {
            return;
        };
        assert!(
            record.ledger.imbalances().is_empty(),
            "{:?}",
            record.ledger.imbalances()
        );
        assert!(record.ledger.totals["litert-lm/engine"].created >= 6);
        assert!(rss_slope(&record) < 64.0 * 1024.0);
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
