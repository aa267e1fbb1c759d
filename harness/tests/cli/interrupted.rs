//! A `leakloop run` killed in the middle (SIGKILL: no destructor, no final report) keeps every
//! sample it took, and its hung worker process does not outlive it; one stopped by SIGINT or
//! SIGTERM writes a partial report marked interrupted; a run in progress owns its `--out`
//! folder, and a killed run never leaves an earlier run's verdict behind.

use std::io::Read;
use std::path::Path;
use std::process::{Child, Output, Stdio};
use std::time::Duration;

use crate::common::{leakloop_command, poll, wait_until};
use crate::fixtures::{self, fixture_path};
use leakloop::analyze::VerdictStatus;
use leakloop::report::{read_report, read_samples, LOCK_FILE};
use leakloop::runner::RunOutcome;
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

/// A simulator scenario in a worker process whose engine really hangs in turn 4, with a call
/// timeout far beyond the test: the run can only end by being killed.
const HANGING_SCENARIO: &str = r#"
name: killed-mid-run
engine:
  backend: sim
  profile: android-opencl-leak
  isolate: true
  call_timeout: 10m
turns: 8
turn:
  - open: {}
  - send: {prompt: "hello"}
  - generate: {max_output_tokens: 8}
  - close: {}
faults:
  - {at_turn: 4, kind: hang}
expect:
  native_heap: {max_growth_per_turn: 1MiB}
"#;

/// Samples in a sample store so far.
fn lines_in(path: &Path) -> usize {
    leakloop::report::read_samples(path).map_or(0, |s| s.samples.len())
}

/// Processes whose command line names `needle`.
fn processes_naming(needle: &str) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(Result::ok)
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .map(|c| String::from_utf8_lossy(&c).contains(needle))
                .unwrap_or(false)
        })
        .collect()
}

/// A child process that is killed when the test ends, also when it fails: a hung run must not
/// outlive its test.
pub(crate) struct KillOnDrop(pub(crate) Child);

impl std::ops::Deref for KillOnDrop {
    type Target = Child;
    fn deref(&self) -> &Child {
        &self.0
    }
}

impl std::ops::DerefMut for KillOnDrop {
    fn deref_mut(&mut self) -> &mut Child {
        &mut self.0
    }
}

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `leakloop run HANGING_SCENARIO --out OUT`, returned once it has streamed the samples of turns
/// 0-3 and hangs in turn 4; stdout and stderr are piped.
fn start_hanging_run(dir: &Path, out: &Path) -> KillOnDrop {
    start_hanging_run_with(dir, out, Stdio::piped())
}

