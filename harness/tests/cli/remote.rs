//! Remote targets for real: an OpenSSH server on 127.0.0.1 started by the test itself (a free
//! port, throwaway host and user keys, no password, a private config, the current user), and
//! `leakloop run` with `target: {ssh: ...}` through it: a simulator and a LiteRT-LM CPU scenario,
//! a remote worker killed mid-run, a dropped connection, a hang, an interrupted run; never a
//! remote worker left behind. Where sshd cannot be started the tests print `SKIPPED: ...`
//! (`LEAKLOOP_REQUIRE_SSHD=1`, set by CI, makes that a failure).

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use leakloop::report::{read_report, read_samples};
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use tempfile::TempDir;

use crate::common::{leakloop_command, poll, LEAKLOOP};
use crate::interrupted::{wait_for, KillOnDrop};

const SSHD: &str = "/usr/sbin/sshd";

/// A private sshd for one test; killed when dropped.
struct Sshd {
    child: Child,
    dir: TempDir,
    port: u16,
    user: String,
}

impl Drop for Sshd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Prints `SKIPPED: {test}: {why}`, or fails under `LEAKLOOP_REQUIRE_SSHD=1`.
fn skip(test: &str, why: &str) {
    leakloop::engine::skip_or_require(
        "LEAKLOOP_REQUIRE_SSHD",
        &format!("{test}: {why} (install openssh-server and openssh-client, as .ci/run does)"),
    );
}

fn run_quiet(program: &str, args: &[&str]) -> Result<String, String> {
    let out = Command::new(program)
        .args(args)
        .output()
        .map_err(|e| format!("cannot run {program}: {e}"))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
    } else {
        Err(format!(
            "{program} {args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

impl Sshd {
    /// Starts sshd, or says why it cannot.
    fn start() -> Result<Sshd, String> {
        if !Path::new(SSHD).exists() {
            return Err(format!("{SSHD} is not installed"));
        }
        let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
        let path = |name: &str| dir.path().join(name).display().to_string();
        for key in ["host_key", "user_key"] {
            run_quiet(
                "ssh-keygen",
                &["-q", "-t", "ed25519", "-N", "", "-f", &path(key)],
            )?;
        }
        std::fs::copy(path("user_key.pub"), path("authorized_keys")).map_err(|e| e.to_string())?;
        let user = run_quiet("id", &["-un"])?;
        // sshd started by root needs its privilege separation folder, which a system sshd's
        // service would have made.
        if run_quiet("id", &["-u"])? == "0" {
            std::fs::create_dir_all("/run/sshd").map_err(|e| format!("/run/sshd: {e}"))?;
        }
        let mut last = String::new();
        for _ in 0..3 {
            let port = TcpListener::bind("127.0.0.1:0")
                .and_then(|l| l.local_addr())
                .map_err(|e| e.to_string())?
                .port();
            let config = format!(
                "Port {port}\nListenAddress 127.0.0.1\nHostKey {host}\nAuthorizedKeysFile {keys}\n\
                 PidFile {pid}\nStrictModes no\nUsePAM no\nPasswordAuthentication no\n\
                 KbdInteractiveAuthentication no\nPubkeyAuthentication yes\n\
                 PermitRootLogin prohibit-password\nAllowUsers {user}\nLogLevel ERROR\n",
                host = path("host_key"),
                keys = path("authorized_keys"),
                pid = path("sshd.pid"),
            );
            std::fs::write(path("sshd_config"), config).map_err(|e| e.to_string())?;
            let mut child = Command::new(SSHD)
                .args(["-D", "-e", "-f", &path("sshd_config")])
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::from(
                    std::fs::File::create(path("sshd.log")).map_err(|e| e.to_string())?,
                ))
                .spawn()
                .map_err(|e| format!("cannot start {SSHD}: {e}"))?;
            let listening = || std::net::TcpStream::connect(("127.0.0.1", port)).is_ok();
            let up = poll(Duration::from_secs(10), || {
                child.try_wait().ok().flatten().is_some() || listening()
            });
            if up && child.try_wait().ok().flatten().is_none() && listening() {
                return Ok(Sshd {
                    child,
                    dir,
                    port,
                    user,
                });
            }
            let _ = child.kill();
            let _ = child.wait();
            last = std::fs::read_to_string(path("sshd.log")).unwrap_or_default();
        }
        Err(format!("sshd did not start: {}", last.trim()))
    }

    /// The `target:` block for this server, the worker in `dir` (`leakloop` as given, if any).
    fn target(&self, dir: &Path, extra: &str) -> String {
        format!(
            "target:\n  ssh:\n    host: 127.0.0.1\n    port: {port}\n    user: {user}\n    \
             identity: {key}\n    options: [StrictHostKeyChecking=no, UserKnownHostsFile=/dev/null, \
             LogLevel=ERROR]\n    dir: {dir}\n{extra}",
            port = self.port,
            user = self.user,
            key = self.dir.path().join("user_key").display(),
            dir = dir.display(),
        )
    }
}

/// Starts sshd for `test`, or prints why not and returns `None`.
fn sshd_for(test: &str) -> Option<Sshd> {
    match Sshd::start() {
        Ok(sshd) => Some(sshd),
        Err(why) => {
            skip(test, &why);
            None
        }
    }
}

/// `    leakloop: THIS BINARY`: use the binary that is already there.
fn this_binary() -> String {
    format!("    leakloop: {}\n", LEAKLOOP)
}

/// A simulator chat long enough (minutes) that a test acts on it mid-run.
fn slow_sim(extra: &str) -> String {
    format!(
        "name: remote-slow\nengine: {{backend: sim, profile: android-opencl-leak, call_timeout: 30s}}\n\
         turns: 20000\nturn:\n  - open: {{}}\n  - send: {{prompt: hi}}\n  - generate: {{max_output_tokens: 4}}\n  \
         - close: {{}}\nwatch: [native_heap, rss]\n{extra}"
    )
}

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

fn leakloop_run(scenario: &Path, out: &Path) -> KillOnDrop {
    KillOnDrop(
        leakloop_command()
            .args(["run", "--quiet", "--out"])
            .arg(out)
            .arg(scenario)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    )
}

/// Processes whose working directory is `dir`: the remote worker and its launch shell.
fn processes_in(dir: &Path) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(Result::ok)
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| std::fs::read_link(format!("/proc/{pid}/cwd")).is_ok_and(|cwd| cwd == dir))
        .collect()
}

