//! `leakloop history` over simulated nightly builds (`fixtures/history/history-sim.yaml`: a
//! profile whose native leak steps up at build k) and `leakloop run --baseline`. Each build is a
//! real `leakloop run --out` with its own seed and `--build-id`, so the test goes through
//! report.json, provenance and folder discovery as a nightly job would.

use std::path::{Path, PathBuf};
use std::process::Output;

use crate::common::{leakloop_command, streams as text, workspace};

pub(crate) const SCENARIO: &str = "fixtures/history/history-sim.yaml";

/// `leakloop ARGS` from the workspace root.
pub(crate) fn leakloop(args: &[&str]) -> Output {
    leakloop_command()
        .args(args)
        .current_dir(workspace())
        .output()
        .expect("the leakloop binary runs")
}

/// Runs build `i` of a simulated history of `target` (the scenario, or a suite folder holding
/// it) into `dir`: profile `leaky` from build `step_at` on, seed `seed_base + i`, build id `bNN`.
fn run_build(target: &Path, dir: &Path, i: usize, step_at: Option<usize>, seed_base: u64) {
    let profile = if step_at.is_some_and(|k| i >= k) {
        "leaky"
    } else {
        "steady"
    };
    let seed = (seed_base + i as u64).to_string();
    let id = format!("b{i:02}");
    let out = leakloop(&[
        "run",
        target.to_str().unwrap(),
        "--quiet",
        "--seed",
        &seed,
        "--profile",
        profile,
        "--build-id",
        &id,
        "--out",
        dir.to_str().unwrap(),
    ]);
    // Every build passes on its own: the leak stays under the absolute limit.
    assert_eq!(out.status.code(), Some(0), "{:?}", text(&out));
}

/// [`run_build`] of the scenario itself.
pub(crate) fn simulate_build(dir: &Path, i: usize, step_at: Option<usize>, seed_base: u64) {
    run_build(Path::new(SCENARIO), dir, i, step_at, seed_base);
}

/// `n` builds in folders `ROOT/bNN`, oldest first.
fn simulate_history(root: &Path, n: usize, step_at: Option<usize>, seed_base: u64) -> Vec<PathBuf> {
    (0..n)
        .map(|i| {
            let dir = root.join(format!("b{i:02}"));
            simulate_build(&dir, i, step_at, seed_base);
            dir
        })
        .collect()
}

fn history(dirs: &[PathBuf], extra: &[&str]) -> Output {
    let mut args = vec!["history".to_owned()];
    args.extend(dirs.iter().map(|d| d.display().to_string()));
    args.extend(extra.iter().map(|s| s.to_string()));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    leakloop(&args)
}

#[test]
fn history_names_the_build_where_the_leak_appeared() {
    let root = tempfile::tempdir().unwrap();
    let dirs = simulate_history(root.path(), 13, Some(7), 100);
    let plots = root.path().join("plots");
    let out = history(&dirs, &["--out", plots.to_str().unwrap()]);
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(1), "{stdout}\n{stderr}");
    assert!(
        stdout.contains("REGRESSION: `history-sim` native_heap growth per turn from build b07:"),
        "{stdout}"
    );
    assert!(stdout.contains("history: 1 regression(s)"), "{stdout}");
    let svg = std::fs::read_to_string(plots.join("history-sim.svg")).unwrap();
    assert!(
        svg.contains("first change") && svg.contains("b07"),
        "plot marks the change"
    );
    assert_eq!(
        std::fs::read_to_string(plots.join("history.txt")).unwrap(),
        stdout
            .lines()
            .filter(|l| !l.starts_with("history: trend plots"))
            .collect::<Vec<_>>()
            .join("\n")
            + "\n"
    );
}

/// Builds that differ only by their noise (other seeds, the same profile) raise nothing, for
/// several histories. `leakloop bench history` measures the rate over many more.
#[test]
fn history_stays_quiet_on_builds_that_differ_only_by_noise() {
    for seed_base in [1, 1000, 2000] {
        let root = tempfile::tempdir().unwrap();
        let dirs = simulate_history(root.path(), 12, None, seed_base);
        let out = history(&dirs, &[]);
        let (stdout, stderr) = text(&out);
        assert_eq!(
            out.status.code(),
            Some(0),
            "seeds from {seed_base}:\n{stdout}\n{stderr}"
        );
        assert!(
            stdout.contains("no regression beyond the builds' own spread"),
            "{stdout}"
        );
    }
}

