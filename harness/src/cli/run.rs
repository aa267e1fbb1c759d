//! `leakloop run`: one scenario, start to finish: claim the output folder, build the engine, run
//! the turn loop while streaming samples to disk, analyse, print the verdict, write the reports
//! and map the verdict to an exit code. SIGINT and SIGTERM end it with a partial report
//! (`interrupt.rs`).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::anyhow;

use crate::analyze::{analyze_run, stop_rule_for, Verdict};
use crate::cli::baseline::Baseline;
use crate::cli::interrupt::{self, InFlight, Pending};
use crate::cli::output;
use crate::cli::overrides::OverrideArgs;
use crate::cli::suite::{self, Partition};
use crate::cli::{CliError, Exit, Outcome};
use crate::engine::build_on_target;
use crate::engine::litert_lm::check_library;
use crate::engine::transport::BuildError;
use crate::probe::target_for;
use crate::report::provenance::{process_env, resolve_build};
use crate::report::{
    print_terminal, provenance, render_report_json, write_reports, Fanout, OutDir,
    ProgressObserver, SampleStream,
};
use crate::runner::{backend_on, run_scenario_on, RunRecord};
use crate::scenario::{load_scenario_with, BackendKind, Overrides, Scenario};

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
    /// The other scenario overrides (shared with `compare`).
    #[command(flatten)]
    pub scenario_overrides: OverrideArgs,
    /// Write report.json, junit.xml, plot.svg, summary.md and the streamed samples.jsonl here.
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
    /// Suites: how many scenarios run at once (default: the cores); scenarios of a real engine
    /// run one at a time per device unless they say `concurrency: shared`.
    #[arg(long, short = 'j', value_name = "N", value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub jobs: Option<u32>,
    /// Suites: run only share K of N of the scenarios (by a hash of each one's path relative
    /// to the suite root); `leakloop merge` joins the shares' --out folders.
    #[arg(long, value_name = "K/N")]
    pub partition: Option<Partition>,
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
            ..self.scenario_overrides.overrides()
        }
    }
}

pub(crate) fn run(args: RunArgs) -> Result<Outcome, CliError> {
    if suite::is_suite(&args) {
        return suite::run_suite(&args);
    }
    let in_flight = Arc::new(InFlight::default());
    interrupt::install(Arc::clone(&in_flight))
        .map_err(|e| CliError::Engine(anyhow!("cannot watch for SIGINT and SIGTERM: {e}")))?;
    // Claimed before anything can fail: from here on the folder shows no earlier run's verdict,
    // whatever stops this one.
    let out = args.out.as_deref().map(claim_out).transpose()?;
    let build = resolve_build(
        args.build_id.as_deref(),
        args.build_date.as_deref(),
        &process_env,
        std::time::SystemTime::now(),
    );
    let scenario = match (
        load_scenario_with(&args.scenarios[0], &args.overrides()),
        build,
    ) {
        (Ok(scenario), Ok(build)) => {
            in_flight.set_build(build);
            scenario
        }
        (Err(e), _) => {
            release(out);
            return Err(e.into());
        }
        (_, Err(e)) => {
            release(out);
            return Err(CliError::bad_input(e));
        }
    };
    let baseline = match args
        .baseline
        .as_deref()
        .map(|dir| Baseline::load(dir, &scenario, args.baseline_min_change.as_deref()))
    {
        Some(Err(e)) => {
            release(out);
            return Err(e);
        }
        baseline => baseline.transpose().unwrap_or(None),
    };
    let (record, mut verdict, out) =
        run_and_analyze(&scenario, out, args.quiet, &in_flight, args.format)?;
    if let Some(baseline) = &baseline {
        baseline.apply(&record, &mut verdict);
    }
    Ok(Outcome::Verdict(finish_run(
        &record,
        &verdict,
        args.format,
        out,
    )))
}

/// How every run ends once it has a verdict, finished or interrupted: print first, write second
/// (a full disk must not hide the verdict or change the exit code, and a closed stdout must not
/// cost the reports); returns the run's exit code.
pub(crate) fn finish_run(
    record: &RunRecord,
    verdict: &Verdict,
    format: Format,
    out: Option<OutDir>,
) -> Exit {
    print_verdict(record, verdict, format, out.as_ref());
    write_out(out, record, verdict);
    Exit::of_run(record, verdict)
}

/// Prints the verdict table (or report.json with `--format json`), then where the reports go.
/// A failed write to stdout is kept for [`super::decide`].
fn print_verdict(record: &RunRecord, verdict: &Verdict, format: Format, out: Option<&OutDir>) {
    match format {
        Format::Json => match render_report_json(record, verdict) {
            Ok(json) => output::println(&json),
            Err(e) => output::warning(&e.to_string()),
        },
        Format::Text => {
            output::write_stdout(|| print_terminal(record, verdict));
            if let Some(out) = out {
                output::println(&format!("reports: {}", out.dir().display()));
            }
        }
    }
}

/// Writes every report into the run's claimed folder and releases it. A write failure (a full
/// disk, a read-only folder) is a warning: the verdict stands, and was printed before.
pub(crate) fn write_out(out: Option<OutDir>, record: &RunRecord, verdict: &Verdict) {
    let Some(out) = out else { return };
    if let Err(e) = write_reports(out.dir(), record, verdict) {
        output::warning(&format!(
            "the verdict above stands, but its reports are incomplete: {e}"
        ));
    }
    release(Some(out));
}

