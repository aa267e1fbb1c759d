//! Issue 20: what attached processes and drivers feed leakloop is read without blocking and held
//! in bounded buffers, and impossible counts end the run as protocol errors. Real processes
//! (`sh` programs and `fixtures/drivers/faulty.sh`), judged by exit code, report.json and, for
//! the buffers, leakloop's peak resident memory (`VmHWM`).

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use leakloop::report::{read_report, ReportFile};
use leakloop::runner::RunOutcome;

use crate::common::{leakloop_command, poll, workspace};

/// Longest a run here may take before the test calls it hung (a hang guard, not a timing).
const HANG_GUARD: Duration = Duration::from_secs(120);

/// How much more memory than the same run without the flood leakloop may use.
const MIB: u64 = 1 << 20;
const HEADROOM: u64 = 64 * MIB;

/// A finished `leakloop run`.
struct Ran {
    code: Option<i32>,
    text: String,
    /// The peak resident memory of leakloop (`VmHWM`), in bytes, as last read while it ran.
    peak: u64,
    report: ReportFile,
}

/// `leakloop run SCENARIO --quiet --out DIR/NAME.out`, where NAME is the scenario's file
/// name, its peak memory read from `/proc/PID/status` while it runs. (Not `ru_maxrss`: a child
/// started by vfork and exec inherits this test process's high-water mark in it.)
fn run_measured(scenario: &Path, dir: &Path) -> Ran {
    let name = scenario.file_stem().unwrap().to_string_lossy();
    let out = dir.join(format!("{name}.out"));
    let stdout = dir.join(format!("{name}.stdout"));
    let stderr = dir.join(format!("{name}.stderr"));
    let mut child = leakloop_command()
        .arg("run")
        .arg(scenario)
        .arg("--quiet")
        .arg("--out")
        .arg(&out)
        .stdin(Stdio::null())
        .stdout(File::create(&stdout).unwrap())
        .stderr(File::create(&stderr).unwrap())
        .spawn()
        .expect("leakloop runs");
    let mut peak = 0;
    let mut status = None;
    let ended = poll(HANG_GUARD, || {
        // The high-water mark only rises, and the floods come well before the end of the run.
        if let Some(hwm) = vm_hwm(child.id()) {
            peak = peak.max(hwm);
        }
        status = child.try_wait().unwrap();
        status.is_some()
    });
    let Some(status) = status.filter(|_| ended) else {
        let _ = child.kill();
        let _ = child.wait();
        panic!(
            "leakloop hung: {}",
            std::fs::read_to_string(&stderr).unwrap()
        );
    };
    let code = status.code();
    let text = format!(
        "{}{}",
        std::fs::read_to_string(&stdout).unwrap(),
        std::fs::read_to_string(&stderr).unwrap()
    );
    let report = read_report(&out.join("report.json"))
        .unwrap_or_else(|e| panic!("no report.json ({e}): {text}"));
    Ran {
        code,
        text,
        peak,
        report,
    }
}

/// `VmHWM` of process `pid`, in bytes, while it runs.
fn vm_hwm(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// An attach scenario in `dir` starting `sh -c SCRIPT` (markers on its stdout unless `markers`
/// says otherwise, as YAML lines under `engine:`).
fn attach_scenario(dir: &Path, name: &str, script: &str, markers: &str, turns: u32) -> PathBuf {
    assert!(
        !script.contains('\''),
        "the script is single-quoted in YAML"
    );
    let path = dir.join(format!("{name}.yaml"));
    std::fs::write(
        &path,
        format!(
            "name: {name}\nengine:\n  backend: attach\n  command: [sh, -c, '{script}']\n\
             {markers}turns: {turns}\nsample: {{settle: 10ms}}\nwatch: [rss]\n"
        ),
    )
    .unwrap();
    path
}

/// The failure's turn, step and message.
fn engine_failure(ran: &Ran) -> (u32, String, String) {
    match &ran.report.record.outcome {
        RunOutcome::EngineFailed { turn, step, error } => {
            (*turn, step.clone(), error.message.clone())
        }
        other => panic!("expected an engine failure, got {other:?}: {}", ran.text),
    }
}

fn turns_sampled(ran: &Ran) -> Vec<u32> {
    ran.report.record.samples.iter().map(|s| s.turn).collect()
}

fn mkfifo(path: &Path) {
    let status = Command::new("mkfifo").arg(path).status().unwrap();
    assert!(status.success());
}

/// A FIFO at `markers.file` before the run: refused at once as the markers' failure (exit 3,
/// the load's sample kept), not waited on until SIGTERM.
#[test]
fn a_fifo_planted_as_the_marker_file_is_a_marker_failure_not_a_hang() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("markers.log");
    mkfifo(&fifo);
    let markers = format!("  markers: {{file: {}, timeout: 60s}}\n", fifo.display());
    let scenario = attach_scenario(dir.path(), "planted", "sleep 60", &markers, 3);
    let ran = run_measured(&scenario, dir.path());
    assert_eq!(ran.code, Some(3), "{}", ran.text);
    let (turn, step, message) = engine_failure(&ran);
    assert_eq!((turn, step.as_str()), (1, "marker"));
    assert!(
        message.contains(&format!(
            "the marker file {} is a named pipe (FIFO), not a regular file",
            fifo.display()
        )),
        "{message}"
    );
    // The baseline waits for the first marker, which never came.
    assert!(turns_sampled(&ran).is_empty());
}

