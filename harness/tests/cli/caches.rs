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
    // Every turn's close sample carries its session id (read back from the sample store).
    let samples = leakloop::report::read_report(&out.join("report.json"))
        .unwrap()
        .record
        .samples;
    assert!(samples
        .iter()
        .filter(|s| s.phase == leakloop::runner::Phase::Close)
        .all(|s| s.key.as_deref().is_some_and(|k| k.starts_with("sess-"))));
    let summary = std::fs::read_to_string(out.join("summary.md")).unwrap();
    assert!(summary.contains("**Caches or leaks**"), "{summary}");
    assert!(summary.contains(words), "{summary}");
}

/// An attached process marking each request's session (`TURN n CLOSED key=K`, as a model
/// server's client prints it): every sampled turn's key is in the record.
#[test]
fn an_attached_process_marks_each_turn_with_its_key() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("keyed.yaml");
    std::fs::write(
        &path,
        "name: keyed\nengine:\n  backend: attach\n  command: [sh, -c, 'echo READY; i=1; while [ $i -le 12 ]; do sleep 0.2; echo \"TURN $i CLOSED key=sess-$((i % 3))\"; i=$((i + 1)); done; sleep 5']\n\
         turns: 6\nsample: {settle: 0ms}\nwatch: [rss]\n",
    )
    .unwrap();
    let out = dir.path().join("out");
    let output = run(&path, &out);
    assert_eq!(
        output.status.code(),
        Some(0),
        "{}",
        crate::common::stdout_and_stderr(&output)
    );
    let samples = leakloop::report::read_report(&out.join("report.json"))
        .unwrap()
        .record
        .samples;
    let closes: Vec<_> = samples
        .iter()
        .filter(|s| s.phase == leakloop::runner::Phase::Close)
        .collect();
    assert!(!closes.is_empty());
    for sample in closes {
        let expected = format!("sess-{}", sample.turn % 3);
        assert_eq!(sample.key.as_deref(), Some(expected.as_str()), "{sample:?}");
    }
}
