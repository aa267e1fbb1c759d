//! The sample store of a real run (`samples.parquet`): report.json references it, every reader
//! reads the samples back through it, and the DuckDB example of docs/report-format.md reads it
//! as it stands (needs `python3` with `duckdb`; says `SKIPPED: ...` without them, fails with
//! `LEAKLOOP_REQUIRE_PYTHON=1`).

use std::path::Path;
use std::process::Command;

use leakloop::engine::skip_or_require;
use leakloop::report::{read_report, read_samples, REPORT_JSON, SAMPLES_STORE};
use leakloop::runner::Phase;

use crate::common::{leakloop, stdout_and_stderr as text, workspace};
use crate::fixtures::{self, fixture_path};

/// The duckdb release CI installs (.ci/run).
const DUCKDB: &str = "duckdb==2.0.1";

fn run_into(out: &Path) {
    let output = fixtures::run(&fixture_path("flutter-gemma-opencl-leak"), out);
    assert_eq!(output.status.code(), Some(1), "{}", text(&output));
}

#[test]
fn a_run_stores_its_samples_once_and_every_reader_reads_them() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    run_into(&out);
    assert!(!out.join("samples.jsonl").exists());
    let report_text = std::fs::read_to_string(out.join(REPORT_JSON)).unwrap();
    let value: serde_json::Value = serde_json::from_str(&report_text).unwrap();
    assert_eq!(value["record"]["samples"]["store"], SAMPLES_STORE);
    let report = read_report(&out.join(REPORT_JSON)).unwrap();
    let stored = read_samples(&out.join(SAMPLES_STORE)).unwrap();
    assert!(!stored.torn_last_line);
    assert_eq!(report.record.samples, stored.samples);
    assert_eq!(
        value["record"]["samples"]["rows"],
        report.record.samples.len()
    );
    // `report` and `analyze` read the samples through the report.
    let output = leakloop(&["report", out.to_str().unwrap(), "--no-write"]);
    assert_eq!(output.status.code(), Some(1), "{}", text(&output));
    let report_path = out.join(REPORT_JSON);
    let output = leakloop(&["analyze", report_path.to_str().unwrap()]);
    assert!(text(&output).contains("native_heap"), "{}", text(&output));
}

/// The python block under "Reading it elsewhere" in docs/report-format.md.
fn duckdb_example() -> String {
    let page = std::fs::read_to_string(workspace().join("docs/report-format.md")).unwrap();
    let from = page.find("**Reading it elsewhere.**").unwrap();
    let block = &page[from..];
    let start = block.find("```python\n").unwrap() + "```python\n".len();
    let end = start + block[start..].find("```").unwrap();
    block[start..end].to_owned()
}

#[test]
fn the_documented_duckdb_example_reads_a_runs_store() {
    let example = duckdb_example();
    assert_eq!(example.lines().count(), 3, "{example}");
    // README shows the same block.
    let readme = std::fs::read_to_string(workspace().join("README.md")).unwrap();
    assert!(
        readme.contains(&format!("```python\n{example}```")),
        "README's DuckDB example differs from docs/report-format.md's:\n{example}"
    );
    let has_duckdb = Command::new("python3")
        .args(["-c", "import duckdb"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !has_duckdb {
        skip_or_require(
            "LEAKLOOP_REQUIRE_PYTHON",
            &format!("duckdb (pip install {DUCKDB})"),
        );
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    run_into(&dir.path().join("out"));
    let output = Command::new("python3")
        .args(["-c", &example])
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", text(&output));
    let report = read_report(&dir.path().join("out").join(REPORT_JSON)).unwrap();
    let last = report
        .record
        .samples
        .iter()
        .rfind(|s| s.phase == Phase::Close)
        .unwrap();
    let expected = format!("({}, {})", last.turn, last.metrics["native_heap"]);
    assert_eq!(String::from_utf8_lossy(&output.stdout).trim(), expected);
}