/// [`start_hanging_run`] with its standard output going to `stdout`.
pub(crate) fn start_hanging_run_with(dir: &Path, out: &Path, stdout: Stdio) -> KillOnDrop {
    let scenario = dir.join("killed-mid-run.yaml");
    std::fs::write(&scenario, HANGING_SCENARIO).unwrap();
    let mut run = KillOnDrop(
        leakloop_command()
            .arg("run")
            .arg(&scenario)
            .arg("--quiet")
            .arg("--out")
            .arg(out)
            .stdout(stdout)
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    // Baseline plus the post-close samples of turns 1-3, then the worker hangs in turn 4: exactly
    // 4 samples. The folder's marker names this run as soon as it claims the folder, before an
    // older run's sample store (more samples) is removed.
    let samples = out.join("samples.parquet");
    let marker = format!("running pid {}\n", run.id());
    let streamed = || {
        std::fs::read_to_string(out.join(LOCK_FILE)).ok().as_deref() == Some(&marker)
            && lines_in(&samples) == 4
    };
    let ready = poll(Duration::from_secs(60), || {
        streamed() || run.try_wait().unwrap().is_some()
    }) && streamed();
    if !ready {
        let _ = run.kill();
        let mut stderr = String::new();
        let _ = run.stderr.take().map(|mut e| e.read_to_string(&mut stderr));
        panic!("the run never streamed 4 samples: {stderr}");
    }
    run
}

/// Waits for `child` to exit (at most 30 s) and returns its exit code, stdout and stderr.
pub(crate) fn wait_for(child: &mut Child) -> (Option<i32>, String, String) {
    let mut status = None;
    wait_until("the process to exit", Duration::from_secs(30), || {
        status = child.try_wait().unwrap();
        status.is_some()
    });
    let status = status.expect("the process exited");
    let read = |pipe: Option<&mut dyn Read>| {
        let mut text = String::new();
        if let Some(pipe) = pipe {
            pipe.read_to_string(&mut text).unwrap();
        }
        text
    };
    let stdout = read(child.stdout.as_mut().map(|p| p as &mut dyn Read));
    let stderr = read(child.stderr.as_mut().map(|p| p as &mut dyn Read));
    (status.code(), stdout, stderr)
}

fn report(out: &Path) -> Output {
    leakloop_command().arg("report").arg(out).output().unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
#[cfg(target_os = "linux")]
fn a_killed_run_keeps_every_sample_it_took_and_leaves_no_worker_behind() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let mut run = start_hanging_run(dir.path(), &out);
    let samples = out.join("samples.parquet");
    // The worker is the leakloop process started with `worker` whose scenario is ours.
    let worker_pids: Vec<u32> = processes_naming("worker")
        .into_iter()
        .filter(|pid| *pid != run.id())
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/status"))
                .map(|s| s.contains(&format!("PPid:\t{}", run.id())))
                .unwrap_or(false)
        })
        .collect();
    assert_eq!(worker_pids.len(), 1, "one worker process: {worker_pids:?}");
    run.kill().unwrap();
    run.wait().unwrap();

    let streamed = read_samples(&samples).unwrap();
    let turns: Vec<u32> = streamed.samples.iter().map(|s| s.turn).collect();
    assert_eq!(turns, [0, 1, 2, 3]);
    assert!(
        streamed.samples.get(3).unwrap().metrics["native_heap"]
            > streamed.samples.get(0).unwrap().metrics["native_heap"]
    );
    assert!(
        !out.join("report.json").exists(),
        "no report of an unfinished run"
    );

    let report = report(&out);
    assert_eq!(report.status.code(), Some(3));
    let text = String::from_utf8_lossy(&report.stdout);
    assert!(
        text.contains("4 samples") || text.contains("4 sample"),
        "{text}"
    );

    wait_until(
        "the hung worker to end with its killed runner",
        Duration::from_secs(10),
        || {
            !worker_pids
                .iter()
                .any(|pid| Path::new(&format!("/proc/{pid}")).exists() && !is_zombie(*pid))
        },
    );
}

fn is_zombie(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|s| {
            s.rsplit(')')
                .next()
                .is_some_and(|rest| rest.trim_start().starts_with('Z'))
        })
        .unwrap_or(true)
}

/// The shell's code for a process ended by `signal`: 128 + its number.
pub(crate) fn interrupted_exit(signal: Signal) -> i32 {
    128 + signal as i32
}

/// Regression: SIGINT and SIGTERM (a CI job's timeout) wrote no report.json or junit.xml.
#[rstest::rstest]
#[case::sigterm(Signal::SIGTERM)]
#[case::sigint(Signal::SIGINT)]
#[cfg(target_os = "linux")]
fn an_interrupted_run_writes_a_partial_report_marked_interrupted(#[case] signal: Signal) {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let mut run = start_hanging_run(dir.path(), &out);
    kill(Pid::from_raw(run.id() as i32), signal).unwrap();
    let (code, stdout, stderr) = wait_for(&mut run);
    assert_eq!(code, Some(interrupted_exit(signal)), "{stdout}{stderr}");
    let name = signal.as_str();
    assert!(
        stdout.contains(&format!("INTERRUPTED by {name} in turn 4")),
        "{stdout}"
    );

    let report_file = read_report(&out.join("report.json")).unwrap();
    assert_eq!(report_file.verdict.status, VerdictStatus::Interrupted);
    assert_eq!(
        report_file.record.outcome,
        RunOutcome::Interrupted {
            signal: name.to_owned(),
            turn: 4
        }
    );
    let turns: Vec<u32> = report_file.record.samples.iter().map(|s| s.turn).collect();
    assert_eq!(turns, [0, 1, 2, 3]);
    assert_eq!(
        read_samples(&out.join("samples.parquet")).unwrap().samples,
        report_file.record.samples,
        "the sample store is kept"
    );
    let junit = std::fs::read_to_string(out.join("junit.xml")).unwrap();
    assert!(
        junit.contains(&format!("interrupted by {name} in turn 4")),
        "{junit}"
    );

    let again = report(&out);
    assert_eq!(again.status.code(), Some(3), "{}", text(&again.stderr));
    assert!(
        text(&again.stdout).contains(&format!("INTERRUPTED by {name} in turn 4")),
        "{}",
        text(&again.stdout)
    );
}

