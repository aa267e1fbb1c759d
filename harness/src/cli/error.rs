//! The CLI's one error type, the documented exit codes, and the one place that decides which
//! code a command ends with.
//!
//! Every subcommand returns an [`Outcome`] or a [`CliError`]. Errors are built from the typed
//! errors of the lower layers through the `From` impls below, so each kind of failure maps to
//! one code whatever command meets it. [`decide`] then combines the command's result with what
//! happened to standard output: once a verdict is known, it decides the code, and a later
//! output failure is a warning next to it.

use std::io::ErrorKind;

use crate::analyze::{TraceError, Verdict, VerdictStatus};
use crate::bench::OverheadError;
use crate::bisect::BisectError;
use crate::engine::litert_lm::{DiscoverError, InspectError, LibraryRefusal};
use crate::engine::transport::{BuildError, TargetError};
use crate::engine::EngineError;
use crate::engine::WorkerError;
use crate::input::InputError;
use crate::report::ReportError;
use crate::runner::{RunOutcome, RunRecord};
use crate::scenario::ScenarioError;
use crate::session::{BaselineError, SessionError};

/// What each exit code means, for every command (`leakloop --help`; docs/exit-codes.md has the
/// same codes in a table).
pub(crate) const EXIT_CODES_HELP: &str = "\
Exit codes (every command):
  0  pass: every expectation held (check: every file is valid, and with --lib the library
     runs it; analyze: no metric grows; bench: done; bisect: the table is printed;
     history: no regression across the builds)
  1  an expectation failed: a leak, an unbalanced create/delete (analyze: a metric grows;
     run --baseline: a significant rise over the baseline; history: a regression;
     driver-check: the driver broke the protocol)
  2  bad input or usage: a malformed scenario, trace or report, a missing or unreadable input
     file, a bad flag or override, a library that cannot run a step of the scenario (check
     --lib, run, compare, bisect), builds that bisect cannot name, a target that cannot be
     used as written (an ssh host that does not resolve, an unknown adb serial)
  3  the engine failed: crash, hang, load error, a missing engine library, unscripted engine
     errors, a remote machine or device that is unreachable or lost; bisect: no build measured
     the figure; driver-check: the driver cannot be started
  4  output could not be written before there was a verdict: the --out folder, or stdout of a
     command without a verdict (bench, bisect); run, merge: every scenario passed but --record
     could not record them all (their folders are written)
  5  inconclusive: no expectation failed, but one could not be decided within the run's
     turns (not shown clean; analyze: a metric is inconclusive), with --on-inconclusive fail
     (run's default); with --on-inconclusive pass such a run exits 0
  130  run: interrupted by SIGINT; the partial report is written, marked interrupted
  143  run: interrupted by SIGTERM (a CI job's timeout); the partial report is written
Once a verdict is known it decides the code; a later failure to write output is a warning.
A closed pipe on stdout (`| head`) ends the output quietly.";

/// The documented exit codes (docs/exit-codes.md, generated from this type, and `leakloop
/// --help`), ordered so that the worse of two verdicts is the larger (see [`Exit::severity`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Exit {
    /// Every expectation held (`check`: every file is valid; `analyze`: no metric grows).
    Pass = 0,
    /// An expectation failed (a leak, an unbalanced create/delete; `analyze`: a metric grows).
    ExpectationFailed = 1,
    /// Bad input or usage (a malformed scenario or trace, a missing or unreadable input file, a
    /// bad flag).
    BadInput = 2,
    /// The engine failed (crash, hang, load error, a missing engine library).
    EngineFailed = 3,
    /// Output could not be written before there was a verdict (the `--out` folder, standard
    /// output of a command without a verdict).
    OutputFailed = 4,
    /// No expectation failed, but at least one could not be decided within the run (`analyze`:
    /// a metric is inconclusive), and `--on-inconclusive fail` asked for a non-zero code. Worse
    /// than a pass, better than a leak shown.
    Inconclusive = 5,
    /// `run` was stopped by SIGINT; it wrote a partial report marked interrupted (128 + 2, what a
    /// shell reports for a process that SIGINT ended).
    InterruptedBySigint = 130,
    /// `run` was stopped by SIGTERM (a CI job's timeout); it wrote a partial report marked
    /// interrupted (128 + 15).
    InterruptedBySigterm = 143,
}

impl PartialOrd for Exit {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Exit {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.severity().cmp(&other.severity())
    }
}

impl Exit {
    /// How bad the code is, for [`Exit::worst`]: the number itself, except that an inconclusive
    /// run (5, a code added after the others) ranks just above a pass and below a leak shown.
    fn severity(self) -> u16 {
        crate::suite::exit_severity(self as u8)
    }

    /// The exit code a saved or compared verdict maps to, inconclusive by the default policy
    /// (`--on-inconclusive fail`). A run that was interrupted did not finish, so its verdict read
    /// back (`report`) counts as an engine failure.
    pub fn of_verdict(status: VerdictStatus) -> Exit {
        Exit::of_verdict_with(status, OnInconclusive::default())
    }

    /// As [`Exit::of_verdict`], with an inconclusive verdict mapped by `policy`.
    pub fn of_verdict_with(status: VerdictStatus, policy: OnInconclusive) -> Exit {
        match status {
            VerdictStatus::Pass => Exit::Pass,
            VerdictStatus::Fail => Exit::ExpectationFailed,
            VerdictStatus::Inconclusive => policy.exit(),
            VerdictStatus::EngineFailed | VerdictStatus::Interrupted => Exit::EngineFailed,
        }
    }

    /// The exit code of a run that just ended with `verdict`: its verdict's (an inconclusive
    /// one by `policy`), or 128 + the signal's number when a signal stopped it.
    pub fn of_run(record: &RunRecord, verdict: &Verdict, policy: OnInconclusive) -> Exit {
        match (&record.outcome, verdict.status) {
            (RunOutcome::Interrupted { signal, .. }, VerdictStatus::Interrupted) => {
                Exit::interrupted(signal)
            }
            (_, status) => Exit::of_verdict_with(status, policy),
        }
    }

    /// The worst of several scenarios' codes (a suite, a merge): the largest in the order of
    /// [`Exit::severity`] (pass < inconclusive < an expectation failed < bad input < engine
    /// failed < output failed < interrupted), so that a suite with a leak and a crash exits 3, one with a leak and a
    /// scenario that was interrupted exits 130 or 143. No codes at all: pass.
    pub fn worst(codes: impl IntoIterator<Item = Exit>) -> Exit {
        codes.into_iter().max().unwrap_or(Exit::Pass)
    }

    /// The code with this number, if it is one of the documented ones (a suite report read back).
    pub fn from_code(code: u8) -> Option<Exit> {
        Exit::ALL.into_iter().find(|e| *e as u8 == code)
    }

    /// What the code means, whatever the command: the first column of docs/exit-codes.md
    /// (generated, see `cli/reference.rs`; what it means per command is in `cli/exit_table.rs`).
    pub fn meaning(self) -> &'static str {
        match self {
            Exit::Pass => "pass",
            Exit::ExpectationFailed => "an expectation failed: a leak, an unbalanced create/delete",
            Exit::BadInput => {
                "bad input or usage: a malformed scenario, trace or report, a missing, unreadable \
                 or non-regular input file, a bad flag or override, a busy `--out` folder, a \
                 library that cannot run a step of the scenario"
            }
            Exit::EngineFailed => {
                "the engine failed: crash, hang, load error, a missing engine library, engine \
                 errors the scenario did not script"
            }
            Exit::OutputFailed => {
                "output could not be written before there was a verdict; a pass that `--record` \
                 could not record"
            }
            Exit::Inconclusive => {
                "inconclusive: no expectation failed, but one could not be decided within the \
                 run (not shown clean), with `--on-inconclusive fail`"
            }
            Exit::InterruptedBySigint => {
                "interrupted by SIGINT (Ctrl-C): 128 + 2, as a shell reports it"
            }
            Exit::InterruptedBySigterm => {
                "interrupted by SIGTERM (what a CI job's timeout sends): 128 + 15"
            }
        }
    }

    /// Every documented code, in order.
    pub const ALL: [Exit; 8] = [
        Exit::Pass,
        Exit::ExpectationFailed,
        Exit::BadInput,
        Exit::EngineFailed,
        Exit::OutputFailed,
        Exit::Inconclusive,
        Exit::InterruptedBySigint,
        Exit::InterruptedBySigterm,
    ];

    /// The code of a command whose verdict is `self` but which could not record every run in
    /// its `--record` database (their folders are written): a pass becomes 4, as output that
    /// could not be written, so that a nightly does not lose its history unnoticed; any other
    /// verdict keeps its code (a leak or a crash says more than the database).
    pub fn with_record_failure(self) -> Exit {
        match self {
            Exit::Pass => Exit::OutputFailed,
            other => other,
        }
    }

    /// The exit code of a run stopped by `signal` (`SIGINT` or `SIGTERM`).
    pub fn interrupted(signal: &str) -> Exit {
        if signal == "SIGINT" {
            Exit::InterruptedBySigint
        } else {
            Exit::InterruptedBySigterm
        }
    }
}

