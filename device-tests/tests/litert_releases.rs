//! Every LiteRT-LM release with a C library (`ci/litert-lm-releases.txt`: 0.11.0 to 0.18.1 and
//! the pinned nightly) through the one FFI: each fetched release loads in a worker process,
//! reports the capabilities its symbol table promises, streams and cancels after 4 tokens,
//! answers a blocking generation, stays balanced, loads with `engine.threads` (0.14.0 on) or
//! refuses it naming the setter it lacks (0.11 to 0.13), and runs a short chat scenario whose memory
//! figures are printed as a table row (`ci/litert-releases.sh` prints the whole table).
//!
//! A release that is not fetched prints `SKIPPED: ...` (run `ci/fetch-litert-lm.sh VERSION`), or
//! fails under `LEAKLOOP_REQUIRE_ENGINE=1`. `LEAKLOOP_REQUIRE_RELEASES` (space-separated
//! versions, as CI and `ci/litert-releases.sh` set it) narrows the sweep to those releases, and
//! each of them must be there. A release that needs a system library that is missing (0.11 to
//! 0.17 link `libvulkan.so.1`) skips with that reason, or fails under `LEAKLOOP_REQUIRE_ENGINE=1`.

use std::path::{Path, PathBuf};

use device_tests::{chat_scenario, model_path, repo_root, skip, REQUIRE_ENV};
use leakloop::engine::litert_lm::{library_capabilities, Capability};
use leakloop::engine::{skip_or_require, Engine, GenerateRequest, Prompt, WorkerEngine};
use leakloop::runner::RunOutcome;
use leakloop::scenario::{Scenario, SessionOptions};
use leakloop::testing::{serve_worker_if_requested, this_test_worker, ScenarioTest};

const MODEL: &str = "tiny-qwen2-f32.litertlm";
const REQUIRE_RELEASES_ENV: &str = "LEAKLOOP_REQUIRE_RELEASES";

/// The published releases and the pinned nightly, oldest first.
fn releases() -> Vec<String> {
    let list = std::fs::read_to_string(repo_root().join("ci/litert-lm-releases.txt"))
        .expect("ci/litert-lm-releases.txt");
    list.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(str::to_owned)
        .collect()
}

fn fetched(version: &str) -> Option<PathBuf> {
    let root = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo_root().join("target"));
    let lib = root.join("litert-lm").join(version).join("liblitert-lm.so");
    lib.is_file().then_some(lib)
}

fn required() -> Vec<String> {
    std::env::var(REQUIRE_RELEASES_ENV)
        .unwrap_or_default()
        .split_whitespace()
        .map(str::to_owned)
        .collect()
}

/// A worker serving `scenario`'s engine: this test binary, started again (see
/// [`serve_worker_if_requested`], which the test calls first).
fn worker(scenario: &Scenario) -> Result<WorkerEngine, String> {
    let command = this_test_worker()?;
    WorkerEngine::launch(&command.program, &command.args, &command.env, scenario)
        .map_err(|e| e.to_string())
}

/// What one release measured, as a row of docs/litert-lm.md's table.
struct Row {
    version: String,
    capabilities: String,
    degraded: String,
    rss_after_load: u64,
    growth: f64,
    plateau: i64,
    peak: u64,
}

const PROMPT: &str = "Summarize the notes about the engine and the cache.";

fn generate(
    engine: &mut WorkerEngine,
    session: leakloop::engine::SessionId,
    cancel_after: Option<u32>,
) -> Result<leakloop::engine::GenerateOutcome, String> {
    let prompt = Prompt {
        text: PROMPT.into(),
        tokens: 12,
    };
    engine
        .send(session, &prompt)
        .map_err(|e| e.message.clone())?;
    engine
        .generate(
            session,
            &GenerateRequest {
                max_output_tokens: if cancel_after.is_some() { 32 } else { 16 },
                cancel_after_tokens: cancel_after,
            },
        )
        .map_err(|e| e.message.clone())
}

