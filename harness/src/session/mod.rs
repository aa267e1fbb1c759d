//! One scenario run from start to finish, the same way for every caller (`leakloop run`, suites,
//! `compare`, `bisect`, `bench`, `leakloop::testing`): claim the output folder, resolve the build
//! stamp, check the engine library, build the engine on its target, stream the samples while the
//! turn loop runs under its stop rule, judge the record (against a baseline too, when given) and
//! write every report. Provenance and engine building are therefore identical everywhere.
//!
//! [`Session`] is the builder; [`Session::run`] returns a [`SessionOutcome`] or a
//! [`SessionError`]. Nothing here prints: progress, the verdict (before the reports are written,
//! so that a full disk cannot hide it), warnings and notes go to a [`SessionObserver`] the caller
//! passes ([`NoObserver`] by default), and warnings are also kept in the outcome. A caller that
//! wants to act between the verdict and the reports uses [`Session::judge`] and
//! [`Judged::write`]. A run that may be stopped from outside (a signal) shares an [`InFlight`]
//! with whoever stops it.

mod baseline;
mod check;
mod error;
mod in_flight;
#[cfg(test)]
mod tests;

use std::path::{Path, PathBuf};
use std::time::Instant;

pub use baseline::{Baseline, BaselineError};
// Not API: what the command line and the benchmarks reach into (checking files without running
// them, the signal handler's partial run, phase times, rewriting a run's reports).
#[doc(hidden)]
pub use check::{check_scenario_file, render_checked};
pub use error::SessionError;
#[doc(hidden)]
pub use in_flight::{InFlight, Interruption, Pending};

use crate::analyze::{analyze_run, stop_rule_for, Verdict};
use crate::attribution::{
    estimate_against, AttributionSource, ClSiteRecorder, HeaptrackSource, DRIVER_METRICS,
};
use crate::engine::build_on_target_in;
use crate::engine::litert_lm::check_library;
use crate::engine::transport::BuildError;
use crate::engine::{Engine, WorkerCommand};
use crate::probe::target_for;
use crate::report::provenance::{process_env, resolve_build};
use crate::report::{
    provenance, write_reports_with, Fanout, OutDir, SampleStream, StoreRef, SAMPLES_STORE,
};
use crate::runner::{backend_on, run_scenario_on, NoObserver, Provenance, RunObserver, RunRecord};
use crate::runner::{BuildStamp, CiRun, Phase, Sample, Samples};
use crate::scenario::{load_scenario_with, AttachProcess, Overrides, Scenario};

/// What a caller sees of a session as it goes; every method does nothing by default.
pub trait SessionObserver {
    /// The turn loop is about to start on `scenario` (the engine is built).
    fn on_start(&mut self, _scenario: &Scenario) {}
    /// A sample was taken.
    fn on_sample(&mut self, _sample: &Sample) {}
    /// A turn ended (`turn` of `total`).
    fn on_turn_end(&mut self, _turn: u32, _total: u32) {}
    /// The turn loop ended and the engine is unloaded; the analysis is next.
    fn on_loop_end(&mut self) {}
    /// The run has its verdict; the reports, if any, are written right after (into `out`).
    fn on_verdict(&mut self, _record: &RunRecord, _verdict: &Verdict, _out: Option<&Path>) {}
    /// Something failed that leaves the verdict standing (a report not written, a folder not
    /// released).
    fn on_warning(&mut self, _message: &str) {}
    /// Something worth knowing that changes nothing (the scenario changed since the baseline).
    fn on_note(&mut self, _message: &str) {}
}

impl SessionObserver for NoObserver {}

