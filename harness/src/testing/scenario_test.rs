//! [`ScenarioTest`]: a scenario (from a file, YAML text or built in code) ready to run from a
//! test, and the run itself: engine (in this process or in this test binary as its worker, one
//! of leakloop's or the test's own), turn loop with samples streamed to disk, analysis, and every
//! report written.

use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard, PoisonError};

use crate::engine::litert_lm::check_library;
use crate::engine::{
    build_engine_with, skip_or_require, Engine, EngineError, WorkerCommand, WorkerEngine,
};
use crate::probe::target_for;
use crate::report::ReportError;
use crate::runner::NoObserver;
use crate::scenario::{
    load_scenario, parse_scenario, EngineSpec, MetricExpectation, PromptSpec, Scenario,
    ScenarioError, SessionOptions, Step, Target,
};

use crate::session::{Session, SessionError};

use super::outcome::{Reports, TestRun};
use super::own_engine::OwnEngine;
use super::worker::{
    serve_if_requested, this_test_worker, this_test_worker_for_own_engine, SERVE_ENV,
    SERVE_OWN_ENGINE,
};

/// Environment variable naming a folder where every test run keeps its reports (in a subfolder
/// named after the test binary, the test and the scenario), passing or not; without it they go to a temporary
/// folder that is kept only when an assertion fails.
pub const REPORTS_ENV: &str = "LEAKLOOP_TEST_REPORTS";

/// A scenario to run from a test.
///
/// ```
/// use leakloop::scenario::EngineSpec;
/// use leakloop::testing::ScenarioTest;
///
/// // The simulator's flat CPU profile: 20 open/send/generate/close turns, no leak.
/// ScenarioTest::chat("flat", EngineSpec::sim("cpu-flat"))
///     .turns(20)
///     .expect_balanced()
///     .expect_max_growth_per_turn("native_heap", 64 << 10)
///     .run()
///     .assert_pass();
/// ```
#[derive(Debug, Clone)]
pub struct ScenarioTest {
    scenario: Scenario,
    worker: Option<WorkerCommand>,
    reports_in: Option<PathBuf>,
    own_engine: Option<OwnEngine>,
}