/// The program replaces its marker file by a FIFO after turn 2: refused on the next reopen,
/// with the samples before it kept.
#[test]
fn a_fifo_swapped_in_mid_run_is_a_marker_failure_with_the_samples_kept() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("markers.log");
    let script = format!(
        "for i in 1 2; do echo \"TURN $i CLOSED\" >> {log}; sleep 0.3; done; sleep 2; \
         rm {log}; mkfifo {log}; sleep 60",
        log = log.display()
    );
    let markers = format!("  markers: {{file: {}, timeout: 60s}}\n", log.display());
    let scenario = attach_scenario(dir.path(), "swapped", &script, &markers, 5);
    let ran = run_measured(&scenario, dir.path());
    assert_eq!(ran.code, Some(3), "{}", ran.text);
    let (turn, step, message) = engine_failure(&ran);
    // Marker 1 is the baseline's, marker 2 turn 1's.
    assert_eq!((turn, step.as_str()), (2, "marker"));
    assert!(message.contains("is a named pipe (FIFO)"), "{message}");
    assert_eq!(turns_sampled(&ran), [0, 1]);
}

/// 64 MiB appended to the marker file at once, then the file replaced (renamed over) by one of
/// 128 MiB, larger than the old offset: leakloop's peak memory stays within 64 MiB of the same
/// run without them, and the replacement is read from its start (all three long lines are
/// counted; read from the old offset, the first of its two would be skipped).
#[test]
#[cfg_attr(not(target_os = "linux"), ignore = "reads VmHWM from /proc")]
fn a_burst_and_a_replaced_marker_file_cost_bounded_memory_and_are_read_whole() {
    let dir = tempfile::tempdir().unwrap();
    let big = dir.path().join("big.txt");
    let mut burst = vec![b'x'; 64 << 20];
    burst.push(b'\n');
    std::fs::write(&big, &burst).unwrap();
    drop(burst);
    let run = |name: &str, flood: bool| {
        let log = dir.path().join(format!("{name}.log"));
        let new = dir.path().join(format!("{name}.new"));
        let (append, replace) = if flood {
            (
                format!(
                    "cat {big} >> {log}",
                    big = big.display(),
                    log = log.display()
                ),
                format!(
                    "cat {big} {big} >> {new}",
                    big = big.display(),
                    new = new.display()
                ),
            )
        } else {
            (":".to_owned(), ":".to_owned())
        };
        // Markers go on coming after turn 3: a marker that comes while a sample is taken has
        // none of its own, and the run needs four.
        let script = format!(
            "echo \"TURN 1 CLOSED\" >> {log}; sleep 0.3; {append}; echo \"TURN 2 CLOSED\" >> {log}; \
             sleep 0.3; echo \"TURN 3 CLOSED\" > {new}; {replace}; mv {new} {log}; i=4; \
             while :; do sleep 0.3; echo \"TURN $i CLOSED\" >> {log}; i=$((i+1)); done",
            log = log.display(),
            new = new.display()
        );
        let markers = format!("  markers: {{file: {}, timeout: 30s}}\n", log.display());
        let scenario = attach_scenario(dir.path(), name, &script, &markers, 4);
        let ran = run_measured(&scenario, dir.path());
        assert_eq!(ran.code, Some(0), "{name}: {}", ran.text);
        ran
    };
    let baseline = run("baseline", false);
    let flooded = run("flooded", true);
    assert!(
        baseline.peak > 0 && flooded.peak > 0,
        "VmHWM was never read"
    );
    eprintln!(
        "peak memory: {} KiB with the flood, {} KiB without",
        flooded.peak >> 10,
        baseline.peak >> 10
    );
    let details = &flooded.report.record.backend.details;
    assert_eq!(details["lines_too_long"], "3", "{details:?}");
    assert!(
        flooded.peak < baseline.peak + HEADROOM,
        "peak {} MiB with 192 MiB of marker file against {} MiB without",
        flooded.peak / MIB,
        baseline.peak / MIB
    );
}

