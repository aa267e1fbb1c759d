//! llama.cpp through `llama-cpp-python`: the in-process driver (`drivers/llama-cpp/driver.py`)
//! against docs/protocol.md (`driver-check`), the project's tiny GGUF model rebuilt byte for byte
//! by its checked-in script (`drivers/llama-cpp/build_model.py`, the `gguf` package), the
//! driver's scenario library `fixtures/llama-cpp/`, and the stock OpenAI-compatible server judged
//! by attach (`fixtures/llama-server/`: clean, bounded and unbounded prompt cache, a server that
//! keeps every session's state or every request's), each scenario ending with the verdict its
//! header states, and the two where sessions repeat explained as a cache filling or a leak per
//! request. Without the package each test says `SKIPPED: llama-cpp-python (...)`;
//! `LEAKLOOP_REQUIRE_LLAMA=1` (CI, which builds it) turns that into a failure.

use std::path::{Path, PathBuf};
use std::process::Command;

use leakloop::analyze::{KeyedExplanation, VerdictStatus};
use leakloop::engine::skip_or_require;
use leakloop::report::{read_report, ReportFile};
use rstest::rstest;

use crate::common::{
    assert_driver_refuses_option, leakloop_command, stdout_and_stderr as text, workspace,
};
use crate::fixtures::{expected_exit, run};
use crate::python_driver::memory_lock;

/// Set in CI, where llama-cpp-python (with its server extras) and `gguf` are installed.
const REQUIRE_LLAMA_ENV: &str = "LEAKLOOP_REQUIRE_LLAMA";
const INSTALL: &str = "CMAKE_ARGS=-DGGML_NATIVE=OFF python3 -m pip install \
                       'llama-cpp-python[server]==0.3.36' gguf==0.19.0";
const DRIVER: &str = "drivers/llama-cpp/driver.py";
const MODEL: &str = "fixtures/models/tiny-llama.gguf";

/// Whether `python3` imports `modules`; reports the skip (with the install line) when it does not.
fn have_llama(test: &str, modules: &str) -> bool {
    let imports = Command::new("python3")
        .args(["-c", &format!("import {modules}")])
        .output()
        .is_ok_and(|o| o.status.success());
    if !imports {
        skip_or_require(
            REQUIRE_LLAMA_ENV,
            &format!("llama-cpp-python ({INSTALL}): {test} needs python3 to import {modules}"),
        );
    }
    imports
}

/// The expectation names a failing scenario states in its `# Fails: a, b` header line.
fn stated_failures(text: &str, path: &Path) -> Vec<String> {
    let line = text
        .lines()
        .find_map(|l| l.strip_prefix("# Fails:"))
        .unwrap_or_else(|| panic!("{} has no `# Fails: ...` header line", path.display()));
    line.split(',').map(|n| n.trim().to_owned()).collect()
}

/// Runs the scenario at `path` and checks the verdict its header states: a pass with a balanced
/// ledger (exit 0), or a failure of at least the expectations its `# Fails:` line names (exit 1).
fn ends_with_its_stated_verdict(path: &Path, backend: &str) -> Option<ReportFile> {
    let name = path.file_name().unwrap().to_string_lossy().into_owned();
    let modules = if backend == "attach" {
        "llama_cpp.server.app"
    } else {
        "llama_cpp"
    };
    if !have_llama(&name, modules) {
        return None;
    }
    let scenario = std::fs::read_to_string(path).unwrap();
    let code = expected_exit(&scenario, path);
    let _lock = memory_lock();
    let dir = tempfile::tempdir().unwrap();
    let output = run(path, &dir.path().join("out"));
    let shown = text(&output);
    assert_eq!(output.status.code(), Some(code), "{name}:\n{shown}");
    let report = read_report(&dir.path().join("out/report.json")).unwrap();
    assert_eq!(report.record.backend.backend, backend, "{name}");
    let failed: Vec<&str> = report
        .verdict
        .expectations
        .iter()
        .filter(|e| !e.passed)
        .map(|e| e.name.as_str())
        .collect();
    match code {
        0 => {
            assert_eq!(
                report.verdict.status,
                VerdictStatus::Pass,
                "{name}:\n{shown}"
            );
            assert!(
                report.record.ledger.imbalances().is_empty(),
                "{name}:\n{shown}"
            );
        }
        1 => {
            assert_eq!(
                report.verdict.status,
                VerdictStatus::Fail,
                "{name}:\n{shown}"
            );
            for stated in stated_failures(&scenario, path) {
                assert!(
                    failed.contains(&stated.as_str()),
                    "{name}: `{stated}` held (failed: {failed:?}):\n{shown}"
                );
            }
        }
        _ => panic!("{name}: the library's scenarios pass (0) or fail (1), not {code}"),
    }
    Some(report)
}

#[rstest]
fn each_driver_scenario_ends_with_the_verdict_it_states(
    #[files("../fixtures/llama-cpp/*.yaml")] path: PathBuf,
) {
    ends_with_its_stated_verdict(&path, "llama-cpp");
}