/// What a blocking generation on a conversation that was just cancelled does: an observation
/// that differs between releases, not a requirement. Its own worker, with a 15 s call timeout,
/// since on some releases the call never returns.
fn after_cancel(version: &str, lib: &Path) -> String {
    let mut scenario = chat_scenario(version, &model_path(MODEL), 2, Some(4));
    scenario.engine.lib = Some(lib.to_path_buf());
    scenario.engine.isolate = true;
    scenario.engine.call_timeout = std::time::Duration::from_secs(15);
    let probe = || -> Result<String, String> {
        let mut engine = worker(&scenario)?;
        engine.load().map_err(|e| e.message.clone())?;
        let session = engine
            .open_session(1, &SessionOptions::default())
            .map_err(|e| e.message.clone())?;
        generate(&mut engine, session, Some(4))?;
        Ok(match generate(&mut engine, session, None) {
            Ok(o) => format!("answers ({} tokens)", o.tokens),
            Err(e) => format!("fails: {e}"),
        })
    };
    probe().unwrap_or_else(|e| format!("could not be probed: {e}"))
}

/// Drives one release in a worker: cancel after 4 tokens, a blocking generation, the ledger.
fn exercise(version: &str, lib: &Path) -> Result<(), String> {
    let mut scenario = chat_scenario(version, &model_path(MODEL), 2, Some(4));
    scenario.engine.lib = Some(lib.to_path_buf());
    scenario.engine.isolate = true;
    let mut engine = worker(&scenario)?;
    engine.load().map_err(|e| e.message.clone())?;
    let options = SessionOptions::default();
    let session = engine
        .open_session(1, &options)
        .map_err(|e| e.message.clone())?;
    let cancelled = generate(&mut engine, session, Some(4))?;
    assert!(cancelled.cancelled, "{version}: {cancelled:?}");
    assert_eq!(cancelled.tokens, 4, "{version}: {cancelled:?}");
    engine.close_session(session).unwrap();
    let session = engine
        .open_session(2, &options)
        .map_err(|e| e.message.clone())?;
    let answered = generate(&mut engine, session, None)?;
    assert!(
        !answered.cancelled && answered.tokens > 0,
        "{version}: {answered:?}"
    );
    engine.close_session(session).unwrap();
    // The capabilities read from the file before loading are the loaded library's own.
    let details = engine.describe().details;
    let from_file = library_capabilities(lib).map_err(|e| e.to_string())?;
    assert_eq!(details["capabilities"], from_file.names(), "{version}");
    assert!(
        details["capabilities_used"].contains("streaming")
            && details["capabilities_used"].contains("cancel"),
        "{version}: {details:?}"
    );
    engine.unload().unwrap();
    let ledger = engine.snapshot().unwrap().ledger;
    assert_eq!(ledger["conversation"].created, 2, "{version}: {ledger:?}");
    for (kind, c) in &ledger {
        assert_eq!(c.created, c.deleted, "{version}: {kind} {c:?}");
    }
    Ok(())
}

/// The short chat scenario (2 warm-up + 10 turns) in a worker, analysed as `leakloop run` does.
fn measure(version: &str, lib: &Path) -> Result<Row, String> {
    let mut scenario = chat_scenario(version, &model_path(MODEL), 10, None);
    scenario.warmup_turns = 2;
    scenario.engine.lib = Some(lib.to_path_buf());
    scenario.engine.isolate = true;
    scenario.watch = vec!["rss".into(), "native_heap".into()];
    let run = ScenarioTest::new(scenario)
        .try_run()
        .map_err(|e| e.to_string())?;
    let record = run.record();
    if let RunOutcome::EngineFailed { error, .. } = &record.outcome {
        return Err(error.message.clone());
    }
    assert!(record.ledger.imbalances().is_empty(), "{version}");
    let rss = &run.verdict().metrics["rss"];
    let details = &record.backend.details;
    Ok(Row {
        version: version.to_owned(),
        capabilities: details["capabilities"].clone(),
        degraded: details.get("degraded").cloned().unwrap_or_default(),
        rss_after_load: rss.baseline,
        growth: rss.slope_bytes_per_turn,
        plateau: rss.plateau.map_or(0, |p| p.size_bytes),
        peak: record
            .samples
            .iter()
            .filter_map(|s| s.metrics.get("rss").copied())
            .max()
            .unwrap_or(0),
    })
}

fn mib(bytes: f64) -> String {
    format!("{:.1} MiB", bytes / (1024.0 * 1024.0))
}

