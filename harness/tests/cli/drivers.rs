//! External engine drivers (docs/protocol.md): `backend: exec` scenarios and
//! `leakloop driver-check`, against real programs: the reference driver
//! (`drivers/reference_sim.py`, needs `python3`; `LEAKLOOP_REQUIRE_PYTHON=1` turns its absence into
//! a failure) and `fixtures/drivers/faulty.sh`, a shell driver with one deliberate fault each.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use leakloop::engine::skip_or_require;
use leakloop::report::{read_report, ReportFile};
use leakloop::runner::RunOutcome;
use rstest::rstest;

use crate::fixtures::{expected_exit, run};

use crate::common::{leakloop_command, poll, stdout_and_stderr as text, wait_until};

/// A path in the repository.
fn repo(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(path)
}

fn faulty() -> String {
    repo("fixtures/drivers/faulty.sh").display().to_string()
}

/// Whether `python3` runs; says SKIPPED (or fails, where required) when it does not.
fn have_python() -> bool {
    let found = Command::new("python3")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !found {
        skip_or_require(
            "LEAKLOOP_REQUIRE_PYTHON",
            "python3 not found, so the reference driver cannot run (install Python 3)",
        );
    }
    found
}

fn driver_check(args: &[&str]) -> Output {
    leakloop_command()
        .arg("driver-check")
        .args(args)
        .output()
        .expect("leakloop runs")
}

#[rstest]
#[case::conforming("none", 0, &["ok    exit", "conforming: 16 steps", "after reload: ledger (created/deleted): conversation 1/1"])]
#[case::wrong_reply("wrong-reply", 1, &["FAIL  open_session", "answering `open_session` with `done`"])]
#[case::missing_field("missing-field", 1, &["FAIL  open_session", "missing field `session`"])]
#[case::reply_to_the_wrong_call("extra-reply", 1, &["FAIL  open_session", "the answer to the call before, `load`"])]
#[case::slow_handshake("slow-hello", 1, &["FAIL  hello", "slow handshake", "within 1s"])]
#[case::garbage_on_stdout("stdout-garbage", 1, &["FAIL  snapshot", "malformed protocol line `loading model...`"])]
#[case::exit_mid_session("exit-mid-session", 1, &["FAIL  open_session", "exit status 3", "| faulty driver: giving up"])]
#[case::hang("hang", 1, &["FAIL  generate", "did not answer `generate` within 1s"])]
#[case::old_version("old-version", 1, &["FAIL  hello", "speaking version 1 (this runner speaks 2)"])]
#[case::counts_go_down("counts-go-down", 1, &["FAIL  snapshot", "`conversation` went down from 5 created"])]
#[case::reserved_kind("reserved-kind", 1, &["FAIL  generate", "a kind only the runner gives"])]
#[case::lingers("lingers", 1, &["FAIL  exit", "did not exit within 2s"])]
#[case::crash_at_exit("crash-at-exit", 1, &["FAIL  exit", "signal 11 (SIGSEGV)", "| faulty driver: crashing at exit"])]
#[case::child_holds_stdout("child-holds-stdout", 1, &["FAIL  exit", "it exited with exit status 0 after its stdin closed, but a process it started still held its stdout open"])]
#[case::hello_without_pid("hello-no-pid", 1, &["FAIL  hello", "its `hello` reply has no `pid` field"])]
#[case::hello_pid_above_u32("hello-big-pid", 1, &["FAIL  hello", "has `pid`: 5000000000, which is not the driver's process id"])]
#[case::fatal_kind_for_a_recoverable_error("fatal-close", 1, &["FAIL  close_session", "no such session", "a recoverable error must use a non-fatal kind such as `close`"])]
#[case::counts_restart_after_reload("reload-resets", 1, &["ok    unload", "FAIL  snapshot", "`conversation` went down from 1 created, 1 deleted to 0 created", "restart them"])]
fn driver_check_names_each_violation_plainly(
    #[case] fault: &str,
    #[case] code: i32,
    #[case] says: &[&str],
) {
    let output = driver_check(&["--call-timeout", "1s", "--", "sh", &faulty(), fault]);
    let shown = text(&output);
    assert_eq!(output.status.code(), Some(code), "{shown}");
    for line in says {
        assert!(shown.contains(line), "`{line}` missing from:\n{shown}");
    }
    if code == 1 {
        assert!(shown.contains("1 protocol violation\n"), "{shown}");
    }
}

