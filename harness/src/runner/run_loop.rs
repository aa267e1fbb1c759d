//! The turn loop itself: load, then for every turn the scenario's steps in order, sampling memory
//! where the scenario asks, then unload.
//!
//! Release ordering follows what survives in the field (context/001): a close is attempted after
//! every successful open, even when send or generate failed or a cancel happened (the `finally` of
//! the app's code); sessions close before the engine unloads or reloads. A fatal engine error
//! (crash, hang, lost worker) ends the run at once, keeping every sample already taken.

use std::time::Instant;

use crate::engine::{BackendInfo, Engine, EngineError, GenerateRequest, Ledger, SessionId};
use crate::probe::{LocalTarget, ProbeError, ProbeSet, Target};
use crate::runner::clock::Clock;
use crate::runner::prompt::prompt_for_turn;
use crate::runner::timing::{Stopwatch, TimedStep, TurnTimes};
use crate::runner::{
    EarlyStop, Metrics, Phase, RunAllTurns, RunOutcome, RunRecord, Sample, Samples, StopRule,
};
use crate::scenario::{FaultKind, SamplePoint, Scenario, SessionOptions, Step};

/// Ledger kind for engine loads and unloads made by the runner.
const RUNNER_ENGINE: &str = "runner/engine";
/// Ledger kind for sessions the runner opened and closed.
const RUNNER_SESSION: &str = "runner/session";

/// Watches a run as it happens: samples are streamed to disk and progress is shown through this.
pub trait RunObserver {
    /// A sample was taken.
    fn on_sample(&mut self, _sample: &Sample) {}
    /// A turn ended (`turn` of `total`).
    fn on_turn_end(&mut self, _turn: u32, _total: u32) {}
    /// The engine's live OpenCL objects by creation site at the sample just taken (called
    /// before [`RunObserver::on_sample`], only where the engine reports them).
    fn on_cl_sites(&mut self, _turn: u32, _phase: Phase, _sites: &crate::attribution::ClSites) {}
    /// The last turn's samples are taken and the engine is about to unload (a process leakloop
    /// started is stopped then): what follows a process's state must read it now.
    fn on_turns_done(&mut self) {}
}

/// An observer that does nothing.
#[derive(Debug, Default, Clone, Copy)]
pub struct NoObserver;

impl RunObserver for NoObserver {}

/// Runs `scenario` against `engine`, returning everything measured. Engine failures end up in the
/// record's outcome, never as a panic or a lost sample. Without a stop rule nothing could tell
/// when an undecided run is decided: a scenario that extends by default (no `max_turns`) runs
/// its `turns` and records `max_turns: turns`.
pub fn run_scenario(
    scenario: &Scenario,
    engine: &mut dyn Engine,
    observer: &mut dyn RunObserver,
) -> RunRecord {
    if scenario.extends_by_default() {
        let fixed = Scenario {
            max_turns: Some(scenario.turns),
            ..scenario.clone()
        };
        return run_scenario_until(&fixed, engine, observer, &mut RunAllTurns);
    }
    run_scenario_until(scenario, engine, observer, &mut RunAllTurns)
}

/// As [`run_scenario`], but `stop` may end the run after any turn it looks at; the engine is
/// still unloaded and the record says at which turn and why ([`RunRecord::early_stop`]).
pub fn run_scenario_until(
    scenario: &Scenario,
    engine: &mut dyn Engine,
    observer: &mut dyn RunObserver,
    stop: &mut dyn StopRule,
) -> RunRecord {
    run_scenario_on(&LocalTarget, scenario, engine, observer, stop)
}