/// One scenario run, built up and then started with [`Session::run`] (or [`Session::judge`]).
///
/// ```no_run
/// use leakloop::runner::NoObserver;
/// use leakloop::scenario::Overrides;
/// use leakloop::session::Session;
///
/// let outcome = Session::from_file("fixtures/scenarios/allocator-warmup.yaml", Overrides::default())
///     .out("target/leakloop/flat")
///     .run(&mut NoObserver)?;
/// println!("{:?}", outcome.verdict.status);
/// # Ok::<(), leakloop::session::SessionError>(())
/// ```
#[derive(Debug)]
pub struct Session<'a> {
    source: Source,
    out: Out,
    build: Option<Stamp>,
    baseline: Option<BaselineFrom>,
    in_flight: Flight<'a>,
    worker: Option<WorkerCommand>,
    engine: Option<Prebuilt>,
}

/// An engine the caller built itself ([`Session::engine`]).
struct Prebuilt(Box<dyn Engine>);

impl std::fmt::Debug for Prebuilt {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Prebuilt(..)")
    }
}

#[derive(Debug)]
enum Source {
    Scenario(Box<Scenario>),
    File { path: PathBuf, overrides: Overrides },
}

/// Where the build stamp comes from, when not from the [`InFlight`].
#[derive(Debug)]
enum Stamp {
    Resolve(Option<String>, Option<String>),
    Given(BuildStamp, Option<CiRun>),
}

#[derive(Debug)]
enum BaselineFrom {
    Folder(PathBuf, Option<String>),
    Loaded(Baseline),
}

#[derive(Debug)]
enum Out {
    None,
    Claim(PathBuf),
    Claimed(OutDir),
}

#[derive(Debug)]
enum Flight<'a> {
    Own(Box<InFlight>),
    Shared(&'a InFlight),
}

impl Flight<'_> {
    fn get(&self) -> &InFlight {
        match self {
            Flight::Own(own) => own,
            Flight::Shared(shared) => shared,
        }
    }
}

impl<'a> Session<'a> {
    /// A session of `scenario`, with no output folder, the build stamp of the environment and no
    /// baseline.
    pub fn new(scenario: Scenario) -> Self {
        Self::with_source(Source::Scenario(Box::new(scenario)))
    }

    /// A session of the scenario in the file at `path`, with `overrides`; the file is read only
    /// once the output folder is claimed, so that a scenario that fails to load still leaves no
    /// earlier run's verdict in that folder.
    pub fn from_file(path: impl Into<PathBuf>, overrides: Overrides) -> Self {
        Self::with_source(Source::File {
            path: path.into(),
            overrides,
        })
    }

    fn with_source(source: Source) -> Self {
        Self {
            source,
            out: Out::None,
            build: None,
            baseline: None,
            in_flight: Flight::Own(Box::default()),
            worker: None,
            engine: None,
        }
    }

    /// Writes report.json, junit.xml, plot.svg, summary.md and the streamed sample store
    /// (samples.parquet) into `dir`, claimed (see [`OutDir::claim`]) before anything else happens.
    pub fn out(mut self, dir: impl Into<PathBuf>) -> Self {
        self.out = Out::Claim(dir.into());
        self
    }

    /// Writes the reports into a folder the caller has claimed already (released at the end, or
    /// on an error).
    pub fn claimed_out(mut self, out: Option<OutDir>) -> Self {
        self.out = out.map_or(Out::None, Out::Claimed);
        self
    }

    /// Records this build id and date (RFC 3339 or YYYY-MM-DD), each defaulting to the
    /// environment's (`LEAKLOOP_BUILD_ID`, `LEAKLOOP_BUILD_DATE`, the CI system's, or when the run
    /// starts); values that cannot be used are an error. Without this call the stamp is the
    /// [`InFlight`]'s.
    pub fn build_stamp(mut self, id: Option<String>, date: Option<String>) -> Self {
        self.build = Some(Stamp::Resolve(id, date));
        self
    }

    /// Records this build stamp, resolved already (a suite resolves it once for all its
    /// scenarios).
    pub fn stamp(mut self, build: BuildStamp, ci: Option<CiRun>) -> Self {
        self.build = Some(Stamp::Given(build, ci));
        self
    }

    /// Also judges the run against the earlier report of the same scenario in `dir` (see
    /// [`Baseline`]); a rise must exceed `min_change` (a size such as `4KiB`) too.
    pub fn baseline(mut self, dir: impl Into<PathBuf>, min_change: Option<String>) -> Self {
        self.baseline = Some(BaselineFrom::Folder(dir.into(), min_change));
        self
    }

