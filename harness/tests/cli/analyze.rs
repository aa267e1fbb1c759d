//! `leakloop analyze` end to end: fixtures in, exit codes, JSON fields and rendered text out.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use rstest::rstest;

use crate::common::leakloop_command;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn analyze(args: &[&str]) -> Output {
    leakloop_command()
        .current_dir(repo())
        .arg("analyze")
        .args(args)
        .output()
        .expect("run leakloop")
}

/// `leakloop analyze ARGS --format json`: the exit code and the parsed output (also used by
/// `real_traces.rs`).
pub(crate) fn json(args: &[&str]) -> (i32, serde_json::Value) {
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

/// A FIFO blocked forever and /dev/zero grew to gigabytes; neither is read now. A folder is read
/// as a dumpsys capture, whose files are named by turn.
#[rstest]
#[case::device("/dev/zero", "a device, not a regular file")]
#[case::folder(
    "fixtures",
    "the name holds no turn number: a capture folder holds files named by turn"
)]
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
    // Read by the one report reader, which names the line and the field.
    assert!(
        stderr.contains("not a leakloop report: line 1, column ")
            && stderr.contains("field `record`"),
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

/// Writes `text` as a trace file in a fresh temporary folder.
fn trace_file(name: &str, text: &str) -> (tempfile::TempDir, String) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(name);
    std::fs::write(&path, text).unwrap();
    let path = path.to_str().unwrap().to_owned();
    (dir, path)
}

/// A report.json built from a fixture's, with its samples changed by `edit`.
fn edited_report(edit: impl FnOnce(&mut Vec<serde_json::Value>)) -> (tempfile::TempDir, String) {
    let text =
        std::fs::read_to_string(repo().join("fixtures/traces/litert-cpu-reload-run1.report.json"))
            .unwrap();
    let mut value: serde_json::Value = serde_json::from_str(&text).unwrap();
    let samples = value["record"]["samples"].as_array_mut().unwrap();
    edit(samples);
    trace_file("report.json", &value.to_string())
}

#[rstest]
#[case::iteration_counter(20_000)]
#[case::hundred_million(100_000_000)]
#[case::up_to_2_53(1 << 48)]
fn sparse_turn_numbers_get_a_verdict_per_turn_unit(#[case] spacing: u64) {
    let mut text = String::from("turn,rss\n");
    for k in 0..=32u64 {
        let wiggle = [0, 300, -200, 100][k as usize % 4];
        text.push_str(&format!(
            "{},{}\n",
            k * spacing,
            1_000_000_000 + 4_000_000 * k as i64 + wiggle
        ));
    }
    let (_dir, path) = trace_file("sparse.csv", &text);
    // Per turn the growth is small: over the default horizon of 1000 turns it stays within the
    // tolerance, so it does not fail; over 1000 samples it does.
    let (code, value) = json(&[&path]);
    assert_eq!(code, 0, "{value:#}");
    let rss = &value["metrics"]["rss"];
    assert_eq!(rss["classification"], "growth");
    assert_eq!(rss["growth_matters"], false);
    let horizon = (1000 * spacing).to_string();
    let (code, _) = json(&[&path, "--horizon", &horizon]);
    assert_eq!(code, 1);
    let slope = rss["slope_bytes_per_turn"].as_f64().unwrap();
    let expected = 4_000_000.0 / spacing as f64;
    assert!(
        (slope / expected - 1.0).abs() < 0.01,
        "{slope} vs {expected}"
    );
}

#[test]
fn four_rows_with_a_huge_last_turn_and_a_far_warmup_end_promptly() {
    let (_dir, path) = trace_file(
        "huge.csv",
        "turn,rss\n0,1000000\n1,1000000\n2,1000000\n4294967295,1000000\n",
    );
    let (code, value) = json(&[&path]);
    assert_eq!(code, 0, "{value:#}");
    let out = analyze(&[&path, "--warmup-turns", "4000000000"]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let out = analyze(&[&path, "--warmup-turns", "4294967296"]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("--warmup-turns 4294967296 is beyond the data")
            && stderr.contains("ends at turn 4294967295"),
        "{stderr}"
    );
}

/// A report whose samples `edit` spoils exits 2 with a message containing every fragment.
fn spoiled_report_exits_two(edit: impl FnOnce(&mut Vec<serde_json::Value>), fragments: &[&str]) {
    let (_dir, path) = edited_report(edit);
    let out = analyze(&[&path]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    for fragment in fragments {
        assert!(stderr.contains(fragment), "{fragment}: {stderr}");
    }
}

#[test]
fn a_report_with_samples_out_of_order_exits_two_naming_the_sample() {
    spoiled_report_exits_two(
        |samples| samples.swap(3, 9),
        &["samples[", "must be in turn order"],
    );
}

#[test]
fn a_report_without_samples_exits_two() {
    spoiled_report_exits_two(Vec::clear, &["no data rows"]);
}

#[test]
fn a_saturated_value_in_a_report_exits_two() {
    spoiled_report_exits_two(
        |samples| samples[5]["metrics"]["rss"] = serde_json::json!(u64::MAX),
        &["samples[5].metrics.rss", "saturated"],
    );
}

#[test]
fn growth_below_the_limit_passes_and_says_why() {
    // The 110 MiB/turn leak fails by default and passes under a 200 MiB/turn limit.
    let trace = "fixtures/traces/synthetic-four-classes.csv";
    let (code, value) = json(&[trace]);
    assert_eq!(code, 1);
    assert_eq!(value["metrics"]["leak"]["growth_matters"], true);
    let out = analyze(&[trace, "--max-growth-per-turn", "200MiB"]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("too small to fail: its upper bound") && stdout.contains("200.0 MiB"),
        "{stdout}"
    );
    // A horizon too short for the leak to leave the tolerance: it does not matter either.
    let (code, value) = json(&[trace, "--horizon", "1", "--tolerance", "1GiB"]);
    assert_eq!(code, 0, "{value:#}");
    assert_eq!(value["metrics"]["leak"]["classification"], "growth");
    assert_eq!(value["metrics"]["leak"]["growth_matters"], false);
    let out = analyze(&[trace, "--max-growth-per-turn", "fast"]);
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn repeated_baseline_rows_are_read_as_baseline_samples() {
    let mut text = String::from("turn,rss\n");
    for k in 0..6 {
        text.push_str(&format!(
            "0,{}\n",
            730_000_000 + [0, 5, -3, 2, -6, 4][k] * 1_000_000
        ));
    }
    for t in 1..=40 {
        text.push_str(&format!(
            "{t},{}\n",
            730_000_000 + [3, -4, 1, -2, 5, -1][t % 6] * 1_000_000
        ));
    }
    let (_dir, path) = trace_file("baseline.csv", &text);
    let (code, value) = json(&[&path, "--tolerance", "20MB"]);
    assert_eq!(code, 0, "{value:#}");
    let rss = &value["metrics"]["rss"];
    // The median of 730, 735, 727, 732, 724 and 734 MB.
    assert_eq!(rss["baseline"], 731_000_000, "{rss:#}");
    assert_eq!(rss["points"], 41, "{rss:#}");
}
