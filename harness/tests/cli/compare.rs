//! `leakloop compare`: one scenario against two LiteRT-LM builds, or against two engine specs. The
//! real comparison (0.18.1 against a fetched nightly) needs both libraries under
//! `target/litert-lm/`; without them it prints `SKIPPED: ...`, and fails when
//! `LEAKLOOP_REQUIRE_ENGINE=1`. Bad usage and the simulator's engine files need no library.

use std::path::PathBuf;
use std::process::Output;

use crate::common::{leakloop_command, streams as text, workspace};

const RELEASE: &str = "0.18.1";
const SCENARIO: &str = "fixtures/scenarios/litert-cpu-chat.yaml";

/// Runs `leakloop compare ARGS` from the workspace root.
fn compare(args: &[&str]) -> Output {
    leakloop_command()
        .arg("compare")
        .args(args)
        .current_dir(workspace())
        .output()
        .expect("the leakloop binary runs")
}

/// The folder `ci/fetch-litert-lm.sh` fills.
fn fetched_root() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace().join("target"))
        .join("litert-lm")
}

/// The 0.18.1 release and the newest other fetched version (a nightly), as folders holding
/// `liblitert-lm.so`.
fn release_and_nightly() -> Result<(PathBuf, PathBuf), String> {
    let root = fetched_root();
    let mut versions: Vec<String> = std::fs::read_dir(&root)
        .map_err(|e| format!("{}: {e}", root.display()))?
        .filter_map(Result::ok)
        .filter(|e| e.path().join("liblitert-lm.so").is_file())
        .filter_map(|e| e.file_name().into_string().ok())
        .collect();
    versions.sort();
    if !versions.iter().any(|v| v == RELEASE) {
        return Err(format!("no {RELEASE} under {}", root.display()));
    }
    let other = versions
        .iter()
        .rev()
        .find(|v| v.as_str() != RELEASE)
        .ok_or_else(|| format!("no version other than {RELEASE} under {}", root.display()))?;
    Ok((root.join(RELEASE), root.join(other)))
}

/// Reports a missing library: `SKIPPED: ...` (shown in a plain `cargo test`), or a panic with
/// `LEAKLOOP_REQUIRE_ENGINE=1`.
fn skip(test: &str, why: &str) {
    leakloop::engine::skip_or_require(
        "LEAKLOOP_REQUIRE_ENGINE",
        &format!("{test}: {why} (run ci/fetch-litert-lm.sh and ci/fetch-litert-lm.sh nightly)"),
    );
}

#[test]
fn release_against_nightly_side_by_side() {
    let (a, b) = match release_and_nightly() {
        Ok(pair) => pair,
        Err(why) => return skip("release_against_nightly_side_by_side", &why),
    };
    let version_b = b.file_name().unwrap().to_string_lossy().into_owned();
    let dir = tempfile::tempdir().unwrap();
    let out = compare(&[
        SCENARIO,
        "--lib",
        a.to_str().unwrap(),
        "--lib",
        b.to_str().unwrap(),
        "--out",
        dir.path().to_str().unwrap(),
        "--quiet",
    ]);
    let (stdout, stderr) = text(&out);
    eprintln!("{stdout}");
    // The clean chat loop passes on both builds; a build that leaks in it is what this catches.
    assert_eq!(out.status.code(), Some(0), "{stdout}{stderr}");
    assert!(
        stdout.contains(&format!("A: litert-lm {RELEASE}")),
        "{stdout}"
    );
    assert!(
        stdout.contains(&format!("B: litert-lm {version_b}")),
        "{stdout}"
    );
    assert!(stdout.contains("completed 32 turns"), "{stdout}");
    for metric in ["rss", "anon_rss", "native_heap"] {
        assert!(
            stdout.lines().any(|l| l.starts_with(&format!("{metric} "))),
            "no row for {metric}:\n{stdout}"
        );
    }
    assert!(stdout.contains("\nA: PASS\n") && stdout.contains("\nB: PASS\n"));
    for (side, version) in [("a", RELEASE), ("b", version_b.as_str())] {
        let report = std::fs::read_to_string(dir.path().join(side).join("report.json"))
            .unwrap_or_else(|e| panic!("{side}/report.json: {e}"));
        let report: serde_json::Value = serde_json::from_str(&report).unwrap();
        assert_eq!(report["record"]["backend"]["version"], version, "{side}");
        assert_eq!(report["verdict"]["status"], "pass", "{side}");
        assert!(dir.path().join(side).join("samples.parquet").is_file());
    }
}