/// As [`run_scenario_until`], with the engine's process living on `target`: the target's probes
/// (chosen from the metric registry for the watched metrics only) sample it.
pub fn run_scenario_on(
    target: &dyn Target,
    scenario: &Scenario,
    engine: &mut dyn Engine,
    observer: &mut dyn RunObserver,
    stop: &mut dyn StopRule,
) -> RunRecord {
    let source = engine.describe().backend;
    let probe = ProbeSet::for_watched(target, &scenario.watched_metrics());
    let samples = preallocated_samples(scenario, engine.process_id());
    let clock = Clock::for_engine(engine.turn_marks().is_some());
    let times = TurnTimes::for_watched(&scenario.watched_metrics());
    let mut run = Run {
        clock,
        scenario,
        engine,
        observer,
        source,
        probe,
        target,
        started: Instant::now(),
        ledger: Ledger::new(),
        samples,
        engine_errors: Vec::new(),
        epoch: 0,
        turns_completed: 0,
        ledger_current: false,
        early_stop: None,
        times,
        turn_done: false,
        turn_key: None,
    };
    let outcome = match run.execute(stop) {
        Ok(()) => RunOutcome::Completed,
        Err(failure) => RunOutcome::EngineFailed {
            turn: failure.turn,
            step: failure.step.to_owned(),
            error: failure.error,
        },
    };
    // Engines learn facts about themselves while loading (the C-API generation, the library
    // actually opened), so the record takes their description after the run.
    RunRecord {
        scenario: scenario.clone(),
        backend: backend_on(target, run.engine),
        samples: run.samples,
        ledger: run.ledger,
        turns_completed: run.turns_completed,
        engine_errors: run.engine_errors,
        outcome,
        early_stop: run.early_stop,
        provenance: None,
    }
}

/// What `engine` says of itself, with where `target` measures it (`details.target`) when the
/// target says.
pub fn backend_on(target: &dyn Target, engine: &dyn Engine) -> BackendInfo {
    let mut backend = engine.describe();
    if let Some(place) = target.describe() {
        backend.details.insert("target".into(), place);
    }
    backend
}

/// How many samples a complete run of `scenario` takes.
fn expected_samples(scenario: &Scenario) -> usize {
    let turns = scenario.total_turns() as usize;
    let points = &scenario.sample.after;
    // An attached process has no steps: its one sampling point is its turn marker.
    let marked =
        usize::from(scenario.engine.attach.is_some() && points.contains(&SamplePoint::Close));
    let per_turn = marked
        + scenario
            .turn
            .iter()
            .filter(|step| match step {
                Step::Open(_) => points.contains(&SamplePoint::Open),
                Step::Generate { .. } | Step::Cancel { .. } => {
                    points.contains(&SamplePoint::Generate)
                }
                Step::Close => points.contains(&SamplePoint::Close),
                Step::Idle(_) => points.contains(&SamplePoint::Idle),
                Step::Send(_) => false,
            })
            .count();
    let reloads = match scenario.reload_every {
        0 => 0,
        k => turns.saturating_sub(1) / k as usize,
    };
    let baseline = scenario.sample.baseline.max(1) as usize;
    baseline * (1 + reloads) + turns.saturating_mul(per_turn)
}

/// The sample buffer of a whole run, reserved before the engine loads: the harness's own records
/// must not read as the engine's growth. When the engine lives in this process (its memory is
/// probed from here), the buffer's pages are touched now too, so that resident memory does not
/// rise page by page as samples fill it.
fn preallocated_samples(scenario: &Scenario, engine_pid: Option<u32>) -> Samples {
    let expected = expected_samples(scenario);
    if engine_pid == Some(std::process::id()) {
        Samples::touched(expected)
    } else {
        Samples::with_capacity(expected)
    }
}

/// A fatal failure: where it happened and what the engine said.
struct Failure {
    turn: u32,
    step: &'static str,
    error: EngineError,
}

/// What a non-fatal error means for the rest of the turn.
enum Recovery {
    /// Skip the remaining send/generate steps, still close and idle.
    SkipWork,
}

