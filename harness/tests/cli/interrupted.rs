//! A `leakloop run` killed in the middle (SIGKILL: no destructor, no final report) keeps every
//! sample it took, and its hung worker process does not outlive it.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use leakloop::report::read_samples;

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

fn lines_in(path: &Path) -> usize {
    std::fs::read_to_string(path)
        .map(|text| text.lines().count())
        .unwrap_or(0)
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

#[test]
#[cfg(target_os = "linux")]
fn a_killed_run_keeps_every_sample_it_took_and_leaves_no_worker_behind() {
    let dir = tempfile::tempdir().unwrap();
    let scenario = dir.path().join("killed-mid-run.yaml");
    std::fs::write(&scenario, HANGING_SCENARIO).unwrap();
    let out = dir.path().join("out");
    let mut run = Command::new(env!("CARGO_BIN_EXE_leakloop"))
        .arg("run")
        .arg(&scenario)
        .arg("--quiet")
        .arg("--out")
        .arg(&out)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();

    // Baseline plus the post-close samples of turns 1-3, then the worker hangs in turn 4.
    let samples = out.join("samples.jsonl");
    let deadline = Instant::now() + Duration::from_secs(60);
    while lines_in(&samples) < 4 {
        assert!(
            Instant::now() < deadline,
            "the run never streamed 4 samples"
        );
        assert!(
            run.try_wait().unwrap().is_none(),
            "the run ended on its own"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
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
        streamed.samples[3].metrics["native_heap"] > streamed.samples[0].metrics["native_heap"]
    );
    assert!(
        !out.join("report.json").exists(),
        "no report of an unfinished run"
    );

    let report = Command::new(env!("CARGO_BIN_EXE_leakloop"))
        .arg("report")
        .arg(&out)
        .env("NO_COLOR", "1")
        .output()
        .unwrap();
    assert_eq!(report.status.code(), Some(3));
    let text = String::from_utf8_lossy(&report.stdout);
    assert!(
        text.contains("4 samples") || text.contains("4 sample"),
        "{text}"
    );

    let deadline = Instant::now() + Duration::from_secs(10);
    while worker_pids
        .iter()
        .any(|pid| Path::new(&format!("/proc/{pid}")).exists() && !is_zombie(*pid))
    {
        assert!(
            Instant::now() < deadline,
            "the hung worker outlived its killed runner"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
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
