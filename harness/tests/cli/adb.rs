//! Android targets over adb. With Debian's real `adb` (a private adb server on a free port, no
//! device attached): the errors it gives for no device and an unknown serial become exit codes 3
//! and 2. No device is attached here, so the states a device can be in (unauthorised, offline,
//! gone mid-run) and `dumpsys meminfo` sampling are played by a fake `adb` script
//! (`LEAKLOOP_ADB`) that answers with adb's own messages and a real `dumpsys meminfo` output
//! (fixtures/dumpsys/launcher3_detailed.txt).

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Command;

use leakloop::report::read_report;

use crate::common::{leakloop_command, LEAKLOOP};

const ADB: &str = "/usr/bin/adb";

/// A private adb server port; the server adb starts there is killed when this is dropped.
struct AdbServer {
    port: u16,
}

impl Drop for AdbServer {
    fn drop(&mut self) {
        let _ = Command::new(ADB)
            .arg("kill-server")
            .env("ANDROID_ADB_SERVER_PORT", self.port.to_string())
            .output();
    }
}

fn scenario(dir: &Path, target: &str) -> PathBuf {
    let path = dir.join(format!("adb-{}.yaml", dir.read_dir().unwrap().count()));
    std::fs::write(
        &path,
        format!(
            "name: adb-target\nengine: {{backend: sim, profile: android-opencl-leak}}\nturns: 6\n\
             turn:\n  - open: {{}}\n  - generate: {{max_output_tokens: 4}}\n  - close: {{}}\n\
             watch: [native_heap, pss]\ntarget:\n  adb: {target}\n"
        ),
    )
    .unwrap();
    path
}

fn run(scenario: &Path, out: &Path, env: &[(&str, String)]) -> (Option<i32>, String) {
    let output = leakloop_command()
        .args(["run", "--quiet", "--out"])
        .arg(out)
        .arg(scenario)
        .envs(env.iter().map(|(k, v)| (k, v)))
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    (output.status.code(), text)
}

#[test]
fn real_adb_without_a_device_is_an_engine_failure_and_an_unknown_serial_bad_input() {
    if !Path::new(ADB).exists() {
        return leakloop::engine::skip_or_require(
            "LEAKLOOP_REQUIRE_ADB",
            "real_adb_without_a_device_is_an_engine_failure_and_an_unknown_serial_bad_input: /usr/bin/adb is not installed (apt-get install adb, as .ci/run does)",
        );
    }
    let server = AdbServer {
        port: TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port(),
    };
    let env = [
        ("ANDROID_ADB_SERVER_PORT", server.port.to_string()),
        ("LEAKLOOP_ADB", ADB.to_owned()),
    ];
    let tmp = tempfile::tempdir().unwrap();
    for (target, exit, says) in [
        ("{native: {}}", 3, "no device is attached"),
        ("{package: com.example.chat}", 3, "no device is attached"),
        (
            "{serial: emulator-5554, native: {}}",
            2,
            "target adb -s emulator-5554",
        ),
        (
            "{serial: emulator-5554, pid: 1234}",
            2,
            "no attached device has this serial",
        ),
    ] {
        let path = scenario(tmp.path(), target);
        let (code, text) = run(&path, &tmp.path().join("out"), &env);
        assert_eq!(code, Some(exit), "{target}: {text}");
        assert!(text.contains(says), "{target}: {text}");
    }
}

/// A fake `adb` in `dir`: `get-state` answers as a device in `state` would; `shell dumpsys
/// meminfo ...` prints the fixture `calls` times, then the device is gone.
fn fake_adb(dir: &Path, state: &str, calls: u32) -> PathBuf {
    let fixture = launcher3_dumpsys();
    let count = dir.join("calls");
    let script = format!(
        r#"#!/bin/sh
# adb's own messages (adb 1.0.41), for a device in the state "{state}".
while [ "$1" = "-s" ]; do serial=$2; shift 2; done
case "$1" in
get-state)
  case "{state}" in
  device) echo device ;;
  unauthorized) echo "error: device unauthorized." >&2
    echo "This adb server's \$ADB_VENDOR_KEYS is not set" >&2; exit 1 ;;
  offline) echo "error: device offline" >&2; exit 1 ;;
  esac ;;
shell)
  n=$(cat "{count}" 2>/dev/null || echo 0); n=$((n + 1)); echo $n > "{count}"
  if [ $n -gt {calls} ]; then echo "error: device '$serial' not found" >&2; exit 1; fi
  case "$2" in *"dumpsys meminfo com.android.launcher3"*) cat "{fixture}" ;;
  *) echo "/system/bin/sh: unexpected: $2" >&2; exit 127 ;; esac ;;
