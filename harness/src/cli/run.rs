//! `leakloop run`: one scenario, start to finish, through the library's
//! [`Session`](crate::session::Session); this file parses the arguments, shows the session (its
//! progress bar, its verdict before the reports are written, its warnings) and maps the verdict
//! to an exit code. SIGINT and SIGTERM end it with a partial report (`interrupt.rs`).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::anyhow;

use crate::analyze::Verdict;
use crate::cli::interrupt::{self, InFlight};
use crate::cli::output;
use crate::cli::overrides::OverrideArgs;
use crate::cli::record::RecordArgs;
use crate::cli::suite::{self, Partition};
use crate::cli::{CliError, Exit, OnInconclusive, Outcome};
use crate::report::{print_terminal, render_report_json, OutDir, ProgressObserver};
use crate::results_db::RunSource;
use crate::runner::{RunObserver, RunRecord, Sample};
use crate::scenario::{BackendKind, Overrides, Scenario};
use crate::session::{Judged, Session, SessionObserver};

/// Arguments of `leakloop run`.
#[derive(Debug, clap::Args)]
pub(crate) struct RunArgs {
    /// The scenario file (YAML); several files, folders (searched for *.yaml and *.yml) or
    /// glob patterns run a suite.
    #[arg(required = true, value_name = "SCENARIO")]
    pub scenarios: Vec<PathBuf>,
    /// Run on another backend than the scenario names.
    #[arg(long, value_enum)]
    pub backend: Option<BackendKind>,
    /// Engine library to load (e.g. a `liblitert-lm.so`), instead of discovering one.
    #[arg(long)]
    pub lib: Option<PathBuf>,
    /// Attach to this running process (`backend: attach`): it replaces the scenario's `command`
    /// or `pid`, and its markers must come from `markers.file` or `markers.command`.
    #[arg(long, value_name = "PID")]
    pub pid: Option<u32>,
    /// Attribute per-turn growth to allocation sites: the engine's process runs under heaptrack
    /// (and an exec driver that offers sites records its own language's, such as Python's
    /// tracemalloc) and the report lists the sites whose live bytes grow per turn
    /// (`engine.attribute`).
    #[arg(long)]
    pub attribute: bool,
    /// The other scenario overrides (shared with `compare`).
    #[command(flatten)]
    pub scenario_overrides: OverrideArgs,
    /// Write report.json, junit.xml, plot.svg, summary.md and the streamed sample store (samples.parquet) here.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// What to print on stdout.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
    /// No progress bar.
    #[arg(long, short)]
    pub quiet: bool,
    /// The build under test, recorded in the report (default: `LEAKLOOP_BUILD_ID` or the CI
    /// system's run id).
    #[arg(long, value_name = "ID")]
    pub build_id: Option<String>,
    /// The build's date, RFC 3339 or YYYY-MM-DD (default: `LEAKLOOP_BUILD_DATE`, the CI
    /// system's, or when the run starts).
    #[arg(long, value_name = "DATE")]
    pub build_date: Option<String>,
    /// Also judge the run against this earlier report of the same scenario (a run's `--out`
    /// folder, or a suite folder holding it): a significant rise in growth per turn or plateau
    /// size fails the run even when its own expectations hold.
    #[arg(long, value_name = "OLD_DIR")]
    pub baseline: Option<PathBuf>,
    /// With `--baseline`: a rise must also exceed this much (bytes per turn for growth, bytes
    /// for plateaus; e.g. `4KiB`).
    #[arg(long, value_name = "SIZE", requires = "baseline")]
    pub baseline_min_change: Option<String>,
    /// What an inconclusive verdict (no expectation failed, one could not be decided within
    /// `max_turns`) exits with: `fail` exits 5, `pass` exits 0; the report says inconclusive
    /// either way.
    #[arg(long, value_enum, value_name = "POLICY", default_value_t = OnInconclusive::Fail)]
    pub on_inconclusive: OnInconclusive,
    /// Suites: how many scenarios run at once (default: the cores); scenarios of a real engine
    /// run one at a time per device unless they say `concurrency: shared`.
    #[arg(long, short = 'j', value_name = "N", value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub jobs: Option<u32>,
    /// Suites: run only share K of N of the scenarios (by a hash of each one's path relative
    /// to the suite root); `leakloop merge` joins the shares' --out folders.
    #[arg(long, value_name = "K/N")]
    pub partition: Option<Partition>,
    /// `--record DB`.
    #[command(flatten)]
    pub record: RecordArgs,
}

/// What `leakloop run` prints on stdout.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Format {
    /// The verdict table.
    Text,
    /// report.json.
    Json,
}

impl RunArgs {
    /// The scenario values this command line replaces.
    pub(crate) fn overrides(&self) -> Overrides {
        Overrides {
            backend: self.backend,
            lib: self.lib.clone(),
            pid: self.pid,
            attribute: self.attribute,
            ..self.scenario_overrides.overrides()
        }
    }
}

