//! What a session in flight shares with whoever may stop it from outside (the CLI's SIGINT and
//! SIGTERM thread): the scenario, the backend, the sample stream (or, without an output folder,
//! the samples themselves), the claimed output folder and the provenance. Every sample passes
//! through the same lock, so whoever takes the run over ([`InFlight::interrupt`]) finds no sample
//! half-written and turns what was taken so far into a partial, judged run
//! ([`Pending::into_judged`]). Installing a signal handler is the caller's business.

use std::sync::{Mutex, MutexGuard, OnceLock, PoisonError};

use crate::analyze::analyze_run;
use crate::engine::BackendInfo;
use crate::report::provenance::{process_env, resolve_build};
use crate::report::{interrupted_record, read_samples, OutDir, SampleStream};
use crate::runner::{BuildStamp, CiRun, Provenance, RunObserver, Sample, Samples};
use crate::scenario::Scenario;

use super::{Judged, PhaseTimes, SessionObserver};

/// What a run in flight shares with the code that may interrupt it.
#[derive(Debug, Default)]
pub struct InFlight {
    state: Mutex<State>,
    /// The build stamp of the run, when the caller gave one; otherwise it is resolved from the
    /// environment when the run starts.
    build: OnceLock<(BuildStamp, Option<CiRun>)>,
}

#[derive(Debug, Default)]
enum State {
    /// No run loop yet (loading the scenario, starting the engine).
    #[default]
    Idle,
    /// The run loop is going.
    Running(Box<Pending>),
    /// The run loop ended (or was interrupted): the verdict is being analysed and written.
    Finishing,
}

/// A run loop's outputs, held by [`InFlight`] while it goes.
#[derive(Debug)]
pub struct Pending {
    /// The scenario as it runs.
    pub(crate) scenario: Scenario,
    /// The engine, as described before it loaded.
    pub(crate) backend: BackendInfo,
    /// The sample store, with an output folder.
    pub(crate) stream: Option<SampleStream>,
    /// The samples themselves, kept only without an output folder.
    pub(crate) samples: Samples,
    /// The claimed output folder.
    pub(crate) out: Option<OutDir>,
    /// Turns that ran to completion.
    pub(crate) turns_completed: u32,
    /// Where the run came from, collected before its first turn.
    pub(crate) provenance: Option<Provenance>,
}

/// What [`InFlight::interrupt`] found.
#[derive(Debug)]
pub enum Interruption {
    /// No run loop had started yet.
    BeforeStart,
    /// A run loop was going: its outputs so far.
    During(Box<Pending>),
}

impl InFlight {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Sets the build stamp the run records (once, before it starts).
    pub fn set_build(&self, build: (BuildStamp, Option<CiRun>)) {
        let _ = self.build.set(build);
    }

    /// The run's build stamp: the one set, else the environment's (CI variables,
    /// `LEAKLOOP_BUILD_ID`) with the date the run starts.
    pub fn build(&self) -> (BuildStamp, Option<CiRun>) {
        self.build
            .get_or_init(|| {
                resolve_build(None, None, &process_env, std::time::SystemTime::now())
                    .unwrap_or_default()
            })
            .clone()
    }

    /// The run loop starts.
    pub(crate) fn start(&self, pending: Pending) {
        *self.lock() = State::Running(Box::new(pending));
    }

    /// The run loop ended: hands its outputs back; an interruption from now on finds nothing.
    pub(crate) fn finish(&self) -> Option<Pending> {
        match std::mem::replace(&mut *self.lock(), State::Finishing) {
            State::Running(pending) => Some(*pending),
            State::Idle | State::Finishing => None,
        }
    }

    /// The observer the run loop streams its samples through.
    pub(crate) fn observer(&self) -> InFlightObserver<'_> {
        InFlightObserver(self)
    }

    /// Writes the samples the run loop streamed since the last flush into its store, so that a
    /// kill or a hung engine loses none of them (called every
    /// [`crate::report::store::FLUSH_EVERY`] while the loop runs).
    pub(crate) fn flush_samples(&self) {
        if let State::Running(pending) = &mut *self.lock() {
            if let Some(stream) = pending.stream.as_mut() {
                stream.flush_pending();
            }
        }
    }

    /// Takes the run over from outside: hands `on` what was in flight, while holding the lock
    /// every sample passes through, so the run loop writes no more samples while `on` runs (a
    /// signal handler's `on` ends the process before returning). Nothing happens when the run is
    /// already finishing.
    pub fn interrupt(&self, on: impl FnOnce(Interruption)) {
        let mut state = self.lock();
        let interruption = match std::mem::replace(&mut *state, State::Finishing) {
            State::Running(pending) => Interruption::During(pending),
            State::Idle => Interruption::BeforeStart,
            State::Finishing => return,
        };
        on(interruption);
    }
}

impl Pending {
    /// The run stopped by `signal` (`SIGINT`, `SIGTERM`), judged on the samples taken so far: a
    /// record marked interrupted, its verdict, and the output folder to write it into. A sample
    /// stream that cannot be flushed or read back is a warning (the samples held are judged).
    pub fn into_judged(self, signal: &str, observer: &mut dyn SessionObserver) -> Judged {
        let Pending {
            scenario,
            backend,
            stream,
            mut samples,
            out,
            turns_completed,
            provenance,
        } = self;
        let mut warnings = Vec::new();
        let mut store = None;
        if let Some(stream) = stream {
            let path = stream.path().to_owned();
            match stream.finish() {
                Ok(finished) => store = Some(finished),
                Err(e) => super::warn(observer, &mut warnings, e.to_string()),
            }
            match read_samples(&path) {
                Ok(streamed) => samples = streamed.samples,
                Err(e) => {
                    store = None;
                    super::warn(observer, &mut warnings, e.to_string())
                }
            }
        }
        let mut record = interrupted_record(scenario, backend, samples, turns_completed, signal);
        record.provenance = provenance;
        let verdict = analyze_run(&record);
        Judged {
            record,
            verdict,
            out,
            store,
            times: PhaseTimes::default(),
            warnings,
        }
    }
}

/// Streams each sample into the in-flight run's sample store (or keeps it, without an output
/// folder).
#[derive(Debug)]
pub(crate) struct InFlightObserver<'a>(&'a InFlight);

impl RunObserver for InFlightObserver<'_> {
    fn on_sample(&mut self, sample: &Sample) {
        if let State::Running(pending) = &mut *self.0.lock() {
            match pending.stream.as_mut() {
                Some(stream) => stream.on_sample(sample),
                None => pending.samples.push(sample),
            }
        }
    }

    fn on_turn_end(&mut self, turn: u32, total: u32) {
        if let State::Running(pending) = &mut *self.0.lock() {
            pending.turns_completed = turn;
            if let Some(stream) = pending.stream.as_mut() {
                stream.on_turn_end(turn, total);
            }
        }
    }
}