#[test]
fn the_reference_driver_conforms() {
    if !have_python() {
        return;
    }
    let driver = repo("drivers/reference_sim.py").display().to_string();
    let output = driver_check(&["--option", "session_kib=64", "--", "python3", &driver]);
    let shown = text(&output);
    assert_eq!(output.status.code(), Some(0), "{shown}");
    assert!(
        shown.contains("reference-sim 1.0, protocol version 2"),
        "{shown}"
    );
    assert!(shown.contains("conversation 1/1"), "{shown}");
}

#[rstest]
#[case::no_such_program(&["--", "/nonexistent/driver"], 3, "cannot start the worker `/nonexistent/driver`")]
#[case::engine_unavailable(&["--option", "bogus=1", "--", "sh", "-c", "read l; echo '{\"reply\":\"failed\",\"error\":{\"kind\":\"unavailable\",\"message\":\"unknown option bogus\"}}'"], 3, "unknown option bogus")]
#[case::option_refused_is_named(&["--option", "bogus=1", "--", "sh", "-c", "read l; echo '{\"reply\":\"failed\",\"error\":{\"kind\":\"unavailable\",\"message\":\"unknown option bogus\"}}'"], 3, "started but refused its configuration: it answered `hello` with `failed`: unknown option bogus")]
#[case::what_was_sent_is_named(&["--option", "bogus=1", "--", "sh", "-c", "read l; echo '{\"reply\":\"failed\",\"error\":{\"kind\":\"unavailable\",\"message\":\"unknown option bogus\"}}'"], 3, "(sent --option bogus=1)")]
#[case::no_command(&[], 2, "COMMAND")]
#[case::bad_timeout(&["--call-timeout", "0s", "--", "true"], 2, "more than 0")]
fn driver_check_without_a_session_exits_as_documented(
    #[case] args: &[&str],
    #[case] code: i32,
    #[case] says: &str,
) {
    let output = driver_check(args);
    let shown = text(&output);
    assert_eq!(output.status.code(), Some(code), "{shown}");
    assert!(shown.contains(says), "{shown}");
}

fn report(out: &Path) -> ReportFile {
    read_report(&out.join("report.json")).unwrap()
}

#[rstest]
fn exec_fixture_exits_as_stated(#[files("../fixtures/exec/*.yaml")] path: PathBuf) {
    if !have_python() {
        return;
    }
    let text = std::fs::read_to_string(&path).unwrap();
    let out = tempfile::tempdir().unwrap();
    let output = run(&path, out.path());
    assert_eq!(
        output.status.code(),
        Some(expected_exit(&text, &path)),
        "{}\n{}",
        path.display(),
        String::from_utf8_lossy(&output.stdout)
    );
    let report = report(out.path());
    assert_eq!(report.record.backend.backend, "reference-sim");
    assert!(report.record.backend.details["driver"].ends_with("reference_sim.py"));
    // The driver's own counts sit next to the runner's.
    let totals = &report.record.ledger.totals;
    let runner = totals["runner/session"];
    let driver = totals["reference-sim/conversation"];
    assert_eq!(driver.created, runner.created, "{totals:?}");
    let leaks_sessions = text.contains("skip_release: true");
    assert_eq!(driver.live() > 0, leaks_sessions, "{totals:?}");
    // Memory was sampled from the driver's process, from outside.
    assert!(report
        .record
        .samples
        .iter()
        .any(|s| s.metrics.get("anon_rss").is_some_and(|v| *v > 1 << 20)));
}

/// Waits (at most 10 s, a hang guard) until process `pid` is gone or a zombie; whether it is.
fn gone(pid: u32) -> bool {
    poll(std::time::Duration::from_secs(10), || {
        let state = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok();
        let alive = state.as_deref().is_some_and(|stat| {
            !matches!(
                stat.rsplit_once(')')
                    .and_then(|(_, rest)| rest.trim_start().chars().next()),
                Some('Z' | 'X')
            )
        });
        !alive
    })
}

/// A driver that exits 0 while a child it started keeps its stdout open: `driver-check` says so
/// (not "did not exit"), and neither it nor `run` leaves that child running.
#[test]
#[cfg(target_os = "linux")]
fn a_child_left_holding_the_drivers_stdout_is_named_and_ended() {
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("child.pid");
    let child_pid = || -> u32 {
        std::fs::read_to_string(&pid_file)
            .expect("the driver wrote its child's pid")
            .trim()
            .parse()
            .unwrap()
    };
    let output = leakloop_command()
        .args(["driver-check", "--", "sh", &faulty(), "child-holds-stdout"])
        .env("LEAKLOOP_TEST_VALUE", &pid_file)
        .output()
        .unwrap();
    let shown = text(&output);
    assert_eq!(output.status.code(), Some(1), "{shown}");
    assert!(!shown.contains("did not exit"), "{shown}");
    let child = child_pid();
    assert!(
        gone(child),
        "driver-check left the driver's child {child} running"
    );

    std::fs::remove_file(&pid_file).unwrap();
    let path = faulty_scenario(dir.path(), "child-holds-stdout", "");
    let output = leakloop_command()
        .args(["run", "--quiet", "--out"])
        .arg(dir.path().join("out"))
        .arg(&path)
        .env("LEAKLOOP_TEST_VALUE", &pid_file)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0), "{}", text(&output));
    let child = child_pid();
    assert!(gone(child), "run left the driver's child {child} running");
}

