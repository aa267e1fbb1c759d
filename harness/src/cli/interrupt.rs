//! SIGINT and SIGTERM during `leakloop run` (a terminal's Ctrl-C, a CI job's timeout): the run
//! stops with a partial report marked interrupted instead of vanishing without one.
//!
//! The signal handler only writes the signal's number into a pipe (all a handler may safely
//! do); a thread reading that pipe does the work. While a run is in flight, the library's
//! [`InFlight`] holds what that thread needs: the scenario, the backend, the sample stream (or,
//! without `--out`, the samples themselves) and the claimed output folder. The thread takes them
//! under the lock that every sample passes through, so no sample is half-written; has the library
//! judge the samples taken so far as an [`RunOutcome::Interrupted`](crate::runner::RunOutcome)
//! record; prints the verdict table; writes report.json, junit.xml, plot.svg and summary.md; and
//! exits with 128 + the signal number. The engine call that was running is not waited for: a hung engine is exactly
//! what a CI timeout interrupts. A worker process dies with its runner (`PR_SET_PDEATHSIG`).

use std::io::Read;
use std::os::fd::IntoRawFd;
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::Arc;

use nix::sys::signal::{sigaction, SaFlags, SigAction, SigHandler, SigSet, Signal};

use crate::cli::output;
use crate::cli::run::{finish_run, Format, Printer};
use crate::cli::{conclude, Exit, Outcome};
use crate::report::discard_pending_writes;
/// What a run in flight shares with the signal thread (the library's; suites, `compare` and
/// `bisect` name it from here).
pub(crate) use crate::session::InFlight;
use crate::session::{Interruption, Pending};

/// A signal arrived: ends the process, with a partial report when a run loop is going.
fn interrupt(in_flight: &InFlight, signal: Signal, format: Format) {
    // The run stays held until the process exits: the run loop writes no more samples. Whatever
    // happens while finishing (a closed stdout, a panic), the process exits.
    in_flight.interrupt(|interruption| {
        let exit = match interruption {
            Interruption::During(pending) => {
                let finish =
                    AssertUnwindSafe(|| finish_interrupted(*pending, signal.as_str(), format));
                std::panic::catch_unwind(finish)
                    .unwrap_or_else(|_| Exit::interrupted(signal.as_str()))
            }
            Interruption::BeforeStart => {
                output::note(&format!(
                    "leakloop: stopped by {} before the run started",
                    signal.as_str()
                ));
                Exit::interrupted(signal.as_str())
            }
        };
        discard_pending_writes();
        // No engine is dropped on the way out: end what the workers started.
        crate::engine::end_live_groups();
        std::process::exit(conclude(Ok(Outcome::Verdict(exit))) as i32)
    });
}

/// Prints and writes the partial report of a stopped run (the same way as a finished run's,
/// [`finish_run`]); returns its exit code.
fn finish_interrupted(pending: Pending, signal: &str, format: Format) -> Exit {
    let judged = pending.into_judged(signal, &mut Printer::without_verdict(true));
    let samples = judged.record.samples.len();
    let exit = finish_run(judged, format);
    output::note(&format!(
        "leakloop: interrupted by {signal}; the report covers the {samples} sample(s) taken"
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

/// Routes SIGINT and SIGTERM to `in_flight` for the rest of the process's life; a partial
/// report is printed as `--format` asks.
pub(crate) fn install(in_flight: Arc<InFlight>, format: Format) -> std::io::Result<()> {
    route(move |signal| interrupt(&in_flight, signal, format))
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
