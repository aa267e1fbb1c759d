//! `leakloop analyze` end to end: fixtures in, exit codes, JSON fields and rendered text out.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use rstest::rstest;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn analyze(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_leakloop"))
        .current_dir(repo())
        .arg("analyze")
        .args(args)
        .output()
        .expect("run leakloop")
}

fn json(args: &[&str]) -> (i32, serde_json::Value) {
    let mut all = args.to_vec();
    all.extend(["--format", "json"]);
    let out = analyze(&all);
    let value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&out.stdout)));
    (out.status.code().expect("exit code"), value)
}

#[test]
fn pixel_trace_graphics_is_a_plateau_and_native_heap_undecided() {
    let (code, value) = json(&["fixtures/traces/pixel4a-opencl-4turns.csv"]);
    assert_eq!(code, 0, "{value:#}");
    let graphics = &value["metrics"]["graphics"];
    assert_eq!(graphics["classification"], "plateau");
    assert_eq!(graphics["plateau"]["settled_at_turn"], 1);
    assert!(graphics["slope_bytes_per_turn"].is_number());
    assert_eq!(
        value["metrics"]["native_heap"]["classification"],
        "inconclusive"
    );
    assert!(
        value["metrics"]["native_heap"]["turns_needed"]
            .as_u64()
            .unwrap()
            > 4
    );
    assert_ne!(value["metrics"]["pss"]["classification"], "growth");
}

#[test]
fn four_shapes_get_four_words_and_growth_exits_one() {
    let (code, value) = json(&["fixtures/traces/synthetic-four-classes.csv"]);
    assert_eq!(code, 1, "growth exits 1");
    let class = |m: &str| {
        value["metrics"][m]["classification"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    assert_eq!(class("clean"), "clean");
    assert_eq!(class("plateau"), "plateau");
    assert_eq!(class("leak"), "growth");
    assert_eq!(class("spiky"), "clean");
    let leak = &value["metrics"]["leak"];
    let slope = leak["slope_bytes_per_turn"].as_f64().unwrap();
    assert!((slope / 1048576.0 - 110.0).abs() < 1.0, "{leak:#}");
    let interval = leak["slope_interval"].as_array().unwrap();
    assert!(interval[0].as_f64().unwrap() <= slope && slope <= interval[1].as_f64().unwrap());
    assert!(leak["plateau"].is_null());
    assert_eq!(value["metrics"]["spiky"]["spike_turns"][0], 9);
}

#[test]
fn short_noisy_trace_is_inconclusive_not_clean() {
    let (code, value) = json(&["fixtures/traces/short-noisy.csv"]);
    assert_eq!(code, 0);
    assert_eq!(value["metrics"]["rss"]["classification"], "inconclusive");
}

#[test]
fn tolerance_flag_changes_what_counts_as_clean() {
    // With a 2 GiB tolerance the 1.7 GiB step is within tolerance: clean, not plateau.
    let (_, value) = json(&[
        "fixtures/traces/synthetic-four-classes.csv",
        "--tolerance",
        "2GiB",
    ]);
    assert_eq!(value["metrics"]["plateau"]["classification"], "clean");
    let (_, value) = json(&[
        "fixtures/traces/synthetic-four-classes.csv",
        "--tolerance",
        "200%",
    ]);
    assert_eq!(value["metrics"]["plateau"]["classification"], "clean");
}

#[test]
fn text_table_of_the_pixel_trace() {
    let out = analyze(&["fixtures/traces/pixel4a-opencl-4turns.csv"]);
    assert_eq!(out.status.code(), Some(0));
    insta::assert_snapshot!(String::from_utf8_lossy(&out.stdout));
}

#[rstest]
#[case::no_turn_column("trace-no-turn-column")]
#[case::not_a_number("trace-not-a-number")]
#[case::repeated_turn("trace-repeated-turn")]
#[case::short_row("trace-short-row")]
fn malformed_traces_exit_two_naming_the_line(#[case] name: &str) {
    let path = format!("fixtures/bad/{name}.csv");
    let out = analyze(&[&path]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("line "), "{stderr}");
    insta::assert_snapshot!(name, stderr);
}

#[test]
fn missing_file_and_bad_flags_exit_two() {
    let out = analyze(&["fixtures/traces/does-not-exist.csv"]);
    assert_eq!(out.status.code(), Some(2));
    let out = analyze(&["fixtures/traces/short-noisy.csv", "--tolerance", "lots"]);
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn report_json_is_read_through_its_record() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("report.json");
    std::fs::write(
        &path,
        "{\"format_version\": 1, \"record\": {\"samples\": []}}",
    )
    .unwrap();
    let out = analyze(&[path.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("not a leakloop report: at `record"),
        "{stderr}"
    );
}

/// Five runs of `fixtures/scenarios/litert-cpu-reload.yaml` on the real LiteRT-LM CPU engine: RSS
/// after each reload settles like an allocator warming up (66.5, 69.8, 71.4, 72.4, 72.4, ... MiB)
/// and in run 5 steps up once more by 0.5 MiB late in the run. Neither is memory each reload
/// leaves behind.
#[rstest]
fn real_engine_warmup_across_reloads_is_not_a_ratchet(#[values(1, 2, 3, 4, 5)] run: u32) {
    let trace = format!("fixtures/traces/litert-cpu-reload-run{run}.report.json");
    let (_, value) = json(&[trace.as_str()]);
    for metric in ["rss", "anon_rss"] {
        let analysis = &value["metrics"][metric];
        let word = analysis["classification"].as_str().unwrap();
        assert!(
            ["clean", "plateau"].contains(&word),
            "run {run} {metric}: {analysis:#}"
        );
    }
}
