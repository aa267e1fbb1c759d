//! `leakloop check` on the fixture scenarios: valid files print `ok`, malformed ones exit 2
//! with an error that names the file and the line.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use rstest::rstest;

use crate::common::{leakloop_command, workspace};

/// Runs `leakloop check ARGS` from the workspace root, so paths in the output are relative.
fn check(args: &[&str]) -> Output {
    leakloop_command()
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
fn a_scenario_that_stops_once_decided_says_its_turns_are_a_maximum() {
    let out = check(&[
        "fixtures/scenarios/stop-decided-leak.yaml",
        "fixtures/scenarios/flutter-gemma-cpu-flat.yaml",
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    // The `ok` lines; each is followed by the file's expectations.
    let lines: Vec<&str> = stdout.lines().filter(|l| l.starts_with("ok ")).collect();
    assert!(
        lines[0].ends_with("(sim, at most 200 turns, stops once decided)"),
        "{stdout}"
    );
    assert!(
        lines[1].ends_with(" turns)") && !lines[1].contains("at most"),
        "{stdout}"
    );
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

/// The LiteRT-LM functions a 0.13-era library exports that capabilities look at (the core every
/// release has, streaming, cancel, the sampler struct setter, optional args).
pub(crate) const OLD_RELEASE_EXPORTS: &[&str] = &[
    "litert_lm_set_min_log_level",
    "litert_lm_engine_settings_create",
    "litert_lm_engine_create",
    "litert_lm_conversation_create",
    "litert_lm_conversation_send_message",
    "litert_lm_conversation_send_message_stream",
    "litert_lm_conversation_cancel_process",
    "litert_lm_session_config_set_sampler_params",
    "litert_lm_conversation_optional_args_create",
];

/// [`OLD_RELEASE_EXPORTS`] without `missing`.
pub(crate) fn exports_without(missing: &str) -> Vec<&'static str> {
    OLD_RELEASE_EXPORTS
        .iter()
        .copied()
        .filter(|n| *n != missing)
        .collect()
}

/// A shared library exporting `names` as empty stubs: `check` reads its symbol table and never
/// loads it. `None` (after a visible skip, or a failure under `LEAKLOOP_REQUIRE_ENGINE=1`) where
/// no C compiler is installed.
pub(crate) fn stub_library(dir: &Path, names: &[&str]) -> Option<PathBuf> {
    let source = dir.join("stub.c");
    let body: String = names
        .iter()
        .map(|n| format!("void {n}(void) {{}}\n"))
        .collect();
    std::fs::write(&source, body).unwrap();
    let lib = dir.join("liblitert-lm.so");
    match Command::new("cc")
        .args(["-shared", "-fPIC", "-o"])
        .arg(&lib)
        .arg(&source)
        .status()
    {
        Ok(s) if s.success() => Some(lib),
        other => {
            leakloop::engine::skip_or_require(
                "LEAKLOOP_REQUIRE_ENGINE",
                &format!(
                    "stub LiteRT-LM library: no working C compiler `cc` ({other:?}; install \
                     build-essential)"
                ),
            );
            None
        }
    }
}

#[test]
fn check_refuses_a_cancel_scenario_on_a_library_without_cancel() {
    let tmp = tempfile::tempdir().unwrap();
    let without_cancel = exports_without("litert_lm_conversation_cancel_process");
    let Some(lib) = stub_library(tmp.path(), &without_cancel) else {
        return;
    };
    // The reload scenario cancels after 4 tokens every turn; the chat scenario never cancels.
    let out = check(&[
        "--lib",
        lib.to_str().unwrap(),
        "fixtures/scenarios/litert-cpu-reload.yaml",
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("litert-cpu-reload.yaml"), "{stderr}");
    assert!(stderr.contains("has a `cancel` step"), "{stderr}");
    assert!(stderr.contains("lacks cancel"), "{stderr}");
    assert!(
        stderr.contains("it offers: conversation,streaming,sampler_params,message_args"),
        "{stderr}"
    );
    let out = check(&[
        "--lib",
        lib.to_str().unwrap(),
        "fixtures/scenarios/litert-cpu-chat.yaml",
    ]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");

    // The same library with cancel exported runs the reload scenario's steps.
    let tmp = tempfile::tempdir().unwrap();
    let Some(lib) = stub_library(tmp.path(), OLD_RELEASE_EXPORTS) else {
        return;
    };
    let out = check(&[
        "--lib",
        lib.to_str().unwrap(),
        "fixtures/scenarios/litert-cpu-reload.yaml",
    ]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
}

#[test]
fn run_refuses_a_cancel_scenario_before_starting_the_engine() {
    let tmp = tempfile::tempdir().unwrap();
    let without = exports_without("litert_lm_conversation_send_message_stream");
    let Some(lib) = stub_library(tmp.path(), &without) else {
        return;
    };
    let out = leakloop_command()
        .args(["run", "fixtures/scenarios/litert-cpu-reload.yaml", "--lib"])
        .arg(&lib)
        .current_dir(workspace())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("lacks streaming"), "{stderr}");

    // compare checks both sides before either runs: with a B that cannot run the scenario, A
    // (a stub that would fail to load, exit 3) never starts.
    let good_dir = tempfile::tempdir().unwrap();
    let Some(good) = stub_library(good_dir.path(), OLD_RELEASE_EXPORTS) else {
        return;
    };
    let out = leakloop_command()
        .args([
            "compare",
            "fixtures/scenarios/litert-cpu-reload.yaml",
            "--lib",
        ])
        .arg(&good)
        .arg("--lib")
        .arg(&lib)
        .current_dir(workspace())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("--lib for side B") && stderr.contains("lacks streaming"),
        "{stderr}"
    );
}

/// `check --lib` opens the library it is given: a path with nothing there, or a file that is no
/// shared library, is what `run --lib` would fail on (a missing or unloadable engine library,
/// exit 3), never `ok`.
#[rstest]
#[case::missing_file("missing.so", "is not a file")]
#[case::text_file("notes.txt", "not a shared library leakloop can read")]
#[case::folder_without_the_library("empty", "is not a file")]
fn check_lib_must_name_a_litert_lm_library(#[case] name: &str, #[case] says: &str) {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("notes.txt"), "not a library\n").unwrap();
    std::fs::create_dir(tmp.path().join("empty")).unwrap();
    let lib = tmp.path().join(name);
    for scenario in [
        "fixtures/scenarios/litert-cpu-chat.yaml",
        "fixtures/scenarios/opencl-clean.yaml",
    ] {
        let out = check(&[scenario, "--lib", lib.to_str().unwrap()]);
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(3), "{scenario}: {stdout}{stderr}");
        assert!(!stdout.contains("ok "), "{scenario}: {stdout}");
        assert!(
            stderr.contains("--lib") && stderr.contains(says),
            "{scenario}: {stderr}"
        );
    }
}