/// `engine.threads` on one release: 0.14.0 on export `litert_lm_engine_settings_set_num_threads`
/// and load with it (the details say how many threads); 0.11 to 0.13 do not, and the load fails
/// naming the function.
fn threads(version: &str, lib: &Path) -> Result<(), String> {
    let mut scenario = chat_scenario(version, &model_path(MODEL), 1, None);
    scenario.engine.lib = Some(lib.to_path_buf());
    scenario.engine.isolate = true;
    scenario.engine.threads = Some(2);
    let mut engine = worker(&scenario)?;
    let has_setter = !["0.11.", "0.12.", "0.13."]
        .iter()
        .any(|p| version.starts_with(p));
    match engine.load() {
        Ok(()) => {
            assert!(
                has_setter,
                "{version} loaded with `threads` but has no setter"
            );
            assert_eq!(engine.describe().details["threads"], "2", "{version}");
            engine.unload().map_err(|e| e.message.clone())
        }
        Err(e) if e.message.contains("cannot open shared object file") => Err(e.message),
        Err(e) => {
            assert!(!has_setter, "{version}: {}", e.message);
            assert!(
                e.message
                    .contains("litert_lm_engine_settings_set_num_threads failed")
                    && e.message.contains("does not export it"),
                "{version}: {}",
                e.message
            );
            Ok(())
        }
    }
}

#[test]
fn every_fetched_release_runs_the_chat_scenario_through_the_one_ffi() {
    // The workers below are this test started again: there, serve and exit.
    serve_worker_if_requested();
    if !model_path(MODEL).is_file() {
        return skip("litert_releases", &format!("model {MODEL} is missing"));
    }
    let required = required();
    let mut rows = Vec::new();
    for version in releases()
        .into_iter()
        .filter(|v| required.is_empty() || required.contains(v))
    {
        let Some(lib) = fetched(&version) else {
            let message = format!(
                "LiteRT-LM {version} is not fetched (run ci/fetch-litert-lm.sh {})",
                if version.contains(".dev") {
                    format!("nightly=={version}")
                } else {
                    version.clone()
                }
            );
            assert!(
                !required.contains(&version),
                "SKIPPED: {message}; {REQUIRE_RELEASES_ENV} requires it"
            );
            // Visible in a plain `cargo test`; a failure under LEAKLOOP_REQUIRE_ENGINE=1.
            skip_or_require(REQUIRE_ENV, &format!("litert_releases: {message}"));
            continue;
        };
        match exercise(&version, &lib)
            .and_then(|()| threads(&version, &lib))
            .and_then(|()| measure(&version, &lib))
        {
            Ok(row) => {
                eprintln!(
                    "{version}: a blocking send on a conversation just cancelled {}",
                    after_cancel(&version, &lib)
                );
                rows.push(row);
            }
            Err(why) if why.contains("cannot open shared object file") => {
                skip(
                    &format!("litert_releases {version}"),
                    &format!(
                        "a system library is missing: {why} (Debian: apt-get install libvulkan1)"
                    ),
                );
            }
            Err(why) => panic!("LiteRT-LM {version} failed: {why}"),
        }
    }
    eprintln!("| release | capabilities | fallbacks | RSS after load | RSS growth/turn | plateau | peak |");
    eprintln!("| --- | --- | --- | --- | --- | --- | --- |");
    for r in &rows {
        eprintln!(
            "| {} | {} | {} | {} | {:+.0} B | {} | {} |",
            r.version,
            r.capabilities,
            if r.degraded.is_empty() {
                "-"
            } else {
                &r.degraded
            },
            mib(r.rss_after_load as f64),
            r.growth,
            mib(r.plateau as f64),
            mib(r.peak as f64)
        );
        // The tiny model's chat loop is clean on every release: well under a kept conversation's
        // ~0.5 MiB per turn.
        assert!(
            r.growth < 64.0 * 1024.0,
            "{}: {:+.0} B/turn",
            r.version,
            r.growth
        );
        let old = ["0.11.", "0.12.", "0.13."]
            .iter()
            .any(|p| r.version.starts_with(p));
        assert_eq!(
            r.degraded.contains(Capability::MessageOutputLimit.as_str()),
            old,
            "{}: {}",
            r.version,
            r.degraded
        );
    }
}