/// Regression: concurrent runs into one `--out` interleaved samples.jsonl.
#[test]
#[cfg(target_os = "linux")]
fn a_second_run_into_a_busy_folder_is_refused_and_the_first_keeps_its_samples() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let mut first = start_hanging_run(dir.path(), &out);
    // The store and its journal, as read.
    let stored = || read_samples(&out.join("samples.parquet")).unwrap().samples;
    let before = stored();
    assert_eq!(before.len(), 4);

    // A scenario that would finish on its own: refused, not run alongside.
    let second = fixtures::run(&fixture_path("flutter-gemma-cpu-flat"), &out);
    let err = text(&second.stderr);
    assert_eq!(second.status.code(), Some(2), "{err}");
    assert!(
        err.contains("is in use by another leakloop process"),
        "{err}"
    );
    assert_eq!(stored(), before);

    let busy = report(&out);
    assert_eq!(busy.status.code(), Some(3), "{}", text(&busy.stderr));
    assert!(
        text(&busy.stdout).contains("a run is still writing"),
        "{}",
        text(&busy.stdout)
    );
    first.kill().unwrap();
    first.wait().unwrap();
}

/// Regression: a run killed in a folder that held an older run left the older PASS next to the
/// new samples, and `leakloop report` printed it with exit 0.
#[test]
#[cfg(target_os = "linux")]
fn a_killed_run_never_leaves_the_previous_runs_verdict() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let first = fixtures::run(&fixture_path("flutter-gemma-cpu-flat"), &out);
    assert_eq!(first.status.code(), Some(0), "{}", text(&first.stderr));
    assert_eq!(report(&out).status.code(), Some(0));

    let mut run = start_hanging_run(dir.path(), &out);
    for stale in ["report.json", "junit.xml", "summary.md", "plot.svg"] {
        assert!(!out.join(stale).exists(), "{stale} of the previous run");
    }
    run.kill().unwrap();
    run.wait().unwrap();

    let after = report(&out);
    let stdout = text(&after.stdout);
    assert_eq!(after.status.code(), Some(3), "{stdout}");
    assert!(stdout.contains("the last run did not finish"), "{stdout}");
    assert!(!stdout.contains("PASS"), "{stdout}");
    assert!(stdout.contains("4 samples, up to turn 3"), "{stdout}");
}

/// A CI runner that gave up may have closed the pipes: the interrupted run still writes its report
/// and exits (a failed print once killed the thread that finishes the run, and the run hung on).
#[test]
#[cfg(target_os = "linux")]
fn an_interrupted_run_whose_output_pipes_are_closed_still_writes_its_report_and_exits() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let mut run = start_hanging_run(dir.path(), &out);
    drop(run.stdout.take());
    drop(run.stderr.take());
    kill(Pid::from_raw(run.id() as i32), Signal::SIGTERM).unwrap();
    let (code, _, _) = wait_for(&mut run);
    assert_eq!(code, Some(interrupted_exit(Signal::SIGTERM)));
    let report_file = read_report(&out.join("report.json")).unwrap();
    assert_eq!(report_file.verdict.status, VerdictStatus::Interrupted);
}
