//! `leakloop run` with a suite (several files, a folder, a glob, or `--partition`): the library
//! (`crate::suite`) expands the arguments, schedules the scenarios on `-j` threads and sums them
//! up; here each scenario runs into its own folder under `--out` exactly as a single run writes
//! it, progress lines go to stderr, and the suite's table, report.json, summary.md and junit.xml
//! are written. The command exits with the worst scenario's code.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::cli::history::min_change_flag;
use crate::cli::output;
use crate::cli::record::Recorder;
use crate::cli::run::{claim_out, Format, Printer, RunArgs};
use crate::cli::{CliError, Exit, OnInconclusive, Outcome};
use crate::report::provenance::{process_env, resolve_build};
use crate::report::{render_suite_text, write_suite_reports, OutDir, SuiteReport};
use crate::results_db::RunSource;
use crate::runner::{BuildStamp, CiRun};
use crate::scenario::{Overrides, Scenario, ScenarioError};
use crate::session::{Baseline, Session};
use crate::suite::{
    is_pattern, plan, Failed, InputsError, Partition, Plan, Ran, RunOptions, ScenarioRunner,
    SuiteEvent,
};

/// Whether these arguments ask for a suite rather than today's single run: several paths, a
/// folder, a glob pattern, or a partition.
pub(crate) fn is_suite(args: &RunArgs) -> bool {
    args.partition.is_some()
        || args.scenarios.len() != 1
        || args.scenarios.iter().any(|p| p.is_dir() || is_pattern(p))
}

/// Runs a suite (see the module doc).
pub(crate) fn run_suite(args: &RunArgs) -> Result<Outcome, CliError> {
    let plan = plan(&args.scenarios, args.partition)?;
    // One build stamp for every scenario of the suite; a bad flag is refused before any runs.
    let build = resolve_build(
        args.build_id.as_deref(),
        args.build_date.as_deref(),
        &process_env,
        std::time::SystemTime::now(),
    )
    .map_err(CliError::bad_input)?;
    if let Some(text) = args.baseline_min_change.as_deref() {
        min_change_flag("--baseline-min-change", Some(text))?;
    }
    let root = args.out.as_deref().map(claim_out).transpose()?;
    let options = SuiteOptions {
        overrides: args.overrides(),
        jobs: args
            .jobs
            .map_or_else(crate::suite::default_jobs, |j| j as usize),
        partition: args.partition,
        quiet: args.quiet,
        build: Some(build),
        baseline: args.baseline.clone(),
        baseline_min_change: args.baseline_min_change.clone(),
        on_inconclusive: args.on_inconclusive,
        recorder: args.record.recorder().map(Arc::new),
    };
    let report = run_plan(&options, &plan, root.as_ref().map(OutDir::dir));
    match args.format {
        Format::Text => output::print(&render_suite_text(&report)),
        Format::Json => match serde_json::to_string_pretty(&report) {
            Ok(json) => output::println(&json),
            Err(e) => output::warning(&e.to_string()),
        },
    }
    if let Some(root) = root {
        if args.format == Format::Text {
            output::println(&format!("reports: {}", root.dir().display()));
        }
        write_index(root, &report);
    }
    let exit = Exit::from_code(report.exit_code).unwrap_or(Exit::BadInput);
    // Every scenario thread is done: the suite holds the last reference.
    let exit = match options.recorder.map(Arc::try_unwrap) {
        Some(Ok(recorder)) => recorder.finish(exit),
        _ => exit,
    };
    Ok(Outcome::Verdict(exit))
}

/// Writes the suite's report.json, summary.md and junit.xml into its claimed folder and
/// releases it. The verdicts were printed before: a failed write is a warning next to them.
pub(crate) fn write_index(root: OutDir, report: &SuiteReport) {
    if let Err(e) = write_suite_reports(root.dir(), report) {
        output::warning(&format!(
            "the verdicts above stand, but the suite's reports are incomplete: {e}"
        ));
    }
    if let Err(e) = root.release() {
        output::warning(&e.to_string());
    }
}

