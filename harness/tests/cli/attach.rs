//! Attach mode with real processes: Python chat loops (fixtures/attach/chat_loop.py) that print
//! turn markers, judged from outside; and each way attaching can go wrong (markers that stop,
//! a process that exits, a marker flood, turn numbers out of order, a pid that is not there or
//! not ours, SIGINT) ending with its verdict, its exit code and every sample kept.

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use leakloop::analyze::VerdictStatus;
use leakloop::report::{read_report, ReportFile};
use leakloop::runner::RunOutcome;
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

use crate::common::{leakloop_command, poll, wait_until, LEAKLOOP};
use crate::fixtures::run;
use crate::interrupted::{interrupted_exit, wait_for, KillOnDrop};

/// `fixtures/attach/NAME`.
pub(crate) fn attach_fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../fixtures/attach")
        .join(name)
}

/// Whether `python3` runs here; a visible skip (or a failure under
/// `LEAKLOOP_REQUIRE_ENGINE=1`) when it does not.
pub(crate) fn python3_or_skip() -> bool {
    let found = Command::new("python3")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !found {
        leakloop::engine::skip_or_require(
            "LEAKLOOP_REQUIRE_ENGINE",
            "attach tests need python3 on PATH (install Python 3)",
        );
    }
    found
}

/// A scenario in `dir` attaching to chat_loop.py with `args` and its markers on stdout, after
/// `extra` YAML lines (sample, expect, ...).
fn chat_loop_scenario(
    dir: &Path,
    name: &str,
    args: &str,
    engine_extra: &str,
    extra: &str,
) -> PathBuf {
    let script = attach_fixture("chat_loop.py");
    let path = dir.join(format!("{name}.yaml"));
    std::fs::write(
        &path,
        format!(
            "name: {name}\nengine:\n  backend: attach\n  command: [python3, {script}, {args}]\n{engine_extra}\
             turns: 6\nsample: {{settle: 10ms}}\nwatch: [rss]\n{extra}",
            script = script.display()
        ),
    )
    .unwrap();
    path
}

/// Runs `scenario` into `dir/out`; returns the exit code, stdout+stderr and report.json.
pub(crate) fn run_attached(scenario: &Path, dir: &Path) -> (Option<i32>, String, ReportFile) {
    let out = dir.join("out");
    let output = run(scenario, &out);
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    let report = read_report(&out.join("report.json"))
        .unwrap_or_else(|e| panic!("no report.json ({e}): {text}"));
    (output.status.code(), text, report)
}

fn engine_failure(report: &ReportFile) -> (u32, String, String) {
    match &report.record.outcome {
        RunOutcome::EngineFailed { turn, step, error } => {
            (*turn, step.clone(), error.message.clone())
        }
        other => panic!("expected an engine failure, got {other:?}"),
    }
}

fn turns_sampled(report: &ReportFile) -> Vec<u32> {
    report.record.samples.iter().map(|s| s.turn).collect()
}

fn wait_until_gone(pid: u32) -> bool {
    poll(Duration::from_secs(10), || {
        !Path::new(&format!("/proc/{pid}")).exists()
    })
}