/// Real suite folders (`leakloop run FOLDER --out`: one folder per scenario and the suite's own
/// index) are read by scenario name; the index is passed over quietly. A report.json that is
/// neither is named in a note.
#[test]
fn history_finds_per_scenario_reports_inside_suite_folders() {
    let root = tempfile::tempdir().unwrap();
    let suite = root.path().join("suite");
    std::fs::create_dir(&suite).unwrap();
    std::fs::copy(workspace().join(SCENARIO), suite.join("history-sim.yaml")).unwrap();
    let dirs: Vec<PathBuf> = (0..12)
        .map(|i| {
            let out = root.path().join(format!("nightly-{i}"));
            run_build(&suite, &out, i, Some(6), 7);
            assert!(out.join("report.json").is_file(), "the suite's index");
            out
        })
        .collect();
    let out = history(&dirs, &[]);
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(1), "{stdout}\n{stderr}");
    assert!(stdout.contains("from build b06:"), "{stdout}");
    assert!(
        !stderr.contains("skipped"),
        "the suite index is no surprise: {stderr}"
    );
    // A suite folder is a baseline too: its report of the scenario is found by name.
    let new = root.path().join("new");
    let run = leakloop(&[
        "run",
        SCENARIO,
        "--quiet",
        "--profile",
        "leaky",
        "--out",
        new.to_str().unwrap(),
        "--baseline",
        dirs[0].to_str().unwrap(),
    ]);
    assert_eq!(run.status.code(), Some(1), "{:?}", text(&run));
    // Something else named report.json is named, not silently taken.
    std::fs::write(dirs[3].join("report.json"), r#"{"kind": "other"}"#).unwrap();
    let out = history(&dirs, &[]);
    assert!(
        text(&out).1.contains("history: skipped"),
        "{:?}",
        text(&out)
    );
}

#[test]
fn history_refuses_what_it_cannot_compare() {
    let root = tempfile::tempdir().unwrap();
    let empty = root.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    let one = history(std::slice::from_ref(&empty), &[]);
    assert_eq!(one.status.code(), Some(2));
    assert!(
        text(&one).1.contains("at least two builds"),
        "{:?}",
        text(&one)
    );
    let none = history(&[empty.clone(), empty.clone()], &[]);
    assert_eq!(none.status.code(), Some(2));
    assert!(
        text(&none).1.contains("holds no report.json"),
        "{:?}",
        text(&none)
    );
    let bad = history(&[empty.clone(), empty], &["--min-change", "5Mib"]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(text(&bad).1.contains("--min-change"), "{:?}", text(&bad));
}

fn run_against(baseline: &Path, out: &Path, profile: &str, seed: &str, extra: &[&str]) -> Output {
    let mut args = vec![
        "run",
        SCENARIO,
        "--quiet",
        "--seed",
        seed,
        "--profile",
        profile,
        "--out",
        out.to_str().unwrap(),
        "--baseline",
        baseline.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    leakloop(&args)
}

#[test]
fn baseline_fails_a_run_whose_growth_rose_though_its_expectations_hold() {
    let root = tempfile::tempdir().unwrap();
    let old = root.path().join("old");
    simulate_build(&old, 0, None, 3);
    // The leaky build passes on its own (checked by simulate_build) ...
    simulate_build(&root.path().join("alone"), 1, Some(1), 5);
    // ... and fails against the baseline.
    let new = root.path().join("new");
    let out = run_against(&old, &new, "leaky", "5", &[]);
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(1), "{stdout}\n{stderr}");
    assert!(
        stdout.contains("✗ baseline.native_heap.growth_per_turn: expected no significant rise over baseline b00"),
        "{stdout}"
    );
    let junit = std::fs::read_to_string(new.join("junit.xml")).unwrap();
    assert!(
        junit.contains("baseline.native_heap.growth_per_turn"),
        "{junit}"
    );
    let summary = std::fs::read_to_string(new.join("summary.md")).unwrap();
    assert!(
        summary.contains("`baseline.native_heap.growth_per_turn`"),
        "{summary}"
    );
    let report = leakloop::report::read_report(&new.join("report.json")).unwrap();
    assert_eq!(
        report.verdict.status,
        leakloop::analyze::VerdictStatus::Fail
    );
    // A rise under --baseline-min-change is no failure.
    let lenient = run_against(
        &old,
        &root.path().join("lenient"),
        "leaky",
        "5",
        &["--baseline-min-change", "64KiB"],
    );
    assert_eq!(lenient.status.code(), Some(0), "{:?}", text(&lenient));
}

#[test]
fn baseline_passes_a_run_that_differs_only_by_noise() {
    let root = tempfile::tempdir().unwrap();
    let old = root.path().join("old");
    simulate_build(&old, 0, None, 11);
    for seed in ["12", "13", "14"] {
        let out = run_against(&old, &root.path().join(seed), "steady", seed, &[]);
        let (stdout, stderr) = text(&out);
        assert_eq!(
            out.status.code(),
            Some(0),
            "seed {seed}: {stdout}\n{stderr}"
        );
        assert!(stdout.contains("all 6 expectations held"), "{stdout}");
    }
}

#[test]
fn baseline_of_another_scenario_is_refused_before_running() {
    let root = tempfile::tempdir().unwrap();
    let old = root.path().join("old");
    simulate_build(&old, 0, None, 3);
    let out = leakloop(&[
        "run",
        "fixtures/scenarios/flutter-gemma-cpu-flat.yaml",
        "--quiet",
        "--out",
        root.path().join("new").to_str().unwrap(),
        "--baseline",
        old.to_str().unwrap(),
    ]);
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(2), "{stdout}\n{stderr}");
    assert!(
        stderr.contains(
            "holds no report of scenario `flutter-gemma-cpu-flat`, only of `history-sim`"
        ),
        "{stderr}"
    );
    assert!(!root.path().join("new/report.json").exists(), "nothing ran");
}