#[test]
fn one_lib_is_bad_usage() {
    let out = compare(&[SCENARIO, "--lib", "target/litert-lm/0.18.1"]);
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(2), "{stdout}{stderr}");
    assert!(
        stderr.contains(
            "compare needs exactly two --lib (A and B) or one or two --engine, got 1 --lib"
        ),
        "{stderr}"
    );
}

#[test]
fn no_lib_is_bad_usage() {
    let out = compare(&[SCENARIO]);
    let (_, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("--lib"), "{stderr}");
}

#[test]
fn a_missing_library_is_named_before_anything_runs() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("no-such-build");
    let out = compare(&[
        SCENARIO,
        "--lib",
        missing.to_str().unwrap(),
        "--lib",
        missing.to_str().unwrap(),
        "--out",
        dir.path().join("out").to_str().unwrap(),
    ]);
    let (stdout, stderr) = text(&out);
    // A missing engine library is an engine failure, as in `leakloop run --lib`.
    assert_eq!(out.status.code(), Some(3), "{stdout}{stderr}");
    assert!(stderr.contains("--lib for side A"), "{stderr}");
    assert!(stderr.contains("no-such-build"), "{stderr}");
    assert!(stderr.contains("ci/fetch-litert-lm.sh"), "{stderr}");
    assert!(!dir.path().join("out").exists(), "nothing may run");
}

#[test]
fn a_scenario_without_a_library_to_swap_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let lib = dir.path().join("liblitert-lm.so");
    std::fs::write(&lib, b"not loaded").unwrap();
    let out = compare(&[
        "fixtures/scenarios/flutter-gemma-cpu-flat.yaml",
        "--lib",
        lib.to_str().unwrap(),
        "--lib",
        lib.to_str().unwrap(),
    ]);
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(2), "{stdout}{stderr}");
    assert!(stderr.contains("only the litert-lm backend"), "{stderr}");
}

/// The simulator's engine that forgets to delete conversations (the scenario's own) against its
/// clean CPU profile from an engine file: one table, A's growth and ledger gone on B.
#[test]
fn an_engine_file_runs_against_the_scenarios_own_engine() {
    let out = compare(&[
        "fixtures/scenarios/forgets-delete.yaml",
        "--engine",
        "fixtures/engines/sim-cpu-flat.yaml",
        "--quiet",
    ]);
    let (stdout, stderr) = text(&out);
    // Both sides fail an expectation (B's one-time rise passes its tolerance too).
    assert_eq!(out.status.code(), Some(1), "{stdout}{stderr}");
    insta::assert_snapshot!(stdout);
}

/// The two forms for two engine files in docs/commands.md: `--engine A.yaml B.yaml` and `--engine A.yaml
/// --engine B.yaml`.
#[rstest::rstest]
#[case::one_flag_two_files(false)]
#[case::two_flags(true)]
fn two_engine_files_are_a_then_b(#[case] two_flags: bool) {
    let dir = tempfile::tempdir().unwrap();
    let leaky = dir.path().join("leaky.yaml");
    std::fs::write(
        &leaky,
        "engine: {backend: sim, profile: forgets-delete, max_tokens: 4096}\n",
    )
    .unwrap();
    let mut args = vec![
        "fixtures/scenarios/forgets-delete.yaml",
        "--engine",
        "fixtures/engines/sim-cpu-flat.yaml",
    ];
    if two_flags {
        args.push("--engine");
    }
    args.extend([leaky.to_str().unwrap(), "--quiet"]);
    let out = compare(&args);
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(1), "{stdout}{stderr}");
    let row = stdout
        .lines()
        .find(|l| l.starts_with("native_heap"))
        .expect("a native_heap row");
    let cells: Vec<&str> = row.split_whitespace().collect();
    // B (the leaky profile) grows by a KV cache per turn more than A.
    assert_eq!(cells[1], "plateau", "{row}");
    // Each growth figure is a number and a unit: `+48.1 MiB`.
    assert_eq!(cells[4], "growth", "{row}");
    assert!(cells[7].starts_with("+4") && cells[8] == "MiB", "{row}");
    assert!(
        stdout.contains("ledger: sim/conversation created 13 deleted 0"),
        "{stdout}"
    );
    // The table says what tells the two engines apart, not the same name twice.
    let differs = |name: &str| {
        stdout
            .lines()
            .find(|l| l.starts_with(&format!("{name} ")))
            .map(|l| l.split_whitespace().skip(1).collect::<Vec<_>>())
            .unwrap_or_else(|| panic!("no `{name}` row:\n{stdout}"))
    };
    assert_eq!(differs("engine.profile"), ["cpu-flat", "forgets-delete"]);
    assert_eq!(
        differs("backend.details.profile"),
        ["cpu-flat", "forgets-delete"]
    );
    assert!(
        !stdout.lines().any(|l| l.starts_with("engine.backend ")),
        "{stdout}"
    );
}