fn read_pid(path: &Path) -> u32 {
    std::fs::read_to_string(path)
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

/// Runs chat_loop.py with `args` (and `engine_extra` lines under `engine:`) for 6 turns: the
/// exit code, the output and the report; `None` when python3 is missing.
fn chat_loop_run(
    name: &str,
    args: &str,
    engine_extra: &str,
) -> Option<(Option<i32>, String, ReportFile)> {
    if !python3_or_skip() {
        return None;
    }
    let dir = tempfile::tempdir().unwrap();
    let scenario = chat_loop_scenario(dir.path(), name, args, engine_extra, "");
    Some(run_attached(&scenario, dir.path()))
}

/// Runs chat_loop.py with `args` (and `engine_extra` lines under `engine:`), expecting exit 3:
/// the failure (turn, step, message) and the report; `None` when python3 is missing.
fn chat_loop_failure(
    name: &str,
    args: &str,
    engine_extra: &str,
) -> Option<(u32, String, String, ReportFile)> {
    let (code, text, report) = chat_loop_run(name, args, engine_extra)?;
    assert_eq!(code, Some(3), "{text}");
    let (turn, step, message) = engine_failure(&report);
    Some((turn, step, message, report))
}

#[test]
fn a_leaking_process_fails_and_is_stopped_at_the_end() {
    if !python3_or_skip() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let pidfile = dir.path().join("pid");
    let scenario = chat_loop_scenario(
        dir.path(),
        "leaky",
        &format!("--leak, 1MiB, --pidfile, {}", pidfile.display()),
        "",
        "warmup_turns: 2\nexpect:\n  rss: {tolerance: 4MiB, warmup_budget: 32MiB, max_growth_per_turn: 64KiB}\n",
    );
    let (code, text, report) = run_attached(&scenario, dir.path());
    assert_eq!(code, Some(1), "{text}");
    assert!(text.contains("rss.max_growth_per_turn"), "{text}");
    assert!(
        text.contains("ledger: not known: the attached process wrote no LEDGER marker lines"),
        "{text}"
    );
    assert_eq!(report.verdict.status, VerdictStatus::Fail);
    assert_eq!(turns_sampled(&report), [0, 1, 2, 3, 4, 5, 6, 7, 8]);
    let details = &report.record.backend.details;
    // The baseline's marker and the 8 turns after it.
    assert_eq!(details["turn_markers"], "9");
    assert!(
        details["stopped"].starts_with("stopped by SIGTERM"),
        "{details:?}"
    );
    assert!(
        wait_until_gone(read_pid(&pidfile)),
        "the process outlived the run"
    );
    // The report of an attached run follows the documented format.
    let errors = crate::common::report_schema_errors(&dir.path().join("out/report.json"));
    assert!(errors.is_empty(), "{errors:#?}");
}

#[test]
fn the_fixture_scenarios_fail_and_pass_as_stated() {
    if !python3_or_skip() {
        return;
    }
    for (name, code) in [("leaky.yaml", 1), ("flat.yaml", 0)] {
        let path = attach_fixture(name);
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(crate::fixtures::expected_exit(&text, &path), code);
        let dir = tempfile::tempdir().unwrap();
        let (got, out, report) = run_attached(&path, dir.path());
        assert_eq!(got, Some(code), "{name}: {out}");
        if name == "flat.yaml" {
            // Its LEDGER lines fill the ledger: 13 conversations created and deleted (the
            // baseline's turn and 12 more).
            let totals = &report.record.ledger.totals;
            assert_eq!(totals["attach/conversation"].created, 13, "{totals:?}");
            assert_eq!(totals["attach/conversation"].deleted, 13, "{totals:?}");
        }
    }
}

#[test]
fn markers_that_stop_coming_end_the_run_at_the_timeout_with_its_samples() {
    let Some((turn, step, message, report)) =
        // Long enough for python3 to start on a loaded machine, which the first marker must also
        // beat; the run still ends 5 s after the last marker.
        chat_loop_failure("silent", "--silent-after, 3", "  markers: {timeout: 5s}\n")
    else {
        return;
    };
    // The app's turn 1 is the baseline, its turns 2 and 3 leakloop's turns 1 and 2.
    assert_eq!((turn, step.as_str()), (3, "marker"));
    assert!(
        message.contains("no turn marker for 5s (markers.timeout) after turn 3's marker"),
        "{message}"
    );
    assert_eq!(turns_sampled(&report), [0, 1, 2]);
}

#[test]
fn a_process_that_exits_before_its_first_marker_says_how_and_what_it_printed() {
    if !python3_or_skip() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("dies.yaml");
    std::fs::write(
        &path,
        "name: dies\nengine:\n  backend: attach\n  command: [python3, -c, \"import sys; \
         print('model file not found', file=sys.stderr); sys.exit(4)\"]\nturns: 3\nwatch: [rss]\n",
    )
    .unwrap();
    let (code, text, report) = run_attached(&path, dir.path());
    assert_eq!(code, Some(3), "{text}");
    let (turn, _, message) = engine_failure(&report);
    assert_eq!(turn, 1);
    assert!(
        message.contains("the program exited (exit status 4) before its ready line or first turn marker; last output: the program's stderr: model file not found"),
        "{message}"
    );
    assert!(text.contains("model file not found"), "{text}");
}

#[test]
fn a_process_that_exits_mid_run_keeps_the_samples_before_it() {
    let Some((_, _, message, report)) =
        chat_loop_failure("exits", "--exit-after, 3, --exit-code, 0", "")
    else {
        return;
    };
    assert!(message.contains("exited (exit status 0)"), "{message}");
    assert!(message.contains("exiting after turn 3"), "{message}");
    let sampled = turns_sampled(&report);
    // The app's turn 1 is the baseline; its turn 3's marker and the exit come together: that
    // sample may find the process gone.
    assert!(
        sampled.starts_with(&[0, 1]) && sampled.len() <= 3,
        "{sampled:?}"
    );
}

#[rstest::rstest]
// Line 1 is the program's greeting, lines 2-4 the markers of turns 1-3.
#[case::repeated("--repeat-at, 3", "turn 3 was marked closed twice (lines 4 and 5)")]
#[case::falling(
    "--back-at, 3",
    "turn 1 was marked closed after turn 3 (lines 4 and 5)"
)]
fn turn_numbers_out_of_order_end_the_run(#[case] args: &str, #[case] said: &str) {
    let Some((_, step, message, report)) =
        chat_loop_failure("order", &format!("{args}, --turn-ms, '150'"), "")
    else {
        return;
    };
    assert_eq!(step, "marker");
    assert!(message.contains(said), "{message}");
    // The baseline at the app's turn 1, leakloop's turn 1 at its turn 2; the repeated marker
    // may come before turn 3's sample.
    let sampled = turns_sampled(&report);
    assert!(sampled.starts_with(&[0, 1]), "{sampled:?}");
}

