//! `leakloop run` with a suite (several files, a folder, a glob, or `--partition`): loads every
//! scenario of its share, runs them on `-j` threads (exclusive ones one at a time per device,
//! `schedule.rs`), each into its own folder under `--out` exactly as a single run writes it,
//! then writes the suite's report.json, summary.md and junit.xml and exits with the worst
//! scenario's code.

use std::path::{Path, PathBuf};
use std::time::Instant;

use crate::analyze::Verdict;
use crate::cli::baseline::Baseline;
use crate::cli::history::min_change_flag;
use crate::cli::interrupt::InFlight;
use crate::cli::output;
use crate::cli::run::{claim_out, run_and_analyze, write_out, Format, RunArgs};
use crate::cli::suite::inputs::{expand, is_pattern, SuiteFile};
use crate::cli::suite::partition::{fnv1a64, Partition};
use crate::cli::suite::schedule::{run_jobs, Device};
use crate::cli::{CliError, Exit, Outcome};
use crate::report::provenance::{process_env, resolve_build};
use crate::report::{
    render_suite_text, write_suite_reports, EntryStatus, OutDir, SuiteEntry, SuiteIdentity,
    SuitePartition, SuiteReport, WorstMetric,
};
use crate::runner::{BuildStamp, CiRun};
use crate::scenario::{load_scenario_with, Overrides, Scenario};

/// Whether these arguments ask for a suite rather than today's single run: several paths, a
/// folder, a glob pattern, or a partition.
pub(crate) fn is_suite(args: &RunArgs) -> bool {
    args.partition.is_some()
        || args.scenarios.len() != 1
        || args.scenarios.iter().any(|p| p.is_dir() || is_pattern(p))
}

/// The suite's files and identity, before a partition takes its share.
pub(crate) struct Plan {
    /// The files of this share, sorted by relative path.
    pub files: Vec<SuiteFile>,
    /// The whole suite.
    pub identity: SuiteIdentity,
}

/// Expands the arguments and keeps `partition`'s share.
pub(crate) fn plan(args: &[PathBuf], partition: Option<Partition>) -> Result<Plan, CliError> {
    let all = expand(args)?;
    let listing: Vec<&str> = all.iter().map(|f| f.relative.as_str()).collect();
    let identity = SuiteIdentity {
        scenarios: all.len(),
        fingerprint: format!("{:016x}", fnv1a64(listing.join("\n").as_bytes())),
    };
    let files = all
        .into_iter()
        .filter(|f| partition.is_none_or(|p| p.holds(&f.relative)))
        .collect();
    Ok(Plan { files, identity })
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
        jobs: args.jobs.map_or_else(default_jobs, |j| j as usize),
        partition: args.partition,
        quiet: args.quiet,
        build: Some(build),
        baseline: args.baseline.clone(),
        baseline_min_change: args.baseline_min_change.clone(),
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
}

/// Loads and runs every file of `plan`, each into `root/<folder>` when there is a root; returns
/// the suite report (not yet written).
pub(crate) fn run_plan(args: &SuiteOptions, plan: &Plan, root: Option<&Path>) -> SuiteReport {
    let total = plan.files.len();
    if let Some(p) = args.partition {
        if !args.quiet {
            output::note(&format!(
                "partition {p}: {total} of the suite's {} scenarios",
                plan.identity.scenarios
            ));
        }
    }
    let overrides = &args.overrides;
    let loaded: Vec<Result<Scenario, Failure>> = plan
        .files
        .iter()
        .map(|f| load_scenario_with(&f.path, overrides).map_err(|e| CliError::from(e).into()))
        .collect();
    let devices: Vec<Device> = loaded
        .iter()
        .map(|s| s.as_ref().ok().and_then(Scenario::exclusive_device))
        .collect();
    let jobs = args.jobs;
    let done = std::sync::atomic::AtomicUsize::new(0);
    let results = run_jobs(
        &devices,
        jobs,
        |i| run_one(&plan.files[i], &loaded[i], root, args),
        |_, (entry, _): &(SuiteEntry, Exit)| {
            let n = done.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1;
            if !args.quiet {
                output::note(&format!(
                    "[{n}/{total}] {:<13} {} ({:.2} s)",
                    entry.status.word(),
                    entry.path,
                    entry.duration_s
                ));
            }
        },
    );
    let exit = Exit::worst(results.iter().map(|(_, exit)| *exit));
    let partition = args.partition.map(|p| SuitePartition {
        index: p.index,
        count: p.count,
    });
    SuiteReport::new(
        plan.identity.clone(),
        partition,
        exit as u8,
        results.into_iter().map(|(entry, _)| entry).collect(),
    )
}

