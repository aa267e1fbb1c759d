//! The exit-code table (docs/exit-codes.md), walked: every command through each code it can
//! produce, with standard output open, full (`> /dev/full`) and closed (`| head -0`).
//!
//! The table (docs/exit-codes.md, generated from `Exit`): 0 pass, 1 an expectation failed, 2 bad
//! input or usage, 3 the engine failed, 4 output could not be written before there was a
//! verdict, 130 and 143 a run interrupted by SIGINT or SIGTERM. Once a verdict is known it
//! decides the code; a closed pipe ends the output quietly. `compare`'s 0 and 1 need a real
//! LiteRT-LM library and are walked in `compare.rs`'s engine tests; `bisect` runs the simulated
//! builds of `bisect-sim-builds.yaml`, and `check --lib` a stub library.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

use leakloop::report::examples::{clean_run, crashed_run, leak_run};
use leakloop::report::{write_reports, SampleStream};
use leakloop::runner::RunObserver;
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use rstest::rstest;

use crate::check::{exports_without, stub_library};
use crate::common::leakloop_command;
use crate::interrupted::{interrupted_exit, start_hanging_run_with, wait_for};

/// Where the command's standard output goes.
#[derive(Debug, Clone, Copy)]
enum Stdout {
    /// A pipe the test reads.
    Open,
    /// `/dev/full`: every write fails with "no space left on device".
    Full,
    /// A pipe whose reading end is already closed: every write fails with a broken pipe.
    Closed,
}

/// Folders and files the cases name: `{tmp}/pass`, `{tmp}/fail`, `{tmp}/crashed` (report
/// folders), `{tmp}/unfinished` (a sample store only), `{tmp}/empty`, `{tmp}/fifo`, `{tmp}/dumpsys`
/// (the seed report's three dumpsys excerpts as a capture folder, turns 0 to 2) and
/// `{tmp}/dumpsys-bad` (a capture folder with a file named without a turn).
fn prepare(tmp: &Path) {
    let capture = tmp.join("dumpsys");
    std::fs::create_dir(&capture).unwrap();
    let bad = tmp.join("dumpsys-bad");
    std::fs::create_dir(&bad).unwrap();
    for (turn, seed) in ["idle", "after_turn1", "peak"].iter().enumerate() {
        let from = format!(
            "{}/../fixtures/dumpsys/seed_{seed}.txt",
            env!("CARGO_MANIFEST_DIR")
        );
        std::fs::copy(&from, capture.join(format!("turn-{turn}.txt"))).unwrap();
        std::fs::copy(&from, bad.join(format!("turn-{turn}.txt"))).unwrap();
    }
    std::fs::write(bad.join("notes.txt"), "not a turn").unwrap();
    for (name, (record, verdict)) in [
        ("pass", clean_run()),
        ("fail", leak_run()),
        ("crashed", crashed_run()),
    ] {
        write_reports(&tmp.join(name), &record, &verdict).unwrap();
    }
    let (record, _) = crashed_run();
    let mut stream = SampleStream::create(&tmp.join("unfinished")).unwrap();
    for sample in &record.samples {
        stream.on_sample(&sample);
    }
    stream.finish().unwrap();
    std::fs::create_dir(tmp.join("empty")).unwrap();
    let made = Command::new("mkfifo")
        .arg(tmp.join("fifo"))
        .status()
        .expect("mkfifo runs");
    assert!(made.success());
}

const HELLO: &str = "{\"call\":\"hello\",\"version\":2,\"engine\":{\"backend\":\"litert-lm\",\
    \"model\":null,\"device\":\"cpu\",\"max_tokens\":512,\"lib\":null,\"profile\":null,\"seed\":0}}\n";
const LEAK: &str = "fixtures/scenarios/flutter-gemma-opencl-leak.yaml";
const FLAT: &str = "fixtures/scenarios/flutter-gemma-cpu-flat.yaml";
const LITERT: &str = "fixtures/scenarios/litert-cpu-chat.yaml";
const BUILDS: &str = "fixtures/scenarios/bisect-sim-builds.yaml";