*) echo "fake adb: $1 is not played" >&2; exit 1 ;;
esac
"#,
        count = count.display(),
        fixture = fixture.display(),
    );
    executable(&dir.join(format!("adb-{state}")), &script)
}

/// The real `dumpsys meminfo com.android.launcher3` output the fake adbs print.
fn launcher3_dumpsys() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/dumpsys/launcher3_detailed.txt")
}

/// Writes `script` to `path`, executable.
fn executable(path: &Path, script: &str) -> PathBuf {
    std::fs::write(path, script).unwrap();
    let mode = <std::fs::Permissions as std::os::unix::fs::PermissionsExt>::from_mode(0o755);
    std::fs::set_permissions(path, mode).unwrap();
    path.to_owned()
}

#[test]
fn an_unauthorised_or_offline_device_is_an_engine_failure_that_says_what_to_do() {
    let tmp = tempfile::tempdir().unwrap();
    for (state, says) in [
        ("unauthorized", "accept the USB debugging prompt"),
        ("offline", "the device is offline"),
    ] {
        let adb = fake_adb(tmp.path(), state, 100);
        let path = scenario(tmp.path(), "{serial: R58M, package: com.android.launcher3}");
        let (code, text) = run(
            &path,
            &tmp.path().join("out"),
            &[("LEAKLOOP_ADB", adb.display().to_string())],
        );
        assert_eq!(code, Some(3), "{state}: {text}");
        assert!(
            text.contains(says) && text.contains("transport adb -s R58M"),
            "{state}: {text}"
        );
    }
}

#[test]
fn an_app_is_sampled_with_dumpsys_and_a_device_gone_mid_run_keeps_the_samples() {
    let tmp = tempfile::tempdir().unwrap();
    // Baseline and turns 1-3 are sampled; the device is gone at turn 4.
    let adb = fake_adb(tmp.path(), "device", 4);
    let path = scenario(tmp.path(), "{serial: R58M, package: com.android.launcher3}");
    let out = tmp.path().join("out");
    let (code, text) = run(&path, &out, &[("LEAKLOOP_ADB", adb.display().to_string())]);
    assert_eq!(code, Some(3), "{text}");
    assert!(text.contains("the device went away"), "{text}");
    let report = read_report(&out.join("report.json")).unwrap();
    let samples = &report.record.samples;
    assert_eq!(
        samples.len(),
        4,
        "every sample before the device went: {samples:?}"
    );
    for sample in samples {
        // The App Summary's Native Heap and TOTAL PSS of the fixture, in bytes, not the
        // simulator's own model.
        assert_eq!(sample.metrics.get("native_heap"), Some(&(24380 * 1024)));
        assert_eq!(sample.metrics.get("pss"), Some(&(105529 * 1024)));
    }
}

/// A fake `adb` whose "device" is this machine: `shell` runs the command with `sh -c` here,
/// `push` copies, `get-state` says `device`. It carries the worker protocol exactly as `adb
/// shell` would (stdin and stdout of one command), without a device.
fn local_device_adb(dir: &Path) -> PathBuf {
    let script = r#"#!/bin/sh
while [ "$1" = "-s" ]; do shift 2; done
case "$1" in
get-state) echo device ;;
shell) shift; exec sh -c "$*" ;;
push) [ "$2" = -- ] && shift; cp -- "$2" "$3" ;;
*) echo "fake adb: $1 is not played" >&2; exit 1 ;;
esac
"#;
    executable(&dir.join("adb-local-device"), script)
}

#[test]
fn a_native_worker_runs_through_adb_shell_and_samples_its_own_proc() {
    let tmp = tempfile::tempdir().unwrap();
    let adb = local_device_adb(tmp.path());
    let device_dir = tmp.path().join("device");
    let target = format!(
        "{{serial: R58M, native: {{leakloop: {}, dir: {}}}}}",
        LEAKLOOP,
        device_dir.display()
    );
    let path = scenario(tmp.path(), &target);
    let out = tmp.path().join("out");
    let (code, text) = run(&path, &out, &[("LEAKLOOP_ADB", adb.display().to_string())]);
    // The leaky profile is judged as it is locally: a failed expectation, not a failed transport.
    assert!(matches!(code, Some(0 | 1)), "{text}");
    let report = read_report(&out.join("report.json")).unwrap();
    assert_eq!(
        report
            .record
            .backend
            .details
            .get("target")
            .map(String::as_str),
        Some("adb -s R58M")
    );
    assert_eq!(report.record.samples.len(), 7);
    // `pss` is watched: the worker read its own smaps_rollup on the "device", which stays
    // within a few MiB, where the simulator's model of an Android app grows ~110 MiB a turn.
    let pss: Vec<u64> = report
        .record
        .samples
        .iter()
        .map(|s| *s.metrics.get("pss").expect("pss in every sample"))
        .collect();
    let spread = pss.iter().max().unwrap() - pss.iter().min().unwrap();
    assert!(spread < 64 << 20, "the worker's own pss: {pss:?}");
}

