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
#[case::no_turn_column("trace-no-turn-column.csv")]
#[case::not_a_number("trace-not-a-number.csv")]
#[case::repeated_turn("trace-repeated-turn.csv")]
#[case::short_row("trace-short-row.csv")]
#[case::latin1("trace-latin1.csv")]
#[case::nan("trace-nan.csv")]
#[case::control_in_metric("trace-control-in-metric.csv")]
fn malformed_traces_exit_two_naming_the_line(#[case] file: &str) {
    let path = format!("fixtures/bad/{file}");
    let out = analyze(&[&path]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("line "), "{stderr}");
    assert!(
        !stderr.contains('\u{1b}'),
        "a raw escape reached stderr: {stderr}"
    );
    let name = file.split('.').next().unwrap();
    insta::assert_snapshot!(name, stderr);
}

/// A 200 KB field used to be echoed whole; the message names it and stays short.
#[test]
fn an_error_never_echoes_a_huge_field() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("huge.csv");
    std::fs::write(
        &path,
        format!("turn,rss\n0,1\n1,{}\n", "9x".repeat(100_000)),
    )
    .unwrap();
    let out = analyze(&[path.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.len() < 1000, "{} bytes: {stderr}", stderr.len());
    assert!(stderr.contains("line 3, column `rss`"), "{stderr}");
    assert!(stderr.contains("characters left out"), "{stderr}");
}

#[test]
fn a_string_format_version_is_a_wrong_type_not_missing() {
    let out = analyze(&["fixtures/bad/report-string-format-version.json"]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    insta::assert_snapshot!("report-string-format-version", stderr);
}

#[test]
fn a_report_with_a_byte_order_mark_is_read() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("report.json");
    let text =
        std::fs::read(repo().join("fixtures/traces/litert-cpu-reload-run1.report.json")).unwrap();
    std::fs::write(&path, [b"\xEF\xBB\xBF".as_slice(), &text].concat()).unwrap();
    let out = analyze(&[path.to_str().unwrap()]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(matches!(out.status.code(), Some(0 | 1)), "{stderr}");
    assert!(String::from_utf8_lossy(&out.stdout).contains("rss"));
}

/// A FIFO blocked forever and /dev/zero grew to gigabytes; neither is read now.
#[rstest]
#[case::device("/dev/zero", "a device, not a regular file")]
#[case::folder("fixtures", "a folder, not a regular file")]
fn inputs_that_are_not_regular_files_are_refused(#[case] path: &str, #[case] why: &str) {
    let out = analyze(&[path]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains(why), "{stderr}");
}

#[test]
fn a_fifo_is_refused_without_blocking() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("trace.csv");
    let made = Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .expect("mkfifo runs");
    assert!(made.success());
    let out = analyze(&[fifo.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("a named pipe (FIFO)"), "{stderr}");
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
