//! Suites: `leakloop run` over folders, files and globs; `--partition K/N`; `leakloop merge`
//! (a merge of every partition equals a run of the whole suite); `leakloop report` on a suite
//! folder; junit.xml against the JUnit schema Jenkins' xUnit plugin reads.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Output};

use leakloop::bench::write_sim_suite;
use leakloop::engine::skip_or_require;
use leakloop::report::{read_suite_report, EntryStatus, JUNIT_XML, REPORT_JSON, SUMMARY_MD};

use crate::common::{leakloop, stdout_and_stderr as text, workspace};

fn path(p: &Path) -> &str {
    p.to_str().expect("temporary paths are UTF-8")
}

/// A suite of `count` generated simulator scenarios (clean and leaky), plus `extra` files.
fn suite(count: usize, extra: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    write_sim_suite(dir.path(), count).unwrap();
    for (name, contents) in extra {
        std::fs::write(dir.path().join(name), contents).unwrap();
    }
    dir
}

#[test]
fn a_folder_runs_as_a_suite_with_a_folder_per_scenario_and_an_index() {
    let dir = suite(5, &[("broken.yaml", "name: broken\nturns: -1\n")]);
    let out = tempfile::tempdir().unwrap();
    let output = leakloop(&[
        "run",
        path(dir.path()),
        "--out",
        path(out.path()),
        "-j",
        "2",
    ]);
    let all = text(&output);
    // A leak (1) and an invalid scenario (2): the worst is 2.
    assert_eq!(output.status.code(), Some(2), "{all}");
    assert!(all.contains("[6/6]"), "progress counts scenarios: {all}");
    let report = read_suite_report(&out.path().join(REPORT_JSON))
        .unwrap()
        .expect("a suite report");
    assert_eq!(report.scenarios.len(), 6);
    assert_eq!(report.exit_code, 2);
    let folders: Vec<&str> = report.scenarios.iter().map(|e| e.folder.as_str()).collect();
    assert_eq!(
        folders,
        [
            "broken",
            "group-0--s0000",
            "group-0--s0004",
            "group-1--s0001",
            "group-2--s0002",
            "group-3--s0003"
        ]
    );
    let broken = &report.scenarios[0];
    assert_eq!(broken.status, EntryStatus::Error);
    assert!(
        broken.error.as_deref().unwrap().contains("broken.yaml"),
        "{broken:?}"
    );
    for entry in &report.scenarios[1..] {
        let folder = out.path().join(&entry.folder);
        assert!(folder.join(REPORT_JSON).is_file(), "{}", folder.display());
        assert!(folder.join("plot.svg").is_file());
    }
    let leak = &report.scenarios[3];
    assert_eq!(leak.status, EntryStatus::Fail, "{leak:?}");
    let worst = leak.worst_metric.as_ref().unwrap();
    assert_eq!(worst.name, "native_heap");
    assert!(worst.growth_per_turn > 1e6, "{worst:?}");

    assert_matches_suite_schema(&out.path().join(REPORT_JSON));

    let summary = std::fs::read_to_string(out.path().join(SUMMARY_MD)).unwrap();
    assert_eq!(summary.matches("](group-").count(), 5, "{summary}");
    assert!(
        summary.contains("| ❌ fail | native_heap (growth) | +"),
        "{summary}"
    );
    let junit = std::fs::read_to_string(out.path().join(JUNIT_XML)).unwrap();
    assert_eq!(junit.matches("<testsuite ").count(), 6, "{junit}");
    assert!(
        junit.contains(r#"<testsuite name="group-1/s0001.yaml""#),
        "{junit}"
    );
    // One test case per expectation plus the engine's.
    let first = junit.split("<testsuite ").nth(2).unwrap();
    assert_eq!(
        first.matches("<testcase ").count(),
        report.scenarios[1].expectations + 1,
        "{first}"
    );

    // `leakloop report` on the suite folder: the same table, the same code.
    let again = leakloop(&["report", path(out.path()), "--no-write"]);
    assert_eq!(again.status.code(), Some(2), "{}", text(&again));
    assert!(
        text(&again).contains("3 pass, 2 fail, 1 error"),
        "{}",
        text(&again)
    );
}

/// Validates a suite report.json against docs/suite-report.schema.json.
fn assert_matches_suite_schema(report: &Path) {
    let schema_path = workspace().join("docs/suite-report.schema.json");
    let schema: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(schema_path).unwrap()).unwrap();
    let validator = jsonschema::draft202012::new(&schema).expect("the schema compiles");
    let value: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(report).unwrap()).unwrap();
    let errors: Vec<String> = validator
        .iter_errors(&value)
        .map(|e| format!("{}: {e}", e.instance_path()))
        .collect();
    assert!(errors.is_empty(), "{}", errors.join("\n"));
    let mut wrong = value.clone();
    wrong["scenarios"][0]["status"] = "maybe".into();
    assert!(!validator.is_valid(&wrong), "the schema checks statuses");
}