/// An interrupted run exits without dropping its engine: the processes its driver started are
/// ended all the same (the driver itself dies with the runner).
#[test]
#[cfg(target_os = "linux")]
fn an_interrupted_run_leaves_no_child_of_its_driver() {
    use nix::sys::signal::{kill, Signal};
    use nix::unistd::Pid;

    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("child.pid");
    let path = dir.path().join("long.yaml");
    std::fs::write(
        &path,
        format!(
            "name: faulty-long\nengine:\n  backend: exec\n  command: [sh, {}, child-holds-stdout]\n\
             turns: 20000\nturn:\n  - open: {{}}\n  - generate: {{max_output_tokens: 4}}\n  \
             - close: {{}}\n",
            faulty()
        ),
    )
    .unwrap();
    let out = dir.path().join("out");
    let mut run = crate::interrupted::KillOnDrop(
        leakloop_command()
            .args(["run", "--quiet", "--out"])
            .arg(&out)
            .arg(&path)
            .env("LEAKLOOP_TEST_VALUE", &pid_file)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap(),
    );
    // Hang guard: the run streams samples within seconds.
    wait_until(
        "the run to stream 3 samples",
        std::time::Duration::from_secs(60),
        || {
            let streamed = crate::common::streamed_samples(&out) >= 3;
            assert!(
                streamed || run.try_wait().unwrap().is_none(),
                "the run never streamed 3 samples"
            );
            streamed
        },
    );
    let child: u32 = std::fs::read_to_string(&pid_file)
        .expect("the driver wrote its child's pid")
        .trim()
        .parse()
        .unwrap();
    kill(Pid::from_raw(run.id() as i32), Signal::SIGINT).unwrap();
    let (code, _, stderr) = crate::interrupted::wait_for(&mut run);
    assert_eq!(code, Some(130), "{stderr}");
    assert!(
        gone(child),
        "the interrupted run left the driver's child {child} running"
    );
}

/// A scenario running `faulty.sh FAULT` as its engine, written into `dir`.
fn faulty_scenario(dir: &Path, fault: &str, extra: &str) -> PathBuf {
    let path = dir.join("driver.yaml");
    std::fs::write(
        &path,
        format!(
            "name: faulty-{fault}\nengine:\n  backend: exec\n  command: [sh, {}, {fault}]\n  \
             call_timeout: 1s\n{extra}turns: 3\nturn:\n  - open: {{}}\n  - generate: \
             {{max_output_tokens: 4}}\n  - close: {{}}\n",
            faulty()
        ),
    )
    .unwrap();
    path
}

#[rstest]
#[case::crash("exit-mid-session", "open", "exit status 3")]
#[case::hang("hang", "generate", "did not answer `generate` within 1s")]
#[case::protocol("wrong-reply", "open", "answering `open_session` with `done`")]
fn a_failing_driver_ends_the_run_as_an_engine_failure_with_its_reports(
    #[case] fault: &str,
    #[case] step: &str,
    #[case] says: &str,
) {
    let dir = tempfile::tempdir().unwrap();
    let path = faulty_scenario(dir.path(), fault, "");
    let out = dir.path().join("out");
    let output = run(&path, &out);
    assert_eq!(output.status.code(), Some(3), "{}", text(&output));
    let RunOutcome::EngineFailed {
        turn,
        step: failed_step,
        error,
    } = report(&out).record.outcome
    else {
        panic!("not an engine failure: {}", text(&output));
    };
    assert_eq!((turn, failed_step.as_str()), (1, step));
    assert!(error.message.contains(says), "{error}");
}