/// A fake `adb` for an app judged in attach mode: `logcat -v raw -s LeakLoop:I` prints `TURN n
/// CLOSED` every 300 ms (then stays open, as logcat does), and `shell dumpsys meminfo
/// com.android.launcher3` prints a real output (fixtures/dumpsys/launcher3_detailed.txt) whose
/// Native Heap and TOTAL PSS grow by `growth_kb` per call. From call `alive + 1` on, dumpsys
/// says the app is not running (`gone: "app"`) or adb says the device is not found (`gone:
/// "device"`).
fn fake_app_adb(dir: &Path, growth_kb: u32, alive: u32, gone: &str) -> PathBuf {
    let fixture = launcher3_dumpsys();
    let count = dir.join("dumpsys-calls");
    let script = format!(
        r#"#!/bin/sh
while [ "$1" = "-s" ]; do serial=$2; shift 2; done
case "$*" in
get-state) echo device ;;
"logcat -v raw -s LeakLoop:I")
  i=1; while [ $i -le 12 ]; do sleep 0.3; echo "TURN $i CLOSED"; i=$((i + 1)); done
  exec sleep 30 ;;
"shell sh -c 'dumpsys meminfo com.android.launcher3'")
  n=$(cat "{count}" 2>/dev/null || echo 0); n=$((n + 1)); echo $n > "{count}"
  if [ $n -gt {alive} ]; then
    case "{gone}" in
    app) echo "No process found for: com.android.launcher3"; exit 0 ;;
    *) echo "error: device '$serial' not found" >&2; exit 1 ;;
    esac
  fi
  sed -e "s/24380/$((24380 + n * {growth_kb}))/g" -e "s/105529/$((105529 + n * {growth_kb}))/g" "{fixture}" ;;
*) echo "fake adb: $* is not played" >&2; exit 1 ;;
esac
"#,
        count = count.display(),
        fixture = fixture.display(),
    );
    executable(&dir.join(format!("adb-app-{growth_kb}-{gone}")), &script)
}

/// An attach scenario for the fake app: no `command` or `pid`, markers from `adb logcat`.
fn app_attach_scenario(dir: &Path, adb: &Path) -> PathBuf {
    let path = dir.join("app-attach.yaml");
    std::fs::write(
        &path,
        format!(
            "name: app-attach\nengine:\n  backend: attach\n  markers:\n    command: [{adb}, -s, \
             R58M, logcat, -v, raw, -s, 'LeakLoop:I']\n    timeout: 10s\n\
             target: {{adb: {{serial: R58M, package: com.android.launcher3}}}}\n\
             warmup_turns: 1\nturns: 6\nsample: {{settle: 20ms}}\nwatch: [native_heap, pss]\n\
             expect:\n  native_heap: {{tolerance: 256KiB, max_growth_per_turn: 64KiB}}\n",
            adb = adb.display()
        ),
    )
    .unwrap();
    path
}

#[rstest::rstest]
#[case::leaking(1024, 1)]
#[case::flat(0, 0)]
fn an_attached_app_is_sampled_with_dumpsys_at_each_logcat_marker(
    #[case] growth_kb: u32,
    #[case] exit: i32,
) {
    let tmp = tempfile::tempdir().unwrap();
    let adb = fake_app_adb(tmp.path(), growth_kb, 100, "app");
    let path = app_attach_scenario(tmp.path(), &adb);
    let out = tmp.path().join("out");
    let (code, text) = run(&path, &out, &[("LEAKLOOP_ADB", adb.display().to_string())]);
    assert_eq!(code, Some(exit), "{text}");
    let report = read_report(&out.join("report.json")).unwrap();
    let samples = &report.record.samples;
    // The baseline after attaching, then one sample per marked turn.
    let turns: Vec<u32> = samples.iter().map(|s| s.turn).collect();
    assert_eq!(turns, [0, 1, 2, 3, 4, 5, 6, 7], "{text}");
    for (call, sample) in (1u64..).zip(samples) {
        let kb = 24380 + call * u64::from(growth_kb);
        assert_eq!(sample.metrics.get("native_heap"), Some(&(kb * 1024)));
    }
    let details = &report.record.backend.details;
    assert_eq!(
        details.get("target").map(String::as_str),
        Some("adb -s R58M dumpsys meminfo com.android.launcher3")
    );
    assert_eq!(
        details.get("process").map(String::as_str),
        Some("the target's app")
    );
}