/// The remote worker (`leakloop worker --remote` running in `dir`).
fn remote_worker(dir: &Path) -> Option<u32> {
    // Not the `sh -c` that started it, whose command line also holds `worker --remote`.
    processes_in(dir).into_iter().find(|pid| {
        std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|c| {
            let args: Vec<&[u8]> = c.split(|b| *b == 0).collect();
            args.get(1..3) == Some(&[b"worker".as_slice(), b"--remote".as_slice()][..])
        })
    })
}

/// Waits until the sample store holds `n` samples.
fn wait_for_samples(run: &mut KillOnDrop, out: &Path, n: usize) {
    let streamed = || crate::common::streamed_samples(out) >= n;
    let ready = poll(Duration::from_secs(60), || {
        streamed() || run.try_wait().unwrap().is_some()
    }) && streamed();
    if !ready {
        let (code, _, stderr) = wait_for(run);
        panic!("the run never streamed {n} samples (exit {code:?}): {stderr}");
    }
}

/// Asserts that nothing runs in `dir` any more (within 10 s: the watchdog's grace is 3 s).
fn assert_nothing_left_in(dir: &Path) {
    let ended = poll(Duration::from_secs(10), || processes_in(dir).is_empty());
    assert!(
        ended,
        "processes left running on the target: {:?}",
        processes_in(dir)
    );
}

/// A long simulator run over ssh, the worker using this binary in place, once it has streamed
/// `samples` samples.
struct SlowRun {
    run: KillOnDrop,
    remote_dir: PathBuf,
    out: PathBuf,
    _tmp: TempDir,
    _sshd: Sshd,
}