#[test]
fn a_driver_that_crashes_at_exit_fails_the_run_with_every_sample_kept() {
    let dir = tempfile::tempdir().unwrap();
    let path = faulty_scenario(dir.path(), "crash-at-exit", "");
    let out = dir.path().join("out");
    let output = run(&path, &out);
    let shown = text(&output);
    assert_eq!(output.status.code(), Some(3), "{shown}");
    assert!(
        shown.contains("crashed at exit with signal 11 (SIGSEGV)"),
        "{shown}"
    );
    let record = report(&out).record;
    assert_eq!(record.turns_completed, 3);
    let clean = tempfile::tempdir().unwrap();
    let clean_path = faulty_scenario(clean.path(), "none", "");
    let clean_out = clean.path().join("out");
    let clean_run = run(&clean_path, &clean_out);
    assert_eq!(clean_run.status.code(), Some(0), "{}", text(&clean_run));
    assert!(
        !text(&clean_run).contains("at exit"),
        "{}",
        text(&clean_run)
    );
    // The crash costs no sample: the run kept as many as the clean one.
    assert_eq!(
        record.samples.len(),
        report(&clean_out).record.samples.len()
    );
    let RunOutcome::EngineFailed { turn, step, error } = record.outcome else {
        panic!("not an engine failure: {shown}");
    };
    assert_eq!((turn, step.as_str()), (3, "exit"));
    assert_eq!(
        error.kind,
        leakloop::engine::EngineErrorKind::Crashed {
            how: "signal 11 (SIGSEGV)".into()
        }
    );
    assert!(error.message.contains("after its last reply"), "{error}");
    assert!(
        error.message.contains("| faulty driver: crashing at exit"),
        "{error}"
    );
    let summary = std::fs::read_to_string(out.join("summary.md")).unwrap();
    assert!(summary.contains("SIGSEGV"), "{summary}");
}

#[test]
fn env_and_cwd_reach_the_driver() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("work")).unwrap();
    let path = faulty_scenario(
        dir.path(),
        "env-cwd",
        "  env: {LEAKLOOP_TEST_VALUE: from-the-scenario}\n  cwd: work\n",
    );
    let out = dir.path().join("out");
    let output = run(&path, &out);
    assert_eq!(output.status.code(), Some(0), "{}", text(&output));
    let details = report(&out).record.backend.details;
    assert_eq!(details["value"], "from-the-scenario");
    assert_eq!(
        Path::new(&details["cwd"]).canonicalize().unwrap(),
        dir.path().join("work").canonicalize().unwrap()
    );
}

#[test]
fn the_opencl_interposer_is_preloaded_into_a_driver_that_asks_for_it() {
    if !have_python() {
        return;
    }
    if let Err(why) = leakloop::engine::opencl::find_interposer() {
        skip_or_require(
            "LEAKLOOP_REQUIRE_OPENCL",
            &format!("{why} (build it with `cargo build -p cl-interposer`)"),
        );
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("interposed.yaml");
    std::fs::write(
        &path,
        format!(
            "name: interposed\nengine:\n  backend: exec\n  command: [python3, {}]\n  \
             opencl_interposer: true\nturns: 2\nturn:\n  - open: {{}}\n  - close: {{}}\n",
            repo("drivers/reference_sim.py").display()
        ),
    )
    .unwrap();
    let out = dir.path().join("out");
    let output = run(&path, &out);
    assert_eq!(output.status.code(), Some(0), "{}", text(&output));
    let report = report(&out);
    assert_eq!(report.record.backend.details["opencl_interposer"], "loaded");
    // The driver read the interposer's counts and reported them as its own ledger kinds.
    assert!(
        report
            .record
            .ledger
            .totals
            .keys()
            .any(|k| k.starts_with("reference-sim/cl_")),
        "{:?}",
        report.record.ledger.totals
    );
}

/// The `call` of each request line in `text` (JSON lines), in order.
fn calls(text: &str) -> Vec<String> {
    text.lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter_map(|v| v["call"].as_str().map(str::to_owned))
        .collect()
}

#[test]
fn driver_check_sends_the_session_docs_protocol_md_shows() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("requests.jsonl");
    // `tee` keeps a copy of every request on its way to the conforming driver.
    let script = format!("tee '{}' | sh '{}'", log.display(), faulty());
    let output = driver_check(&["--", "sh", "-c", &script]);
    let sent = calls(&std::fs::read_to_string(&log).unwrap());
    let spec = std::fs::read_to_string(repo("docs/protocol.md")).unwrap();
    let session = &spec[spec.find("## A whole session").unwrap()..];
    let block = &session[session.find("```json").unwrap()..];
    let block = &block[..block[3..].find("```").unwrap()];
    assert_eq!(sent, calls(block), "{}", text(&output));
    assert!(sent.len() >= 10, "{sent:?}");
}