/// What an inconclusive verdict exits with (`--on-inconclusive`): a gate that must show a build
/// clean fails it, one that only stops builds shown leaking passes it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum OnInconclusive {
    /// Exit 5: not shown clean is not a pass (the default of `run`).
    #[default]
    Fail,
    /// Exit 0: only a leak shown fails (the report still says inconclusive).
    Pass,
}

impl OnInconclusive {
    /// The exit code of an inconclusive verdict under this policy.
    pub fn exit(self) -> Exit {
        match self {
            OnInconclusive::Fail => Exit::Inconclusive,
            OnInconclusive::Pass => Exit::Pass,
        }
    }
}

/// What a subcommand ended with, when it did not fail.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// A verdict (run, check, analyze, report, compare): it decides the exit code.
    Verdict(Exit),
    /// Done, with nothing to judge (bench, worker, help): exit 0 unless its output failed.
    Done,
}

/// Everything that can stop a subcommand, each mapped to one exit code.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    /// Bad input or usage: exit 2.
    #[error(transparent)]
    BadInput(anyhow::Error),
    /// The engine failed before anything could be judged: exit 3.
    #[error(transparent)]
    Engine(anyhow::Error),
    /// Output could not be written before there was a verdict: exit 4.
    #[error(transparent)]
    Output(anyhow::Error),
    /// The command line did not parse (clap's own explanation): exit 2.
    #[error("{0}")]
    Usage(String),
}