    /// Also judges the run against `baseline`, loaded already (its [note](Baseline::note) is
    /// the caller's to show).
    pub fn with_baseline(mut self, baseline: Baseline) -> Self {
        self.baseline = Some(BaselineFrom::Loaded(baseline));
        self
    }

    /// Shares the run in flight with `in_flight` (which a signal handler may
    /// [interrupt](InFlight::interrupt)); its build stamp is used unless
    /// [`build_stamp`](Self::build_stamp) is called.
    pub fn in_flight(mut self, in_flight: &'a InFlight) -> Self {
        self.in_flight = Flight::Shared(in_flight);
        self
    }

    /// Starts an isolated engine's worker with `command` instead of `leakloop worker` (a test
    /// binary serving as its own worker).
    pub fn worker(mut self, command: Option<WorkerCommand>) -> Self {
        self.worker = command;
        self
    }

    /// Runs `engine`, built by the caller, instead of building the scenario's (a test's own
    /// engine, served by its test binary as worker): the session still checks the scenario,
    /// finds the target, streams, judges and writes as for any run.
    pub fn engine(mut self, engine: Box<dyn Engine>) -> Self {
        self.engine = Some(Prebuilt(engine));
        self
    }

    /// Runs the session to the end: judges the run ([`Session::judge`]), tells `observer` the
    /// verdict, then writes the reports ([`Judged::write`]).
    pub fn run(self, observer: &mut dyn SessionObserver) -> Result<SessionOutcome, SessionError> {
        let judged = self.judge(observer)?;
        observer.on_verdict(&judged.record, &judged.verdict, judged.out_dir());
        Ok(judged.write(observer))
    }

    /// Everything up to the verdict: claims the output folder, loads the scenario, resolves the
    /// build stamp, reads the baseline, checks the library, builds the engine, runs the turn
    /// loop (samples streamed into the folder) and judges the record. An engine that fails
    /// mid-run still gives a verdict; an error means nothing ran, and the claimed folder is
    /// released holding no report (the previous run's are gone, none are new).
    pub fn judge(self, observer: &mut dyn SessionObserver) -> Result<Judged, SessionError> {
        let Session {
            source,
            out,
            build,
            baseline,
            in_flight,
            worker,
            engine,
        } = self;
        // Claimed before anything can fail: from here on the folder shows no earlier run's
        // verdict, whatever stops this one.
        let mut out = match out {
            Out::None => None,
            Out::Claim(dir) => Some(OutDir::claim(&dir)?),
            Out::Claimed(out) => Some(out),
        };
        let mut warnings = Vec::new();
        let setup = Setup {
            source,
            build,
            baseline,
            in_flight: in_flight.get(),
            worker: worker.as_ref(),
            engine,
        };
        match setup.judge(&mut out, observer, &mut warnings) {
            Ok(judged) => Ok(judged),
            Err(e) => {
                release(out, observer, &mut warnings);
                Err(e)
            }
        }
    }
}

/// The parts of a [`Session`] once its folder is claimed.
struct Setup<'s> {
    source: Source,
    build: Option<Stamp>,
    baseline: Option<BaselineFrom>,
    in_flight: &'s InFlight,
    worker: Option<&'s WorkerCommand>,
    engine: Option<Prebuilt>,
}

