//! `leakloop bench`: the benchmarks run and print their tables (the figures themselves are
//! machine-dependent and asserted nowhere).

use crate::common::leakloop_command;
use crate::fixtures::fixture_path;

fn bench(args: &[&str]) -> (Option<i32>, String) {
    let output = leakloop_command().arg("bench").args(args).output().unwrap();
    (
        output.status.code(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
    )
}

#[test]
fn runner_bench_measures_in_process_and_worker_runs() {
    let (code, table) = bench(&["runner", "--turns", "5"]);
    assert_eq!(code, Some(0), "{table}");
    let rows: Vec<&str> = table.lines().filter(|l| l.starts_with("| ")).collect();
    assert!(
        rows.iter().any(|l| l.starts_with("| in-process | 5 |")),
        "{table}"
    );
    assert!(
        rows.iter().any(|l| l.starts_with("| worker | 5 |")),
        "{table}"
    );
    assert!(
        rows.iter().all(|l| !l.contains("| 0 |")),
        "every run took samples: {table}"
    );
}

#[test]
fn detection_bench_prints_every_cell_of_its_table() {
    let (code, table) = bench(&["detection", "--series", "3"]);
    assert_eq!(code, Some(0), "{table}");
    // 3 run lengths x (clean, plateau, spiky + 5 leak sizes + reload clean + 4 ratchet sizes +
    // slow warm-up + 3 each of quantized, t(3) noise, GC sawtooth and allocator step noise).
    let data_rows = table
        .lines()
        .filter(|l| l.starts_with("| 10 ") || l.starts_with("| 20 ") || l.starts_with("| 40 "))
        .count();
    assert_eq!(data_rows, 78, "{table}");
    assert!(table.contains("oracle (OLS t, 1%)"), "{table}");
}

#[test]
fn a_zero_turn_runner_bench_is_a_usage_error() {
    let (code, _) = bench(&["runner", "--turns", "0"]);
    assert_eq!(code, Some(2));
}

#[test]
fn scale_bench_runs_each_length_in_its_own_process_and_prints_sizes() {
    let (code, table) = bench(&["scale", "--max-turns", "1000"]);
    assert_eq!(code, Some(0), "{table}");
    let rows: Vec<&str> = table
        .lines()
        .filter(|l| l.starts_with("| 1000 |"))
        .collect();
    assert_eq!(rows.len(), 2, "without and with reloads: {table}");
    assert!(rows[0].starts_with("| 1000 | none | 1001 |"), "{table}");
    assert!(rows[1].contains("every 1999"), "{table}");
    assert!(
        rows.iter()
            .all(|r| r.contains("KiB") && !r.contains("| 0 B |")),
        "every report has a size: {table}"
    );
}

#[test]
fn overhead_bench_without_the_library_says_it_skipped() {
    let output = leakloop_command()
        .args(["bench", "overhead", "--lib", "/nonexistent/liblitert-lm.so"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains("SKIPPED: leakloop bench overhead"),
        "{stderr}"
    );
    assert!(stderr.contains("fetch-litert-lm.sh"), "{stderr}");
}

/// `leakloop bench overhead` runs the bare C loop and leakloop side by side and prints a ratio
/// (needs LiteRT-LM's library and the tiny model; `SKIPPED: ...` without them), with a row for
/// the worker under heaptrack where heaptrack is installed and a `SKIPPED:` line where it is not
/// (`LEAKLOOP_HEAPTRACK_DIR` naming an empty folder stands for a machine without it).
#[test]
fn overhead_bench_prints_leakloop_next_to_the_bare_loop() {
    let test = "overhead_bench_prints_leakloop_next_to_the_bare_loop";
    let library = match leakloop::engine::litert_lm::discover_library(None) {
        Ok(library) => library,
        Err(e) => {
            return leakloop::engine::skip_or_require(
                "LEAKLOOP_REQUIRE_ENGINE",
                &format!("{test}: {e}"),
            )
        }
    };
    let model = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../fixtures/models/tiny-qwen2-f32.litertlm");
    let bench = |heaptrack_dir: Option<&std::path::Path>| {
        let mut command = leakloop_command();
        command
            .args([
                "bench", "overhead", "--turns", "5", "--warmup", "1", "--rounds", "1", "--block",
                "2",
            ])
            .arg("--lib")
            .arg(&library.path)
            .arg("--model")
            .arg(&model);
        if let Some(dir) = heaptrack_dir {
            command.env("LEAKLOOP_HEAPTRACK_DIR", dir);
        }
        let output = command.output().unwrap();
        let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
        let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
        assert!(output.status.success(), "{stdout}\n{stderr}");
        for row in [
            "| bare C loop |",
            "| bare C loop (control) |",
            "| C loop + sample, 1 round trip |",
            "| C loop + sample, 5 round trips |",
            "| leakloop (worker) |",
            "| leakloop (in-process) |",
        ] {
            assert!(stdout.contains(row), "{row} in {stdout}\n{stderr}");
        }
        assert!(stdout.contains("x |"), "{stdout}");
        // On one CPU both loops give the engine one thread (a pool of several waits on itself).
        assert!(stdout.contains("on the CPU (1 thread)"), "{stdout}");
        // Where the time goes: every loop's steps, timed, with leakloop's rest outside them.
        let (_, breakdown) = stdout
            .split_once("Where a turn's time goes")
            .unwrap_or_else(|| panic!("no breakdown in {stdout}"));
        for (row, has_send) in [
            ("| bare C loop |", false),
            ("| C loop + sample, 1 round trip |", false),
            ("| C loop + sample, 5 round trips |", false),
            ("| leakloop (worker) |", true),
            ("| leakloop (in-process) |", true),
        ] {
            let line = breakdown
                .lines()
                .find(|l| l.starts_with(row))
                .unwrap_or_else(|| panic!("{row} in {breakdown}"));
            let cells: Vec<&str> = line.trim_matches('|').split('|').map(str::trim).collect();
            assert_eq!(cells.len(), 6, "{line}");
            let micros = |i: usize| cells[i].parse::<f64>().unwrap_or(f64::NAN);
            assert!(micros(1) > 0.0 && micros(3) > 0.0, "open, generate: {line}");
            assert_eq!(cells[2] == "-", !has_send, "{line}");
            assert!(micros(5).is_finite(), "rest: {line}");
            if row.starts_with("| C loop + sample") {
                // The sample is outside the steps: reading the allocator's statistics and at
                // least one pipe round trip to another process (two context switches, a read
                // of /proc) cannot take under a microsecond.
                assert!(micros(5) >= 1.0, "the floor's sample in its rest: {line}");
            }
        }
        (stdout, stderr)
    };
    let heaptrack_row = "| leakloop (worker + heaptrack) |";
    let skipped = "SKIPPED: leakloop (worker + heaptrack): heaptrack is not installed";
    if leakloop::attribution::heaptrack_or_skip(test) {
        let (stdout, stderr) = bench(None);
        assert!(stdout.contains(heaptrack_row), "{stdout}\n{stderr}");
        assert!(!stderr.contains("SKIPPED"), "{stderr}");
    }
    let empty = tempfile::tempdir().unwrap();
    let (stdout, stderr) = bench(Some(empty.path()));
    assert!(!stdout.contains(heaptrack_row), "{stdout}");
    assert!(stderr.contains(skipped), "{stderr}");
}

#[test]
fn sequential_detection_bench_prints_a_row_per_maximum_and_kind() {
    let (code, table) = bench(&["detection", "--sequential", "--series", "2"]);
    assert_eq!(code, Some(0), "{table}");
    assert!(table.contains("| max turns | series |"), "{table}");
    // 3 maxima x (clean, plateau, spiky + 5 leak sizes + reload clean + 4 ratchet sizes).
    let data_rows = table
        .lines()
        .filter(|l| l.starts_with("| 20 ") || l.starts_with("| 40 ") || l.starts_with("| 100 "))
        .count();
    assert_eq!(data_rows, 39, "{table}");
}

#[test]
fn stability_bench_runs_each_scenario_n_times_and_counts_false_fails() {
    let out = tempfile::tempdir().unwrap();
    let flat = fixture_path("stop-decided-flat");
    let leak = fixture_path("stop-decided-leak");
    let output = leakloop_command()
        .args([
            "bench",
            "stability",
            "--runs",
            "2",
            "--load",
            "1",
            "--expect",
            "pass",
        ])
        .arg(&flat)
        .arg(&leak)
        .arg("--out")
        .arg(out.path())
        .output()
        .unwrap();
    let table = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{table}\n{stderr}");
    assert!(table.starts_with("Busy threads: 1."), "{table}");
    // The clean scenario passed both runs; the leak, expected to pass here, failed both: two
    // false FAILs.
    assert!(
        table.contains("| stop-decided-flat | 2 | pass | pass 2 | 0 | 0 |"),
        "{table}"
    );
    assert!(
        table.contains("| stop-decided-leak | 2 | pass | fail 2 | 2 | 2 |"),
        "{table}"
    );
    assert!(
        table
            .lines()
            .any(|l| l.starts_with("| stop-decided-leak | native_heap | growth 2 |")),
        "{table}"
    );
    assert!(
        stderr.contains("stop-decided-leak: run 2/2: fail"),
        "{stderr}"
    );
    for folder in ["stop-decided-flat", "stop-decided-leak"] {
        for run in ["run-01", "run-02"] {
            let report = out.path().join(folder).join(run).join("report.json");
            assert!(report.is_file(), "{}", report.display());
        }
    }
}

#[test]
fn stability_bench_takes_the_expected_verdict_from_the_scenarios_header() {
    // stop-decided-leak.yaml says `# Expected: FAIL`: its failures are right, not false FAILs.
    let (code, table) = bench(&[
        "stability",
        "--runs",
        "1",
        fixture_path("stop-decided-leak").to_str().unwrap(),
    ]);
    assert_eq!(code, Some(0), "{table}");
    assert!(
        table.contains("| stop-decided-leak | 1 | fail | fail 1 | 0 | n/a |"),
        "{table}"
    );
}