/// 15,000 LEDGER kinds: the first 256 are kept (the cap drivers have), the rest counted.
#[test]
fn ledger_kinds_past_the_cap_are_counted_not_kept() {
    let dir = tempfile::tempdir().unwrap();
    let script = "i=0; while [ $i -lt 15000 ]; do echo \"LEDGER kind$i created=1 deleted=1\"; \
                  i=$((i+1)); done; echo \"TURN 1 CLOSED\"; sleep 0.3; echo \"TURN 2 CLOSED\"; \
                  sleep 0.3; echo \"TURN 3 CLOSED\"; sleep 60";
    let scenario = attach_scenario(dir.path(), "kinds", script, "", 2);
    let ran = run_measured(&scenario, dir.path());
    assert_eq!(ran.code, Some(0), "{}", ran.text);
    let details = &ran.report.record.backend.details;
    assert_eq!(details["ledger_markers_dropped"], "14744", "{details:?}");
    let totals = &ran.report.record.ledger.totals;
    let kept = totals.keys().filter(|k| k.starts_with("attach/")).count();
    assert_eq!(kept, 256, "{totals:?}");
}

/// Cumulative counts of 2^64-1, then 0, then 2^64-1 from an attached process: a protocol
/// error (exit 3) at the sample that saw the fall, the report and earlier samples kept.
#[test]
fn an_attached_count_that_falls_from_the_maximum_is_a_protocol_error() {
    let dir = tempfile::tempdir().unwrap();
    let script = "for n in 18446744073709551615 0 18446744073709551615; do \
                  echo \"LEDGER conversation created=$n deleted=0\"; i=$((i+1)); \
                  echo \"TURN $i CLOSED\"; sleep 0.4; done; sleep 60";
    let scenario = attach_scenario(dir.path(), "falls", script, "", 3);
    let ran = run_measured(&scenario, dir.path());
    assert_eq!(ran.code, Some(3), "{}", ran.text);
    let (turn, step, message) = engine_failure(&ran);
    // The baseline at the first marker holds 2^64-1; turn 1's sample sees the fall.
    assert_eq!((turn, step.as_str()), (1, "sample"), "{message}");
    assert!(
        message.contains(
            "the cumulative created count of `conversation` went down from \
             18446744073709551615 to 0"
        ),
        "{message}"
    );
    assert_eq!(turns_sampled(&ran), [0]);
}

/// A scenario running `faulty.sh FAULT` as its engine.
fn faulty_scenario(dir: &Path, fault: &str) -> PathBuf {
    let path = dir.join(format!("{fault}.yaml"));
    std::fs::write(
        &path,
        format!(
            "name: faulty-{fault}\nengine:\n  backend: exec\n  command: [sh, {}, {fault}]\n  \
             call_timeout: 60s\nturns: 3\nturn:\n  - open: {{}}\n  - generate: \
             {{max_output_tokens: 4}}\n  - close: {{}}\n",
            workspace().join("fixtures/drivers/faulty.sh").display()
        ),
    )
    .unwrap();
    path
}

/// The same counts from a driver's snapshots.
#[test]
fn a_driver_count_that_falls_from_the_maximum_is_a_protocol_error() {
    let dir = tempfile::tempdir().unwrap();
    let ran = run_measured(&faulty_scenario(dir.path(), "huge-counts"), dir.path());
    assert_eq!(ran.code, Some(3), "{}", ran.text);
    let (turn, _, message) = engine_failure(&ran);
    assert_eq!(turn, 1, "{message}");
    // The worker engine checks a driver's snapshots itself (docs/protocol.md): its message
    // names both snapshots' counts.
    assert!(
        message.contains("`conversation` went down from 18446744073709551615 created"),
        "{message}"
    );
    assert_eq!(turns_sampled(&ran), [0]);
}

/// 70 lines of 4 MiB on stdout before `hello`: kept as a tail of 4 KiB lines, so leakloop's
/// peak memory stays within 64 MiB of a driver that prints nothing (they cost 256 MiB before).
#[test]
#[cfg_attr(not(target_os = "linux"), ignore = "reads VmHWM from /proc")]
fn long_lines_a_driver_prints_before_hello_cost_bounded_memory() {
    let dir = tempfile::tempdir().unwrap();
    let quiet = run_measured(&faulty_scenario(dir.path(), "none"), dir.path());
    assert_eq!(quiet.code, Some(0), "{}", quiet.text);
    let noisy = run_measured(&faulty_scenario(dir.path(), "noisy-hello"), dir.path());
    assert_eq!(noisy.code, Some(0), "{}", noisy.text);
    assert!(quiet.peak > 0 && noisy.peak > 0, "VmHWM was never read");
    eprintln!(
        "peak memory: {} KiB with the noise, {} KiB without",
        noisy.peak >> 10,
        quiet.peak >> 10
    );
    assert!(
        noisy.peak < quiet.peak + HEADROOM,
        "peak {} MiB after 280 MiB of stdout before hello against {} MiB without",
        noisy.peak / MIB,
        quiet.peak / MIB
    );
}
