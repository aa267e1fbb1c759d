//! `--record DB` (`run`, suites, `merge`; default `LEAKLOOP_RECORD`): each scenario's outcome
//! goes into the results database (`crate::results_db`) once its folder is written. The
//! database is opened (and migrated) before anything runs, so that a wrong URL shows at once,
//! but it never stops a run: the first failure is kept, the later scenarios are not recorded,
//! and the command ends by saying so, with the code `Exit::with_record_failure` decides.

use std::path::Path;
use std::sync::Mutex;
use std::time::SystemTime;

use crate::analyze::Verdict;
use crate::cli::output;
use crate::cli::Exit;
use crate::results_db::{open, DbError, RunRow, RunSource, Store};
use crate::runner::RunRecord;

/// The environment variable that records every run when `--record` is not given.
pub(crate) const RECORD_ENV: &str = "LEAKLOOP_RECORD";

/// Arguments shared by the commands that record.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct RecordArgs {
    /// Record each scenario's outcome into this results database: a SQLite file (created when
    /// absent) or a `postgres://` URL (default: `LEAKLOOP_RECORD`; docs/results-db.md). The
    /// run's folder is written first; a database that cannot be written does not stop the run.
    #[arg(long, value_name = "DB")]
    pub record: Option<String>,
}

impl RecordArgs {
    /// The database to record into: the flag, else the environment's, else none.
    pub(crate) fn target(&self) -> Option<String> {
        self.record.clone().or_else(|| {
            std::env::var(RECORD_ENV)
                .ok()
                .filter(|v| !v.trim().is_empty())
        })
    }

    /// The recorder, opened now; `None` when nothing is to be recorded.
    pub(crate) fn recorder(&self) -> Option<Recorder> {
        self.target().map(|target| Recorder::open(&target))
    }
}

/// Records runs into one database from any thread; keeps the first failure.
#[derive(Debug)]
pub(crate) struct Recorder {
    store: Mutex<Result<Box<dyn Store>, DbError>>,
    recorded: Mutex<usize>,
    missed: Mutex<usize>,
}

impl Recorder {
    /// Opens `target`; a failure is kept for [`Recorder::finish`].
    pub(crate) fn open(target: &str) -> Recorder {
        Recorder {
            store: Mutex::new(open(target)),
            recorded: Mutex::new(0),
            missed: Mutex::new(0),
        }
    }

    /// Records one scenario's outcome (its folder already written).
    pub(crate) fn record(
        &self,
        source: RunSource,
        record: &RunRecord,
        verdict: &Verdict,
        run_dir: Option<&Path>,
        exit: Exit,
        times: Option<(SystemTime, SystemTime)>,
    ) {
        let row = RunRow::of(source, record, verdict, run_dir, exit as u8, times);
        self.record_row(&row);
    }

    fn record_row(&self, row: &RunRow) {
        let mut store = self.store.lock().unwrap_or_else(|p| p.into_inner());
        let failed = match store.as_mut() {
            Ok(s) => match s.insert(std::slice::from_ref(row)) {
                Ok(()) => false,
                Err(e) => {
                    *store = Err(e);
                    true
                }
            },
            Err(_) => true,
        };
        let counter = if failed { &self.missed } else { &self.recorded };
        *counter.lock().unwrap_or_else(|p| p.into_inner()) += 1;
    }

    /// Says what was recorded (or why not) and returns the command's code: `exit`, or what
    /// `Exit::with_record_failure` makes of it when a run could not be recorded.
    pub(crate) fn finish(self, exit: Exit) -> Exit {
        let missed = *self.missed.lock().unwrap_or_else(|p| p.into_inner());
        let recorded = *self.recorded.lock().unwrap_or_else(|p| p.into_inner());
        let store = self.store.into_inner().unwrap_or_else(|p| p.into_inner());
        match store {
            Err(e) if missed > 0 => {
                output::error(&format!(
                    "{missed} run(s) not recorded (their reports are written): {e}"
                ));
                exit.with_record_failure()
            }
            Err(e) => {
                output::warning(&e.to_string());
                exit
            }
            Ok(s) => {
                output::note(&format!("recorded {recorded} run(s) in {}", s.target()));
                exit
            }
        }
    }
}