#[test]
fn a_run_whose_driver_restarts_its_counts_at_a_reload_is_a_protocol_error() {
    let dir = tempfile::tempdir().unwrap();
    let path = faulty_scenario(dir.path(), "reload-resets", "reload_every: 1\n");
    let out = dir.path().join("out");
    let output = run(&path, &out);
    let shown = text(&output);
    // Not a ledger of `1 created 0 deleted` and a verdict: the run ends as an engine failure.
    assert_eq!(output.status.code(), Some(3), "{shown}");
    let RunOutcome::EngineFailed { error, .. } = report(&out).record.outcome else {
        panic!("not an engine failure: {shown}");
    };
    assert_eq!(error.kind, leakloop::engine::EngineErrorKind::Protocol);
    assert!(
        error.message.contains("`conversation` went down from"),
        "{error}"
    );
    // The same driver without reloads keeps its counts and passes.
    let clean = tempfile::tempdir().unwrap();
    let path = faulty_scenario(clean.path(), "reload-resets", "");
    let output = run(&path, &clean.path().join("out"));
    assert_eq!(output.status.code(), Some(0), "{}", text(&output));
}

#[test]
fn option_values_arrive_typed_as_docs_protocol_md_says() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("requests.jsonl");
    let script = format!("tee '{}' | sh '{}'", log.display(), faulty());
    let output = driver_check(&[
        "--option",
        "threads=2",
        "--option",
        "ratio=0.5",
        "--option",
        "fast=true",
        "--option",
        "name=tiny",
        "--option",
        "quoted=\"2\"",
        "--option",
        "size=64KiB",
        "--",
        "sh",
        "-c",
        &script,
    ]);
    // (The `tee` wrapper is not the process that answers, so the check itself fails on the pid.)
    let sent = std::fs::read_to_string(&log).unwrap();
    let first = sent
        .lines()
        .next()
        .unwrap_or_else(|| panic!("{}", text(&output)));
    let hello: serde_json::Value = serde_json::from_str(first).unwrap();
    let options = &hello["engine"]["options"];
    assert_eq!(options["threads"], serde_json::json!(2));
    assert!(options["threads"].is_u64(), "{options}");
    assert_eq!(options["ratio"], serde_json::json!(0.5));
    assert_eq!(options["fast"], serde_json::json!(true));
    assert_eq!(options["name"], serde_json::json!("tiny"));
    assert_eq!(options["quoted"], serde_json::json!("2"));
    assert_eq!(options["size"], serde_json::json!("64KiB"));
    // The page says so.
    let spec = std::fs::read_to_string(repo("docs/protocol.md")).unwrap();
    assert!(spec.contains("`--option threads=2` sends the integer `2`"));
}

#[test]
fn the_reference_driver_fails_an_unknown_session_with_a_non_fatal_kind() {
    if !have_python() {
        return;
    }
    use std::io::Write as _;
    let mut child = Command::new("python3")
        .arg(repo("drivers/reference_sim.py"))
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let requests = [
        r#"{"call":"hello","version":2,"engine":{"backend":"exec","model":null,"device":"cpu","max_tokens":512,"lib":null,"profile":null,"seed":0,"options":{}}}"#,
        r#"{"call":"close_session","session":5}"#,
        r#"{"call":"generate","session":5,"request":{"max_output_tokens":1,"cancel_after_tokens":null}}"#,
        r#"{"call":"close_session"}"#,
    ];
    let mut stdin = child.stdin.take().unwrap();
    for request in requests {
        writeln!(stdin, "{request}").unwrap();
    }
    drop(stdin);
    let output = child.wait_with_output().unwrap();
    let replies: Vec<serde_json::Value> = String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let kinds: Vec<&str> = replies[1..]
        .iter()
        .map(|r| r["error"]["kind"].as_str().unwrap_or("none"))
        .collect();
    // The engine's own refusals go on; only a request without its field is the runner's fault.
    assert_eq!(kinds, ["close", "generate", "protocol"], "{replies:?}");
}

#[test]
fn summary_and_provenance_name_a_driver_by_its_command() {
    let dir = tempfile::tempdir().unwrap();
    let path = faulty_scenario(dir.path(), "none", "");
    let out = dir.path().join("out");
    let output = run(&path, &out);
    assert_eq!(output.status.code(), Some(0), "{}", text(&output));
    let command = format!("sh {} none", faulty());
    let provenance = report(&out).record.provenance.expect("provenance");
    assert_eq!(provenance.engine.driver.as_deref(), Some(command.as_str()));
    assert_eq!(provenance.model, None);
    let summary = std::fs::read_to_string(out.join("summary.md")).unwrap();
    let engine = summary
        .lines()
        .find(|l| l.contains("**engine:**"))
        .unwrap_or_else(|| panic!("{summary}"));
    assert!(engine.contains(&format!("exec: {command}")), "{engine}");
    assert!(!engine.contains("built in"), "{engine}");
}