/// Markers faster than sampling, floods of other lines and lines of a MiB: the run completes,
/// each sample stands for the latest closed turn, and the report counts what had no sample.
#[test]
fn a_marker_flood_is_sampled_at_the_latest_turn_and_counted() {
    if !python3_or_skip() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("flood.yaml");
    std::fs::write(
        &path,
        format!(
            "name: flood\nengine:\n  backend: attach\n  command: [python3, {}, --turn-ms, '1', --flood, '200', --long-line]\n\
             turns: 40\nsample: {{settle: 100ms}}\nwatch: [rss]\n",
            attach_fixture("chat_loop.py").display()
        ),
    )
    .unwrap();
    let (code, text, report) = run_attached(&path, dir.path());
    assert_eq!(code, Some(0), "{text}");
    let sampled = turns_sampled(&report);
    assert!(sampled.windows(2).all(|w| w[0] < w[1]), "{sampled:?}");
    assert!(
        sampled.len() < 41,
        "every turn had its own sample: {sampled:?}"
    );
    assert!(*sampled.last().unwrap() >= 40, "{sampled:?}");
    let details = &report.record.backend.details;
    let without: u64 = details["turns_without_sample"].parse().unwrap();
    assert!(without > 0, "{details:?}");
    assert!(
        details["lines_too_long"].parse::<u64>().unwrap() > 0,
        "{details:?}"
    );
}

#[test]
fn a_pid_that_does_not_exist_is_an_engine_failure() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("nopid.yaml");
    let log = dir.path().join("app.log");
    std::fs::write(
        &path,
        format!(
            "name: nopid\nengine:\n  backend: attach\n  pid: 2147483647\n  markers: {{file: {}}}\nturns: 3\nwatch: [rss]\n",
            log.display()
        ),
    )
    .unwrap();
    let output = run(&path, &dir.path().join("out"));
    let stderr = String::from_utf8_lossy(&output.stderr);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_eq!(output.status.code(), Some(3), "{stdout}{stderr}");
    assert!(
        format!("{stdout}{stderr}")
            .contains("there is no process with pid 2147483647 to attach to"),
        "{stdout}{stderr}"
    );
}

