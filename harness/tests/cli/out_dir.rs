//! The `--out` folder: a run that stops early leaves no earlier verdict behind, files respect the
//! umask and never follow a planted symlink, and a full disk while writing reports costs neither
//! the printed verdict nor its exit code (`leakloop run` and `leakloop report` alike).

use std::ffi::OsStr;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Output};

use rstest::rstest;

use crate::common::LEAKLOOP;
use crate::fixtures::{self, fixture_path};

const ARTIFACTS: [&str; 5] = [
    "report.json",
    "junit.xml",
    "plot.svg",
    "summary.md",
    "samples.parquet",
];

/// `leakloop ARGS`, run by `sh` after the shell commands in `setup` (e.g. `umask 027`).
fn leakloop_after(setup: &str, args: &[&OsStr]) -> Output {
    Command::new("sh")
        .arg("-c")
        .arg(format!("{setup}\nexec \"$0\" \"$@\""))
        .arg(LEAKLOOP)
        .args(args)
        .env("NO_COLOR", "1")
        .output()
        .expect("sh runs")
}

fn leakloop(args: &[&OsStr]) -> Output {
    leakloop_after("", args)
}

/// The arguments of `leakloop run SCENARIO --quiet --out OUT EXTRA...`.
fn run_args<'a>(scenario: &'a Path, out: &'a Path, extra: &[&'a str]) -> Vec<&'a OsStr> {
    let mut args: Vec<&OsStr> = vec![
        "run".as_ref(),
        scenario.as_os_str(),
        "--quiet".as_ref(),
        "--out".as_ref(),
        out.as_os_str(),
    ];
    args.extend(extra.iter().map(|s| OsStr::new(*s)));
    args
}

/// `leakloop report OUT` of a folder whose last run wrote no report: exits 3; returns stdout.
fn report_without_verdict(out: &Path) -> String {
    let report = leakloop(&["report".as_ref(), out.as_os_str()]);
    let stdout = text(&report.stdout);
    assert_eq!(
        report.status.code(),
        Some(3),
        "{stdout}{}",
        text(&report.stderr)
    );
    assert!(
        !stdout.contains("PASS") && !stdout.contains("FAIL"),
        "{stdout}"
    );
    stdout
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Regression: a run that failed before writing anything left the previous run's report.json,
/// and `leakloop report` printed its PASS with exit 0.
#[rstest]
#[case::engine_cannot_start(
    &["--backend", "litert-lm", "--model", "/nonexistent/m.litertlm", "--lib", "/nonexistent/l.so"],
    3
)]
#[case::override_refused(&["--turns", "0"], 2)]
fn a_run_that_stops_before_its_engine_runs_leaves_no_earlier_verdict(
    #[case] extra: &[&str],
    #[case] code: i32,
) {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let scenario = fixture_path("flutter-gemma-cpu-flat");
    let first = fixtures::run(&scenario, &out);
    assert_eq!(first.status.code(), Some(0), "{}", text(&first.stderr));

    let failed = leakloop(&run_args(&scenario, &out, extra));
    assert_eq!(failed.status.code(), Some(code), "{}", text(&failed.stderr));
    for artifact in ARTIFACTS {
        assert!(
            !out.join(artifact).exists(),
            "{artifact} of the previous run"
        );
    }
    let stdout = report_without_verdict(&out);
    assert!(
        stdout.contains("the last run ended without writing it"),
        "{stdout}"
    );
}

/// Regression: samples.jsonl (now the sample store) was opened through a symlink planted in the
/// output folder (the victim was overwritten with samples); reports were created 0600 and samples 0644 whatever
/// the umask.
#[test]
fn every_file_respects_the_umask_and_no_planted_symlink_is_followed() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    std::fs::create_dir(&out).unwrap();
    let mut victims = Vec::new();
    for artifact in ARTIFACTS {
        let victim = dir.path().join(format!("victim-{artifact}"));
        std::fs::write(&victim, "precious").unwrap();
        std::os::unix::fs::symlink(&victim, out.join(artifact)).unwrap();
        victims.push(victim);
    }
    let scenario = fixture_path("flutter-gemma-cpu-flat");
    let output = leakloop_after("umask 027", &run_args(&scenario, &out, &[]));
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    for victim in &victims {
        assert_eq!(
            std::fs::read_to_string(victim).unwrap(),
            "precious",
            "{}",
            victim.display()
        );
    }
    for name in ARTIFACTS.iter().chain([&leakloop::report::LOCK_FILE]) {
        let meta = std::fs::symlink_metadata(out.join(name)).unwrap();
        assert!(meta.is_file(), "{name} is a regular file");
        assert_eq!(
            meta.permissions().mode() & 0o777,
            0o640,
            "{name}: mode 0666 less the umask 027"
        );
    }
}

/// `ulimit -f` (in 512-byte blocks) makes every write past that size fail with "File too large",
/// as a full disk would, also for root, where a read-only folder would not stop the write.
fn file_size_limit(blocks: u32) -> String {
    format!("ulimit -f {blocks} && trap '' XFSZ")
}

/// Regression: a full disk while writing reports hid the verdict table and exited 2 instead of 1.
#[test]
fn a_full_disk_while_writing_reports_keeps_the_verdict_and_its_exit_code() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    // samples.parquet (under 1 KB) and junit.xml (3 KB) fit under 5 KiB; report.json (about
    // 7 KB, its samples in the store) does not.
    let scenario = fixture_path("flutter-gemma-opencl-leak");
    let output = leakloop_after(&file_size_limit(10), &run_args(&scenario, &out, &[]));
    let (stdout, stderr) = (text(&output.stdout), text(&output.stderr));
    assert_eq!(output.status.code(), Some(1), "{stdout}{stderr}");
    assert!(
        stdout.contains("FAIL: 3 of 9 expectations failed"),
        "{stdout}"
    );
    assert!(
        stderr.contains("warning: the verdict above stands, but its reports are incomplete"),
        "{stderr}"
    );
    assert!(stderr.contains("File too large"), "{stderr}");
    // What fits is still written: the CI job gets its test results.
    assert!(out.join("junit.xml").is_file());
    assert!(!out.join("report.json").exists());

    let stdout = report_without_verdict(&out);
    assert!(!stdout.contains("did not finish"), "{stdout}");
    assert!(
        stdout.contains("its reports could not be written"),
        "{stdout}"
    );
}

/// Regression: `leakloop report` rewrote summary.md and plot.svg before printing, so a folder it
/// could not write showed no verdict and exited 2.
#[test]
fn report_prints_first_and_a_failed_rewrite_is_a_warning() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let first = fixtures::run(&fixture_path("flutter-gemma-opencl-leak"), &out);
    assert_eq!(first.status.code(), Some(1), "{}", text(&first.stderr));

    // summary.md (about 1 KB) and plot.svg do not fit in 512 bytes.
    let output = leakloop_after(&file_size_limit(1), &["report".as_ref(), out.as_os_str()]);
    let (stdout, stderr) = (text(&output.stdout), text(&output.stderr));
    assert_eq!(output.status.code(), Some(1), "{stdout}{stderr}");
    assert!(
        stdout.contains("FAIL: 3 of 9 expectations failed"),
        "{stdout}"
    );
    assert!(
        stderr.contains("warning: the verdict above stands"),
        "{stderr}"
    );
    assert!(stderr.contains("summary.md"), "{stderr}");
}
