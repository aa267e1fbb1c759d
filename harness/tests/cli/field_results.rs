//! docs/field-results.md and the leak hunt behind it (`drivers/hunt/hunt.py`): every scenario
//! the page names as a reproducer exists and is valid (`leakloop check`), and the hunt runs end
//! to end on one release of one runtime, the LiteRT Interpreter as this machine's python3 has
//! it (`--release installed`: no download, no environment), with a passing and a leaking
//! scenario of its library. Without python3 or `ai-edge-litert` that test says `SKIPPED: ...`;
//! `LEAKLOOP_REQUIRE_PYTHON=1` (CI, which installs the package) turns that into a failure.

use std::collections::BTreeSet;
use std::process::Command;

use leakloop::engine::skip_or_require;

use crate::common::{leakloop, stdout_and_stderr as text, workspace, LEAKLOOP};
use crate::python_driver::memory_lock;

const PAGE: &str = "docs/field-results.md";
const HUNT: &str = "drivers/hunt/hunt.py";
const INSTALL: &str = "python3 -m pip install ai-edge-litert==2.3.0";
const LLAMA_INSTALL: &str =
    "CMAKE_ARGS=-DGGML_NATIVE=OFF python3 -m pip install 'llama-cpp-python[server]==0.3.36'";

/// Every `fixtures/....yaml` path the page mentions (in code spans, command lines or links).
fn reproducers(page: &str) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    let mut rest = page;
    while let Some(start) = rest.find("fixtures/") {
        let tail = &rest[start..];
        let end = tail
            .find(|c: char| !(c.is_ascii_alphanumeric() || "/._-".contains(c)))
            .unwrap_or(tail.len());
        let path = &tail[..end];
        if path.ends_with(".yaml") {
            found.insert(path.to_owned());
        }
        rest = &tail[end..];
    }
    found
}

#[test]
fn every_reproducer_the_field_results_name_exists_and_is_a_valid_scenario() {
    let root = workspace();
    let page = std::fs::read_to_string(root.join(PAGE)).expect("docs/field-results.md reads");
    let paths = reproducers(&page);
    // The page names a reproducer per finding, for each runtime's library and LiteRT-LM's.
    for library in [
        "fixtures/litert-interpreter/",
        "fixtures/onnxruntime/",
        "fixtures/scenarios/litert-py-",
        "fixtures/llama-cpp/",
        "fixtures/llama-server/",
    ] {
        assert!(
            paths.iter().any(|p| p.starts_with(library)),
            "{PAGE} names no reproducer under {library}: {paths:?}"
        );
    }
    let missing: Vec<_> = paths.iter().filter(|p| !root.join(p).is_file()).collect();
    assert!(
        missing.is_empty(),
        "{PAGE} names missing files: {missing:?}"
    );
    let absolute: Vec<String> = paths
        .iter()
        .map(|p| root.join(p).to_string_lossy().into_owned())
        .collect();
    let mut args = vec!["check"];
    args.extend(absolute.iter().map(String::as_str));
    let output = leakloop(&args);
    assert_eq!(
        output.status.code(),
        Some(0),
        "`leakloop check` refuses a reproducer of {PAGE}:\n{}",
        text(&output)
    );
}

#[test]
fn the_hunt_runs_the_installed_release_end_to_end() {
    let test = "the_hunt_runs_the_installed_release_end_to_end";
    let imports = Command::new("python3")
        .args(["-c", "import ai_edge_litert.interpreter"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !imports {
        skip_or_require(
            "LEAKLOOP_REQUIRE_PYTHON",
            &format!("{test}: python3 cannot import ai_edge_litert ({INSTALL})"),
        );
        return;
    }
    let _lock = memory_lock();
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("hunt");
    let output = Command::new("python3")
        .arg(workspace().join(HUNT))
        .args(["--runtime", "ai-edge-litert", "--release", "installed"])
        .args(["--only", "reuse.yaml", "--only", "outputs-kept.yaml"])
        .args(["--leakloop", LEAKLOOP, "--out"])
        .arg(&out)
        .output()
        .expect("python3 runs the hunt");
    let shown = text(&output);
    assert_eq!(output.status.code(), Some(0), "{shown}");

    let doc: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("hunt.json")).expect("hunt.json"))
            .expect("hunt.json is JSON");
    assert_eq!(doc["kind"], "leakloop-hunt", "{doc}");
    let releases = doc["releases"].as_array().expect("releases");
    assert_eq!(releases.len(), 1, "{doc}");
    let release = &releases[0];
    assert_eq!(release["install"], "ready", "{release}");
    // `installed` is resolved to the version python3 has, as the driver's `hello` reports it.
    let version = release["release"].as_str().expect("a version");
    assert!(
        version.chars().next().is_some_and(|c| c.is_ascii_digit()),
        "{release}"
    );
    let scenarios = release["scenarios"].as_array().expect("scenarios");
    let by_name = |name: &str| {
        scenarios
            .iter()
            .find(|s| s["name"] == name)
            .unwrap_or_else(|| panic!("no {name} in {release}"))
    };
    assert_eq!(scenarios.len(), 2, "{release}");

    let reuse = by_name("tflite-reuse");
    assert_eq!(reuse["status"], "pass", "{reuse}");
    assert_eq!(reuse["exit_code"], 0, "{reuse}");
    assert_eq!(reuse["as_expected"], true, "{reuse}");
    assert_eq!(reuse["unbalanced"], serde_json::json!([]), "{reuse}");

    let kept = by_name("tflite-outputs-kept");
    assert_eq!(kept["status"], "fail", "{kept}");
    assert_eq!(kept["exit_code"], 1, "{kept}");
    assert_eq!(kept["expected_exit"], 1, "{kept}");
    let unbalanced = kept["unbalanced"].to_string();
    assert!(unbalanced.contains("litert-interpreter/output"), "{kept}");
    // Every kept output holds 8 x 64 x 256 floats: far above the scenario's 256 KiB limit.
    let rss = kept["growth_per_turn"]["rss"].as_f64().expect("rss growth");
    assert!(rss > 256.0 * 1024.0, "{kept}");

    let table = std::fs::read_to_string(out.join("hunt.md")).expect("hunt.md");
    assert!(table.contains("## ai-edge-litert"), "{table}");
    let row = table
        .lines()
        .find(|l| l.starts_with(&format!("| {version} |")))
        .unwrap_or_else(|| panic!("no row for {version}:\n{table}"));
    assert!(row.contains("PASS (exit 0)"), "{row}");
    assert!(row.contains("FAIL (exit 1)"), "{row}");
    // Each release's suite folder is kept as leakloop wrote it.
    assert!(out
        .join("runs/ai-edge-litert")
        .join(version)
        .join("report.json")
        .is_file());
}