/// A process of another user: run as root, the test drops leakloop to `nobody` (setpriv) and
/// attaches it to a root process; run as a user, it attaches to pid 1.
#[test]
fn a_pid_that_is_not_ours_to_read_is_an_engine_failure() {
    use std::os::unix::fs::PermissionsExt;
    // SAFETY: geteuid cannot fail and touches no memory.
    let root = unsafe { libc::geteuid() } == 0;
    let target = root.then(|| KillOnDrop(Command::new("sleep").arg("60").spawn().unwrap()));
    let pid = target.as_ref().map_or(1, |t| t.id());
    // A folder `nobody` can read, holding the scenario and (as root) a copy of leakloop: the
    // build's own folder may be private to root.
    let shared = tempfile::Builder::new().tempdir_in("/tmp").unwrap();
    std::fs::set_permissions(shared.path(), PermissionsExt::from_mode(0o755)).unwrap();
    let scenario = shared.path().join("notours.yaml");
    std::fs::write(
        &scenario,
        format!(
            "name: notours\nengine:\n  backend: attach\n  pid: {pid}\n  markers: {{file: /dev/null}}\nturns: 3\nwatch: [pss]\n"
        ),
    )
    .unwrap();
    std::fs::set_permissions(&scenario, PermissionsExt::from_mode(0o644)).unwrap();
    let mut command = if root {
        let copy = shared.path().join("leakloop");
        std::fs::copy(LEAKLOOP, &copy).unwrap();
        std::fs::set_permissions(&copy, PermissionsExt::from_mode(0o755)).unwrap();
        let mut c = Command::new("setpriv");
        c.args(["--reuid=65534", "--regid=65534", "--clear-groups"])
            .arg(copy);
        c
    } else {
        leakloop_command()
    };
    let output = match command
        .arg("run")
        .arg(&scenario)
        .arg("--quiet")
        .env("NO_COLOR", "1")
        .output()
    {
        Ok(output) => output,
        Err(e) => {
            return leakloop::engine::skip_or_require(
                "LEAKLOOP_REQUIRE_ENGINE",
                &format!(
                    "cannot run leakloop as another user ({e}; needs setpriv from util-linux)"
                ),
            )
        }
    };
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert_eq!(output.status.code(), Some(3), "{text}");
    assert!(
        text.contains(&format!("process {pid} is not ours to read")),
        "{text}"
    );
    drop(target);
}

/// An already running process, its markers in a file it appends to, read through a marker
/// command (`tail -F`, standing in for `adb logcat -s TAG:I`); leakloop leaves it running.
#[test]
fn an_attached_pid_is_judged_from_a_marker_command_and_left_running() {
    if !python3_or_skip() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("app.log");
    let app = KillOnDrop(
        Command::new("python3")
            .arg(attach_fixture("chat_loop.py"))
            .args(["--ledger", "--turn-ms", "100", "--to"])
            .arg(&log)
            .stdout(Stdio::null())
            .spawn()
            .unwrap(),
    );
    // Attach once it is in its loop, as one attaches to a running app.
    wait_until("the app to mark turn 2", Duration::from_secs(30), || {
        std::fs::read_to_string(&log).is_ok_and(|t| t.contains("TURN 2 CLOSED"))
    });
    let path = dir.path().join("bypid.yaml");
    std::fs::write(
        &path,
        format!(
            "name: bypid\nengine:\n  backend: attach\n  pid: {}\n  markers:\n    command: [tail, -n, '0', -F, {}]\n    timeout: 10s\n\
             turns: 5\nsample: {{settle: 10ms}}\nwatch: [rss]\nexpect:\n  balanced: true\n",
            app.id(),
            log.display()
        ),
    )
    .unwrap();
    let (code, text, report) = run_attached(&path, dir.path());
    assert_eq!(code, Some(0), "{text}");
    // The first marker after attaching is turn 1, whatever the app numbers it.
    let sampled = turns_sampled(&report);
    assert!(sampled.starts_with(&[0, 1]), "{sampled:?}");
    assert!(*sampled.last().unwrap() >= 5, "{sampled:?}");
    assert!(report.record.ledger.totals["attach/conversation"].created > 0);
    assert!(
        Path::new(&format!("/proc/{}", app.id())).exists(),
        "the attached process was stopped"
    );
}