#[rstest]
// check: 0 every file valid, 2 any invalid; its verdict outlives stdout.
#[case::check_valid(&["check", FLAT], Stdout::Open, "", 0)]
#[case::check_valid_full_stdout(&["check", FLAT], Stdout::Full, "", 0)]
#[case::check_valid_closed_stdout(&["check", FLAT], Stdout::Closed, "", 0)]
#[case::check_invalid(&["check", "fixtures/bad/unknown-key.yaml"], Stdout::Open, "", 2)]
#[case::check_fifo(&["check", "{tmp}/fifo"], Stdout::Open, "", 2)]
#[case::check_refuses_what_run_would(&["check", "fixtures/bad/crash-without-generation.yaml"], Stdout::Open, "", 2)]
#[case::check_bad_flag(&["check", "--nope", FLAT], Stdout::Open, "", 2)]
#[case::check_lib_names_no_library(&["check", FLAT, "--lib", "{tmp}/empty"], Stdout::Open, "", 3)]
// run: the verdict's code, whatever happens to stdout afterwards.
#[case::run_pass(&["run", FLAT], Stdout::Open, "", 0)]
#[case::run_leak(&["run", LEAK], Stdout::Open, "", 1)]
#[case::run_leak_full_stdout(&["run", LEAK], Stdout::Full, "", 1)]
#[case::run_leak_closed_stdout(&["run", LEAK], Stdout::Closed, "", 1)]
#[case::run_leak_json_full_stdout(&["run", LEAK, "--format", "json"], Stdout::Full, "", 1)]
#[case::run_leak_stopped_when_decided(&["run", LEAK, "--stop", "decided"], Stdout::Open, "", 1)]
#[case::run_flat_stopped_when_decided_closed_stdout(&["run", "fixtures/scenarios/stop-decided-flat.yaml"], Stdout::Closed, "", 0)]
#[case::run_unknown_stop_mode(&["run", FLAT, "--stop", "sometimes"], Stdout::Open, "", 2)]
#[case::run_bad_scenario(&["run", "fixtures/bad/unknown-key.yaml"], Stdout::Open, "", 2)]
#[case::run_scenario_is_a_fifo(&["run", "{tmp}/fifo"], Stdout::Open, "", 2)]
#[case::run_unknown_backend(&["run", FLAT, "--backend", "vulkan"], Stdout::Open, "", 2)]
#[case::run_override_drops_a_fault(&["run", "fixtures/scenarios/fault-crash.yaml", "--turns", "2"], Stdout::Open, "", 2)]
#[case::run_override_adds_a_refused_fault(&["run", "fixtures/scenarios/fault-generate-error.yaml", "--backend", "opencl"], Stdout::Open, "", 2)]
#[case::run_unknown_profile(&["run", FLAT, "--profile", "cpu-flot"], Stdout::Open, "", 2)]
#[case::run_engine_crash(&["run", "fixtures/scenarios/fault-crash.yaml"], Stdout::Open, "", 3)]
#[case::run_engine_crash_full_stdout(&["run", "fixtures/scenarios/fault-crash.yaml"], Stdout::Full, "", 3)]
#[case::run_missing_library(&["run", LITERT, "--lib", "{tmp}/no-such-lib.so"], Stdout::Open, "", 3)]
#[case::run_out_folder_cannot_be_made(&["run", FLAT, "--turns", "3", "--out", "/dev/null/out"], Stdout::Open, "", 4)]
// A suite exits with its worst scenario's code.
#[case::run_inconclusive(&["run", "fixtures/scenarios/outcome-undecided.yaml"], Stdout::Open, "", 5)]
#[case::run_inconclusive_on_inconclusive_pass(&["run", "fixtures/scenarios/outcome-undecided.yaml", "--on-inconclusive", "pass"], Stdout::Open, "", 0)]
#[case::suite_inconclusive_and_pass(&["run", "fixtures/scenarios/outcome-undecided.yaml", FLAT, "-q"], Stdout::Open, "", 5)]
#[case::suite_inconclusive_on_inconclusive_pass(&["run", "fixtures/scenarios/outcome-undecided.yaml", FLAT, "-q", "--on-inconclusive", "pass"], Stdout::Open, "", 0)]
#[case::suite_inconclusive_and_leak(&["run", "fixtures/scenarios/outcome-undecided.yaml", LEAK, "-q"], Stdout::Open, "", 1)]
#[case::suite_pass(&["run", FLAT, "fixtures/scenarios/stop-decided-flat.yaml", "-q"], Stdout::Open, "", 0)]
#[case::suite_leak_full_stdout(&["run", FLAT, LEAK, "-q"], Stdout::Full, "", 1)]
#[case::suite_bad_scenario_and_leak(&["run", LEAK, "fixtures/bad/unknown-key.yaml", "-q"], Stdout::Open, "", 2)]
#[case::suite_leak_and_crash(&["run", LEAK, "fixtures/scenarios/fault-crash.yaml", "-q"], Stdout::Closed, "", 3)]
#[case::suite_out_folder_cannot_be_made(&["run", FLAT, LEAK, "--out", "/dev/null/out"], Stdout::Open, "", 4)]
#[case::suite_bad_partition(&["run", FLAT, "--partition", "0/2"], Stdout::Open, "", 2)]
#[case::merge_of_a_single_run(&["merge", "{tmp}/pass", "--out", "{tmp}/merged"], Stdout::Open, "", 2)]
// run's 130 and 143 (a signal in the middle of a run): `run_interrupted_exits_128_plus_the_signal`.
// analyze: 0 nothing grows, 1 something grows, 2 a bad trace.
#[case::analyze_clean(&["analyze", "fixtures/traces/short-noisy.csv"], Stdout::Open, "", 0)]
#[case::analyze_growth(&["analyze", "fixtures/traces/synthetic-four-classes.csv"], Stdout::Open, "", 1)]
#[case::analyze_growth_full_stdout(&["analyze", "fixtures/traces/synthetic-four-classes.csv"], Stdout::Full, "", 1)]
#[case::analyze_growth_closed_stdout(&["analyze", "fixtures/traces/synthetic-four-classes.csv"], Stdout::Closed, "", 1)]
#[case::analyze_dumpsys_capture(&["analyze", "{tmp}/dumpsys"], Stdout::Open, "", 1)]
#[case::analyze_dumpsys_bad_name(&["analyze", "{tmp}/dumpsys-bad"], Stdout::Open, "", 2)]
#[case::analyze_bad_trace(&["analyze", "fixtures/bad/trace-short-row.csv"], Stdout::Open, "", 2)]
#[case::analyze_device(&["analyze", "/dev/zero"], Stdout::Open, "", 2)]
#[case::analyze_fifo(&["analyze", "{tmp}/fifo"], Stdout::Open, "", 2)]
#[case::analyze_bad_tolerance(&["analyze", "fixtures/traces/short-noisy.csv", "--tolerance", "lots"], Stdout::Open, "", 2)]
// report: exits like the run did.
#[case::report_pass(&["report", "{tmp}/pass", "--no-write"], Stdout::Open, "", 0)]
#[case::report_fail(&["report", "{tmp}/fail", "--no-write"], Stdout::Open, "", 1)]
#[case::report_fail_full_stdout(&["report", "{tmp}/fail", "--no-write"], Stdout::Full, "", 1)]
#[case::report_fail_md_closed_stdout(&["report", "{tmp}/fail", "--format", "md"], Stdout::Closed, "", 1)]
#[case::report_engine_failed(&["report", "{tmp}/crashed", "--no-write"], Stdout::Open, "", 3)]
#[case::report_unfinished_run(&["report", "{tmp}/unfinished"], Stdout::Open, "", 3)]
#[case::report_empty_folder(&["report", "{tmp}/empty"], Stdout::Open, "", 2)]
#[case::report_bad_format(&["report", "{tmp}/pass", "--format", "html"], Stdout::Open, "", 2)]
#[case::run_bad_build_date(&["run", FLAT, "--build-date", "yesterday"], Stdout::Open, "", 2)]
#[case::run_baseline_without_report(&["run", FLAT, "--baseline", "{tmp}/empty"], Stdout::Open, "", 2)]
// history: 0 no regression (also with a full stdout: the verdict decides), 2 bad input, 4 an
// --out folder that cannot be made; 1 (a regression) needs a dozen builds: history.rs.
#[case::history_no_change(&["history", "{tmp}/pass", "{tmp}/pass"], Stdout::Open, "", 0)]
#[case::history_no_change_full_stdout(&["history", "{tmp}/pass", "{tmp}/pass"], Stdout::Full, "", 0)]
#[case::history_one_build(&["history", "{tmp}/pass"], Stdout::Open, "", 2)]
#[case::history_empty_build(&["history", "{tmp}/pass", "{tmp}/empty"], Stdout::Open, "", 2)]
#[case::history_out_cannot_be_made(&["history", "{tmp}/pass", "{tmp}/pass", "--out", "/dev/null/out"], Stdout::Open, "", 4)]
// compare: 2 bad input, 3 a missing engine library (as in `run --lib`).
#[case::compare_one_lib(&["compare", LITERT, "--lib", "{tmp}/a.so"], Stdout::Open, "", 2)]
#[case::compare_not_litert(&["compare", FLAT, "--lib", "{tmp}/a.so", "--lib", "{tmp}/b.so"], Stdout::Open, "", 2)]
#[case::compare_bad_scenario(&["compare", "fixtures/bad/unknown-key.yaml", "--lib", "{tmp}/a.so", "--lib", "{tmp}/b.so"], Stdout::Open, "", 2)]
#[case::compare_missing_library(&["compare", LITERT, "--lib", "{tmp}/a.so", "--lib", "{tmp}/b.so"], Stdout::Open, "", 3)]
// bench: no verdict, so a failed stdout is exit 4 (a closed pipe stays quiet).
#[case::bench_detection(&["bench", "detection", "--series", "1"], Stdout::Open, "", 0)]
#[case::bench_full_stdout(&["bench", "detection", "--series", "1"], Stdout::Full, "", 4)]
#[case::bench_closed_stdout(&["bench", "detection", "--series", "1"], Stdout::Closed, "", 0)]
#[case::bench_bad_flag(&["bench", "detection", "--series", "0"], Stdout::Open, "", 2)]
// bisect: no verdict (its table is the result), so a failed stdout is exit 4; 2 bad input, 3 no
// build measured (or a library path that is none, as `run --lib`), 4 an --out folder.
#[case::bisect_table(&["bisect", BUILDS, "--versions", "build-4..build-5", "--runs", "1", "--turns", "3"], Stdout::Open, "", 0)]
#[case::bisect_full_stdout(&["bisect", BUILDS, "--versions", "build-4..build-5", "--runs", "1", "--turns", "3"], Stdout::Full, "", 4)]
#[case::bisect_closed_stdout(&["bisect", BUILDS, "--versions", "build-4..build-5", "--runs", "1", "--turns", "3"], Stdout::Closed, "", 0)]
#[case::bisect_unknown_build(&["bisect", BUILDS, "--versions", "build-0..build-99"], Stdout::Open, "", 2)]
#[case::bisect_bad_min_change(&["bisect", BUILDS, "--versions", "build-4..build-5", "--min-change", "lots"], Stdout::Open, "", 2)]
#[case::bisect_bad_turns_override(&["bisect", BUILDS, "--versions", "build-4..build-5", "--turns", "0"], Stdout::Open, "", 2)]
#[case::bisect_not_sim_or_litert(&["bisect", "fixtures/scenarios/opencl-clean.yaml", "--versions", "a..b"], Stdout::Open, "", 2)]
#[case::bisect_bad_scenario(&["bisect", "fixtures/bad/unknown-key.yaml", "--versions", "a..b"], Stdout::Open, "", 2)]
#[case::bisect_missing_library(&["bisect", LITERT, "--versions", "{tmp}/a.so"], Stdout::Open, "", 3)]
#[case::bisect_out_folder_cannot_be_made(&["bisect", BUILDS, "--versions", "build-4..build-5", "--runs", "1", "--turns", "3", "--out", "/dev/null/out"], Stdout::Open, "", 4)]
// driver-check: 0 the driver conforms, 1 a protocol violation (both verdicts: a failed stdout is
// a warning), 2 bad usage, 3 the driver cannot be started.
#[case::driver_check_conforms(&["driver-check", "--", "sh", "fixtures/drivers/faulty.sh"], Stdout::Open, "", 0)]
#[case::driver_check_conforms_full_stdout(&["driver-check", "--", "sh", "fixtures/drivers/faulty.sh"], Stdout::Full, "", 0)]
#[case::driver_check_conforms_closed_stdout(&["driver-check", "--", "sh", "fixtures/drivers/faulty.sh"], Stdout::Closed, "", 0)]
#[case::driver_check_violation(&["driver-check", "--", "sh", "fixtures/drivers/faulty.sh", "wrong-reply"], Stdout::Open, "", 1)]
#[case::driver_check_violation_full_stdout(&["driver-check", "--", "sh", "fixtures/drivers/faulty.sh", "missing-field"], Stdout::Full, "", 1)]
#[case::driver_check_no_command(&["driver-check"], Stdout::Open, "", 2)]
#[case::driver_check_bad_timeout(&["driver-check", "--call-timeout", "soon", "--", "true"], Stdout::Open, "", 2)]
#[case::driver_check_cannot_start(&["driver-check", "--", "{tmp}/no-such-driver"], Stdout::Open, "", 3)]
// worker (started by the runner): 0 when the runner hangs up, 2 for a bad scenario or protocol,
// 3 when its engine cannot be built.
#[case::worker_runner_hangs_up(&["worker"], Stdout::Open, "", 0)]
#[case::worker_missing_scenario(&["worker", "--scenario", "{tmp}/nope.yaml"], Stdout::Open, "", 2)]
#[case::worker_bad_protocol(&["worker"], Stdout::Open, "hello?\n", 2)]
#[case::worker_engine_cannot_be_built(&["worker", "--scenario", LITERT], Stdout::Open, HELLO, 3)]
// no command: help is output, a typo is usage.
#[case::help(&["--help"], Stdout::Open, "", 0)]
#[case::help_full_stdout(&["--help"], Stdout::Full, "", 4)]
#[case::unknown_command(&["chekc"], Stdout::Open, "", 2)]
fn every_command_exits_as_documented(
    #[case] args: &[&str],
    #[case] stdout: Stdout,
    #[case] stdin: &str,
    #[case] expected: i32,
) {
    let tmp = tempfile::tempdir().unwrap();
    prepare(tmp.path());
    let tmp_text = tmp.path().to_str().expect("temporary paths are UTF-8");
    let args: Vec<String> = args.iter().map(|a| a.replace("{tmp}", tmp_text)).collect();
    let mut command = leakloop_command();
    command
        .args(&args)
        // The worker case whose engine cannot be built names a library that is not there.
        .env("LITERT_LM_LIB", tmp.path().join("no-such-lib.so"));
    assert_exits(command, stdout, stdin, expected);
}

