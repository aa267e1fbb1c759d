//! Shared helpers for device tests: finding the real engine and its models, skipping loudly when
//! they are absent, and building the scenarios the tests drive.
//!
//! A test that needs a resource calls [`require_litert`] first. When the library or the model is
//! missing it prints `SKIPPED: ...` with the way to get it and returns `None`; with
//! `LEAKLOOP_REQUIRE_ENGINE=1` (CI, which fetches the library) it panics instead, so a missing
//! resource can never pass silently.

use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};

use leakloop::analyze::{classify, ClassifyOptions, GrowthPerTurn, MetricSeries};
use leakloop::engine::litert_lm::{discover_library, LibraryLocation};
use leakloop::engine::skip_or_require;
use leakloop::scenario::{BackendKind, EngineSpec, PromptSpec, Scenario, SessionOptions, Step};

/// Environment variable that turns a skip into a failure.
pub const REQUIRE_ENV: &str = "LEAKLOOP_REQUIRE_ENGINE";

/// The repository root (the workspace folder).
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("device-tests sits inside the workspace")
        .to_path_buf()
}

/// A committed tiny model under `fixtures/models/`.
pub fn model_path(file: &str) -> PathBuf {
    repo_root().join("fixtures/models").join(file)
}

/// Reports a missing resource: `SKIPPED: ...` on stderr, or a panic when [`REQUIRE_ENV`] is set.
/// The line shows in a plain `cargo test` (see [`skip_or_require`]).
pub fn skip(test: &str, why: &str) {
    skip_or_require(
        REQUIRE_ENV,
        &format!("{test}: {why} (run ci/fetch-litert-lm.sh)"),
    );
}

/// The LiteRT-LM library and the model `model_file`, or `None` after reporting a skip.
pub fn require_litert(test: &str, model_file: &str) -> Option<(LibraryLocation, PathBuf)> {
    let library = match discover_library(None) {
        Ok(l) => l,
        Err(e) => {
            skip(test, &e.to_string());
            return None;
        }
    };
    let model = model_path(model_file);
    if !model.is_file() {
        skip(
            test,
            &format!(
                "model {} is missing (fixtures/models/build_models.py builds it)",
                model.display()
            ),
        );
        return None;
    }
    Some((library, model))
}

/// Serializes tests that measure this process's memory, so that they do not see each other.
pub fn memory_lock() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

/// A per-turn chat scenario on the CPU backend: open, send, generate (or cancel), close.
pub fn chat_scenario(name: &str, model: &Path, turns: u32, cancel_after: Option<u32>) -> Scenario {
    let generate = match cancel_after {
        Some(after_tokens) => Step::Cancel {
            after_tokens,
            max_output_tokens: 32,
        },
        None => Step::Generate {
            max_output_tokens: 16,
        },
    };
    Scenario::new(
        name,
        EngineSpec {
            model: Some(model.to_path_buf()),
            max_tokens: 1024,
            isolate: false,
            ..EngineSpec::new(BackendKind::LitertLm)
        },
        turns,
        vec![
            Step::Open(SessionOptions::default()),
            Step::Send(PromptSpec::Text(
                "Summarize the notes about the engine and the cache.".to_owned(),
            )),
            generate,
            Step::Close,
        ],
    )
}

/// The growth per turn of a series measured by hand (`(turn, bytes)`, turn 0 after load), as
/// the analyzer fits it after `warmup_turns`.
pub fn growth(points: &[(u64, u64)], warmup_turns: u64) -> GrowthPerTurn {
    let options = ClassifyOptions {
        warmup_turns,
        ..ClassifyOptions::default()
    };
    GrowthPerTurn::of(&classify(&MetricSeries::from_points(points), &options))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn growth_of_a_rising_series_is_its_rise_per_turn() {
        let points: Vec<(u64, u64)> = (0..30).map(|t| (t, (64 << 20) + t * 3000)).collect();
        let growth = growth(&points, 5);
        assert!((growth.bytes_per_turn - 3000.0).abs() < 1.0, "{growth:?}");
        let flat: Vec<(u64, u64)> = (0..30).map(|t| (t, 64 << 20)).collect();
        assert_eq!(super::growth(&flat, 5).bytes_per_turn, 0.0);
    }
}
