//! A test binary as its own worker. A scenario that runs isolated (`engine.isolate`, the default
//! for real engines) needs a process that serves the engine over the worker protocol. In a test,
//! that is the test binary itself: it is started again with a filter that selects only the test
//! that is running (`--exact NAME`) and [`SERVE_ENV`] set; in that child the test reaches
//! [`ScenarioTest::run`](super::ScenarioTest::run) again, which serves the engine the runner's
//! handshake names (or the test's own, given with
//! [`ScenarioTest::engine`](super::ScenarioTest::engine)) and exits instead of running the
//! scenario.

use std::ffi::OsString;

use crate::engine::worker::serve_stdio;
use crate::engine::{serve_worker, WorkerCommand};
use crate::scenario::Scenario;

use super::own_engine::OwnEngine;

/// Set in the environment of a test binary started as a worker: `1` when it serves the engine
/// the runner's handshake names (one of leakloop's), [`SERVE_OWN_ENGINE`] when it serves the
/// test's own engine ([`ScenarioTest::engine`](super::ScenarioTest::engine)).
pub const SERVE_ENV: &str = "LEAKLOOP_SERVE_AS_WORKER";

/// The value of [`SERVE_ENV`] that asks for the test's own engine.
pub const SERVE_OWN_ENGINE: &str = "engine";

/// When this process was started as a worker (see the module docs): serves the engine on
/// stdin/stdout until the runner closes it, then exits the process. Returns at once otherwise,
/// and also when the worker is to serve the test's own engine, which only
/// [`ScenarioTest::run`](super::ScenarioTest::run) knows (it serves it there).
///
/// [`ScenarioTest::run`](super::ScenarioTest::run) calls it first. A test binary with its own
/// `main` (`harness = false`) calls it at the start of `main` and passes its own command to
/// [`ScenarioTest::worker`](super::ScenarioTest::worker).
pub fn serve_worker_if_requested() {
    serve_if_requested(None);
}

/// Serves and exits when this process is a worker: `own` (the test's own engine, for its
/// scenario) when the runner asked for it, else the engine the handshake names. Returns when
/// this process is not a worker, or when it is to serve an own engine that `own` does not give.
pub(super) fn serve_if_requested(own: Option<(&OwnEngine, &Scenario)>) {
    let Some(asked) = std::env::var_os(SERVE_ENV) else {
        return;
    };
    let result = if asked == SERVE_OWN_ENGINE {
        let Some((own, mine)) = own else {
            return;
        };
        end_framework_line();
        serve_stdio(
            None,
            Box::new(|asked: &Scenario| own.build_for(asked, mine)),
        )
        .map_err(|e| e.to_string())
    } else {
        end_framework_line();
        serve_worker().map_err(|e| e.to_string())
    };
    if let Err(err) = &result {
        eprintln!("leakloop test worker: {err}");
    }
    // Exit here: the test framework must print nothing more on the protocol's pipe, and the
    // rest of the test must not run in the worker.
    std::process::exit(if result.is_ok() { 0 } else { 2 });
}

/// Ends a line the test framework may have left open. The worker is started with `--quiet`, so
/// libtest prints no `test NAME ... ` (which it writes without a newline); a framework that
/// prints one anyway gets its line ended before the handshake reply, and the runner skips it as
/// a line before the handshake.
fn end_framework_line() {
    println!();
}

/// The command that starts this test binary again as a worker running only the current test.
/// The current test is the name the test framework gives the thread it runs the test on; `Err`
/// says why it cannot be told (called from `main`, or from a thread the test started).
///
/// ```
/// // A doctest runs in `main`, which is no test's thread.
/// let err = leakloop::testing::this_test_worker().unwrap_err();
/// assert!(err.contains("cannot tell which test is running"));
/// ```
pub fn this_test_worker() -> Result<WorkerCommand, String> {
    let program = std::env::current_exe()
        .map_err(|e| format!("cannot find this test binary to start it as the worker: {e}"))?;
    let thread = std::thread::current();
    let test = thread
        .name()
        .filter(|name| *name != "main")
        .ok_or_else(|| {
            "cannot tell which test is running (no test name on this thread): run the scenario \
         from the test's own thread, or pass a worker with ScenarioTest::worker"
                .to_owned()
        })?;
    Ok(test_worker_command(program, test, "1"))
}

/// [`this_test_worker`] for a test that serves its own engine.
pub(super) fn this_test_worker_for_own_engine() -> Result<WorkerCommand, String> {
    let mut command = this_test_worker()?;
    command.env = vec![(SERVE_ENV.to_owned(), SERVE_OWN_ENGINE.to_owned())];
    Ok(command)
}

/// `program TEST --exact ...` with [`SERVE_ENV`] set to `serve`: runs only `TEST`, uncaptured,
/// even when it is `#[ignore]`d, and quietly: without `--quiet` libtest writes `test TEST ... `
/// on stdout, the protocol's pipe, without ending the line (issue 21).
fn test_worker_command(program: std::path::PathBuf, test: &str, serve: &str) -> WorkerCommand {
    let args = [
        test,
        "--exact",
        "--include-ignored",
        "--nocapture",
        "--test-threads=1",
        "--quiet",
    ];
    WorkerCommand {
        program,
        args: args.into_iter().map(OsString::from).collect(),
        env: vec![(SERVE_ENV.to_owned(), serve.to_owned())],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_worker_is_this_test_alone() {
        let command = this_test_worker().unwrap();
        assert_eq!(command.program, std::env::current_exe().unwrap());
        assert_eq!(
            command.args[..2],
            [
                OsString::from("testing::worker::tests::the_worker_is_this_test_alone"),
                OsString::from("--exact")
            ]
        );
        assert_eq!(command.env, [(SERVE_ENV.to_owned(), "1".to_owned())]);
    }

    #[test]
    fn a_thread_without_a_test_name_is_refused_with_the_way_out() {
        let err = std::thread::spawn(this_test_worker)
            .join()
            .unwrap()
            .unwrap_err();
        assert!(err.contains("ScenarioTest::worker"), "{err}");
    }
}
