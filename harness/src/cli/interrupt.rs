//! SIGINT and SIGTERM during `leakloop run` (a terminal's Ctrl-C, a CI job's timeout): the run
//! stops with a partial report marked interrupted instead of vanishing without one.
//!
//! The signal handler only writes the signal's number into a pipe (all a handler may safely
//! do); a thread reading that pipe does the work. While a run is in flight, [`InFlight`] holds
//! what that thread needs: the scenario, the backend, the sample stream (or, without `--out`, the
//! samples themselves) and the claimed output folder. The thread takes them under the lock that
//! every sample passes through, so no sample is half-written; analyses the samples taken so far
//! as an [`RunOutcome::Interrupted`](crate::runner::RunOutcome) record; prints the verdict
//! table; writes report.json, junit.xml, plot.svg and summary.md; and exits with 128 + the
//! signal number. The engine call that was running is not waited for: a hung engine is exactly
//! what a CI timeout interrupts. A worker process dies with its runner (`PR_SET_PDEATHSIG`).

use std::io::Read;
use std::os::fd::IntoRawFd;
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError};

use nix::sys::signal::{sigaction, SaFlags, SigAction, SigHandler, SigSet, Signal};

use crate::analyze::analyze_run;
use crate::cli::output;
use crate::cli::run::{finish_run, Format};
use crate::cli::{conclude, Exit, Outcome};
use crate::engine::BackendInfo;
use crate::report::provenance::{process_env, resolve_build};
use crate::report::{
    discard_pending_writes, interrupted_record, read_samples, OutDir, SampleStream,
};
use crate::runner::{BuildStamp, CiRun, Provenance, RunObserver, Sample};
use crate::scenario::Scenario;

/// What a run in flight shares with the signal thread.
#[derive(Debug, Default)]
pub(crate) struct InFlight {
    state: Mutex<State>,
    /// The build stamp of the run (`--build-id`, `--build-date`), when the command line gave
    /// one; otherwise it is resolved from the environment when the run starts.
    build: OnceLock<(BuildStamp, Option<CiRun>)>,
}

#[derive(Debug, Default)]
enum State {
    /// No run loop yet (loading the scenario, starting the engine).
    #[default]
    Idle,
    /// The run loop is going.
    Running(Box<Pending>),
    /// The run loop ended: the real verdict is being analysed, printed and written.
    Finishing,
}

/// A run loop's outputs, held here while it goes.
#[derive(Debug)]
pub(crate) struct Pending {
    /// The scenario as it runs.
    pub scenario: Scenario,
    /// The engine, as described before it loaded.
    pub backend: BackendInfo,
    /// samples.jsonl, with `--out`.
    pub stream: Option<SampleStream>,
    /// The samples themselves, kept only without `--out`.
    pub samples: Vec<Sample>,
    /// The claimed output folder.
    pub out: Option<OutDir>,
    /// Turns that ran to completion.
    pub turns_completed: u32,
    /// What `--format` asked to print.
    pub format: Format,
    /// Where the run came from, collected before its first turn.
    pub provenance: Option<Provenance>,
}

impl InFlight {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Sets the build stamp resolved from the command line (once, before the run starts).
    pub(crate) fn set_build(&self, build: (BuildStamp, Option<CiRun>)) {
        let _ = self.build.set(build);
    }

    /// The run's build stamp: the one set, else the environment's (CI variables,
    /// `LEAKLOOP_BUILD_ID`) with the date the run starts.
    pub(crate) fn build(&self) -> (BuildStamp, Option<CiRun>) {
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

    /// The run loop ended: hands its outputs back; a signal from now on is ignored.
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

    /// A signal arrived: ends the process, with a partial report when a run loop is going.
    fn interrupt(&self, signal: Signal) {
        let mut state = self.lock();
        match std::mem::replace(&mut *state, State::Finishing) {
            // The lock stays held until the process exits: the run loop writes no more samples.
            // Whatever happens while finishing (a closed stdout, a panic), the process exits.
            State::Running(pending) => {
                let finish = AssertUnwindSafe(|| finish_interrupted(*pending, signal.as_str()));
                let exit = std::panic::catch_unwind(finish)
                    .unwrap_or_else(|_| Exit::interrupted(signal.as_str()));
                discard_pending_writes();
                // No engine is dropped on the way out: end what the workers started.
                crate::engine::end_live_groups();
                std::process::exit(conclude(Ok(Outcome::Verdict(exit))) as i32)
            }
            State::Idle => {
                output::note(&format!(
                    "leakloop: stopped by {} before the run started",
                    signal.as_str()
                ));
                let exit = Exit::interrupted(signal.as_str());
                discard_pending_writes();
                crate::engine::end_live_groups();
                std::process::exit(conclude(Ok(Outcome::Verdict(exit))) as i32)
            }
            State::Finishing => {}
        }
    }
}

/// Streams each sample into the in-flight run's samples.jsonl (or keeps it, without `--out`).
#[derive(Debug)]
pub(crate) struct InFlightObserver<'a>(&'a InFlight);