/// How a suite runs: what `leakloop run` was told besides its paths and `--out`.
#[derive(Debug, Clone, Default)]
pub(crate) struct SuiteOptions {
    /// The command line's overrides, applied to every scenario.
    pub overrides: Overrides,
    /// Scenarios at once (`-j`).
    pub jobs: usize,
    /// The share to run.
    pub partition: Option<Partition>,
    /// No progress lines.
    pub quiet: bool,
    /// The build stamp of every run (`--build-id`, `--build-date`); none: each run's own from
    /// the environment.
    pub build: Option<(BuildStamp, Option<CiRun>)>,
    /// `--baseline`: the earlier suite (or run) folder each scenario is compared with, by name.
    pub baseline: Option<PathBuf>,
    /// `--baseline-min-change`.
    pub baseline_min_change: Option<String>,
    /// `--on-inconclusive`: each scenario's exit code for an inconclusive verdict.
    pub on_inconclusive: OnInconclusive,
    /// `--record`: where each scenario's outcome is recorded once its folder is written.
    pub recorder: Option<Arc<Recorder>>,
}

/// Runs every file of `plan` (the library's suite run), each into `root/<folder>` when there is
/// a root, with progress lines on stderr unless quiet; returns the suite report (not yet
/// written).
pub(crate) fn run_plan(options: &SuiteOptions, plan: &Plan, root: Option<&Path>) -> SuiteReport {
    let run_options = RunOptions {
        overrides: options.overrides.clone(),
        jobs: options.jobs,
        partition: options.partition,
    };
    let progress = |event: SuiteEvent<'_>| {
        if options.quiet {
            return;
        }
        match event {
            SuiteEvent::Partition {
                partition,
                running,
                suite,
            } => output::note(&format!(
                "partition {partition}: {running} of the suite's {suite} scenarios"
            )),
            SuiteEvent::Finished { done, total, entry } => output::note(&format!(
                "[{done}/{total}] {:<13} {} ({:.2} s)",
                entry.status.word(),
                entry.path,
                entry.duration_s
            )),
        }
    };
    crate::suite::run_plan(&run_options, plan, root, options, &progress)
}

/// A scenario's error, kept for the suite with its exit code.
fn failed(e: CliError) -> Failed {
    Failed {
        text: format!("{e:#}"),
        exit_code: e.exit() as u8,
        engine_failed: matches!(e, CliError::Engine(_)),
    }
}

/// Each scenario runs as `leakloop run FILE --out FOLDER --quiet` would (without printing its
/// table).
impl ScenarioRunner for SuiteOptions {
    fn load_failed(&self, error: ScenarioError) -> Failed {
        failed(error.into())
    }

    fn run(&self, scenario: &Scenario, folder: Option<PathBuf>) -> Result<Ran, Failed> {
        run_into_folder(scenario, folder, self).map_err(failed)
    }
}

/// Runs the scenario through a [`Session`] into its folder, with the suite's build stamp and
/// judged against its baseline when there is one; returns its verdict and exit code.
fn run_into_folder(
    scenario: &Scenario,
    folder: Option<PathBuf>,
    options: &SuiteOptions,
) -> Result<Ran, CliError> {
    // The baseline is found (by scenario name) before the folder is claimed or anything runs.
    let baseline = options
        .baseline
        .as_deref()
        .map(|dir| Baseline::load(dir, scenario, options.baseline_min_change.as_deref()))
        .transpose()?;
    let mut session = Session::new(scenario.clone());
    if let Some(baseline) = baseline {
        if let Some(note) = baseline.note() {
            output::note(&note);
        }
        session = session.with_baseline(baseline);
    }
    if let Some((build, ci)) = &options.build {
        session = session.stamp(build.clone(), ci.clone());
    }
    if let Some(folder) = &folder {
        session = session.out(folder);
    }
    let started = std::time::SystemTime::now();
    let outcome = session.run(&mut Printer::without_verdict(true))?;
    let exit = Exit::of_run(&outcome.record, &outcome.verdict, options.on_inconclusive);
    if let Some(recorder) = &options.recorder {
        recorder.record(
            RunSource::Suite,
            &outcome.record,
            &outcome.verdict,
            folder.as_deref(),
            exit,
            Some((started, std::time::SystemTime::now())),
        );
    }
    let exit_code = exit as u8;
    Ok(Ran {
        verdict: outcome.verdict,
        exit_code,
    })
}

/// A suite whose arguments name no usable scenario files is bad input.
impl From<InputsError> for CliError {
    fn from(e: InputsError) -> Self {
        CliError::bad_input(e)
    }
}
