//! `leakloop init`: each backend's starter scenario passes `check` and `run` as written (the
//! simulator, an exec driver, an attached marker-printing program, LiteRT-LM when its library
//! is here), records its turn times, and an existing file is never overwritten without `--force`.

use std::path::{Path, PathBuf};

use leakloop::report::read_report;
use leakloop::runner::Phase;

use crate::common::{leakloop, report_schema_errors, stdout_and_stderr, workspace};

/// `leakloop init ARGS... --out DIR/NAME.yaml`, which must succeed; the file's path.
fn init(dir: &Path, name: &str, args: &[&str]) -> PathBuf {
    let path = dir.join(format!("{name}.yaml"));
    let mut all = vec!["init", args[0], "--out", path.to_str().unwrap()];
    all.extend_from_slice(&args[1..]);
    let out = leakloop(&all);
    assert!(out.status.success(), "{}", stdout_and_stderr(&out));
    path
}

/// Checks and runs the starter at `path`, which must pass both; the post-close turn times.
fn check_and_run(path: &Path, out_dir: &Path) -> Vec<u64> {
    let checked = leakloop(&["check", path.to_str().unwrap()]);
    assert_eq!(
        checked.status.code(),
        Some(0),
        "{}",
        stdout_and_stderr(&checked)
    );
    let ran = leakloop(&[
        "run",
        path.to_str().unwrap(),
        "--quiet",
        "--out",
        out_dir.to_str().unwrap(),
    ]);
    assert_eq!(
        ran.status.code(),
        Some(0),
        "{}\n{}",
        stdout_and_stderr(&ran),
        std::fs::read_to_string(path).unwrap()
    );
    let report = read_report(&out_dir.join("report.json")).expect("report.json");
    report
        .record
        .samples
        .iter()
        .filter(|s| s.phase == Phase::Close)
        .filter_map(|s| s.metrics.get("turn_time").copied())
        .collect()
}

#[test]
fn the_sim_starter_checks_runs_and_times_every_turn() {
    let dir = tempfile::tempdir().unwrap();
    let path = init(dir.path(), "sim", &["sim"]);
    let times = check_and_run(&path, &dir.path().join("out"));
    assert_eq!(times.len(), 32, "{times:?}");
    // cpu-flat's 16 decoded tokens take 20 ms each on the virtual clock.
    assert!(times.iter().all(|t| *t >= 320_000_000), "{times:?}");
    // The report, with a `max` limit and time metrics, is what docs/report.schema.json says.
    let errors = report_schema_errors(&dir.path().join("out/report.json"));
    assert!(errors.is_empty(), "{errors:#?}");
}

#[test]
fn the_exec_starter_runs_the_reference_driver_and_times_its_turns() {
    let dir = tempfile::tempdir().unwrap();
    let driver = workspace().join("drivers/reference_sim.py");
    let path = init(
        dir.path(),
        "exec",
        &["exec", "--", "python3", driver.to_str().unwrap()],
    );
    let times = check_and_run(&path, &dir.path().join("out"));
    assert_eq!(times.len(), 32, "{times:?}");
    assert!(times.iter().all(|t| *t > 0), "{times:?}");
}

#[test]
fn the_attach_starter_times_turns_marker_to_marker() {
    let dir = tempfile::tempdir().unwrap();
    // A marker every 50 ms: each turn time is at least that (a lower bound on an injected
    // delay, not a timing assertion).
    let script =
        "i=0; while [ $i -lt 60 ]; do i=$((i+1)); sleep 0.05; echo \"TURN $i CLOSED\"; done";
    let path = init(dir.path(), "attach", &["attach", "--", "sh", "-c", script]);
    // The starter tells where the baseline is taken and how a program moves it to its loaded
    // state (this program prints no READY: its first marker is the baseline).
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(
        text.contains("ready: '^READY\\b'") && text.contains("Print `READY` once"),
        "{text}"
    );
    let times = check_and_run(&path, &dir.path().join("out"));
    // The first marker has no marker before it.
    assert!(times.len() >= 20, "{times:?}");
    assert!(times.iter().all(|t| *t >= 40_000_000), "{times:?}");
}

#[test]
fn the_litert_lm_starter_runs_on_the_library_when_it_is_here() {
    let found = leakloop::engine::litert_lm::discover_library(None).is_ok();
    if !found {
        leakloop::engine::skip_or_require(
            "LEAKLOOP_REQUIRE_ENGINE",
            "the litert-lm starter needs the LiteRT-LM library (set LITERT_LM_LIB, or fetch it \
             into target/litert-lm/ as .ci/run does)",
        );
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let model = workspace().join("fixtures/models/tiny-qwen2-f32.litertlm");
    let path = init(
        dir.path(),
        "litert",
        &["litert-lm", "--model", model.to_str().unwrap()],
    );
    let times = check_and_run(&path, &dir.path().join("out"));
    assert_eq!(times.len(), 32, "{times:?}");
}

#[test]
fn an_existing_file_is_kept_unless_forced() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("mine.yaml");
    std::fs::write(&path, "my own scenario\n").unwrap();
    let refused = leakloop(&["init", "sim", "--out", path.to_str().unwrap()]);
    assert_eq!(
        refused.status.code(),
        Some(2),
        "{}",
        stdout_and_stderr(&refused)
    );
    assert!(stdout_and_stderr(&refused).contains("--force"));
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "my own scenario\n");
    let forced = leakloop(&["init", "sim", "--out", path.to_str().unwrap(), "--force"]);
    assert!(forced.status.success(), "{}", stdout_and_stderr(&forced));
    assert!(std::fs::read_to_string(&path)
        .unwrap()
        .contains("backend: sim"));
}

#[test]
fn a_command_where_none_belongs_or_none_where_one_is_needed_is_bad_input() {
    for args in [&["init", "sim", "--", "python3"][..], &["init", "exec"][..]] {
        let out = leakloop(args);
        assert_eq!(
            out.status.code(),
            Some(2),
            "{args:?}: {}",
            stdout_and_stderr(&out)
        );
    }
    // Without --out the starter goes to standard output.
    let printed = leakloop(&["init", "sim"]);
    assert!(printed.status.success());
    assert!(String::from_utf8_lossy(&printed.stdout).contains("watch: ["));
}