impl CliError {
    /// The exit code this error ends the process with.
    pub fn exit(&self) -> Exit {
        match self {
            CliError::BadInput(_) | CliError::Usage(_) => Exit::BadInput,
            CliError::Engine(_) => Exit::EngineFailed,
            CliError::Output(_) => Exit::OutputFailed,
        }
    }

    /// A bad-input error from anything printable.
    pub fn bad_input(message: impl std::fmt::Display) -> Self {
        CliError::BadInput(anyhow::anyhow!("{message}"))
    }

    /// The same error with `context` in front of its message, keeping its code.
    pub fn context(self, context: impl std::fmt::Display + Send + Sync + 'static) -> Self {
        match self {
            CliError::BadInput(e) => CliError::BadInput(e.context(context)),
            CliError::Engine(e) => CliError::Engine(e.context(context)),
            CliError::Output(e) => CliError::Output(e.context(context)),
            CliError::Usage(text) => CliError::Usage(format!("{context}: {text}")),
        }
    }
}

/// Maps whole error types to one code each.
macro_rules! exit_by_type {
    ($variant:ident: $($error:ty),+ $(,)?) => {
        $(impl From<$error> for CliError {
            fn from(e: $error) -> Self {
                CliError::$variant(e.into())
            }
        })+
    };
}

// A scenario, trace or input file that cannot be used is bad input, and so is a scenario that
// the chosen engine library cannot run (a step needs a capability the release lacks).
// A baseline that cannot be used is bad input too.
exit_by_type!(BadInput: ScenarioError, TraceError, InputError, LibraryRefusal, BaselineError);
// An engine that cannot be built (its library missing, named or discovered; its model unusable;
// a worker that does not start), or the runner benchmark's engine failing, is an engine failure.
exit_by_type!(Engine: EngineError, OverheadError, DiscoverError, InspectError);

impl From<ReportError> for CliError {
    fn from(e: ReportError) -> Self {
        match e {
            ReportError::Write { .. }
            | ReportError::Render { .. }
            | ReportError::Several { .. } => CliError::Output(e.into()),
            // A folder another run holds is a usage error: wait, or choose another --out.
            ReportError::Read { .. }
            | ReportError::Input(_)
            | ReportError::Parse { .. }
            | ReportError::FormatVersion { .. }
            | ReportError::Inconsistent { .. }
            | ReportError::Implausible { .. }
            | ReportError::Busy { .. }
            | ReportError::UnsafeName(_)
            | ReportError::Walk(_)
            | ReportError::NothingToReport { .. } => CliError::BadInput(e.into()),
        }
    }
}

