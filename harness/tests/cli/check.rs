//! `leakloop check` on the fixture scenarios: valid files print `ok`, malformed ones exit 2
//! with an error that names the file and the line.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use rstest::rstest;

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("harness sits in the workspace")
        .to_owned()
}

/// Runs `leakloop check ARGS` from the workspace root, so paths in the output are relative.
fn check(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_leakloop"))
        .arg("check")
        .args(args)
        .current_dir(workspace())
        .output()
        .expect("the leakloop binary runs")
}

fn relative(path: &Path) -> String {
    path.strip_prefix(workspace())
        .expect("fixture under the workspace")
        .display()
        .to_string()
}

#[test]
fn every_example_scenario_is_ok() {
    let mut files: Vec<String> = std::fs::read_dir(workspace().join("fixtures/scenarios"))
        .expect("fixtures/scenarios exists")
        .map(|e| e.expect("readable entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .map(|p| relative(&p))
        .collect();
    files.sort();
    assert!(!files.is_empty());
    let args: Vec<&str> = files.iter().map(String::as_str).collect();
    let out = check(&args);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for file in &files {
        assert!(
            stdout
                .lines()
                .any(|l| l.starts_with(&format!("ok {file}: "))),
            "no ok line for {file}:\n{stdout}"
        );
    }
}

#[rstest]
fn every_bad_fixture_exits_2(#[files("../fixtures/bad/*.yaml")] path: PathBuf) {
    let file = relative(&path);
    let out = check(&[&file]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(out.stdout.is_empty());
    assert!(stderr.starts_with(&format!("error: {file}: ")), "{stderr}");
    let empty = stderr.contains("the file is empty");
    assert!(empty || stderr.contains(": line "), "no line: {stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
}

#[test]
fn mixed_files_report_each_and_exit_2() {
    let out = check(&[
        "fixtures/scenarios/dsl-example-issue-sketch.yaml",
        "fixtures/bad/unknown-key.yaml",
        "fixtures/bad/does-not-exist.yaml",
    ]);
    assert_eq!(out.status.code(), Some(2));
    let text = format!(
        "--- stdout\n{}--- stderr\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    insta::with_settings!({
        snapshot_path => workspace().join("golden/cli"),
        prepend_module_to_snapshot => false,
        omit_expression => true,
    }, {
        insta::assert_snapshot!("check-mixed", text);
    });
}

#[test]
fn no_files_is_a_usage_error() {
    let out = check(&[]);
    assert_eq!(out.status.code(), Some(2));
}