/// Claims an output folder for a run (see [`OutDir::claim`]): a busy folder is a usage error, one
/// that cannot be created or marked an output failure (error.rs).
pub(crate) fn claim_out(dir: &Path) -> Result<OutDir, CliError> {
    Ok(OutDir::claim(dir)?)
}

/// Releases a claimed folder; a failure is a warning.
fn release(out: Option<OutDir>) {
    if let Some(Err(e)) = out.map(OutDir::release) {
        output::warning(&e.to_string());
    }
}

/// Builds the engine, runs the scenario (streaming samples into the claimed `out` folder when
/// given) and analyses the record; returns the folder for [`write_out`]. An engine that fails
/// mid-run still yields a record and a verdict; only an engine that cannot be built at all is an
/// error (and leaves `out` without any report: the previous run's are gone, none are new).
/// `format` is what the signal thread prints should the run be interrupted.
pub(crate) fn run_and_analyze(
    scenario: &Scenario,
    out: Option<OutDir>,
    quiet: bool,
    in_flight: &InFlight,
    format: Format,
) -> Result<(RunRecord, Verdict, Option<OutDir>), CliError> {
    run_and_analyze_timed(
        scenario,
        out,
        quiet,
        in_flight,
        format,
        &mut PhaseTimes::default(),
    )
}

/// Wall time of the phases of [`run_and_analyze`], in seconds, and of writing the reports (for
/// `leakloop bench scale`).
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct PhaseTimes {
    /// Building the engine and the turn loop, samples streamed.
    pub run: f64,
    /// The analysis.
    pub analyze: f64,
    /// Writing the reports (timed by the caller around [`write_out`]).
    pub reports: f64,
    /// Peak resident memory when the turn loop ended, in bytes, where the OS tells.
    pub run_peak_rss: Option<u64>,
}

/// [`run_and_analyze`], timing each phase into `times`.
pub(crate) fn run_and_analyze_timed(
    scenario: &Scenario,
    out: Option<OutDir>,
    quiet: bool,
    in_flight: &InFlight,
    format: Format,
    times: &mut PhaseTimes,
) -> Result<(RunRecord, Verdict, Option<OutDir>), CliError> {
    // What the library cannot run is bad input, refused before anything starts. A remote
    // worker loads its library on the target: this machine's library says nothing about it.
    let checked = match scenario.target.remote_worker() {
        None => check_library(scenario, None),
        Some(_) => Ok(None),
    };
    if let Err(why) = checked {
        release(out);
        return Err(why.into());
    }
    let started = std::time::Instant::now();
    // Where the engine's process is measured; a device that does not answer stops the run
    // before anything starts.
    let built = target_for(scenario)
        .map_err(BuildError::from)
        .and_then(|target| Ok((target, build_on_target(scenario)?)));
    let (target, mut engine) = match built {
        Ok(built) => built,
        Err(e) => {
            release(out);
            return Err(CliError::from(e).context(format!(
                "cannot start the `{}` engine for {}",
                scenario.engine.backend.as_str(),
                scenario_label(scenario)
            )));
        }
    };
    let stream = match out.as_ref().map(|out| SampleStream::create(out.dir())) {
        Some(Err(e)) => {
            release(out);
            return Err(e.into());
        }
        stream => stream.transpose().unwrap_or(None),
    };
    // Hashed before the first turn: an interrupted run keeps it, and a model file swapped
    // while the run goes is not mistaken for the one that ran.
    let (build, ci) = in_flight.build();
    let backend = backend_on(target.as_ref(), engine.as_ref());
    let provenance = provenance::collect(scenario, &backend, &build, ci.as_ref());
    in_flight.start(Pending {
        scenario: scenario.clone(),
        backend,
        stream,
        samples: Vec::new(),
        out,
        turns_completed: 0,
        format,
        provenance: Some(provenance),
    });
    let mut progress = ProgressObserver::new(&scenario.name, scenario.total_turns(), quiet);
    let mut record = {
        let mut observer = in_flight.observer();
        let mut fanout = Fanout::new(vec![&mut progress, &mut observer]);
        let mut stop = stop_rule_for(scenario);
        run_scenario_on(
            target.as_ref(),
            scenario,
            engine.as_mut(),
            &mut fanout,
            stop.as_mut(),
        )
    };
    drop(engine);
    progress.finish();
    let pending = in_flight.finish();
    let (stream, out) = match pending {
        Some(p) => {
            record.provenance = p.provenance;
            (p.stream, p.out)
        }
        None => (None, None),
    };
    if let Some(stream) = stream {
        // The samples are on disk already; a failed final flush is reported but the run's
        // result still stands.
        if let Err(e) = stream.finish() {
            output::warning(&e.to_string());
        }
    }
    times.run = started.elapsed().as_secs_f64();
    times.run_peak_rss = crate::probe::peak_rss_bytes();
    let started = std::time::Instant::now();
    let verdict = analyze_run(&record);
    times.analyze = started.elapsed().as_secs_f64();
    Ok((record, verdict, out))
}

fn scenario_label(scenario: &Scenario) -> String {
    match &scenario.source {
        Some(path) => format!("{} ({})", scenario.name, path.display()),
        None => scenario.name.clone(),
    }
}