struct Run<'a> {
    /// What marks the end of each turn.
    clock: Clock,
    scenario: &'a Scenario,
    engine: &'a mut dyn Engine,
    observer: &'a mut dyn RunObserver,
    source: String,
    /// The target's probes for the watched metrics the runner reads itself (empty when none).
    probe: ProbeSet,
    /// Where the engine's process lives; asked at each sample which process the probes read
    /// ([`Target::measured_process`]): an engine may learn its process only when it loads.
    target: &'a dyn Target,
    started: Instant,
    ledger: Ledger,
    samples: Samples,
    engine_errors: Vec<(u32, String, EngineError)>,
    epoch: u32,
    turns_completed: u32,
    /// Whether the ledger already holds the engine's counts as of its last call (a sample's
    /// snapshot came after it), so that the end of a turn needs no further round trip.
    ledger_current: bool,
    early_stop: Option<EarlyStop>,
    /// The times of the turn in progress (see `runner/timing.rs`).
    times: TurnTimes,
    /// Whether the turn in progress is over as far as its time goes (its close ran, or its
    /// marker came).
    turn_done: bool,
    /// The key of the turn in progress (its session id, or the one its marker named).
    turn_key: Option<String>,
}

impl Run<'_> {
    /// Runs every turn (or until `stop` says the run is decided), then unloads.
    fn execute(&mut self, stop: &mut dyn StopRule) -> Result<(), Failure> {
        self.load(0, "load")?;
        let at_marker = self.wait_ready()?;
        self.baseline(0, Phase::Load)?;
        if let Clock::Marked(clock) = &mut self.clock {
            let marks = self
                .engine
                .turn_marks()
                .expect("a marked clock is chosen only for an engine with turn marks");
            clock.after_baseline(marks, at_marker);
        }
        let total = self.scenario.total_turns();
        let reload_every = self.scenario.reload_every;
        let mut last = total;
        let mut turn = 0;
        while turn < total {
            turn = self.next_turn(turn)?;
            self.turns_completed = turn.min(total);
            let stopping = turn < total && stop.wants_look(turn) && self.look(turn, stop);
            if reload_every > 0 && turn % reload_every == 0 && turn < total && !stopping {
                self.reload(turn)?;
            }
            self.absorb_ledger(turn)?;
            self.observer.on_turn_end(turn, total);
            if stopping {
                last = turn;
                break;
            }
        }
        self.ledger_current = false;
        let last = last.min(turn);
        self.observer.on_turns_done();
        self.engine.unload().map_err(|error| Failure {
            turn: last,
            step: "unload",
            error,
        })?;
        if self.clock.is_driven() {
            self.ledger.record_delete(last, RUNNER_ENGINE);
            self.absorb_ledger(last)?;
        }
        // A process that crashes while exiting (a native destructor on a dead engine) gave
        // every reply: only its exit status shows it.
        self.engine.shut_down().map_err(|error| Failure {
            turn: last,
            step: "exit",
            error,
        })
    }

    /// A marked process: waits until it is ready to be measured (its ready line or its first
    /// turn marker), so that the baseline stands for the loaded process, not its start-up. True
    /// when the baseline stands for a turn marker. A driven engine is ready once loaded.
    fn wait_ready(&mut self) -> Result<bool, Failure> {
        let Clock::Marked(clock) = &mut self.clock else {
            return Ok(false);
        };
        let marks = self
            .engine
            .turn_marks()
            .expect("a marked clock is chosen only for an engine with turn marks");
        clock.ready(marks).map_err(|error| Failure {
            turn: 1,
            step: "marker",
            error,
        })
    }

    /// Runs or waits for the turn after `turn`; returns the turn that ended (past `turn + 1`
    /// when a process marked several turns while one was sampled).
    fn next_turn(&mut self, turn: u32) -> Result<u32, Failure> {
        let Clock::Marked(clock) = &mut self.clock else {
            self.run_turn(turn + 1)?;
            return Ok(turn + 1);
        };
        let failure = |error| Failure {
            turn: turn + 1,
            step: "marker",
            error,
        };
        let marks = self
            .engine
            .turn_marks()
            .expect("a marked clock is chosen only for an engine with turn marks");
        clock.wait(marks).map_err(failure)?;
        if !self.scenario.sample.after.contains(&SamplePoint::Close) {
            return Ok(clock.sampled_turn(marks));
        }
        // Not `self.settle()`: the clock stays borrowed.
        if !self.scenario.sample.settle.is_zero() {
            self.engine.idle(self.scenario.sample.settle);
        }
        let marks = self
            .engine
            .turn_marks()
            .expect("a marked clock is chosen only for an engine with turn marks");
        let ended = clock.sampled_turn(marks);
        let turn_nanos = marks.taken_turn_nanos();
        self.turn_key = marks.taken_turn_key();
        self.times.start_turn();
        self.times.set_turn(turn_nanos);
        self.turn_done = true;
        self.take_sample(ended, Phase::Close)?;
        Ok(ended)
    }

    /// Shows `stop` the run so far; true (and the reason recorded) when it ends the run. A look
    /// asks the engine nothing (a simulator's snapshot draws its noise), so the ledger it sees
    /// has the engine's own counts up to the previous turn.
    fn look(&mut self, turn: u32, stop: &mut dyn StopRule) -> bool {
        // The record is lent the run's samples, ledger and errors for the look, not given
        // copies: a long run's samples must not be held twice (issue 15).
        let so_far = RunRecord {
            scenario: self.scenario.clone(),
            backend: self.engine.describe(),
            samples: std::mem::take(&mut self.samples),
            ledger: std::mem::take(&mut self.ledger),
            turns_completed: turn,
            engine_errors: std::mem::take(&mut self.engine_errors),
            outcome: RunOutcome::Completed,
            early_stop: None,
            provenance: None,
        };
        let decision = stop.look(&so_far);
        self.samples = so_far.samples;
        self.ledger = so_far.ledger;
        self.engine_errors = so_far.engine_errors;
        let Some(reason) = decision else {
            return false;
        };
        self.early_stop = Some(EarlyStop {
            turn,
            max_turns: self.scenario.total_turns(),
            reason,
        });
        true
    }

    /// The sample(s) after a (re)load: `sample.baseline` of them, each after the settle time.
    fn baseline(&mut self, turn: u32, phase: Phase) -> Result<(), Failure> {
        for _ in 0..self.scenario.sample.baseline.max(1) {
            self.sample(turn, phase)?;
        }
        Ok(())
    }

    fn load(&mut self, turn: u32, step: &'static str) -> Result<(), Failure> {
        self.ledger_current = false;
        self.engine
            .load()
            .map_err(|error| Failure { turn, step, error })?;
        if self.clock.is_driven() {
            self.ledger.record_create(turn, RUNNER_ENGINE);
        }
        self.epoch += 1;
        Ok(())
    }

    fn reload(&mut self, turn: u32) -> Result<(), Failure> {
        self.ledger_current = false;
        self.engine.unload().map_err(|error| Failure {
            turn,
            step: "reload",
            error,
        })?;
        self.ledger.record_delete(turn, RUNNER_ENGINE);
        self.load(turn, "reload")?;
        self.baseline(turn, Phase::Reload)
    }

    fn run_turn(&mut self, turn: u32) -> Result<(), Failure> {
        let skip_close = self
            .scenario
            .faults
            .iter()
            .any(|f| f.kind == FaultKind::SkipClose && turn >= f.at_turn);
        let mut session: Option<SessionId> = None;
        let mut recovery: Option<Recovery> = None;
        self.times.start_turn();
        self.turn_done = false;
        self.turn_key = self
            .scenario
            .sessions
            .map(|s| s.key_for_turn(turn, self.scenario.seed));
        for step in &self.scenario.turn {
            // Every step may call the engine, whose counts then move on.
            self.ledger_current = false;
            match step {
                Step::Open(options) => {
                    let keyed;
                    let options = match &self.turn_key {
                        Some(key) => {
                            keyed = SessionOptions {
                                session: Some(key.clone()),
                                ..options.clone()
                            };
                            &keyed
                        }
                        None => options,
                    };
                    let watch = Stopwatch::start(&*self.engine);
                    let opened = self.engine.open_session(turn, options);
                    self.times.add(TimedStep::Open, watch.nanos(&*self.engine));
                    match opened {
                        Ok(id) => {
                            self.ledger.record_create(turn, RUNNER_SESSION);
                            session = Some(id);
                        }
                        Err(error) => recovery = Some(self.non_fatal(turn, "open", error)?),
                    }
                    self.sample_if(turn, SamplePoint::Open, Phase::Open)?;
                }
                Step::Send(spec) => {
                    let (Some(id), None) = (session, &recovery) else {
                        continue;
                    };
                    let prompt = prompt_for_turn(
                        spec,
                        turn,
                        self.scenario.seed,
                        self.scenario.engine.backend,
                    );
                    let watch = Stopwatch::start(&*self.engine);
                    let sent = self.engine.send(id, &prompt);
                    self.times.add(TimedStep::Send, watch.nanos(&*self.engine));
                    if let Err(error) = sent {
                        recovery = Some(self.non_fatal(turn, "send", error)?);
                    }
                }
                Step::Generate { max_output_tokens } => {
                    self.generate(turn, session, &mut recovery, *max_output_tokens, None)?;
                }
                Step::Cancel {
                    after_tokens,
                    max_output_tokens,
                } => {
                    self.generate(
                        turn,
                        session,
                        &mut recovery,
                        *max_output_tokens,
                        Some(*after_tokens),
                    )?;
                }
                Step::Close => {
                    if let Some(id) = session.take() {
                        if skip_close {
                            // The harness-side fault: the session is dropped on the floor, as a
                            // binding that forgets its delete would.
                        } else {
                            self.close(turn, id)?;
                        }
                    }
                    self.turn_done = true;
                    self.sample_if(turn, SamplePoint::Close, Phase::Close)?;
                }
                Step::Idle(duration) => {
                    self.engine.idle(*duration);
                    self.sample_if(turn, SamplePoint::Idle, Phase::Idle)?;
                }
            }
        }
        // A turn whose steps left a session open still closes it before the next turn or an
        // unload: sessions never outlive their turn unless a fault says so.
        if let (Some(id), false) = (session, skip_close) {
            self.close(turn, id)?;
        }
        Ok(())
    }

    fn close(&mut self, turn: u32, id: SessionId) -> Result<(), Failure> {
        self.ledger_current = false;
        let watch = Stopwatch::start(&*self.engine);
        let closed = self.engine.close_session(id);
        self.times.add(TimedStep::Close, watch.nanos(&*self.engine));
        match closed {
            Ok(()) => self.ledger.record_delete(turn, RUNNER_SESSION),
            Err(error) => {
                self.non_fatal(turn, "close", error)?;
            }
        }
        Ok(())
    }

    fn generate(
        &mut self,
        turn: u32,
        session: Option<SessionId>,
        recovery: &mut Option<Recovery>,
        max_output_tokens: u32,
        cancel_after_tokens: Option<u32>,
    ) -> Result<(), Failure> {
        let (Some(id), None) = (session, &*recovery) else {
            return Ok(());
        };
        let request = GenerateRequest {
            max_output_tokens,
            cancel_after_tokens,
        };
        let step = match cancel_after_tokens {
            Some(_) => TimedStep::Cancel,
            None => TimedStep::Generate,
        };
        let watch = Stopwatch::start(&*self.engine);
        let generated = self.engine.generate(id, &request);
        self.times.add(step, watch.nanos(&*self.engine));
        if let Err(error) = generated {
            *recovery = Some(self.non_fatal(turn, "generate", error)?);
        }
        self.sample_if(turn, SamplePoint::Generate, Phase::Generate)
    }

    /// Records a recoverable error, or turns a fatal one into the run's failure.
    fn non_fatal(
        &mut self,
        turn: u32,
        step: &'static str,
        error: EngineError,
    ) -> Result<Recovery, Failure> {
        if error.kind.is_fatal() {
            return Err(Failure { turn, step, error });
        }
        self.engine_errors.push((turn, step.to_owned(), error));
        Ok(Recovery::SkipWork)
    }

    fn sample_if(&mut self, turn: u32, point: SamplePoint, phase: Phase) -> Result<(), Failure> {
        if self.scenario.sample.after.contains(&point) {
            self.sample(turn, phase)?;
        }
        Ok(())
    }

    /// Brings the ledger up to date with the engine's counts, unless a sample's snapshot already
    /// did after the engine's last call (issue 15: a second worker round trip every turn).
    fn absorb_ledger(&mut self, turn: u32) -> Result<(), Failure> {
        if self.ledger_current {
            return Ok(());
        }
        let snapshot = self.engine.snapshot().map_err(|error| Failure {
            turn,
            step: "snapshot",
            error,
        })?;
        self.absorb_counts(turn, "snapshot", &snapshot.ledger)
    }

    /// Folds the engine's cumulative counts into the ledger; impossible ones (a count that fell,
    /// a total past 2^64-1) fail the run at `step` as a protocol error, its samples kept.
    fn absorb_counts(
        &mut self,
        turn: u32,
        step: &'static str,
        counts: &std::collections::BTreeMap<String, crate::engine::KindCounts>,
    ) -> Result<(), Failure> {
        self.ledger
            .absorb_cumulative(turn, &self.source, counts)
            .map_err(|e| Failure {
                turn,
                step,
                error: EngineError::new(
                    crate::engine::EngineErrorKind::Protocol,
                    format!(
                        "the {} backend reported impossible counts: {e}",
                        self.source
                    ),
                ),
            })
    }

    /// Settles, then records every metric the engine and the target's probes can see.
    fn sample(&mut self, turn: u32, phase: Phase) -> Result<(), Failure> {
        self.settle();
        self.take_sample(turn, phase)
    }

    /// Waits the scenario's settle time (on the engine's clock).
    fn settle(&mut self) {
        if !self.scenario.sample.settle.is_zero() {
            self.engine.idle(self.scenario.sample.settle);
        }
    }

    /// Records every metric the engine and the process probe can see, now.
    fn take_sample(&mut self, turn: u32, phase: Phase) -> Result<(), Failure> {
        let snapshot = self.engine.snapshot().map_err(|error| Failure {
            turn,
            step: "sample",
            error,
        })?;
        self.absorb_counts(turn, "sample", &snapshot.ledger)?;
        self.ledger_current = true;
        if let Some(sites) = &snapshot.cl_sites {
            self.observer.on_cl_sites(turn, phase, sites);
        }
        let mut metrics = Metrics::new();
        for (name, value) in &snapshot.metrics {
            metrics.insert(name, *value);
        }
        let measured = self.target.measured_process(self.engine.process_id());
        if let Some(pid) = measured.filter(|_| !self.probe.is_empty()) {
            // A probe that cannot read the process means the process is gone; the engine call
            // that follows reports how it died, so the sample is kept with what the engine said.
            // A target that failed (a device gone) ends the run here: no engine call would see it.
            let mut probed = Metrics::new();
            match self
                .probe
                .read(pid, &mut |name, value| probed.insert(name, value))
            {
                Ok(()) => {
                    for (name, value) in &probed {
                        metrics.insert(name, *value);
                    }
                }
                Err(ProbeError {
                    fatal: Some(error), ..
                }) => {
                    return Err(Failure {
                        turn,
                        step: "sample",
                        error,
                    })
                }
                Err(_) => {}
            }
        }
        if !matches!(phase, Phase::Load | Phase::Reload) {
            // A (re)load sample starts an epoch's series: it carries no turn's time.
            self.times.write(&mut metrics, self.turn_done);
        }
        let t_ms = self
            .engine
            .simulated_clock_ms()
            .unwrap_or_else(|| self.started.elapsed().as_secs_f64() * 1000.0);
        let sample = Sample {
            turn,
            phase,
            epoch: self.epoch,
            t_ms,
            metrics,
            key: (!matches!(phase, Phase::Load | Phase::Reload))
                .then(|| self.turn_key.clone())
                .flatten(),
        };
        self.observer.on_sample(&sample);
        self.samples.push(&sample);
        Ok(())
    }
}

#[cfg(test)]
mod tests;
