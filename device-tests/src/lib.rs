//! Shared helpers for device tests: finding the real engine and its models, skipping loudly when
//! they are absent, and building the scenarios the tests drive.
//!
//! A test that needs a resource calls [`require_litert`] first. When the library or the model is
//! missing it prints `SKIPPED: ...` with the way to get it and returns `None`; with
//! `LEAKLOOP_REQUIRE_ENGINE=1` (CI, which fetches the library) it panics instead, so a missing
//! resource can never pass silently.

use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};

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

/// Least-squares slope of `(x, y)` points, in y units per x.
pub fn slope(points: &[(f64, f64)]) -> f64 {
    let n = points.len() as f64;
    if n < 2.0 {
        return 0.0;
    }
    let mx = points.iter().map(|p| p.0).sum::<f64>() / n;
    let my = points.iter().map(|p| p.1).sum::<f64>() / n;
    let sxy: f64 = points.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
    let sxx: f64 = points.iter().map(|p| (p.0 - mx).powi(2)).sum();
    if sxx == 0.0 {
        0.0
    } else {
        sxy / sxx
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slope_of_a_line_is_its_gradient() {
        let pts: Vec<_> = (0..10).map(|x| (x as f64, 3.0 * x as f64 + 7.0)).collect();
        assert!((slope(&pts) - 3.0).abs() < 1e-9);
        assert_eq!(slope(&[(1.0, 5.0)]), 0.0);
    }
}