#[test]
fn the_exit_code_is_the_worst_scenarios() {
    let dir = suite(2, &[]);
    let out = tempfile::tempdir().unwrap();
    let output = leakloop(&["run", path(dir.path()), "--out", path(out.path()), "-q"]);
    assert_eq!(
        output.status.code(),
        Some(1),
        "a leak and a clean run: {}",
        text(&output)
    );
    let glob = format!("{}/group-0/*.yaml", path(dir.path()));
    let output = leakloop(&["run", &glob, "--out", path(out.path()), "-q"]);
    assert_eq!(
        output.status.code(),
        Some(0),
        "only the clean one: {}",
        text(&output)
    );
}

#[test]
fn one_file_keeps_the_single_run_layout() {
    let dir = suite(1, &[]);
    let out = tempfile::tempdir().unwrap();
    let file = dir.path().join("group-0/s0000.yaml");
    let output = leakloop(&["run", path(&file), "--out", path(out.path())]);
    assert_eq!(output.status.code(), Some(0), "{}", text(&output));
    assert!(text(&output).contains("PASS"), "{}", text(&output));
    assert!(out.path().join("samples.parquet").is_file());
    assert_eq!(
        read_suite_report(&out.path().join(REPORT_JSON)).unwrap(),
        None
    );
}

