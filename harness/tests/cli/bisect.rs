//! `leakloop bisect`: the simulated builds of `bisect-sim-builds.yaml` (a native leak injected
//! from build-5 on) must be found in order and by bisection; bad ranges are bad input.

use std::process::Output;

use crate::common::{leakloop_command, workspace};

const SCENARIO: &str = "fixtures/scenarios/bisect-sim-builds.yaml";

fn bisect(args: &[&str]) -> Output {
    leakloop_command()
        .arg("bisect")
        .args(args)
        .current_dir(workspace())
        .output()
        .expect("the leakloop binary runs")
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The build names in the table that ran (a number of runs in the second column).
fn ran(table: &str) -> Vec<String> {
    table
        .lines()
        .filter(|l| l.starts_with("build-"))
        .filter(|l| l.split_whitespace().nth(1) != Some("-"))
        .map(|l| l.split_whitespace().next().unwrap().to_owned())
        .collect()
}

#[test]
fn every_build_in_order_finds_the_injected_leak() {
    let tmp = tempfile::tempdir().unwrap();
    let out_dir = tmp.path().join("bisect");
    let out = bisect(&[
        SCENARIO,
        "--versions",
        "build-0..build-7",
        "--out",
        out_dir.to_str().unwrap(),
    ]);
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(0), "{text}\n{out:?}");
    assert!(text.contains("first change: build-5 ("), "{text}");
    assert_eq!(ran(&text).len(), 8, "{text}");
    // Three runs per build, each with its own seed: a spread that is not zero.
    let row = text.lines().find(|l| l.starts_with("build-0")).unwrap();
    assert!(row.contains("3 PASS"), "{row}");
    assert!(!row.contains(" 0 B/turn"), "no spread measured: {row}");
    let svg = std::fs::read_to_string(out_dir.join("trend.svg")).unwrap();
    let texts: Vec<&str> = svg.lines().map(str::trim).collect();
    for label in ["build-0", "build-5", "build-7", "first change"] {
        assert!(texts.contains(&label), "{label} not in trend.svg");
    }
    assert_eq!(
        std::fs::read_to_string(out_dir.join("bisect.txt")).unwrap(),
        text.lines()
            .filter(|l| !l.starts_with("trend plot:"))
            .map(|l| format!("{l}\n"))
            .collect::<String>()
    );
    assert!(out_dir.join("build-5/run-3/report.json").is_file());
}

#[test]
fn bisection_finds_it_running_fewer_builds() {
    let out = bisect(&[SCENARIO, "--versions", "build-0..build-7", "--bisect"]);
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(0), "{text}\n{out:?}");
    assert!(text.contains("first change: build-5 ("), "{text}");
    let ran = ran(&text);
    assert!(ran.len() <= 5, "ran {ran:?}");
    assert!(ran.contains(&"build-5".to_owned()) && ran.contains(&"build-4".to_owned()));
}

#[test]
fn a_range_without_the_leak_finds_no_change() {
    let out = bisect(&[SCENARIO, "--versions", "build-0..build-4", "--runs", "2"]);
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert!(
        text.contains("no change beyond the run-to-run spread"),
        "{text}"
    );
}