impl Setup<'_> {
    /// [`Session::judge`] after the claim; takes `out` once the run loop starts (an error before
    /// that leaves it to the caller to release).
    fn judge(
        self,
        out: &mut Option<OutDir>,
        observer: &mut dyn SessionObserver,
        warnings: &mut Vec<String>,
    ) -> Result<Judged, SessionError> {
        let in_flight = self.in_flight;
        let scenario = match self.source {
            Source::Scenario(scenario) => Ok(*scenario),
            Source::File { path, overrides } => load_scenario_with(&path, &overrides),
        };
        let build = self.build.map(|stamp| match stamp {
            Stamp::Resolve(id, date) => resolve_build(
                id.as_deref(),
                date.as_deref(),
                &process_env,
                std::time::SystemTime::now(),
            ),
            Stamp::Given(build, ci) => Ok((build, ci)),
        });
        // A scenario that cannot be read is named before a build stamp that cannot be used.
        let scenario = scenario?;
        if let Some(build) = build {
            in_flight.set_build(build.map_err(SessionError::BuildStamp)?);
        }
        let baseline = match self.baseline {
            Some(BaselineFrom::Folder(dir, min_change)) => {
                let baseline = Baseline::load(&dir, &scenario, min_change.as_deref())?;
                if let Some(note) = baseline.note() {
                    observer.on_note(&note);
                }
                Some(baseline)
            }
            Some(BaselineFrom::Loaded(baseline)) => Some(baseline),
            None => None,
        };
        // What the library cannot run is refused before anything starts. A remote worker loads
        // its library on the target: this machine's library says nothing about it.
        if scenario.target.remote_worker().is_none() {
            check_library(&scenario, None)?;
        }
        let mut times = PhaseTimes::default();
        let started = Instant::now();
        // The attribution source starts before the engine's process, whose environment it
        // sets; one that cannot start leaves the run as it is, with a warning.
        let source = match self.engine.is_none() && scenario.engine.attribute {
            true => start_attribution(&scenario, observer, warnings),
            false => None,
        };
        let extra_env = source.as_ref().map(|s| s.env()).unwrap_or_default();
        // Where the engine's process is measured; a device that does not answer stops the run
        // before anything starts.
        let built = target_for(&scenario)
            .map_err(BuildError::from)
            .and_then(|target| {
                let engine = match self.engine {
                    Some(Prebuilt(engine)) => engine,
                    None => build_on_target_in(&scenario, self.worker, &extra_env)?,
                };
                Ok((target, engine))
            });
        let (target, mut engine) = built.map_err(|source| SessionError::Start {
            backend: scenario.engine.backend.as_str(),
            scenario: scenario_label(&scenario),
            source,
        })?;
        // A driver that records its own language's heap (docs/protocol.md, "Allocation
        // sites") starts before the model loads; its sites are reported beside heaptrack's.
        let mut sources: Vec<Box<dyn AttributionSource>> = source.into_iter().collect();
        if scenario.engine.attribute {
            match engine.start_sites() {
                Ok(Some(driver)) => sources.push(driver),
                Ok(None) => {}
                Err(e) => warn(observer, warnings, format!("no driver attribution: {e}")),
            }
        }
        let stream = out
            .as_ref()
            .map(|out| SampleStream::create(out.dir()))
            .transpose()?;
        // Hashed before the first turn: an interrupted run keeps it, and a model file swapped
        // while the run goes is not mistaken for the one that ran.
        let (build, ci) = in_flight.build();
        let backend = backend_on(target.as_ref(), engine.as_ref());
        let provenance = provenance::collect(&scenario, &backend, &build, ci.as_ref());
        in_flight.start(Pending {
            scenario: scenario.clone(),
            backend,
            stream,
            samples: Samples::new(),
            out: out.take(),
            turns_completed: 0,
            provenance: Some(provenance),
        });
        observer.on_start(&scenario);
        let mut cl_sites = ClSiteRecorder::default();
        let mut record = std::thread::scope(|scope| {
            // Fast turns share a flush; this writes them out at least every FLUSH_EVERY, also
            // while the engine hangs.
            let (stop_flushing, stopped) = std::sync::mpsc::channel::<()>();
            scope.spawn(move || {
                while let Err(std::sync::mpsc::RecvTimeoutError::Timeout) =
                    stopped.recv_timeout(crate::report::store::FLUSH_EVERY)
                {
                    in_flight.flush_samples();
                }
            });
            let mut progress = Progress(&mut *observer, &mut sources, &mut cl_sites);
            let mut streamed = in_flight.observer();
            let mut fanout = Fanout::new(vec![&mut progress, &mut streamed]);
            let mut stop = stop_rule_for(&scenario);
            let record = run_scenario_on(
                target.as_ref(),
                &scenario,
                engine.as_mut(),
                &mut fanout,
                stop.as_mut(),
            );
            drop(stop_flushing);
            record
        });
        drop(engine);
        observer.on_loop_end();
        let (stream, out) = match in_flight.finish() {
            Some(pending) => {
                record.provenance = pending.provenance;
                (pending.stream, pending.out)
            }
            None => (None, None),
        };
        let mut store = None;
        if let Some(stream) = stream {
            // The samples are on disk already; a failed final flush is reported but the run's
            // result still stands (and the store is written again from the record).
            match stream.finish() {
                Ok(finished) => store = Some(finished),
                Err(e) => warn(observer, warnings, e.to_string()),
            }
        }
        times.run = started.elapsed().as_secs_f64();
        times.run_peak_rss = crate::probe::peak_rss_bytes();
        let started = Instant::now();
        let mut verdict = analyze_run(&record);
        verdict.cl_objects = cl_sites
            .estimate(record.scenario.warmup_turns)
            .map(Box::new);
        // Heaptrack's (native) attribution first, a driver's beside it; each names its source.
        for source in sources {
            let (name, metrics) = (source.name().to_owned(), source.metrics());
            let metrics = growing_first(metrics, &verdict, metrics == DRIVER_METRICS);
            match source.finish() {
                Ok(recording) => {
                    let found = estimate_against(&name, &metrics, &recording, &record, &verdict);
                    match verdict.attribution {
                        None => verdict.attribution = Some(Box::new(found)),
                        Some(_) => verdict.driver_attribution = Some(Box::new(found)),
                    }
                }
                Err(e) => warn(observer, warnings, format!("no attribution ({name}): {e}")),
            }
        }
        if let Some(note) = one_time_limits_under_attribution(&verdict) {
            warn(observer, warnings, note);
        }
        times.analyze = started.elapsed().as_secs_f64();
        if let Some(baseline) = &baseline {
            baseline.apply(&record, &mut verdict);
        }
        Ok(Judged {
            record,
            verdict,
            out,
            store,
            times,
            warnings: std::mem::take(warnings),
        })
    }
}