/// Durations and timings differ between two runs of the same suite, and so does a build date
/// taken from the run's start (provenance, to the second); nothing else may.
fn without_timings(text: &str) -> String {
    let durations = regex::Regex::new(r"\d+\.\d+ s\b").unwrap();
    let json_durations = regex::Regex::new(r#""duration_s": [0-9.e-]+"#).unwrap();
    let times = regex::Regex::new(r#" time="[0-9.]+""#).unwrap();
    let run_start = regex::Regex::new(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ").unwrap();
    let text = durations.replace_all(text, "<duration>");
    let text = json_durations.replace_all(&text, r#""duration_s": 0"#);
    let text = run_start.replace_all(&text, "<run start>");
    times.replace_all(&text, "").into_owned()
}

fn files_of(dir: &Path) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for folder in std::fs::read_dir(dir).unwrap() {
        let folder = folder.unwrap().path();
        if folder.is_dir() {
            for name in [SUMMARY_MD, JUNIT_XML] {
                let key = format!("{}/{name}", folder.file_name().unwrap().to_string_lossy());
                let contents = std::fs::read_to_string(folder.join(name)).unwrap();
                out.insert(key, without_timings(&contents));
            }
        }
    }
    for name in [SUMMARY_MD, JUNIT_XML, REPORT_JSON] {
        out.insert(
            name.to_owned(),
            without_timings(&std::fs::read_to_string(dir.join(name)).unwrap()),
        );
    }
    out
}

#[test]
fn a_merge_of_every_partition_equals_a_run_of_the_whole_suite() {
    let dir = suite(12, &[("broken.yaml", "name: [\n")]);
    let work = tempfile::tempdir().unwrap();
    let whole = work.path().join("whole");
    let whole_run = leakloop(&["run", path(dir.path()), "--out", path(&whole), "-q"]);
    let mut parts = Vec::new();
    let mut held = 0;
    for k in 1..=3 {
        let part = work.path().join(format!("part-{k}"));
        let run = leakloop(&[
            "run",
            path(dir.path()),
            "--partition",
            &format!("{k}/3"),
            "--out",
            path(&part),
            "-q",
        ]);
        assert!(run.status.code().is_some_and(|c| c <= 2), "{}", text(&run));
        held += read_suite_report(&part.join(REPORT_JSON))
            .unwrap()
            .unwrap()
            .scenarios
            .len();
        parts.push(part);
    }
    assert_eq!(held, 13, "every scenario in exactly one share");
    let merged = work.path().join("merged");
    let mut args = vec!["merge"];
    args.extend(parts.iter().rev().map(|p| path(p)));
    args.extend(["--out", path(&merged)]);
    let merge = leakloop(&args);
    assert_eq!(
        merge.status.code(),
        whole_run.status.code(),
        "{}",
        text(&merge)
    );
    let (expected, got) = (files_of(&whole), files_of(&merged));
    assert_eq!(
        expected.keys().collect::<Vec<_>>(),
        got.keys().collect::<Vec<_>>()
    );
    for (name, contents) in &expected {
        assert_eq!(&got[name], contents, "{name} differs");
    }
}

#[test]
fn merge_refuses_missing_and_overlapping_partitions() {
    let dir = suite(6, &[]);
    let work = tempfile::tempdir().unwrap();
    let part = |k: u32| {
        let out = work.path().join(format!("p{k}"));
        let share = format!("{k}/2");
        leakloop(&[
            "run",
            path(dir.path()),
            "--partition",
            &share,
            "--out",
            path(&out),
            "-q",
        ]);
        out
    };
    let (p1, p2) = (part(1), part(2));
    let merged = work.path().join("merged");
    let missing = leakloop(&["merge", path(&p1), "--out", path(&merged)]);
    assert_eq!(missing.status.code(), Some(2));
    assert!(
        text(&missing).contains("partition 2/2 is missing"),
        "{}",
        text(&missing)
    );
    let twice = leakloop(&[
        "merge",
        path(&p1),
        path(&p2),
        path(&p1),
        "--out",
        path(&merged),
    ]);
    assert_eq!(twice.status.code(), Some(2));
    assert!(
        text(&twice).contains("partitions overlap"),
        "{}",
        text(&twice)
    );
    let bad = leakloop(&["run", path(dir.path()), "--partition", "3/2"]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(text(&bad).contains("between 1 and N"), "{}", text(&bad));
}

/// Validates `xml` against the JUnit schema of Jenkins' xUnit plugin with `xmllint`; `None`
/// when xmllint is missing (the caller skips, or fails under LEAKLOOP_REQUIRE_XMLLINT=1).
fn xmllint(xml: &Path) -> Option<Output> {
    let schema = workspace().join("fixtures/junit/junit-10.xsd");
    match Command::new("xmllint")
        .args(["--noout", "--schema", path(&schema), path(xml)])
        .output()
    {
        Ok(output) => Some(output),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => panic!("xmllint: {e}"),
    }
}

#[test]
fn junit_xml_validates_against_the_junit_schema() {
    let dir = suite(3, &[("broken.yaml", "name: broken\n")]);
    let work = tempfile::tempdir().unwrap();
    let out = work.path().join("out");
    leakloop(&["run", path(dir.path()), "--out", path(&out), "-q"]);
    let crash = workspace().join("fixtures/scenarios/fault-crash.yaml");
    let single = work.path().join("single");
    leakloop(&["run", path(&crash), "--out", path(&single), "-q"]);
    let files = [
        out.join(JUNIT_XML),
        out.join("group-1--s0001").join(JUNIT_XML),
        single.join(JUNIT_XML),
    ];
    for file in &files {
        assert!(file.is_file(), "{}", file.display());
    }
    for file in &files {
        let Some(output) = xmllint(file) else {
            skip_or_require(
                "LEAKLOOP_REQUIRE_XMLLINT",
                "junit.xml schema validation (install xmllint: apt-get install libxml2-utils)",
            );
            return;
        };
        assert!(
            output.status.success(),
            "{} does not validate: {}",
            file.display(),
            text(&output)
        );
    }
}

#[test]
fn the_schema_check_fails_on_what_the_schema_refuses() {
    // The check itself must be able to fail: `skipped` on <testsuites>, as quick-junit writes it.
    let dir = tempfile::tempdir().unwrap();
    let xml = dir.path().join("bad.xml");
    std::fs::write(
        &xml,
        "<?xml version=\"1.0\"?>\n<testsuites name=\"x\" tests=\"0\" skipped=\"0\" failures=\"0\" errors=\"0\"/>\n",
    )
    .unwrap();
    let Some(output) = xmllint(&xml) else {
        skip_or_require(
            "LEAKLOOP_REQUIRE_XMLLINT",
            "junit.xml schema validation (install xmllint: apt-get install libxml2-utils)",
        );
        return;
    };
    assert!(!output.status.success(), "{}", text(&output));
}