/// A results database that `history --db` cannot read is bad input, as a folder would be.
/// (`--record` never stops a run with one: see `cli/record.rs` and
/// [`Exit::with_record_failure`].)
impl From<crate::results_db::DbError> for CliError {
    fn from(e: crate::results_db::DbError) -> Self {
        CliError::BadInput(e.into())
    }
}

/// A target that cannot be used as written is bad input; a transport or device that is not
/// there, or vanishes, is an engine failure.
impl From<TargetError> for CliError {
    fn from(e: TargetError) -> Self {
        if e.is_bad_target() {
            CliError::BadInput(e.into())
        } else {
            CliError::Engine(e.into())
        }
    }
}

impl From<BuildError> for CliError {
    fn from(e: BuildError) -> Self {
        match e {
            BuildError::Target(e) => e.into(),
            BuildError::Engine(e) => e.into(),
        }
    }
}

/// A session that cannot run maps by what stopped it; an engine that cannot be started says
/// which scenario it was for, keeping the code of its cause.
impl From<SessionError> for CliError {
    fn from(e: SessionError) -> Self {
        match e {
            SessionError::Scenario(e) => e.into(),
            SessionError::BuildStamp(e) => CliError::bad_input(e),
            SessionError::Baseline(e) => e.into(),
            SessionError::Refused(e) => e.into(),
            SessionError::Start {
                backend,
                scenario,
                source,
            } => CliError::from(source).context(format!(
                "cannot start the `{backend}` engine for {scenario}"
            )),
            SessionError::Out(e) => e.into(),
        }
    }
}

/// A worker whose engine cannot be built is an engine failure; one that is spoken to out of
/// protocol (or whose pipes break) had bad input.
impl From<WorkerError> for CliError {
    fn from(e: WorkerError) -> Self {
        match e {
            WorkerError::Build(_) => CliError::Engine(e.into()),
            _ => CliError::BadInput(e.into()),
        }
    }
}

/// `bisect`: builds that cannot be named are bad input; a library path that is no library, and a
/// series in which no build measured the figure (the table says why each one failed), are engine
/// failures, as a missing `--lib` is for `run`.
impl From<BisectError> for CliError {
    fn from(e: BisectError) -> Self {
        match e {
            BisectError::Builds(_) | BisectError::NoBuild { .. } | BisectError::Refused { .. } => {
                CliError::BadInput(e.into())
            }
            BisectError::Library(_) | BisectError::NothingMeasured { .. } => {
                CliError::Engine(e.into())
            }
        }
    }
}

/// How a command ends: its exit code, and what to say on stderr.
#[derive(Debug, PartialEq, Eq)]
pub struct Decision {
    /// The exit code.
    pub exit: Exit,
    /// The text for stderr (`error: ...`, `warning: ...`, or clap's usage message).
    pub stderr: Option<String>,
}

/// The one place that decides a command's exit code: from its result and from the first write
/// to standard output that failed, if any. A closed pipe (`leakloop ... | head -1`) ends output
/// quietly; any other write failure is a warning next to a verdict, or exit 4 where there is no
/// verdict.
pub fn decide(result: Result<Outcome, CliError>, stdout: Option<&std::io::Error>) -> Decision {
    let stdout_failure = stdout
        .filter(|e| e.kind() != ErrorKind::BrokenPipe)
        .map(|e| format!("could not write to standard output: {e}"));
    match result {
        Err(CliError::Usage(text)) => Decision {
            exit: Exit::BadInput,
            stderr: Some(text),
        },
        Err(err) => Decision {
            exit: err.exit(),
            stderr: Some(format!("error: {err:#}")),
        },
        Ok(Outcome::Verdict(exit)) => Decision {
            exit,
            stderr: stdout_failure.map(|m| format!("warning: {m}")),
        },
        Ok(Outcome::Done) => Decision {
            exit: if stdout_failure.is_some() {
                Exit::OutputFailed
            } else {
                Exit::Pass
            },
            stderr: stdout_failure.map(|m| format!("error: {m}")),
        },
    }
}

#[cfg(test)]
mod tests {
    use std::io::Error;