/// `metrics` in order, or, for a driver's source (`driver`), the fastest-growing first: an
/// interpreter's heap lands in anonymous memory or in `malloc`'s heap depending on what it
/// allocated before (tracemalloc's own records are `malloc`ed, and a kept object may reuse an
/// arena its snapshots freed), so its sites are set against the metric that moved most.
fn growing_first(
    metrics: &'static [&'static str],
    verdict: &Verdict,
    driver: bool,
) -> Vec<&'static str> {
    let slope = |m: &str| {
        verdict
            .metrics
            .get(m)
            .map_or(0.0, |a| a.slope_bytes_per_turn.max(0.0))
    };
    let mut ordered: Vec<&'static str> = metrics.to_vec();
    if driver {
        // Stable: metrics that do not grow keep their order of preference.
        ordered.sort_by(|a, b| slope(b).total_cmp(&slope(a)));
    }
    ordered
}

/// Under attribution, the failed one-time limits (a warm-up budget, a level's tolerance, a
/// maximum) in words: the sources record inside the measured process, and their own tables rise
/// once (a Python driver under heaptrack and tracemalloc, on a clean chat: native_heap rose
/// +47.5 MiB by turn 9 and rss +19.3 MiB by turn 6), so those limits are judged more truly
/// without `--attribute`. Growth per turn is not affected: the tables stop growing once the
/// run's stacks are known.
fn one_time_limits_under_attribution(verdict: &crate::analyze::Verdict) -> Option<String> {
    use crate::analyze::ExpectationKind as Kind;
    if verdict.attribution.is_none() && verdict.driver_attribution.is_none() {
        return None;
    }
    let failed: Vec<&str> = verdict
        .expectations
        .iter()
        .filter(|e| e.failed())
        .filter(|e| {
            matches!(
                Kind::parse(&e.name),
                Some((Kind::WarmupBudget | Kind::Tolerance | Kind::Max, _))
            )
        })
        .map(|e| e.name.as_str())
        .collect();
    (!failed.is_empty()).then(|| {
        format!(
            "{} failed with attribution on: the attribution sources record inside the measured \
             process and their own memory rises once; judge one-time limits from a run without \
             --attribute (docs/attribution.md)",
            failed.join(", ")
        )
    })
}

