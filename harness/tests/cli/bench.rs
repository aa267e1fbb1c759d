//! `leakloop bench`: the benchmarks run and print their tables (the figures themselves are
//! machine-dependent and asserted nowhere).

use std::process::Command;

fn bench(args: &[&str]) -> (Option<i32>, String) {
    let output = Command::new(env!("CARGO_BIN_EXE_leakloop"))
        .arg("bench")
        .args(args)
        .output()
        .unwrap();
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
    // slow warm-up + 3 each of quantized, t(3) noise and GC sawtooth).
    let data_rows = table
        .lines()
        .filter(|l| l.starts_with("| 10 ") || l.starts_with("| 20 ") || l.starts_with("| 40 "))
        .count();
    assert_eq!(data_rows, 69, "{table}");
    assert!(table.contains("oracle (OLS t, 1%)"), "{table}");
}

#[test]
fn a_zero_turn_runner_bench_is_a_usage_error() {
    let (code, _) = bench(&["runner", "--turns", "0"]);
    assert_eq!(code, Some(2));
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