/// Runs `command` from the workspace with `stdout` and `stdin`, and checks that it exits with
/// `expected` and says on stderr what happened to its output.
fn assert_exits(mut command: Command, stdout: Stdout, stdin: &str, expected: i32) {
    command
        .current_dir(Path::new(env!("CARGO_MANIFEST_DIR")).join(".."))
        .env("NO_COLOR", "1")
        .stdin(Stdio::piped())
        .stderr(Stdio::piped())
        .stdout(stdio(stdout));
    let shown = format!("{command:?}");
    let mut child = command.spawn().expect("leakloop starts");
    let mut input = child.stdin.take().unwrap();
    // A worker that stops reading early may close its end first.
    let _ = input.write_all(stdin.as_bytes());
    drop(input);
    let output = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(expected), "{shown}: {stderr}");
    stderr_tells(stdout, &stderr);
}

/// With a stub library (what a 0.13-era release exports, less cancel): `check --lib` 0 when the
/// library can run every step of the scenario, 2 when it lacks what a step needs; `bisect` over
/// it 2 for a scenario that cancels, 3 (no build measured) for one it passes but cannot load.
#[test]
fn a_stub_library_walks_check_and_bisect_through_their_codes() {
    let tmp = tempfile::tempdir().unwrap();
    let without_cancel = exports_without("litert_lm_conversation_cancel_process");
    let Some(lib) = stub_library(tmp.path(), &without_cancel) else {
        return;
    };
    let lib = lib.to_str().expect("temporary paths are UTF-8");
    let chat = "fixtures/scenarios/litert-cpu-chat.yaml";
    let reload = "fixtures/scenarios/litert-cpu-reload.yaml";
    let cases: [(&[&str], Stdout, i32); 6] = [
        (&["check", "--lib", lib, chat], Stdout::Open, 0),
        (&["check", "--lib", lib, chat], Stdout::Full, 0),
        (&["check", "--lib", lib, reload], Stdout::Open, 2),
        (&["check", "--lib", lib, reload], Stdout::Closed, 2),
        (
            &["bisect", reload, "--versions", lib, "--runs", "1"],
            Stdout::Open,
            2,
        ),
        (
            &["bisect", chat, "--versions", lib, "--runs", "1"],
            Stdout::Open,
            3,
        ),
    ];
    for (args, stdout, expected) in cases {
        let mut command = leakloop_command();
        command.args(args);
        assert_exits(command, stdout, "", expected);
    }
}

