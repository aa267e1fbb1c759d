//! Default expectations and growth below the limit (issue 22, items 1 and 10): a watched metric
//! without `expect` fails on growth that matters (the silent pass of the simulator's Android
//! OpenCL profile), `report_only: true` opts out and still reports the growth, `check` lists the
//! effective expectations with the defaults marked, and a growth that passes its limit is named
//! in the text, summary.md and junit.xml.

use leakloop::analyze::Classification;

use crate::common::leakloop;
use crate::fixtures::run_yaml;

/// A simulator scenario on `profile` watching `native_heap`, with `extra` appended.
fn scenario(profile: &str, extra: &str) -> String {
    format!(
        "name: defaults-{profile}\nseed: 1\nengine: {{backend: sim, profile: {profile}}}\n\
         warmup_turns: 1\nturns: 10\nturn:\n  - open: {{}}\n  - send: {{prompt: hi}}\n  \
         - generate: {{max_output_tokens: 8}}\n  - close: {{}}\nwatch: [native_heap]\n{extra}"
    )
}

/// The silent pass of issue 22: `native_heap` watched without `expect` on the Android OpenCL
/// profile grew about 110 MiB a turn and the run said `PASS: all 1 expectations held`.
#[test]
fn a_watched_metric_without_expectations_fails_on_the_android_opencl_leak() {
    let dir = tempfile::tempdir().unwrap();
    let (code, text, report) = run_yaml(dir.path(), &scenario("android-opencl-leak", ""));
    assert_eq!(code, Some(1), "{text}");
    let horizon = report
        .verdict
        .expectations
        .iter()
        .find(|e| e.name == "native_heap.horizon")
        .unwrap_or_else(|| panic!("no default in {:#?}", report.verdict.expectations));
    assert!(!horizon.passed && horizon.defaulted, "{horizon:?}");
    assert!(text.contains("✗ native_heap.horizon (default)"), "{text}");
    assert!(text.contains("default expectations: "), "{text}");
}

#[test]
fn report_only_opts_out_and_the_growth_is_still_reported() {
    let dir = tempfile::tempdir().unwrap();
    let (code, text, report) = run_yaml(
        dir.path(),
        &scenario(
            "android-opencl-leak",
            "expect:\n  native_heap: {report_only: true}\n",
        ),
    );
    assert_eq!(code, Some(0), "{text}");
    let native = &report.verdict.metrics["native_heap"];
    assert_eq!(native.classification, Classification::Growth, "{text}");
    assert!(
        report
            .verdict
            .expectations
            .iter()
            .all(|e| !e.name.starts_with("native_heap")),
        "{:#?}",
        report.verdict.expectations
    );
    let row = text
        .lines()
        .find(|l| l.starts_with("native_heap"))
        .unwrap_or_else(|| panic!("no native_heap row: {text}"));
    assert!(row.contains("growth"), "{row}");
}

#[test]
fn check_lists_the_effective_expectations_and_marks_the_defaults() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("scenario.yaml");
    std::fs::write(
        &path,
        scenario(
            "cpu-flat",
            "expect:\n  pss: {max_growth_per_turn: 1MiB}\n  rss: {report_only: true}\n",
        ),
    )
    .unwrap();
    let out = leakloop(&["check", path.to_str().unwrap()]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    let lines: Vec<&str> = stdout.lines().skip(1).collect();
    assert_eq!(
        lines,
        [
            "  balanced (default): every create has its delete, where the run records a ledger",
            "  native_heap.horizon (default): no growth that matters over 1,000 turns (opt out: \
             `expect: {native_heap: {report_only: true}}`)",
            "  pss.max_growth_per_turn: at most 1.0 MiB per turn",
            "  rss: reported only (`report_only: true`)",
            "  engine_errors: no engine errors other than scripted faults",
        ],
        "{stdout}"
    );
}

/// A leak under a generous limit passes, but every report says it grows.
#[test]
fn growth_below_the_limit_is_named_in_text_summary_and_junit() {
    let dir = tempfile::tempdir().unwrap();
    let (code, text, report) = run_yaml(
        dir.path(),
        &scenario(
            "forgets-delete",
            "expect:\n  balanced: false\n  native_heap: {max_growth_per_turn: 1GiB}\n",
        ),
    );
    assert_eq!(code, Some(0), "{text}");
    assert_eq!(
        report.verdict.metrics["native_heap"].classification,
        Classification::Growth
    );
    let said = "native_heap: growth below the limit: +";
    assert!(text.contains(said), "{text}");
    assert!(text.contains(" per 1,000 turns)"), "{text}");
    let out = dir.path().join("out");
    let summary = std::fs::read_to_string(out.join("summary.md")).unwrap();
    assert!(
        summary.contains("- `native_heap`: growth below the limit: +"),
        "{summary}"
    );
    let junit = std::fs::read_to_string(out.join("junit.xml")).unwrap();
    assert!(junit.contains("growth below the limit: +"), "{junit}");
}