/// Starts the attribution source for `scenario`'s engine process, or says why not.
fn start_attribution(
    scenario: &Scenario,
    observer: &mut dyn SessionObserver,
    warnings: &mut Vec<String>,
) -> Option<Box<dyn AttributionSource>> {
    if scenario.target.remote_worker().is_some() {
        warn(
            observer,
            warnings,
            "no attribution: the engine runs on a remote target".into(),
        );
        return None;
    }
    let started_here = scenario
        .engine
        .attach
        .as_ref()
        .is_none_or(|attach| matches!(attach.process, AttachProcess::Command(_)));
    if !started_here {
        warn(
            observer,
            warnings,
            "no attribution: the attached process was not started by leakloop (`pid:` or a \
             device's app), so heaptrack's preload cannot reach it; start it with `command:`"
                .into(),
        );
        return None;
    }
    match HeaptrackSource::start() {
        Ok(source) => Some(Box::new(source)),
        Err(e) => {
            warn(observer, warnings, format!("no attribution: {e}"));
            None
        }
    }
}

/// Hands the turn loop's progress to a [`SessionObserver`], and its post-close sample points to
/// the attribution sources and (their OpenCL creation sites) to the recorder.
struct Progress<'o>(
    &'o mut dyn SessionObserver,
    &'o mut Vec<Box<dyn AttributionSource>>,
    &'o mut ClSiteRecorder,
);

impl RunObserver for Progress<'_> {
    fn on_sample(&mut self, sample: &Sample) {
        if let Phase::Load | Phase::Close = sample.phase {
            for source in self.1.iter_mut() {
                source.mark(sample.turn);
            }
        }
        self.0.on_sample(sample);
    }

    fn on_turn_end(&mut self, turn: u32, total: u32) {
        self.0.on_turn_end(turn, total);
    }

    fn on_cl_sites(&mut self, turn: u32, phase: Phase, sites: &crate::attribution::ClSites) {
        if matches!(phase, Phase::Load | Phase::Close) {
            self.2.record(turn, sites);
        }
    }

    fn on_turns_done(&mut self) {
        for source in self.1.iter_mut() {
            source.catch_up();
        }
    }
}

/// Wall time of a session's phases, in seconds, and its peak memory (for `leakloop bench
/// scale`).
#[derive(Debug, Default, Clone, Copy, PartialEq)]
pub struct PhaseTimes {
    /// Building the engine and the turn loop, samples streamed.
    pub run: f64,
    /// The analysis.
    pub analyze: f64,
    /// Writing the reports.
    pub reports: f64,
    /// Peak resident memory of this process when the turn loop ended, in bytes, where the OS
    /// tells.
    pub run_peak_rss: Option<u64>,
}

/// A run with its verdict whose reports are not written yet ([`Session::judge`], or an
/// interrupted run's [`Pending::into_judged`]).
#[derive(Debug)]
pub struct Judged {
    /// What ran, sample by sample; its provenance says where the run came from.
    pub record: RunRecord,
    /// The verdict (with the baseline's checks, when there was one).
    pub verdict: Verdict,
    /// The claimed output folder the reports go to.
    out: Option<OutDir>,
    /// The sample store streamed into it, finished.
    pub(crate) store: Option<StoreRef>,
    /// How long the phases took so far.
    pub times: PhaseTimes,
    /// Warnings so far (each also given to the observer).
    pub warnings: Vec<String>,
}

impl Judged {
    /// The folder the reports will be written into, if any.
    pub fn out_dir(&self) -> Option<&Path> {
        self.out.as_ref().map(OutDir::dir)
    }

