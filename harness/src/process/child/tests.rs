use std::io::{BufRead, BufReader};
use std::process::Stdio;
use std::time::Instant;

use super::*;

/// Whether `pid` names no live process (absent, or a zombie) within a bounded wait.
pub(crate) fn gone_soon(pid: u32) -> bool {
    let deadline = Instant::now() + Duration::from_secs(10);
    while pid_alive(pid) {
        if Instant::now() > deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    true
}

fn sh(script: &str) -> Process {
    let mut command = Command::new("sh");
    command
        .args(["-c", script])
        .stdin(Stdio::null())
        .stdout(Stdio::piped());
    Process::spawn(command, libc::SIGKILL).unwrap()
}

/// The first line `process` prints (it says when it is ready, and which pid it started).
fn first_line(process: &mut Process) -> String {
    let mut line = String::new();
    BufReader::new(process.take_stdout().unwrap())
        .read_line(&mut line)
        .unwrap();
    line.trim().to_owned()
}

#[test]
fn dropping_kills_a_child_that_ignores_sigterm_with_its_grandchild() {
    let mut process = sh("trap '' TERM; sleep 300 & echo $!; wait");
    let grandchild: u32 = first_line(&mut process).parse().unwrap();
    let pid = process.id();
    assert!(pid_alive(pid) && pid_alive(grandchild));
    drop(process);
    // Reaped by the drop: no zombie of ours is left either.
    assert!(!pid_alive(pid));
    assert!(gone_soon(grandchild), "the grandchild outlived the drop");
}

#[test]
fn a_wait_that_times_out_says_so_and_the_process_runs_on() {
    let mut process = sh("echo ready; sleep 300");
    first_line(&mut process);
    assert_eq!(process.wait_timeout(Duration::from_millis(50)), None);
    assert!(pid_alive(process.id()));
    let status = process.kill(KILL_GRACE).expect("killed and reaped");
    assert_eq!(status.signal(), Some(libc::SIGKILL));
}

#[test]
fn a_process_that_ignores_sigterm_is_killed_after_the_grace_time() {
    let mut process = sh("trap '' TERM; echo ready; sleep 300");
    first_line(&mut process);
    assert_eq!(process.stop(Duration::from_millis(200)), Stopped::Killed);
    assert!(!pid_alive(process.id()));
}

#[test]
fn a_process_that_exits_on_sigterm_is_stopped_by_it() {
    let mut command = Command::new("sleep");
    command.arg("300");
    let mut process = Process::spawn(command, libc::SIGTERM).unwrap();
    match process.stop(Duration::from_secs(30)) {
        Stopped::Terminated(status) => assert_eq!(status.signal(), Some(libc::SIGTERM)),
        other => panic!("{other:?}"),
    }
}

/// Issue 20: a leader that exited is seen without being reaped, so its group (a wrapper's
/// leftover child) is signalled while the leader's zombie still holds the group's id.
#[test]
fn a_wrapper_that_exited_is_not_reaped_before_its_leftovers_are_killed() {
    let mut process = sh("sleep 300 & echo $!; exit 0");
    let leftover: u32 = first_line(&mut process).parse().unwrap();
    let status = process
        .wait_timeout(Duration::from_secs(30))
        .expect("the wrapper exited");
    assert_eq!(status.code(), Some(0));
    assert!(!process.reaped);
    let stat = std::fs::read_to_string(format!("/proc/{}/stat", process.id())).unwrap();
    assert!(stat.contains(") Z"), "the leader was reaped early: {stat}");
    assert!(pid_alive(leftover));
    assert_eq!(
        process.stop(Duration::from_secs(5)),
        Stopped::ByItself(status)
    );
    assert!(process.reaped);
    assert!(
        gone_soon(leftover),
        "the wrapper's leftover child outlived stop()"
    );
}
