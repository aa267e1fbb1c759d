//! [`ScenarioTest`]: a scenario (from a file, YAML text or built in code) ready to run from a
//! test, and the run itself: engine (in this process or in this test binary as its worker), turn
//! loop with samples streamed to disk, analysis, and every report written.

use std::path::{Path, PathBuf};

use crate::engine::litert_lm::discover_library;
use crate::engine::{skip_or_require, EngineError, WorkerCommand};
use crate::report::ReportError;
use crate::runner::NoObserver;
use crate::scenario::{
    load_scenario, parse_scenario, BackendKind, EngineSpec, MetricExpectation, PromptSpec,
    Scenario, ScenarioError, SessionOptions, Step,
};
use crate::session::{Session, SessionError};

use super::outcome::{Reports, TestRun};
use super::worker::{serve_worker_if_requested, this_test_worker};

/// Environment variable naming a folder where every test run keeps its reports (in a subfolder
/// named after the test and the scenario), passing or not; without it they go to a temporary
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

    /// Sets the number of measured turns.
    pub fn turns(mut self, turns: u32) -> Self {
        self.scenario.turns = turns;
        self
    }

    /// Sets the number of warm-up turns run before the measured ones.
    pub fn warmup_turns(mut self, turns: u32) -> Self {
        self.scenario.warmup_turns = turns;
        self
    }

    /// Expects every create to have its delete in the call ledger.
    pub fn expect_balanced(mut self) -> Self {
        self.scenario.expect.balanced = true;
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
    /// LiteRT-LM library and model of a `litert-lm` scenario; other backends always run.
    pub fn skip_unless_available(self, require_env: &str) -> Option<Self> {
        let missing = match self.scenario.engine.backend {
            BackendKind::LitertLm => self.missing_litert_lm(),
            BackendKind::Sim | BackendKind::Opencl | BackendKind::Attach | BackendKind::Exec => {
                None
            }
        };
        let Some(why) = missing else {
            return Some(self);
        };
        let thread = std::thread::current();
        let test = thread.name().unwrap_or(&self.scenario.name);
        skip_or_require(require_env, &format!("{test}: {why}"));
        None
    }

    fn missing_litert_lm(&self) -> Option<String> {
        if let Err(e) = discover_library(self.scenario.engine.lib.as_deref()) {
            return Some(e.to_string());
        }
        match &self.scenario.engine.model {
            Some(model) if !model.is_file() => {
                Some(format!("the model {} is missing", model.display()))
            }
            None => Some("the scenario names no model".to_owned()),
            Some(_) => None,
        }
    }

    /// Runs the scenario and analyses it; panics with the reason when it cannot start (see
    /// [`ScenarioTest::try_run`]).
    #[track_caller]
    pub fn run(self) -> TestRun {
        serve_worker_if_requested();
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
        serve_worker_if_requested();
        let scenario = self.scenario;
        let worker = match (scenario.engine.isolate, self.worker) {
            (false, _) => None,
            (true, Some(command)) => Some(command),
            (true, None) => Some(this_test_worker().map_err(RunError::Worker)?),
        };
        let name = scenario.name.clone();
        let reports = Reports::for_run(self.reports_in, &name)?;
        // The library's session: the same checks, engine, provenance and reports as `leakloop
        // run --out`; what goes wrong after the verdict is kept as the run's problems.
        let outcome = Session::new(scenario)
            .out(reports.path())
            .worker(worker)
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
}