/// Markers appended to a file by a process leakloop starts.
#[test]
fn markers_are_read_from_a_file_the_started_process_appends_to() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("markers.log");
    let Some((code, text, report)) = chat_loop_run(
        "tofile",
        &format!("--to, {}", log.display()),
        &format!("  markers: {{file: {}, timeout: 10s}}\n", log.display()),
    ) else {
        return;
    };
    assert_eq!(code, Some(0), "{text}");
    assert_eq!(turns_sampled(&report), [0, 1, 2, 3, 4, 5, 6]);
}

#[test]
fn a_marker_command_that_ends_is_an_engine_failure() {
    let Some((_, _, message, _)) = chat_loop_failure(
        "nologcat",
        "--turn-ms, '50'",
        "  markers: {command: [sh, -c, 'echo \"error: no devices/emulators found\" >&2; exit 1']}\n",
    ) else {
        return;
    };
    assert!(
        message.contains("the marker command ended (exit status 1)")
            && message.contains("no devices/emulators found"),
        "{message}"
    );
}

/// Ctrl-C (SIGINT to the terminal's foreground process group, here leakloop's own group) reaches
/// leakloop alone, since the program has a group of its own: the partial report is written, the
/// exit code is 130, and the program is stopped with leakloop.
#[test]
fn sigint_during_attach_writes_the_partial_report_and_stops_the_program() {
    if !python3_or_skip() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let pidfile = dir.path().join("pid");
    let scenario = chat_loop_scenario(
        dir.path(),
        "interrupted",
        &format!("--turn-ms, '50', --pidfile, {}", pidfile.display()),
        "",
        "",
    );
    std::fs::write(
        &scenario,
        std::fs::read_to_string(&scenario)
            .unwrap()
            .replace("turns: 6", "turns: 100000"),
    )
    .unwrap();
    let out = dir.path().join("out");
    let mut leakloop = KillOnDrop(
        leakloop_command()
            .arg("run")
            .arg(&scenario)
            .arg("--quiet")
            .arg("--out")
            .arg(&out)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .spawn()
            .unwrap(),
    );
    wait_until("4 streamed samples", Duration::from_secs(30), || {
        crate::common::streamed_samples(&out) >= 4
    });
    let program = read_pid(&pidfile);
    kill(Pid::from_raw(-(leakloop.id() as i32)), Signal::SIGINT).unwrap();
    let (code, stdout, stderr) = wait_for(&mut leakloop);
    assert_eq!(
        code,
        Some(interrupted_exit(Signal::SIGINT)),
        "{stdout}{stderr}"
    );
    let report = read_report(&out.join("report.json")).unwrap();
    assert_eq!(report.verdict.status, VerdictStatus::Interrupted);
    assert!(report.record.samples.len() >= 4);
    assert!(
        wait_until_gone(program),
        "the program outlived the interrupted run"
    );
}