    use rstest::rstest;

    use super::*;

    fn full() -> Error {
        Error::from_raw_os_error(libc::ENOSPC)
    }

    fn pipe() -> Error {
        Error::from(ErrorKind::BrokenPipe)
    }

    #[rstest]
    #[case::pass(Ok(Outcome::Verdict(Exit::Pass)), None, Exit::Pass, None)]
    #[case::closed_pipe_is_quiet(
        Ok(Outcome::Verdict(Exit::ExpectationFailed)),
        Some(pipe()),
        Exit::ExpectationFailed,
        None
    )]
    #[case::verdict_outlives_a_full_stdout(
        Ok(Outcome::Verdict(Exit::ExpectationFailed)),
        Some(full()),
        Exit::ExpectationFailed,
        Some(false)
    )]
    #[case::no_verdict_and_full_stdout(
        Ok(Outcome::Done),
        Some(full()),
        Exit::OutputFailed,
        Some(true)
    )]
    #[case::no_verdict_and_closed_pipe(Ok(Outcome::Done), Some(pipe()), Exit::Pass, None)]
    #[case::error_keeps_its_code(
        Err(CliError::Engine(anyhow::anyhow!("gone"))),
        Some(full()),
        Exit::EngineFailed,
        Some(true)
    )]
    fn decides_one_code(
        #[case] result: Result<Outcome, CliError>,
        #[case] stdout: Option<Error>,
        #[case] exit: Exit,
        #[case] error: Option<bool>,
    ) {
        let decision = decide(result, stdout.as_ref());
        assert_eq!(decision.exit, exit);
        assert_eq!(
            decision.stderr.as_ref().map(|m| m.starts_with("error: ")),
            error,
            "{:?}",
            decision.stderr
        );
    }

    /// `leakloop --help` and [`Exit`] list the same codes (docs/exit-codes.md is generated from
    /// [`Exit`], see `cli/reference.rs`).
    #[test]
    fn help_and_enum_agree_on_the_codes() {
        let codes: Vec<u8> = Exit::ALL.iter().map(|e| *e as u8).collect();
        let in_help: Vec<u8> = EXIT_CODES_HELP
            .lines()
            .filter_map(|l| {
                l.strip_prefix("  ")?
                    .split_whitespace()
                    .next()?
                    .parse()
                    .ok()
            })
            .collect();
        assert_eq!(in_help, codes);
    }

    #[test]
    fn the_worst_code_of_a_suite_follows_the_enum_order() {
        use Exit::*;
        assert_eq!(Exit::worst([]), Pass);
        assert_eq!(
            Exit::worst([Pass, ExpectationFailed, Pass]),
            ExpectationFailed
        );
        assert_eq!(
            Exit::worst([ExpectationFailed, EngineFailed, BadInput]),
            EngineFailed
        );
        assert_eq!(
            Exit::worst([InterruptedBySigint, OutputFailed]),
            InterruptedBySigint
        );
        // Inconclusive is worse than a pass, better than a leak shown, whatever its number.
        assert_eq!(Exit::worst([Pass, Inconclusive]), Inconclusive);
        assert_eq!(
            Exit::worst([Inconclusive, ExpectationFailed]),
            ExpectationFailed
        );
        assert_eq!(Exit::worst([OutputFailed, Inconclusive]), OutputFailed);
        for code in [Pass, BadInput, Inconclusive, InterruptedBySigterm] {
            assert_eq!(Exit::from_code(code as u8), Some(code));
        }
        assert_eq!(Exit::from_code(6), None);
    }

    #[test]
    fn report_write_failures_are_output_failures_and_parse_failures_bad_input() {
        let write = ReportError::Write {
            path: "out/report.json".into(),
            source: full(),
        };
        assert_eq!(CliError::from(write).exit(), Exit::OutputFailed);
        let nothing = ReportError::NothingToReport { dir: "out".into() };
        assert_eq!(CliError::from(nothing).exit(), Exit::BadInput);
        let busy = ReportError::Busy { dir: "out".into() };
        assert_eq!(CliError::from(busy).exit(), Exit::BadInput);
        let inconsistent = ReportError::Inconsistent {
            path: "out/report.json".into(),
            stored: "pass".into(),
            derived: "fail".into(),
        };
        assert_eq!(CliError::from(inconsistent).exit(), Exit::BadInput);
    }
}