    /// Writes every report into the claimed folder and releases it. A write failure (a full
    /// disk, a read-only folder) is a warning: the verdict stands.
    pub fn write(self, observer: &mut dyn SessionObserver) -> SessionOutcome {
        let Judged {
            record,
            verdict,
            out,
            store,
            mut times,
            mut warnings,
        } = self;
        let started = Instant::now();
        let artifacts = write_artifacts(
            out,
            &record,
            &verdict,
            store.as_ref(),
            observer,
            &mut warnings,
        );
        times.reports = started.elapsed().as_secs_f64();
        SessionOutcome {
            record,
            verdict,
            artifacts,
            times,
            warnings,
        }
    }

    /// The record, the verdict and the claimed folder, for callers that write the reports
    /// themselves later (see [`write_artifacts`]).
    pub fn into_parts(self) -> (RunRecord, Verdict, Option<OutDir>) {
        (self.record, self.verdict, self.out)
    }
}

/// How a session ended: what ran, its verdict, where its reports are.
#[derive(Debug)]
pub struct SessionOutcome {
    /// What ran, sample by sample, with the call ledger and the outcome (completed, stopped
    /// early, engine failed).
    pub record: RunRecord,
    /// The verdict (with the baseline's checks, when there was one).
    pub verdict: Verdict,
    /// The reports written, when the session had an output folder.
    pub artifacts: Option<Artifacts>,
    /// How long each phase took.
    pub times: PhaseTimes,
    /// What went wrong without changing the verdict (each also given to the observer).
    pub warnings: Vec<String>,
}

impl SessionOutcome {
    /// Where the run came from (build, scenario and model digests, host), collected before its
    /// first turn.
    pub fn provenance(&self) -> Option<&Provenance> {
        self.record.provenance.as_ref()
    }
}

/// The reports of a session in its output folder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Artifacts {
    /// The output folder.
    pub dir: PathBuf,
    /// report.json, junit.xml, plot.svg and summary.md, as written (none when any failed).
    pub reports: Vec<PathBuf>,
    /// The sample store (samples.parquet), streamed while the run went on, when it is there.
    pub samples: Option<PathBuf>,
    /// Every report was written.
    pub complete: bool,
}

#[doc(hidden)]
/// Writes every report of `record` into the claimed folder `out` and releases it; a failure is a
/// warning (the verdict stands). Nothing without a folder.
pub fn write_artifacts(
    out: Option<OutDir>,
    record: &RunRecord,
    verdict: &Verdict,
    store: Option<&StoreRef>,
    observer: &mut dyn SessionObserver,
    warnings: &mut Vec<String>,
) -> Option<Artifacts> {
    let out = out?;
    let dir = out.dir().to_owned();
    let (reports, complete) = match write_reports_with(&dir, record, verdict, store) {
        Ok(written) => (written, true),
        Err(e) => {
            warn(
                observer,
                warnings,
                format!("the verdict above stands, but its reports are incomplete: {e}"),
            );
            (Vec::new(), false)
        }
    };
    release(Some(out), observer, warnings);
    let samples = dir.join(SAMPLES_STORE);
    Some(Artifacts {
        samples: samples.is_file().then_some(samples),
        dir,
        reports,
        complete,
    })
}

/// Releases a claimed folder; a failure is a warning.
fn release(out: Option<OutDir>, observer: &mut dyn SessionObserver, warnings: &mut Vec<String>) {
    if let Some(Err(e)) = out.map(OutDir::release) {
        warn(observer, warnings, e.to_string());
    }
}

/// Gives `message` to the observer and keeps it.
fn warn(observer: &mut dyn SessionObserver, warnings: &mut Vec<String>, message: String) {
    observer.on_warning(&message);
    warnings.push(message);
}

fn scenario_label(scenario: &Scenario) -> String {
    match &scenario.source {
        Some(path) => format!("{} ({})", scenario.name, path.display()),
        None => scenario.name.clone(),
    }
}