/// Why a scenario could not be run at all (a run that starts always ends in a [`TestRun`], even
/// when its engine fails on the way).
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// The scenario file or text is not a valid scenario.
    #[error(transparent)]
    Scenario(#[from] ScenarioError),
    /// The engine library cannot run this scenario's steps.
    #[error("{0}")]
    Refused(String),
    /// No worker process can be started for an isolated engine.
    #[error("{0}")]
    Worker(String),
    /// The engine could not be built or started.
    #[error("cannot start the `{backend}` engine for {scenario}: {error}")]
    Engine {
        /// The backend.
        backend: &'static str,
        /// The scenario's name.
        scenario: String,
        /// What failed.
        error: EngineError,
    },
    /// The report folder could not be made.
    #[error(transparent)]
    Reports(#[from] ReportError),
}

impl ScenarioTest {
    /// A scenario read from a YAML file (relative paths in it resolve against its folder).
    pub fn from_file(path: impl AsRef<Path>) -> Result<Self, RunError> {
        Ok(Self::new(load_scenario(path.as_ref())?))
    }

    /// A scenario given as YAML text; relative paths in it resolve against the current folder
    /// (a test's current folder is its package's root).
    pub fn from_yaml(text: &str) -> Result<Self, RunError> {
        Ok(Self::new(parse_scenario(text, Path::new("scenario.yaml"))?))
    }

    /// A scenario built in code (see [`Scenario::new`]).
    pub fn new(scenario: Scenario) -> Self {
        Self {
            scenario,
            worker: None,
            reports_in: None,
            own_engine: None,
        }
    }

    /// The field's per-turn chat loop on `engine`: 30 turns of open, send a short prompt,
    /// generate up to 16 tokens, close; sampled after load and after close; no expectations yet.
    pub fn chat(name: &str, engine: EngineSpec) -> Self {
        let turn = vec![
            Step::Open(SessionOptions::default()),
            Step::Send(PromptSpec::Text(
                "Summarize the notes about the engine and the cache.".to_owned(),
            )),
            Step::Generate {
                max_output_tokens: 16,
            },
            Step::Close,
        ];
        Self::new(Scenario::new(name, engine, 30, turn))
    }

    /// Sets the number of measured turns (a fixed run: no extension past them).
    pub fn turns(mut self, turns: u32) -> Self {
        self.scenario.turns = turns;
        // Still a fixed run, as [`Scenario::new`] made it.
        self.scenario.max_turns = Some(turns);
        self
    }

    /// Sets the number of warm-up turns run before the measured ones.
    pub fn warmup_turns(mut self, turns: u32) -> Self {
        self.scenario.warmup_turns = turns;
        self
    }

    /// Expects every create to have its delete in the call ledger.
    pub fn expect_balanced(mut self) -> Self {
        self.scenario.expect.balanced = Some(true);
        self
    }

    /// Expects at most `most` objects of the ledger kind `kind` alive at once (`conversation`
    /// for every source's, `sim/conversation` for one); that kind is then judged by this bound
    /// instead of [`expect_balanced`](Self::expect_balanced).
    pub fn expect_max_live(mut self, kind: &str, most: u64) -> Self {
        self.scenario.expect.max_live.insert(kind.to_owned(), most);
        self
    }

    /// Sets the expectation on `metric` (replacing any earlier one).
    pub fn expect(mut self, metric: &str, expectation: MetricExpectation) -> Self {
        self.scenario
            .expect
            .metrics
            .insert(metric.to_owned(), expectation);
        self
    }

    /// Expects `metric` to grow by at most `bytes` per turn after warm-up (judged on the upper
    /// bound of the growth's confidence interval), keeping its other expectations.
    pub fn expect_max_growth_per_turn(mut self, metric: &str, bytes: u64) -> Self {
        let entry = self
            .scenario
            .expect
            .metrics
            .entry(metric.to_owned())
            .or_default();
        entry.max_growth_per_turn = Some(bytes);
        self
    }

    /// Runs on this engine library (a `liblitert-lm.so`) instead of the one discovered.
    pub fn lib(mut self, path: impl Into<PathBuf>) -> Self {
        self.scenario.engine.lib = Some(path.into());
        self
    }

    /// Runs with this model file.
    pub fn model(mut self, path: impl Into<PathBuf>) -> Self {
        self.scenario.engine.model = Some(path.into());
        self
    }

    /// Changes anything else in the scenario.
    pub fn configure(mut self, change: impl FnOnce(&mut Scenario)) -> Self {
        change(&mut self.scenario);
        self
    }

    /// Runs your own engine instead of the one the scenario's `engine:` names: `build` makes it,
    /// in this test binary started again as the worker with only the current test selected (see
    /// [`this_test_worker`]). The runner samples that process from outside and reads the
    /// engine's [`snapshot`](Engine::snapshot) for the ledger, so a crash ends the run with a
    /// verdict and each test's counts are its own process's, even when the engine keeps them in
    /// globals and tests run in parallel.
    ///
    /// The scenario's `engine:` still sets how the engine is called (`call_timeout`) and what
    /// the report says was asked (`model`, `device`, `max_tokens`); its `backend` and `profile`
    /// choose nothing then. `build` runs only in the worker; run one scenario with its own engine
    /// per test, from the test's own thread.
    ///
    /// ```no_run
    /// # use leakloop::testing::{BackendInfo, Engine, EngineError, EngineSnapshot, GenerateOutcome};
    /// # use leakloop::testing::{GenerateRequest, Prompt, ScenarioTest, SessionId, SessionOptions};
    /// # #[derive(Default)] struct MyEngine;
    /// # impl Engine for MyEngine {
    /// #     fn describe(&self) -> BackendInfo { unimplemented!() }
    /// #     fn load(&mut self) -> Result<(), EngineError> { Ok(()) }
    /// #     fn open_session(&mut self, _: u32, _: &SessionOptions) -> Result<SessionId, EngineError> { unimplemented!() }
    /// #     fn send(&mut self, _: SessionId, _: &Prompt) -> Result<(), EngineError> { Ok(()) }
    /// #     fn generate(&mut self, _: SessionId, _: &GenerateRequest) -> Result<GenerateOutcome, EngineError> { unimplemented!() }
    /// #     fn close_session(&mut self, _: SessionId) -> Result<(), EngineError> { Ok(()) }
    /// #     fn unload(&mut self) -> Result<(), EngineError> { Ok(()) }
    /// #     fn snapshot(&mut self) -> Result<EngineSnapshot, EngineError> { Ok(EngineSnapshot::default()) }
    /// # }
    /// #[test]
    /// fn my_engine_keeps_no_conversation() {
    ///     ScenarioTest::from_file("scenarios/chat.yaml")
    ///         .unwrap()
    ///         .engine(MyEngine::default)
    ///         .run()
    ///         .assert_pass();
    /// }
    /// ```
    pub fn engine<E: Engine + 'static>(
        mut self,
        build: impl Fn() -> E + Send + Sync + 'static,
    ) -> Self {
        self.own_engine = Some(OwnEngine::new(build));
        self
    }

    /// Starts this program as the worker of an isolated engine, instead of this test binary
    /// running the current test again (see [`this_test_worker`]).
    pub fn worker(mut self, command: WorkerCommand) -> Self {
        self.worker = Some(command);
        self
    }

    /// Writes the reports into `dir` (kept, passing or not) instead of a temporary folder.
    pub fn reports_in(mut self, dir: impl Into<PathBuf>) -> Self {
        self.reports_in = Some(dir.into());
        self
    }

    /// The scenario as it will run.
    pub fn scenario(&self) -> &Scenario {
        &self.scenario
    }

    /// `Some(self)` when what the scenario needs is here; otherwise prints a visible
    /// `SKIPPED: <test>: <what is missing>` and returns `None`, or panics when the environment
    /// variable `require_env` is `1` (CI, where the resource must be there). Checks the
    /// LiteRT-LM library and model of a `litert-lm` scenario; other backends, and a test's own
    /// engine, always run.
    pub fn skip_unless_available(self, require_env: &str) -> Option<Self> {
        if self.own_engine.is_some() {
            return Some(self);
        }
        let missing = (crate::backend::of(self.scenario.engine.backend).missing)(&self.scenario);
        let Some(why) = missing else {
            return Some(self);
        };
        let thread = std::thread::current();
        let test = thread.name().unwrap_or(&self.scenario.name);
        skip_or_require(require_env, &format!("{test}: {why}"));
        None
    }

    /// Runs the scenario and analyses it; panics with the reason when it cannot start (see
    /// [`ScenarioTest::try_run`]).
    #[track_caller]
    pub fn run(self) -> TestRun {
        self.serve_if_worker();
        match self.try_run() {
            Ok(run) => run,
            Err(e) => panic!("leakloop: {e}"),
        }
    }

    /// Runs the scenario: builds its engine (an isolated one in this test binary started again as
    /// its worker), runs every turn (or until decided, for `stop: decided`) while streaming the
    /// samples into the report folder, analyses the run and writes every report there. An
    /// engine that fails mid-run still gives a [`TestRun`] (its status says so); only a run that
    /// cannot start is an error.
    pub fn try_run(self) -> Result<TestRun, RunError> {
        self.serve_if_worker();
        let ScenarioTest {
            scenario,
            worker,
            reports_in,
            own_engine,
        } = self;
        let engine_error = |error| RunError::Engine {
            backend: scenario.engine.backend.as_str(),
            scenario: scenario.name.clone(),
            error,
        };
        // Found before the engine starts, as the session will: a device that does not answer
        // is named before a worker is started for nothing.
        target_for(&scenario).map_err(|e| engine_error(e.into()))?;
        let (engine, _alone) = match own_engine {
            Some(_) => (start_own_engine(&scenario, worker)?, None),
            None => start_engine(&scenario, worker)?,
        };
        run_to_reports(scenario, engine, reports_in)
    }

    /// In the worker (this test binary started again), serves the engine and exits.
    fn serve_if_worker(&self) {
        serve_if_requested(self.own_engine.as_ref().map(|own| (own, &self.scenario)));
    }
}

