//! A test binary as its own worker. A scenario that runs isolated (`engine.isolate`, the default
//! for real engines) needs a process that serves the engine over the worker protocol. In a test,
//! that is the test binary itself: it is started again with a filter that selects only the test
//! that is running (`--exact NAME`) and [`SERVE_ENV`] set; in that child the test reaches
//! [`ScenarioTest::run`](super::ScenarioTest::run) again, which serves the engine the runner's
//! handshake names and exits instead of running the scenario.

use std::ffi::OsString;

use crate::engine::{serve_worker, WorkerCommand};

/// Set in the environment of a test binary started as a worker.
pub const SERVE_ENV: &str = "LEAKLOOP_SERVE_AS_WORKER";

/// When this process was started as a worker (see the module docs): serves the engine on
/// stdin/stdout until the runner closes it, then exits the process. Returns at once otherwise.
///
/// [`ScenarioTest::run`](super::ScenarioTest::run) calls it first. A test binary with its own
/// `main` (`harness = false`) calls it at the start of `main` and passes its own command to
/// [`ScenarioTest::worker`](super::ScenarioTest::worker).
pub fn serve_worker_if_requested() {
    if std::env::var_os(SERVE_ENV).is_none() {
        return;
    }
    // The test framework has printed `test NAME ... ` without ending the line; end it so that
    // the handshake reply starts a line of its own (lines before the handshake are ignored).
    println!();
    let result = serve_worker();
    if let Err(err) = &result {
        eprintln!("leakloop test worker: {err}");
    }
    // Exit here: the test framework must print nothing more on the protocol's pipe, and the
    // rest of the test must not run in the worker.
    std::process::exit(if result.is_ok() { 0 } else { 2 });
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
    Ok(test_worker_command(program, test))
}

/// `program TEST --exact ...` with [`SERVE_ENV`] set: runs only `TEST`, uncaptured, even when
/// it is `#[ignore]`d.
fn test_worker_command(program: std::path::PathBuf, test: &str) -> WorkerCommand {
    let args = [
        test,
        "--exact",
        "--include-ignored",
        "--nocapture",
        "--test-threads=1",
    ];
    WorkerCommand {
        program,
        args: args.into_iter().map(OsString::from).collect(),
        env: vec![(SERVE_ENV.to_owned(), "1".to_owned())],
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