fn start_slow_run(test: &str, samples: usize) -> Option<SlowRun> {
    let sshd = sshd_for(test)?;
    let tmp = tempfile::tempdir().unwrap();
    let remote_dir = tmp.path().join("remote");
    let target = sshd.target(&remote_dir, &this_binary());
    let path = write(tmp.path(), "s.yaml", &slow_sim(&target));
    let out = tmp.path().join("out");
    let mut run = leakloop_run(&path, &out);
    wait_for_samples(&mut run, &out, samples);
    Some(SlowRun {
        run,
        remote_dir,
        out,
        _tmp: tmp,
        _sshd: sshd,
    })
}

#[test]
fn a_simulator_scenario_over_ssh_measures_what_a_local_worker_measures() {
    let Some(sshd) =
        sshd_for("a_simulator_scenario_over_ssh_measures_what_a_local_worker_measures")
    else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let remote_dir = tmp.path().join("remote");
    let body = "name: remote-sim\nengine: {backend: sim, profile: android-opencl-leak, isolate: true}\n\
                turns: 6\nturn:\n  - open: {}\n  - send: {prompt: hi}\n  - generate: {max_output_tokens: 8}\n  \
                - close: {}\nwatch: [native_heap, rss]\nexpect:\n  native_heap: {max_growth_per_turn: 1MiB}\n";
    let local = write(tmp.path(), "local.yaml", body);
    // No `leakloop:`: this binary is copied into the target's folder.
    let remote = write(
        tmp.path(),
        "remote.yaml",
        &format!("{body}{}", sshd.target(&remote_dir, "")),
    );
    let started = Instant::now();
    let mut run = leakloop_run(&remote, &tmp.path().join("remote-out"));
    let (code, stdout, stderr) = wait_for(&mut run);
    let stderr = format!("{stdout}{stderr}");
    let took = started.elapsed();
    assert_eq!(
        code,
        Some(1),
        "the leak is found over ssh as it is locally: {stderr}"
    );
    assert!(
        remote_dir.join("leakloop").exists(),
        "the binary was copied"
    );
    let mut run = leakloop_run(&local, &tmp.path().join("local-out"));
    let (local_code, _, stderr) = wait_for(&mut run);
    assert_eq!(local_code, Some(1), "{stderr}");

    let remote = read_report(&tmp.path().join("remote-out/report.json")).unwrap();
    let local = read_report(&tmp.path().join("local-out/report.json")).unwrap();
    let series = |r: &leakloop::report::ReportFile, m: &str| -> Vec<Option<u64>> {
        r.record
            .samples
            .iter()
            .map(|s| s.metrics.get(m).copied())
            .collect()
    };
    // The simulator's model is deterministic: the same native heap on both sides.
    assert_eq!(
        series(&remote, "native_heap"),
        series(&local, "native_heap")
    );
    // rss is the remote worker's own, read on the target: every sample has one.
    assert!(series(&remote, "rss")
        .iter()
        .all(|v| v.is_some_and(|b| b > 1 << 20)));
    assert_eq!(
        remote
            .record
            .backend
            .details
            .get("target")
            .map(String::as_str),
        Some(format!("ssh {}@127.0.0.1:{}", sshd.user, sshd.port).as_str())
    );
    assert_nothing_left_in(&remote_dir);
    let _ = std::io::Write::write_all(
        &mut std::io::stderr(),
        format!(
            "remote-sim over ssh (binary copied, 6 turns): {:.2} s\n",
            took.as_secs_f64()
        )
        .as_bytes(),
    );
}