/// `compare` takes `run`'s scenario overrides and applies them to both sides; the engine ones
/// reach an engine file too.
#[test]
fn run_overrides_apply_to_both_sides() {
    let out = compare(&[
        "fixtures/scenarios/forgets-delete.yaml",
        "--engine",
        "fixtures/engines/sim-cpu-flat.yaml",
        "--turns",
        "4",
        "--warmup-turns",
        "2",
        "--seed",
        "3",
        "--stop",
        "turns",
        "--max-tokens",
        "2048",
        "--quiet",
    ]);
    let (stdout, stderr) = text(&out);
    assert_ne!(out.status.code(), Some(2), "{stdout}{stderr}");
    for side in ["A", "B"] {
        let line = stdout
            .lines()
            .find(|l| l.starts_with(&format!("  {side}: ")))
            .unwrap_or_else(|| panic!("no line for {side}:\n{stdout}"));
        // 4 measured turns after 2 warm-up turns (the scenario says 1).
        assert!(line.ends_with("completed 6 turns"), "{line}");
    }
    // Both sides got 2048, so the context size is not among the differences.
    assert!(
        !stdout.lines().any(|l| l.starts_with("engine.max_tokens ")),
        "{stdout}"
    );
    let out = compare(&[
        "fixtures/scenarios/forgets-delete.yaml",
        "--engine",
        "fixtures/engines/sim-cpu-flat.yaml",
        "--turns",
        "0",
    ]);
    let (_, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("--turns 0"), "{stderr}");
}

#[rstest::rstest]
#[case::unknown_key(
    "engine:\n  backend: sim\n  profil: cpu-flat\n",
    "line 3, column 3: `engine.profil`: unknown key `profil`"
)]
#[case::more_than_the_engine(
    "engine: {backend: sim}\nturns: 3\n",
    "an engine file holds only `engine:`, found `turns`"
)]
#[case::not_a_mapping("- sim\n", "an engine file is a YAML mapping with one key, `engine`")]
fn a_bad_engine_file_is_named_before_anything_runs(#[case] yaml: &str, #[case] message: &str) {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("engine.yaml");
    std::fs::write(&file, yaml).unwrap();
    let out = compare(&[
        "fixtures/scenarios/forgets-delete.yaml",
        "--engine",
        "fixtures/engines/sim-cpu-flat.yaml",
        "--engine",
        file.to_str().unwrap(),
        "--out",
        dir.path().join("out").to_str().unwrap(),
    ]);
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(2), "{stdout}{stderr}");
    assert!(stderr.contains("--engine for side B"), "{stderr}");
    assert!(stderr.contains(message), "{stderr}");
    assert!(!dir.path().join("out").exists(), "nothing may run");
}

#[test]
fn three_engine_files_or_engines_with_libs_are_bad_usage() {
    let engine = "fixtures/engines/sim-cpu-flat.yaml";
    let out = compare(&[
        SCENARIO, "--engine", engine, "--engine", engine, "--engine", engine,
    ]);
    let (_, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("compare takes one --engine"), "{stderr}");
    assert!(stderr.contains("got 3"), "{stderr}");
    let out = compare(&[
        SCENARIO,
        "--engine",
        engine,
        "--lib",
        "target/litert-lm/0.18.1",
    ]);
    let (_, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("cannot be used with"), "{stderr}");
}