/// llama-cpp-python's library in the hunt, as this machine's python3 has it: an in-process
/// scenario and a server one (judged by attach), so both halves of the library run under the
/// release's environment. Its other releases are built from source: too slow for a test.
#[test]
fn the_hunt_runs_llama_cpp_python_in_process_and_as_a_server() {
    let test = "the_hunt_runs_llama_cpp_python_in_process_and_as_a_server";
    let imports = Command::new("python3")
        .args(["-c", "import llama_cpp.server"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !imports {
        skip_or_require(
            "LEAKLOOP_REQUIRE_LLAMA",
            &format!("{test}: python3 cannot import llama_cpp.server ({LLAMA_INSTALL})"),
        );
        return;
    }
    let _lock = memory_lock();
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("hunt");
    let output = Command::new("python3")
        .arg(workspace().join(HUNT))
        .args(["--runtime", "llama-cpp-python", "--release", "installed"])
        .args([
            "--only",
            "llama-reuse.yaml",
            "--only",
            "llama-server-keep-states.yaml",
        ])
        .args(["--leakloop", LEAKLOOP, "--out"])
        .arg(&out)
        .output()
        .expect("python3 runs the hunt");
    let shown = text(&output);
    assert_eq!(output.status.code(), Some(0), "{shown}");
    let doc: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("hunt.json")).expect("hunt.json"))
            .expect("hunt.json is JSON");
    let release = &doc["releases"][0];
    assert_eq!(release["install"], "ready", "{release}");
    let scenarios = release["scenarios"].as_array().expect("scenarios");
    let by_name = |name: &str| {
        scenarios
            .iter()
            .find(|s| s["name"] == name)
            .unwrap_or_else(|| panic!("no {name} in {release}"))
    };
    assert_eq!(scenarios.len(), 2, "{release}");
    let reuse = by_name("llama-reuse");
    assert_eq!(reuse["status"], "pass", "{reuse}");
    assert_eq!(reuse["as_expected"], true, "{reuse}");
    let kept = by_name("llama-server-keep-states");
    assert_eq!(kept["status"], "fail", "{kept}");
    assert_eq!(kept["as_expected"], true, "{kept}");
    let table = std::fs::read_to_string(out.join("hunt.md")).expect("hunt.md");
    assert!(table.contains("## llama-cpp-python"), "{table}");
}

/// The reproducers that live in `fixtures/field/` (findings no scenario library holds), each with
/// the Python module its driver needs and how to install it.
const FIELD: [(&str, &str, &str); 1] = [(
    "fixtures/field/ort-genai-append.yaml",
    "onnxruntime_genai",
    "python3 -m pip install onnxruntime==1.32.0 onnxruntime-genai==0.18.0",
)];

#[test]
fn each_field_reproducer_ends_as_its_header_states() {
    let root = workspace();
    let mut listed: Vec<String> = std::fs::read_dir(root.join("fixtures/field"))
        .expect("fixtures/field exists")
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.ends_with(".yaml"))
        .map(|n| format!("fixtures/field/{n}"))
        .collect();
    listed.sort();
    let known: Vec<&str> = FIELD.iter().map(|(p, _, _)| *p).collect();
    assert_eq!(
        listed, known,
        "every fixtures/field scenario needs its row in FIELD"
    );
    for (path, module, install) in FIELD {
        let test = format!("each_field_reproducer_ends_as_its_header_states ({path})");
        let imports = Command::new("python3")
            .args(["-c", &format!("import {module}")])
            .output()
            .is_ok_and(|o| o.status.success());
        if !imports {
            skip_or_require(
                "LEAKLOOP_REQUIRE_PYTHON",
                &format!("{test}: python3 cannot import {module} ({install})"),
            );
            continue;
        }
        let file = root.join(path);
        let header = std::fs::read_to_string(&file).unwrap();
        let expected = crate::fixtures::expected_exit(&header, &file);
        let _lock = memory_lock();
        let tmp = tempfile::tempdir().unwrap();
        let out = tmp.path().join("out");
        let output = leakloop(&[
            "run",
            file.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
        ]);
        assert_eq!(
            output.status.code(),
            Some(expected),
            "{path}:\n{}",
            text(&output)
        );
    }
}