#[test]
fn a_litert_lm_cpu_scenario_runs_over_ssh() {
    let test = "a_litert_lm_cpu_scenario_runs_over_ssh";
    let Some(lib) = std::env::var_os("LITERT_LM_LIB").filter(|l| Path::new(l).exists()) else {
        return leakloop::engine::skip_or_require(
            "LEAKLOOP_REQUIRE_ENGINE",
            &format!("{test}: LITERT_LM_LIB names no library (run ci/fetch-litert-lm.sh)"),
        );
    };
    let Some(sshd) = sshd_for(test) else { return };
    let tmp = tempfile::tempdir().unwrap();
    let remote_dir = tmp.path().join("remote");
    let model =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/models/tiny-qwen2-f32.litertlm");
    // The model is copied; the library and the binary are used where they are.
    let scenario = format!(
        "name: remote-litert\nengine:\n  backend: litert-lm\n  model: {model}\n  lib: {lib}\n  \
         device: cpu\n  max_tokens: 512\nturns: 3\nturn:\n  - open: {{}}\n  - send: {{prompt: hello}}\n  \
         - generate: {{max_output_tokens: 4}}\n  - close: {{}}\nwatch: [rss, native_heap]\n\
         expect:\n  balanced: true\n{target}    push: [model]\n",
        model = model.display(),
        lib = Path::new(&lib).display(),
        target = sshd.target(&remote_dir, &this_binary()),
    );
    let path = write(tmp.path(), "litert.yaml", &scenario);
    let started = Instant::now();
    let mut run = leakloop_run(&path, &tmp.path().join("out"));
    let (code, stdout, stderr) = wait_for(&mut run);
    let stderr = format!("{stdout}{stderr}");
    let took = started.elapsed();
    assert_eq!(code, Some(0), "{stderr}");
    assert!(
        remote_dir.join("tiny-qwen2-f32.litertlm").exists(),
        "the model was copied"
    );
    let report = read_report(&tmp.path().join("out/report.json")).unwrap();
    assert_eq!(report.record.backend.backend, "litert-lm");
    assert!(report.record.samples.len() >= 4);
    assert!(report
        .record
        .samples
        .iter()
        .all(|s| s.metrics.get("rss").is_some()));
    assert_nothing_left_in(&remote_dir);
    let _ = std::io::Write::write_all(
        &mut std::io::stderr(),
        format!(
            "remote-litert over ssh (3 turns): {:.2} s\n",
            took.as_secs_f64()
        )
        .as_bytes(),
    );
}

#[test]
fn a_remote_worker_killed_mid_run_is_a_crash_that_keeps_every_sample() {
    // The server and the folders live as long as `slow`.
    let Some(mut slow) = start_slow_run(
        "a_remote_worker_killed_mid_run_is_a_crash_that_keeps_every_sample",
        4,
    ) else {
        return;
    };
    let remote_dir = slow.remote_dir.clone();
    let out = slow.out.clone();
    let run = &mut slow.run;
    let worker = remote_worker(&remote_dir).expect("the remote worker runs in its folder");
    kill(Pid::from_raw(worker as i32), Signal::SIGKILL).unwrap();
    let (code, stdout, stderr) = wait_for(run);
    let stderr = format!("{stdout}{stderr}");
    assert_eq!(code, Some(3), "{stderr}");
    assert!(stderr.contains("the remote worker (pid"), "{stderr}");
    assert!(stderr.contains("signal 9 (SIGKILL)"), "{stderr}");
    let report = read_report(&out.join("report.json")).unwrap();
    let streamed = read_samples(&out.join("samples.parquet")).unwrap();
    assert!(report.record.samples.len() >= 4);
    assert_eq!(
        report.record.samples.len(),
        streamed.samples.len(),
        "nothing measured is lost"
    );
    assert_nothing_left_in(&remote_dir);
}

#[test]
fn a_dropped_connection_ends_the_run_and_the_remote_worker() {
    // The server and the folders live as long as `slow`.
    let Some(mut slow) =
        start_slow_run("a_dropped_connection_ends_the_run_and_the_remote_worker", 4)
    else {
        return;
    };
    let remote_dir = slow.remote_dir.clone();
    let out = slow.out.clone();
    let run = &mut slow.run;
    // The ssh client carrying the worker: its command line holds the launch script.
    let needle = remote_dir.display().to_string();
    let client = std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .find(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|c| {
                let c = String::from_utf8_lossy(&c);
                c.starts_with("ssh\0") && c.contains(&needle) && c.contains("--remote")
            })
        })
        .expect("the ssh client runs");
    kill(Pid::from_raw(client as i32), Signal::SIGKILL).unwrap();
    let (code, stdout, stderr) = wait_for(run);
    let stderr = format!("{stdout}{stderr}");
    assert_eq!(code, Some(3), "{stderr}");
    assert!(stderr.contains("the connection was lost"), "{stderr}");
    assert!(stderr.contains("transport ssh"), "{stderr}");
    let report = read_report(&out.join("report.json")).unwrap();
    assert!(report.record.samples.len() >= 4, "nothing measured is lost");
    assert_nothing_left_in(&remote_dir);
}