#[rstest]
fn each_server_scenario_ends_with_the_verdict_it_states(
    #[files("../fixtures/llama-server/*.yaml")] path: PathBuf,
) {
    let Some(report) = ends_with_its_stated_verdict(&path, "attach") else {
        return;
    };
    // The client prints READY once the server answers: the baseline is the loaded model, not
    // the interpreter starting. On a loaded machine the first request (the client pauses a
    // second before it) may still close before the baseline is sampled; the baseline then
    // stands for that turn, after the ready line (docs/attach.md, "Ready line").
    let details = &report.record.backend.details;
    let at = &details["baseline_at"];
    assert!(
        at.starts_with("ready line") || at.contains("after the ready line"),
        "{}: {details:?}",
        path.display()
    );
    // The client's `key=` is the session: where sessions repeat, the report tells a cache
    // filling from a leak per request (analyze/cache_or_leak.rs), on both memory metrics.
    let name = path.file_name().unwrap().to_string_lossy();
    let expected = match name.as_ref() {
        "llama-server-cycled-cache.yaml" => KeyedExplanation::CacheFilling,
        "llama-server-keep-every-state.yaml" => KeyedExplanation::PerRequest,
        _ => return,
    };
    for metric in ["anon_rss", "rss"] {
        let keyed = report.verdict.metrics[metric]
            .keyed_growth
            .as_ref()
            .unwrap_or_else(|| panic!("{name}: {metric} has no keyed_growth"));
        assert_eq!(keyed.explanation, expected, "{name}: {metric}: {keyed:?}");
        assert!(keyed.repeat_turns >= 20, "{name}: {metric}: {keyed:?}");
        // One cache entry or saved state: llama.cpp's state and a copy of the logits.
        let grown = match expected {
            KeyedExplanation::CacheFilling => keyed.per_new_key_bytes,
            _ => keyed.per_request_bytes,
        };
        assert!(
            (64.0 * 1024.0..256.0 * 1024.0).contains(&grown),
            "{name}: {metric}: {keyed:?}"
        );
    }
}

#[rstest]
#[case::one_llama_reused(&[], "after reload: ledger (created/deleted): batch 2/1, context 2/1, logits 1/1, model 2/1")]
#[case::one_llama_per_request(
    &["context=\"per_request\""],
    "after reload: ledger (created/deleted): batch 1/1, context 1/1, logits 1/1, model 1/1"
)]
#[case::bounded_prompt_cache(
    &["cache=\"ram\"", "cache_bytes=100000", "distinct_prompts=true"],
    "after reload: ledger (created/deleted): batch 2/1, context 2/1, logits 1/1, model 2/1"
)]
fn the_driver_conforms_to_the_protocol(#[case] options: &[&str], #[case] after_reload: &str) {
    let test = "the_driver_conforms_to_the_protocol";
    if !have_llama(test, "llama_cpp") {
        return;
    }
    let mut command = leakloop_command();
    command.args(["driver-check", "--model", MODEL]);
    for option in options {
        command.args(["--option", option]);
    }
    let output = command
        .args(["--", "python3", DRIVER])
        .current_dir(workspace())
        .output()
        .expect("leakloop runs");
    let shown = text(&output);
    assert_eq!(output.status.code(), Some(0), "{options:?}:\n{shown}");
    assert!(shown.contains("conforming:"), "{shown}");
    assert!(shown.contains("llama-cpp 0.3."), "{shown}");
    let line = shown
        .lines()
        .find(|l| l.contains("after reload: ledger"))
        .unwrap_or_default();
    assert!(line.contains(after_reload), "{options:?}:\n{shown}");
}

#[test]
fn the_driver_refuses_an_option_it_does_not_know() {
    if !have_llama("the_driver_refuses_an_option_it_does_not_know", "llama_cpp") {
        return;
    }
    assert_driver_refuses_option(
        MODEL,
        DRIVER,
        "cache=\"disk\"",
        r#"option `cache`: "disk" is not "none" or "ram""#,
    );
}

#[test]
fn the_build_script_writes_the_committed_model_byte_for_byte_and_llama_cpp_generates_with_it() {
    let test = "the_build_script_writes_the_committed_model_byte_for_byte";
    if !have_llama(test, "gguf") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let built = dir.path().join("tiny-llama.gguf");
    let output = Command::new("python3")
        .arg("drivers/llama-cpp/build_model.py")
        .arg(&built)
        .current_dir(workspace())
        .output()
        .expect("python3 runs");
    assert!(output.status.success(), "{}", text(&output));
    let committed = std::fs::read(workspace().join(MODEL)).unwrap();
    let rebuilt = std::fs::read(&built).unwrap();
    assert!(
        committed == rebuilt,
        "{MODEL} ({} bytes) differs from what build_model.py writes ({} bytes): rebuild it",
        committed.len(),
        rebuilt.len()
    );
    if !have_llama(test, "llama_cpp") {
        return;
    }
    // llama.cpp loads the rebuilt model and generates the tokens asked for.
    let generate = "import sys, llama_cpp\n\
        llm = llama_cpp.Llama(model_path=sys.argv[1], n_ctx=128, n_threads=1, verbose=False)\n\
        out = llm.create_completion('the engine', max_tokens=8, temperature=0.0,\n\
                                    logit_bias={llm.token_eos(): -1e9})\n\
        print('generated', out['usage']['completion_tokens'])\n\
        llm.close()\n";
    let output = Command::new("python3")
        .args(["-c", generate])
        .arg(&built)
        .output()
        .expect("python3 runs");
    let shown = text(&output);
    assert!(output.status.success(), "{shown}");
    // At least the 8 tokens asked for: 0.3.36 may run past `max_tokens` while a stray byte
    // token leaves the text inside a UTF-8 sequence (the driver biases such tokens away).
    let generated: u32 = shown
        .lines()
        .find_map(|l| l.strip_prefix("generated "))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("no token count: {shown}"));
    assert!(generated >= 8, "{shown}");
}