/// The baseline is the loaded process, not its start: 48 MiB "loaded" before the first turn
/// (after 300 ms, as a model loads) are in the baseline sample, whether the app prints `READY`
/// once loaded or only marks its turns (then its first marker is the baseline's and counts as
/// no turn).
#[rstest::rstest]
#[case::at_the_first_marker("", "turn marker 1 ", 7)]
#[case::at_the_ready_line(", --ready", "ready line ", 6)]
fn the_baseline_is_the_loaded_process_not_its_start(
    #[case] ready: &str,
    #[case] at: &str,
    #[case] markers: u64,
) {
    let Some((code, text, report)) = chat_loop_run("loaded", &format!("--load, 48MiB{ready}"), "")
    else {
        return;
    };
    assert_eq!(code, Some(0), "{text}");
    assert_eq!(turns_sampled(&report), [0, 1, 2, 3, 4, 5, 6]);
    let baseline = &report.record.samples.get(0).unwrap();
    let rss = *baseline.metrics.get("rss").unwrap();
    assert!(
        rss >= 48 * 1024 * 1024,
        "the baseline missed what the process loaded: rss {rss}"
    );
    let details = &report.record.backend.details;
    assert!(details["baseline_at"].starts_with(at), "{details:?}");
    let seen: u64 = details["turn_markers"].parse().unwrap();
    assert!(seen >= markers, "{details:?}");
}

/// A process that prints `READY` and goes straight into its first turn closes it within the
/// settle time, before the baseline is sampled: that turn is then the baseline's (as a first
/// marker is without a ready line), and the runner's turn 1 is the marker after it, so the
/// first counted turn's 4 MiB are growth, not part of the baseline.
#[test]
fn a_turn_closed_before_the_baseline_after_ready_is_the_baselines() {
    if !python3_or_skip() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let scenario = chat_loop_scenario(
        dir.path(),
        "straight",
        "--ready, --first-turn-ms, '0', --turn-ms, '600', --leak, 4MiB",
        "",
        "max_turns: 3\n",
    );
    std::fs::write(
        &scenario,
        std::fs::read_to_string(&scenario)
            .unwrap()
            .replace("settle: 10ms", "settle: 200ms")
            .replace("turns: 6", "turns: 3"),
    )
    .unwrap();
    let (_, text, report) = run_attached(&scenario, dir.path());
    assert_eq!(turns_sampled(&report), [0, 1, 2, 3], "{text}");
    let details = &report.record.backend.details;
    assert!(
        details["baseline_at"].starts_with("turn marker 1 (line ")
            && details["baseline_at"].contains("after the ready line"),
        "{details:?}"
    );
    let rss = |i: usize| {
        *report
            .record
            .samples
            .get(i)
            .unwrap()
            .metrics
            .get("rss")
            .unwrap() as i64
    };
    assert!(
        rss(1) - rss(0) >= 3 * 1024 * 1024,
        "the first counted turn's leak landed in the baseline: {} then {}",
        rss(0),
        rss(1)
    );
}

/// `settle: 0`: each marker is sampled as soon as it is read, so an app that goes straight on
/// with its next turn (no pause after the marker) still has one sample per turn.
#[test]
fn with_no_settle_time_each_marker_is_sampled_at_once() {
    if !python3_or_skip() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let scenario = chat_loop_scenario(dir.path(), "nosettle", "--turn-ms, '200'", "", "");
    std::fs::write(
        &scenario,
        std::fs::read_to_string(&scenario)
            .unwrap()
            .replace("settle: 10ms", "settle: 0ms"),
    )
    .unwrap();
    let (code, text, report) = run_attached(&scenario, dir.path());
    assert_eq!(code, Some(0), "{text}");
    assert_eq!(turns_sampled(&report), [0, 1, 2, 3, 4, 5, 6]);
    let details = &report.record.backend.details;
    assert_eq!(details["turns_without_sample"], "0", "{details:?}");
}