/// Regression (issue 10, item 4): a run stopped by SIGINT or SIGTERM exits 130 or 143 after
/// writing its partial report, whatever happens to its standard output.
#[rstest]
#[case::sigint(Signal::SIGINT, Stdout::Open)]
#[case::sigterm(Signal::SIGTERM, Stdout::Open)]
#[case::sigterm_full_stdout(Signal::SIGTERM, Stdout::Full)]
#[case::sigterm_closed_stdout(Signal::SIGTERM, Stdout::Closed)]
#[cfg(target_os = "linux")]
fn run_interrupted_exits_128_plus_the_signal(#[case] signal: Signal, #[case] stdout: Stdout) {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    let mut run = start_hanging_run_with(tmp.path(), &out, stdio(stdout));
    kill(Pid::from_raw(run.id() as i32), signal).unwrap();
    let (code, _, stderr) = wait_for(&mut run);
    assert_eq!(code, Some(interrupted_exit(signal)), "{stderr}");
    assert!(out.join("report.json").is_file(), "{stderr}");
    stderr_tells(stdout, &stderr);
}

/// Where a command's standard output goes, for [`Command::stdout`].
fn stdio(stdout: Stdout) -> Stdio {
    match stdout {
        Stdout::Open => Stdio::piped(),
        Stdout::Full => std::fs::File::create("/dev/full")
            .expect("/dev/full")
            .into(),
        Stdout::Closed => {
            let (reader, writer) = std::io::pipe().unwrap();
            drop(reader);
            writer.into()
        }
    }
}

/// No panic, a closed pipe is quiet, a failed write is reported.
fn stderr_tells(stdout: Stdout, stderr: &str) {
    assert!(!stderr.contains("panicked"), "{stderr}");
    match stdout {
        Stdout::Closed => assert!(
            !stderr.contains("standard output"),
            "a closed pipe is quiet: {stderr}"
        ),
        Stdout::Full => assert!(
            stderr.contains("could not write to standard output"),
            "a failed write is reported: {stderr}"
        ),
        Stdout::Open => {}
    }
}