#[test]
fn a_remote_hang_is_a_hang_and_the_remote_worker_is_stopped() {
    let Some(sshd) = sshd_for("a_remote_hang_is_a_hang_and_the_remote_worker_is_stopped") else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let remote_dir = tmp.path().join("remote");
    let scenario = format!(
        "name: remote-hang\nengine: {{backend: sim, profile: cpu-flat, call_timeout: 2s}}\nturns: 4\n\
         turn:\n  - open: {{}}\n  - generate: {{max_output_tokens: 4}}\n  - close: {{}}\n\
         faults:\n  - {{at_turn: 2, kind: hang}}\n{}",
        sshd.target(&remote_dir, &this_binary())
    );
    let path = write(tmp.path(), "s.yaml", &scenario);
    let mut run = leakloop_run(&path, &tmp.path().join("out"));
    let (code, stdout, stderr) = wait_for(&mut run);
    let stderr = format!("{stdout}{stderr}");
    assert_eq!(code, Some(3), "{stderr}");
    assert!(stderr.contains("did not answer"), "{stderr}");
    assert!(stderr.contains("on ssh "), "{stderr}");
    assert_nothing_left_in(&remote_dir);
}

#[test]
fn an_interrupted_run_leaves_no_remote_worker() {
    // The server and the folders live as long as `slow`.
    let Some(mut slow) = start_slow_run("an_interrupted_run_leaves_no_remote_worker", 3) else {
        return;
    };
    let remote_dir = slow.remote_dir.clone();
    let run = &mut slow.run;
    assert!(remote_worker(&remote_dir).is_some());
    kill(Pid::from_raw(run.id() as i32), Signal::SIGINT).unwrap();
    let (code, stdout, stderr) = wait_for(run);
    let stderr = format!("{stdout}{stderr}");
    assert_eq!(code, Some(130), "{stderr}");
    assert_nothing_left_in(&remote_dir);
}

#[test]
fn an_ssh_host_that_does_not_resolve_is_a_bad_target_and_a_refused_port_an_engine_failure() {
    let tmp = tempfile::tempdir().unwrap();
    let free_port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    for (host, port, exit, says) in [
        (
            "no-such-host.invalid",
            22,
            2,
            "target ssh no-such-host.invalid",
        ),
        ("127.0.0.1", free_port, 3, "transport ssh 127.0.0.1"),
    ] {
        let scenario = format!(
            "name: unreachable\nengine: {{backend: sim, profile: cpu-flat}}\nturns: 1\n\
             turn:\n  - open: {{}}\n  - close: {{}}\ntarget:\n  ssh: {{host: {host}, port: {port}, \
             options: [ConnectTimeout=5]}}\n"
        );
        let path = write(tmp.path(), "s.yaml", &scenario);
        let mut run = leakloop_run(&path, &tmp.path().join(format!("out-{port}")));
        let (code, stdout, stderr) = wait_for(&mut run);
        let stderr = format!("{stdout}{stderr}");
        assert_eq!(code, Some(exit), "{host}:{port}: {stderr}");
        assert!(stderr.contains(says), "{host}:{port}: {stderr}");
    }
}

/// A fake `ssh` (`LEAKLOOP_SSH`) that only leaves a mark that it ran.
fn marking_ssh(dir: &Path, mark: &Path) -> PathBuf {
    let path = dir.join("ssh");
    std::fs::write(
        &path,
        format!("#!/bin/sh\ntouch '{}'\nexit 255\n", mark.display()),
    )
    .unwrap();
    let mode = <std::fs::Permissions as std::os::unix::fs::PermissionsExt>::from_mode(0o755);
    std::fs::set_permissions(&path, mode).unwrap();
    path
}