/// Held by a run whose engine lives in this process and is measured there (a real engine with
/// `isolate: false`): the process's memory is then the run's, so two such runs of one test
/// binary (tests run in parallel) take turns instead of measuring each other.
static MEASURED_HERE: Mutex<()> = Mutex::new(());

/// This process's turn at being measured, held for the whole run ([`MEASURED_HERE`]).
type MeasuredHere = MutexGuard<'static, ()>;

/// Builds one of leakloop's engines (an isolated one in this test binary started again as its
/// worker), with the turn to measure this process when the engine is real and runs here.
fn start_engine(
    scenario: &Scenario,
    worker: Option<WorkerCommand>,
) -> Result<(Box<dyn Engine>, Option<MeasuredHere>), RunError> {
    check_library(scenario, None).map_err(|e| RunError::Refused(e.to_string()))?;
    let worker = match (scenario.engine.isolate, worker) {
        (false, _) => None,
        (true, Some(command)) => Some(command),
        (true, None) => Some(this_test_worker().map_err(RunError::Worker)?),
    };
    // Taken before the engine is built, since building allocates; given back at once when the
    // engine turns out to run elsewhere (a driver) or to model its memory (the simulator).
    let alone = (!scenario.engine.isolate)
        .then(|| MEASURED_HERE.lock().unwrap_or_else(PoisonError::into_inner));
    let engine =
        build_engine_with(scenario, worker.as_ref()).map_err(|error| RunError::Engine {
            backend: scenario.engine.backend.as_str(),
            scenario: scenario.name.clone(),
            error,
        })?;
    let alone = alone.filter(|_| measured_here(engine.as_ref()));
    Ok((engine, alone))
}

