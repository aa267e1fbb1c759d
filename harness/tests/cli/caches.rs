//! Caches versus leaks end to end: the keyed simulator fixtures in `fixtures/caches/` exit as
//! their header says, and their report says what the growth follows (a cache filling, growth
//! per request), in report.json and in summary.md.

use std::path::PathBuf;

use rstest::rstest;

use crate::fixtures::{expected_exit, run};

#[rstest]
#[case::unbounded_cache(
    "prefix-cache-unbounded-sessions",
    "cache_filling",
    "every new key so far added memory"
)]
#[case::bounded_cache(
    "prefix-cache-bounded-sessions",
    "cache_filling",
    "new keys stopped adding memory after 4 distinct keys"
)]
#[case::leak_per_request(
    "leak-per-request-sessions",
    "per_request",
    "per request even when the key was seen before"
)]
fn keyed_fixture_says_what_its_growth_follows(
    #[case] name: &str,
    #[case] explanation: &str,
    #[case] words: &str,
) {
    let path =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(format!("../fixtures/caches/{name}.yaml"));
    let text = std::fs::read_to_string(&path).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let output = run(&path, &out);
    assert_eq!(
        output.status.code(),
        Some(expected_exit(&text, &path)),
        "{}",
        crate::common::stdout_and_stderr(&output)
    );
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("report.json")).unwrap()).unwrap();
    let keyed = &report["verdict"]["metrics"]["native_heap"]["keyed_growth"];
    assert_eq!(keyed["explanation"], explanation, "{keyed}");
    // Every turn's close sample carries its session id.
    let samples = report["record"]["samples"].as_array().unwrap();
    assert!(samples
        .iter()
        .filter(|s| s["phase"] == "close")
        .all(|s| s["key"].as_str().is_some_and(|k| k.starts_with("sess-"))));
    let summary = std::fs::read_to_string(out.join("summary.md")).unwrap();
    assert!(summary.contains("**Caches or leaks**"), "{summary}");
    assert!(summary.contains(words), "{summary}");
}