#[rstest::rstest]
#[case::app_dies("app", "com.android.launcher3 is not running on the device")]
#[case::device_vanishes("device", "the device went away")]
fn an_attached_app_or_its_device_gone_mid_run_is_an_engine_failure_keeping_the_samples(
    #[case] gone: &str,
    #[case] says: &str,
) {
    let tmp = tempfile::tempdir().unwrap();
    // The baseline and turns 1-3 are sampled; the fourth marker's sample finds it gone.
    let adb = fake_app_adb(tmp.path(), 0, 4, gone);
    let path = app_attach_scenario(tmp.path(), &adb);
    let out = tmp.path().join("out");
    let (code, text) = run(&path, &out, &[("LEAKLOOP_ADB", adb.display().to_string())]);
    assert_eq!(code, Some(3), "{text}");
    assert!(text.contains(says), "{text}");
    let report = read_report(&out.join("report.json")).unwrap();
    let turns: Vec<u32> = report.record.samples.iter().map(|s| s.turn).collect();
    assert_eq!(turns, [0, 1, 2, 3], "{text}");
}

/// A fake `adb` whose "device" is this machine (as [`local_device_adb`]) that writes each
/// command line it gets to `log`, one argument a line and a blank line after each, and reads
/// `push` arguments as adb does: an argument starting with `-` is an option (and an unknown one
/// an error), unless it follows `--`.
fn recording_adb(dir: &Path, log: &Path) -> PathBuf {
    let script = format!(
        r#"#!/bin/sh
for arg in "$@"; do printf '%s\n' "$arg"; done >> '{log}'
echo >> '{log}'
while [ "$1" = "-s" ]; do shift 2; done
case "$1" in
get-state) echo device ;;
shell) shift; exec sh -c "$*" ;;
push)
  shift
  case "$1" in
  --) shift ;;
  -*) echo "adb: unrecognized option '$1'" >&2; exit 1 ;;
  esac
  cp -- "$1" "$2" ;;
*) echo "fake adb: $1 is not played" >&2; exit 1 ;;
esac
"#,
        log = log.display()
    );
    executable(&dir.join("adb-recording"), &script)
}

/// Regression: a model file named `-n` became `adb push -n ...`, an option. Every path goes
/// after `--`, on adb's command line and in the commands run on the device.
#[test]
fn a_file_named_like_an_option_is_pushed_as_a_file() {
    let tmp = tempfile::tempdir().unwrap();
    let log = tmp.path().join("adb.log");
    let adb = recording_adb(tmp.path(), &log);
    let device_dir = tmp.path().join("device");
    std::fs::write(tmp.path().join("-n"), "a model").unwrap();
    // Run from the scenario's folder with a relative path, so the model's path is `-n` itself.
    std::fs::write(
        tmp.path().join("dash.yaml"),
        format!(
            "name: adb-dash\nengine: {{backend: sim, profile: cpu-flat, model: '-n'}}\nturns: 2\n\
             turn:\n  - open: {{}}\n  - generate: {{max_output_tokens: 4}}\n  - close: {{}}\n\
             target:\n  adb: {{serial: R58M, native: {{leakloop: {}, dir: {}, push: [model]}}}}\n",
            LEAKLOOP,
            device_dir.display()
        ),
    )
    .unwrap();
    let output = leakloop_command()
        .args(["run", "--quiet", "--out", "out", "dash.yaml"])
        .current_dir(tmp.path())
        .env("LEAKLOOP_ADB", &adb)
        .output()
        .unwrap();
    let text = crate::common::stdout_and_stderr(&output);
    assert_eq!(output.status.code(), Some(0), "{text}");
    assert_eq!(
        std::fs::read_to_string(device_dir.join("-n")).unwrap(),
        "a model"
    );
    let log = std::fs::read_to_string(&log).unwrap();
    let calls: Vec<Vec<&str>> = log
        .split("\n\n")
        .filter(|c| !c.is_empty())
        .map(|c| c.lines().collect())
        .collect();
    let remote = format!("{}/-n", device_dir.display());
    assert!(
        calls.contains(&vec!["-s", "R58M", "push", "--", "-n", remote.as_str()]),
        "{calls:?}"
    );
    // Every command run on the device that takes a path ends its options with `--`.
    let scripts: Vec<&str> = calls
        .iter()
        .filter(|c| c.get(2) == Some(&"shell"))
        .filter_map(|c| c.last().copied())
        .collect();
    for command in ["mkdir -p", "command -v", "chmod 700"] {
        assert!(
            scripts
                .iter()
                .any(|s| s.contains(&format!("{command} -- "))),
            "no `{command} -- ` in {scripts:?}"
        );
        assert!(
            !scripts.iter().any(|s| s.contains(&format!("{command} '"))),
            "`{command}` without `--` in {scripts:?}"
        );
    }
}