pub(crate) fn run(args: RunArgs) -> Result<Outcome, CliError> {
    if suite::is_suite(&args) {
        return suite::run_suite(&args);
    }
    let in_flight = Arc::new(InFlight::default());
    interrupt::install(Arc::clone(&in_flight), args.format)
        .map_err(|e| CliError::Engine(anyhow!("cannot watch for SIGINT and SIGTERM: {e}")))?;
    let mut session = Session::from_file(&args.scenarios[0], args.overrides())
        .build_stamp(args.build_id.clone(), args.build_date.clone())
        .in_flight(&in_flight);
    if let Some(out) = &args.out {
        session = session.out(out);
    }
    if let Some(dir) = &args.baseline {
        session = session.baseline(dir, args.baseline_min_change.clone());
    }
    let recorder = args.record.recorder();
    let started = std::time::SystemTime::now();
    let outcome = session.run(&mut Printer::new(args.quiet, args.format))?;
    let exit = Exit::of_run(&outcome.record, &outcome.verdict, args.on_inconclusive);
    let Some(recorder) = recorder else {
        return Ok(Outcome::Verdict(exit));
    };
    recorder.record(
        RunSource::Run,
        &outcome.record,
        &outcome.verdict,
        args.out.as_deref(),
        exit,
        Some((started, std::time::SystemTime::now())),
    );
    Ok(Outcome::Verdict(recorder.finish(exit)))
}

/// How the command line shows a session: a progress bar while the turns run (none with
/// `--quiet`), the verdict (table or report.json) before the reports are written, so that a full
/// disk cannot hide it, then warnings and notes on stderr.
pub(crate) struct Printer {
    quiet: bool,
    /// None: the caller shows the verdict itself.
    format: Option<Format>,
    bar: Option<ProgressObserver>,
}

impl Printer {
    /// Shows a session as `leakloop run --format <format> [--quiet]` does.
    pub(crate) fn new(quiet: bool, format: Format) -> Self {
        Self {
            quiet,
            format: Some(format),
            bar: None,
        }
    }

    /// Shows only the progress bar (unless `quiet`), warnings and notes: the caller shows the
    /// verdict its own way (a suite's table, a comparison, a benchmark's figures).
    pub(crate) fn without_verdict(quiet: bool) -> Self {
        Self {
            quiet,
            format: None,
            bar: None,
        }
    }
}

impl SessionObserver for Printer {
    fn on_start(&mut self, scenario: &Scenario) {
        self.bar = Some(ProgressObserver::new(
            &scenario.name,
            scenario.total_turns(),
            self.quiet,
        ));
    }

    fn on_sample(&mut self, sample: &Sample) {
        if let Some(bar) = &mut self.bar {
            bar.on_sample(sample);
        }
    }

    fn on_turn_end(&mut self, turn: u32, total: u32) {
        if let Some(bar) = &mut self.bar {
            bar.on_turn_end(turn, total);
        }
    }

    fn on_loop_end(&mut self) {
        if let Some(bar) = self.bar.take() {
            bar.finish();
        }
    }

    fn on_verdict(&mut self, record: &RunRecord, verdict: &Verdict, out: Option<&Path>) {
        if let Some(format) = self.format {
            print_verdict(record, verdict, format, out);
        }
    }

    fn on_warning(&mut self, message: &str) {
        output::warning(message);
    }

    fn on_note(&mut self, message: &str) {
        output::note(message);
    }
}

/// How an interrupted run ends once it has a verdict: print first, write second (a full disk
/// must not hide the verdict or change the exit code, and a closed stdout must not cost the
/// reports); returns the run's exit code.
pub(crate) fn finish_run(judged: Judged, format: Format) -> Exit {
    let mut printer = Printer::new(true, format);
    printer.on_verdict(&judged.record, &judged.verdict, judged.out_dir());
    let outcome = judged.write(&mut printer);
    // A stopped run's code is its signal's; the policy only maps a finished inconclusive run.
    Exit::of_run(&outcome.record, &outcome.verdict, OnInconclusive::default())
}

/// Prints the verdict table (or report.json with `--format json`), then where the reports go.
/// A failed write to stdout is kept for [`super::decide`].
fn print_verdict(record: &RunRecord, verdict: &Verdict, format: Format, out: Option<&Path>) {
    match format {
        Format::Json => match render_report_json(record, verdict) {
            Ok(json) => output::println(&json),
            Err(e) => output::warning(&e.to_string()),
        },
        Format::Text => {
            output::write_stdout(|| print_terminal(record, verdict));
            if let Some(out) = out {
                output::println(&format!("reports: {}", out.display()));
            }
        }
    }
}

/// Claims an output folder for a run (see [`OutDir::claim`]): a busy folder is a usage error, one
/// that cannot be created or marked an output failure (error.rs).
pub(crate) fn claim_out(dir: &Path) -> Result<OutDir, CliError> {
    Ok(OutDir::claim(dir)?)
}