/// The default `-j`: the cores this process may use.
pub(crate) fn default_jobs() -> usize {
    std::thread::available_parallelism().map_or(1, usize::from)
}

/// Why a scenario has no verdict, kept as text with its exit code (a load error is found before
/// the jobs start and read by the job that reports it).
#[derive(Debug)]
pub(crate) struct Failure {
    text: String,
    exit: Exit,
}

impl From<CliError> for Failure {
    fn from(e: CliError) -> Self {
        Self {
            text: format!("{e:#}"),
            exit: e.exit(),
        }
    }
}

/// Runs one scenario of the suite into its folder, as `leakloop run FILE --out FOLDER --quiet`
/// would (without printing its table), and sums it up for the suite.
fn run_one(
    file: &SuiteFile,
    loaded: &Result<Scenario, Failure>,
    root: Option<&Path>,
    options: &SuiteOptions,
) -> (SuiteEntry, Exit) {
    let started = Instant::now();
    let mut entry = SuiteEntry {
        path: file.relative.clone(),
        folder: file.folder.clone(),
        name: None,
        status: EntryStatus::Error,
        exit_code: 0,
        error: None,
        worst_metric: None,
        expectations: 0,
        expectations_failed: 0,
        duration_s: 0.0,
    };
    let exit = match loaded {
        Err(failure) => {
            entry.error = Some(failure.text.clone());
            failure.exit
        }
        Ok(scenario) => {
            entry.name = Some(scenario.name.clone());
            match run_into_folder(scenario, file, root, options) {
                Ok((exit, verdict)) => {
                    entry.status = EntryStatus::of_verdict(verdict.status);
                    entry.worst_metric = WorstMetric::of(&verdict);
                    entry.expectations = verdict.expectations.len();
                    entry.expectations_failed =
                        verdict.expectations.iter().filter(|e| !e.passed).count();
                    exit
                }
                Err(e) => {
                    if matches!(e, CliError::Engine(_)) {
                        entry.status = EntryStatus::EngineFailed;
                    }
                    entry.error = Some(format!("{e:#}"));
                    e.exit()
                }
            }
        }
    };
    entry.exit_code = exit as u8;
    entry.duration_s = started.elapsed().as_secs_f64();
    (entry, exit)
}

/// Claims the scenario's folder, runs it and writes its reports; returns its exit code and
/// verdict.
fn run_into_folder(
    scenario: &Scenario,
    file: &SuiteFile,
    root: Option<&Path>,
    options: &SuiteOptions,
) -> Result<(Exit, Verdict), CliError> {
    // The baseline is found (by scenario name) before the folder is claimed or anything runs.
    let baseline = options
        .baseline
        .as_deref()
        .map(|dir| Baseline::load(dir, scenario, options.baseline_min_change.as_deref()))
        .transpose()?;
    let out = root
        .map(|root| claim_out(&root.join(&file.folder)))
        .transpose()?;
    let in_flight = InFlight::default();
    if let Some(build) = &options.build {
        in_flight.set_build(build.clone());
    }
    let (record, mut verdict, out) =
        run_and_analyze(scenario, out, true, &in_flight, Format::Text)?;
    if let Some(baseline) = &baseline {
        baseline.apply(&record, &mut verdict);
    }
    write_out(out, &record, &verdict);
    Ok((Exit::of_run(&record, &verdict), verdict))
}