/// Regression: `ProxyCommand` (and every other option that runs a local command, reads another
/// configuration or connects elsewhere) passed `check` and ran at `run`, and a host holding
/// `$(...)` passed `check` and failed only at `run` (exit 3). Both are refused at `check` and
/// `run` (exit 2, located at the key), before ssh or anything an option names runs.
#[test]
fn dangerous_ssh_options_and_hosts_are_refused_before_anything_runs() {
    let tmp = tempfile::tempdir().unwrap();
    let mark = tmp.path().join("ran");
    let ssh = marking_ssh(tmp.path(), &mark);
    let touch = format!("touch {}", mark.display());
    for (target, key) in [
        (
            format!("{{host: 127.0.0.1, options: [\"ProxyCommand={touch}\"]}}"),
            "target.ssh.options[0]",
        ),
        (
            format!(
                "{{host: 127.0.0.1, options: [PermitLocalCommand=yes, \"LocalCommand {touch}\"]}}"
            ),
            "target.ssh.options[0]",
        ),
        (
            format!("{{host: 127.0.0.1, options: [\"knownhostscommand {touch}\"]}}"),
            "target.ssh.options[0]",
        ),
        (
            format!("{{host: 127.0.0.1, options: [ConnectTimeout=5, \"Match exec '{touch}'\"]}}"),
            "target.ssh.options[1]",
        ),
        (
            "{host: 127.0.0.1, options: [ProxyJump=elsewhere]}".to_owned(),
            "target.ssh.options[0]",
        ),
        (format!("{{host: \"$({touch})\"}}"), "target.ssh.host"),
        (format!("{{host: \"ci@$({touch})\"}}"), "target.ssh.host"),
    ] {
        let scenario = format!(
            "name: refused\nengine: {{backend: sim, profile: cpu-flat}}\nturns: 1\n\
             turn:\n  - open: {{}}\n  - close: {{}}\ntarget:\n  ssh: {target}\n"
        );
        let path = write(tmp.path(), "s.yaml", &scenario);
        for command in ["check", "run"] {
            let output = leakloop_command()
                .arg(command)
                .arg(&path)
                .env("LEAKLOOP_SSH", &ssh)
                .current_dir(tmp.path())
                .output()
                .unwrap();
            let text = crate::common::stdout_and_stderr(&output);
            assert_eq!(output.status.code(), Some(2), "{command} {target}: {text}");
            assert!(
                text.contains(&format!("`{key}`")) && text.contains("line 8"),
                "{command} {target}: {text}"
            );
            assert!(!mark.exists(), "{command} {target}: something ran");
        }
    }
}

/// Regression: a file named like an option (`-n`) stays a file on every command line over ssh.
#[test]
fn a_model_named_like_an_option_is_pushed_over_ssh() {
    let Some(sshd) = sshd_for("a_model_named_like_an_option_is_pushed_over_ssh") else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let remote_dir = tmp.path().join("remote");
    std::fs::write(tmp.path().join("-n"), "a model").unwrap();
    let scenario = format!(
        "name: remote-dash\nengine: {{backend: sim, profile: cpu-flat, model: '-n'}}\nturns: 2\n\
         turn:\n  - open: {{}}\n  - generate: {{max_output_tokens: 4}}\n  - close: {{}}\n{}    \
         push: [model]\n",
        sshd.target(&remote_dir, &this_binary())
    );
    write(tmp.path(), "dash.yaml", &scenario);
    // Run from the scenario's folder with a relative path, so the model's path is `-n` itself.
    let output = leakloop_command()
        .args(["run", "--quiet", "--out", "out", "dash.yaml"])
        .current_dir(tmp.path())
        .output()
        .unwrap();
    let text = crate::common::stdout_and_stderr(&output);
    assert_eq!(output.status.code(), Some(0), "{text}");
    assert_eq!(
        std::fs::read_to_string(remote_dir.join("-n")).unwrap(),
        "a model"
    );
    assert_nothing_left_in(&remote_dir);
}