impl RunObserver for InFlightObserver<'_> {
    fn on_sample(&mut self, sample: &Sample) {
        if let State::Running(pending) = &mut *self.0.lock() {
            match pending.stream.as_mut() {
                Some(stream) => stream.on_sample(sample),
                None => pending.samples.push(sample.clone()),
            }
        }
    }

    fn on_turn_end(&mut self, turn: u32, _total: u32) {
        if let State::Running(pending) = &mut *self.0.lock() {
            pending.turns_completed = turn;
        }
    }
}

/// Prints and writes the partial report of a stopped run (the same way as a finished run's,
/// [`finish_run`]); returns its exit code.
fn finish_interrupted(pending: Pending, signal: &str) -> Exit {
    let Pending {
        scenario,
        backend,
        stream,
        mut samples,
        out,
        turns_completed,
        format,
        provenance,
    } = pending;
    if let Some(stream) = stream {
        let path = stream.path().to_owned();
        if let Err(e) = stream.finish() {
            output::warning(&e.to_string());
        }
        match read_samples(&path) {
            Ok(streamed) => samples = streamed.samples,
            Err(e) => output::warning(&e.to_string()),
        }
    }
    let mut record = interrupted_record(scenario, backend, samples, turns_completed, signal);
    record.provenance = provenance;
    let verdict = analyze_run(&record);
    let exit = finish_run(&record, &verdict, format, out);
    output::note(&format!(
        "leakloop: interrupted by {signal}; the report covers the {} sample(s) taken",
        record.samples.len()
    ));
    exit
}

/// The write end of the signal pipe, for the handler.
static SIGNAL_PIPE: AtomicI32 = AtomicI32::new(-1);

extern "C" fn on_signal(signal: libc::c_int) {
    let saved = nix::errno::Errno::last_raw();
    let fd = SIGNAL_PIPE.load(Ordering::Relaxed);
    if fd >= 0 {
        let byte = signal as u8;
        // SAFETY: write(2) is async-signal-safe; the buffer is one valid byte on this stack.
        unsafe { libc::write(fd, (&byte as *const u8).cast(), 1) };
    }
    nix::errno::Errno::set_raw(saved);
}

/// Routes SIGINT and SIGTERM to `in_flight` for the rest of the process's life.
pub(crate) fn install(in_flight: Arc<InFlight>) -> std::io::Result<()> {
    route(move |signal| in_flight.interrupt(signal))
}

/// Routes SIGINT and SIGTERM of a command that writes files but runs no scenario (`history
/// --out`): the signal ends it with 128 + the signal's number, after removing the temporaries of
/// the atomic writes in progress, so no `.tmp` file is left behind.
pub(crate) fn install_for_writes(command: &'static str) -> std::io::Result<()> {
    route(move |signal| {
        discard_pending_writes();
        output::note(&format!(
            "leakloop {command}: stopped by {}",
            signal.as_str()
        ));
        let exit = Exit::interrupted(signal.as_str());
        std::process::exit(conclude(Ok(Outcome::Verdict(exit))) as i32)
    })
}

/// Hands each SIGINT and SIGTERM, for the rest of the process's life, to `on` on a thread of
/// its own (the handler itself only writes the signal's number into a pipe).
fn route(on: impl Fn(Signal) + Send + 'static) -> std::io::Result<()> {
    let (mut reader, writer) = std::io::pipe()?;
    // Never closed: the handler may write to it until the process exits.
    SIGNAL_PIPE.store(writer.into_raw_fd(), Ordering::Relaxed);
    std::thread::Builder::new()
        .name("leakloop-signals".to_owned())
        .spawn(move || loop {
            let mut byte = [0u8];
            match reader.read(&mut byte) {
                Ok(1) => {
                    if let Ok(signal) = Signal::try_from(i32::from(byte[0])) {
                        on(signal);
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                _ => return,
            }
        })?;
    let action = SigAction::new(
        SigHandler::Handler(on_signal),
        SaFlags::SA_RESTART,
        SigSet::empty(),
    );
    for signal in [Signal::SIGINT, Signal::SIGTERM] {
        // SAFETY: the handler only reads an atomic and calls write(2), both async-signal-safe.
        unsafe { sigaction(signal, &action) }.map_err(std::io::Error::from)?;
    }
    Ok(())
}