/// Whether `engine`'s memory is this process's: it has no process of its own and no simulated
/// clock (the simulator models its memory per engine).
pub(super) fn measured_here(engine: &dyn Engine) -> bool {
    engine.process_id().is_none() && engine.simulated_clock_ms().is_none()
}

/// Starts this test binary again as the worker serving the test's own engine
/// ([`ScenarioTest::engine`]); `worker` replaces that command (the runner then asks it for the
/// own engine through [`SERVE_ENV`]).
fn start_own_engine(
    scenario: &Scenario,
    worker: Option<WorkerCommand>,
) -> Result<Box<dyn Engine>, RunError> {
    if !matches!(scenario.target, Target::Local) {
        return Err(RunError::Refused(format!(
            "{}: a test's own engine runs in this test binary, on this machine: drop `target`",
            scenario.name
        )));
    }
    let command = match worker {
        Some(mut command) => {
            command.env.retain(|(key, _)| key != SERVE_ENV);
            command
                .env
                .push((SERVE_ENV.to_owned(), SERVE_OWN_ENGINE.to_owned()));
            command
        }
        None => this_test_worker_for_own_engine().map_err(RunError::Worker)?,
    };
    // The worker learns the scenario from the handshake, which carries it to leakloop's own
    // workers only (not to an external driver's command).
    let mut served = scenario.clone();
    served.engine.isolate = true;
    served.engine.exec = None;
    let engine = WorkerEngine::launch(&command.program, &command.args, &command.env, &served)
        .map_err(|error| RunError::Engine {
            backend: "own",
            scenario: scenario.name.clone(),
            error,
        })?;
    Ok(Box::new(engine))
}

/// The run itself, once its engine is built: the library's session (the same checks, target,
/// provenance, streamed samples, stop rule, analysis and reports as `leakloop run --out`), into
/// the test's report folder. What goes wrong after the verdict is kept as the run's problems. The
/// one place a test's run sequence lives.
fn run_to_reports(
    scenario: Scenario,
    engine: Box<dyn Engine>,
    reports_in: Option<PathBuf>,
) -> Result<TestRun, RunError> {
    let name = scenario.name.clone();
    let reports = Reports::for_run(reports_in, &name)?;
    let outcome = Session::new(scenario)
        .out(reports.path())
        .engine(engine)
        .run(&mut NoObserver)
        .map_err(|e| match e {
            SessionError::Scenario(e) => RunError::Scenario(e),
            SessionError::Start {
                backend, source, ..
            } => RunError::Engine {
                backend,
                scenario: name,
                error: source.into(),
            },
            SessionError::Out(e) => RunError::Reports(e),
            // A build stamp and a baseline are never asked for here.
            e @ (SessionError::Refused(_)
            | SessionError::BuildStamp(_)
            | SessionError::Baseline(_)) => RunError::Refused(e.to_string()),
        })?;
    let (record, verdict, problems) = (outcome.record, outcome.verdict, outcome.warnings);
    Ok(TestRun::new(record, verdict, reports, problems))
}