#[test]
fn an_unknown_build_is_bad_input() {
    let out = bisect(&[SCENARIO, "--versions", "build-0..build-99"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("`build-99` is not one of the scenario's profiles"),
        "{stderr}"
    );
    let out = bisect(&["fixtures/scenarios/opencl-clean.yaml", "--versions", "a..b"]);
    assert_eq!(out.status.code(), Some(2));
}

/// A fetched release's library, or `None` after a visible skip (a failure under
/// `LEAKLOOP_REQUIRE_ENGINE=1`).
fn release(test: &str, version: &str) -> Option<std::path::PathBuf> {
    let lib = workspace()
        .join("target/litert-lm")
        .join(version)
        .join("liblitert-lm.so");
    if lib.is_file() {
        return Some(lib);
    }
    leakloop::engine::skip_or_require(
        "LEAKLOOP_REQUIRE_ENGINE",
        &format!(
            "{test}: LiteRT-LM {version} is not fetched (run ci/fetch-litert-lm.sh {version})"
        ),
    );
    None
}

/// A real difference between two real releases: the native heap's peak in the chat loop is
/// 6.2 MiB on 0.11.0 and 5.2-5.3 MiB from 0.12.0 on, with a run-to-run spread of a few KiB.
#[test]
fn bisect_reports_the_native_heap_difference_between_0_11_and_0_14() {
    let test = "bisect_reports_the_native_heap_difference_between_0_11_and_0_14";
    let (Some(_), Some(_)) = (release(test, "0.11.0"), release(test, "0.14.0")) else {
        return;
    };
    let out = bisect(&[
        "fixtures/scenarios/litert-cpu-chat.yaml",
        "--versions",
        "0.11.0,0.14.0",
        "--metric",
        "peak",
        "--watch",
        "native_heap",
        "--runs",
        "2",
        "--turns",
        "4",
        "--offline",
    ]);
    let text = stdout(&out);
    let stderr = String::from_utf8_lossy(&out.stderr);
    if text.contains("libvulkan.so.1") {
        return leakloop::engine::skip_or_require(
            "LEAKLOOP_REQUIRE_ENGINE",
            &format!("{test}: libvulkan.so.1 is missing (apt-get install libvulkan1)"),
        );
    }
    assert_eq!(out.status.code(), Some(0), "{text}\n{stderr}");
    assert!(text.contains("first change: 0.14.0 ("), "{text}\n{stderr}");
    assert!(text.contains("against 6."), "{text}");
}

/// Merge of bisect with the claimed `--out` folder: bisect claims its folder as `run` does, so a
/// folder another run holds is refused (exit 2) and the previous bisect's table and plot are
/// gone before anything can fail.
#[test]
#[cfg(target_os = "linux")]
fn the_out_folder_is_claimed_like_runs() {
    let dir = tempfile::tempdir().unwrap();
    let stale = dir.path().join("stale");
    std::fs::create_dir(&stale).unwrap();
    for name in ["trend.svg", "bisect.txt"] {
        std::fs::write(stale.join(name), "an earlier bisect").unwrap();
    }
    let stale_text = stale.to_str().unwrap();
    let out = bisect(&[
        SCENARIO,
        "--versions",
        "build-0..build-99",
        "--out",
        stale_text,
    ]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    for name in ["trend.svg", "bisect.txt"] {
        assert!(!stale.join(name).exists(), "{name} of the earlier bisect");
    }

    let busy = dir.path().join("busy");
    let _run =
        crate::interrupted::start_hanging_run_with(dir.path(), &busy, std::process::Stdio::null());
    let busy_text = busy.to_str().unwrap();
    let out = bisect(&[
        SCENARIO,
        "--versions",
        "build-4..build-5",
        "--out",
        busy_text,
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("is in use by another leakloop process"),
        "{stderr}"
    );
}

/// A published release that is not fetched into this workspace, for the fetch tests.
fn unfetched_release() -> String {
    let list = std::fs::read_to_string(workspace().join("ci/litert-lm-releases.txt")).unwrap();
    list.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#') && !l.contains(".dev"))
        .find(|v| {
            !workspace()
                .join("target/litert-lm")
                .join(v)
                .join("liblitert-lm.so")
                .exists()
        })
        .expect("some release is not fetched here")
        .to_owned()
}

/// Writes an executable shell script.
fn script(path: &std::path::Path, body: &str) {
    std::fs::write(path, format!("#!/bin/sh\n{body}")).unwrap();
    let mode = <std::fs::Permissions as std::os::unix::fs::PermissionsExt>::from_mode(0o755);
    std::fs::set_permissions(path, mode).unwrap();
}

/// Regression: a missing build was fetched by running `ci/fetch-litert-lm.sh` at the path of the
/// workspace leakloop was built in, wherever the binary ran. That script runs `$PIP download`,
/// so a `PIP` that leaves a mark shows whether it ran: it must not, and the build is reported as
/// not fetched with the command that fetches it.
#[test]
fn bisect_runs_no_fetch_script_it_was_not_given() {
    let tmp = tempfile::tempdir().unwrap();
    let mark = tmp.path().join("pip-ran");
    let pip = tmp.path().join("pip");
    script(
        &pip,
        &format!("echo \"$@\" > '{}'\nexit 1\n", mark.display()),
    );
    let version = unfetched_release();
    let out = leakloop_command()
        .args([
            "bisect",
            "fixtures/scenarios/litert-cpu-chat.yaml",
            "--versions",
        ])
        .arg(&version)
        .args(["--runs", "1"])
        .current_dir(workspace())
        .env("PIP", &pip)
        .env("LITERT_LM_DIR", tmp.path().join("fetched"))
        .env_remove("LEAKLOOP_FETCH_SCRIPT")
        .output()
        .unwrap();
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(3), "{text}\n{out:?}");
    assert!(!mark.exists(), "a fetch script nobody named ran");
    assert!(
        text.contains(&format!(
            "not fetched (no --fetch-script): fetch it with `ci/fetch-litert-lm.sh {version}`"
        )),
        "{text}"
    );
}

/// A fetch script named with `--fetch-script` or `LEAKLOOP_FETCH_SCRIPT` is run with the version.
#[test]
fn bisect_fetches_through_the_script_it_is_given() {
    let tmp = tempfile::tempdir().unwrap();
    let log = tmp.path().join("fetch.log");
    let fetch = tmp.path().join("fetch.sh");
    script(
        &fetch,
        &format!(
            "echo \"$@\" >> '{}'\necho 'no network here' >&2\nexit 1\n",
            log.display()
        ),
    );
    let version = unfetched_release();
    let bisect_with = |flag: bool| {
        let mut command = leakloop_command();
        command
            .args([
                "bisect",
                "fixtures/scenarios/litert-cpu-chat.yaml",
                "--versions",
            ])
            .arg(&version)
            .args(["--runs", "1"])
            .current_dir(workspace());
        if flag {
            command.arg("--fetch-script").arg(&fetch);
            command.env_remove("LEAKLOOP_FETCH_SCRIPT");
        } else {
            command.env("LEAKLOOP_FETCH_SCRIPT", &fetch);
        }
        command.output().unwrap()
    };
    for flag in [true, false] {
        let out = bisect_with(flag);
        let text = stdout(&out);
        assert_eq!(out.status.code(), Some(3), "{text}\n{out:?}");
        assert!(text.contains("failed: no network here"), "{text}");
    }
    assert_eq!(
        std::fs::read_to_string(&log).unwrap(),
        format!("{version}\n{version}\n")
    );
}