/// `run --pid N` attaches to a running process instead of the program the scenario starts, and
/// `--warmup-turns` applies to an attached process as to any other; a scenario whose markers
/// come from the program's stdout cannot take `--pid` (exit 2, blamed on the flag).
#[test]
fn run_pid_attaches_to_a_running_process_in_place_of_the_scenarios_program() {
    if !python3_or_skip() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("app.log");
    std::fs::write(&log, "").unwrap();
    let app = KillOnDrop(
        Command::new("python3")
            .arg(attach_fixture("chat_loop.py"))
            .args(["--ledger", "--turn-ms", "100", "--to"])
            .arg(&log)
            .stdout(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let pid = app.id().to_string();
    // The scenario would start a program that fails at once: `--pid` must replace it.
    let path = dir.path().join("started.yaml");
    std::fs::write(
        &path,
        format!(
            "name: started\nengine:\n  backend: attach\n  command: [sh, -c, 'exit 7']\n  markers:\n    \
             command: [tail, -n, '0', -F, {}]\n    timeout: 10s\n\
             warmup_turns: 3\nturns: 4\nsample: {{settle: 10ms}}\nwatch: [rss]\nexpect:\n  balanced: true\n",
            log.display()
        ),
    )
    .unwrap();
    let out = dir.path().join("out");
    let output = leakloop_command()
        .args([
            "run",
            "--quiet",
            "--pid",
            &pid,
            "--warmup-turns",
            "1",
            "--out",
        ])
        .arg(&out)
        .arg(&path)
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert_eq!(output.status.code(), Some(0), "{text}");
    let report = read_report(&out.join("report.json")).unwrap();
    assert_eq!(
        report.record.backend.details["process"],
        format!("pid {pid}")
    );
    assert_eq!(report.record.scenario.warmup_turns, 1);
    let sampled = turns_sampled(&report);
    assert_eq!(sampled.first(), Some(&0), "{sampled:?}");
    assert!(*sampled.last().unwrap() >= 5, "{sampled:?}");
    assert!(
        Path::new(&format!("/proc/{pid}")).exists(),
        "the attached process was stopped"
    );

    let stdout_markers = chat_loop_scenario(dir.path(), "stdout", "--turn-ms, '100'", "", "");
    let output = leakloop_command()
        .args(["run", "--quiet", "--pid", &pid])
        .arg(&stdout_markers)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{text}");
    assert!(text.contains(&format!("--pid {pid}")), "{text}");
    assert!(text.contains("markers: {file: ...}"), "{text}");
}

/// Whether LiteRT-LM's Python package imports here; a visible skip (or a failure under
/// `LEAKLOOP_REQUIRE_ENGINE=1`) when it does not.
pub(crate) fn litert_lm_python_or_skip() -> bool {
    if !python3_or_skip() {
        return false;
    }
    let output = Command::new("python3")
        .args(["-c", "import litert_lm"])
        .output()
        .expect("python3 runs");
    if !output.status.success() {
        leakloop::engine::skip_or_require(
            "LEAKLOOP_REQUIRE_ENGINE",
            &format!(
                "the attach test over LiteRT-LM's Python package needs `litert_lm` \
                 (python3 -m pip install litert-lm-api==0.18.1): {}",
                String::from_utf8_lossy(&output.stderr)
                    .lines()
                    .last()
                    .unwrap_or_default()
            ),
        );
    }
    output.status.success()
}

/// A real chat app over `litert_lm` on the tiny model, attached: closing every conversation
/// stays flat and balanced; keeping them alive grows (about 0.5 MiB per turn measured) and the
/// LEDGER lines show it.
#[test]
fn a_litert_lm_python_chat_app_is_judged_by_its_markers() {
    if !litert_lm_python_or_skip() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (code, text, report) = run_attached(&attach_fixture("litert-python-chat.yaml"), dir.path());
    assert_eq!(code, Some(0), "{text}");
    let totals = &report.record.ledger.totals;
    assert_eq!(
        totals["attach/conversation"].created,
        totals["attach/conversation"].deleted
    );

    let dir = tempfile::tempdir().unwrap();
    let (code, text, report) = run_attached(
        &attach_fixture("litert-python-never-closed.yaml"),
        dir.path(),
    );
    assert_eq!(code, Some(1), "{text}");
    assert!(text.contains("rss.max_growth_per_turn"), "{text}");
    let totals = &report.record.ledger.totals;
    assert_eq!(totals["attach/conversation"].deleted, 0, "{totals:?}");
    assert!(totals["attach/conversation"].created >= 20, "{totals:?}");
}
