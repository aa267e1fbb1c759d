//! The bisect itself: resolve the builds, check the libraries already on disk, then visit the
//! builds in the chosen order, fetching a missing one through the user's program and running the
//! scenario `runs` times on each (through the caller's [`ScenarioRunner`], into
//! `OUT/BUILD/run-R/`). A run folder that cannot be claimed stops the runs: the outcome keeps
//! its error for the caller, after the table of what did run.

use std::path::PathBuf;

use crate::analyze::{Verdict, VerdictStatus};
use crate::bisect::builds::{fetch, fetch_command, fetch_script, resolve, Build};
use crate::bisect::search::{search, Figures, Metric, Order};
use crate::bisect::BisectError;
use crate::engine::litert_lm::check_library;
use crate::report::safe_path::unique_slugs;
use crate::runner::{RunOutcome, RunRecord};
use crate::scenario::Scenario;

/// What a bisect runs and how.
#[derive(Debug, Clone)]
pub(crate) struct BisectOptions {
    /// The scenario (with the command line's overrides), run on every build.
    pub scenario: Scenario,
    /// The builds: `FROM..TO` or a comma-separated list (`--versions`).
    pub versions: String,
    /// The figure compared across builds.
    pub metric: Metric,
    /// The watched metric the figure is taken of (default: the scenario's first watched one).
    pub watch: Option<String>,
    /// Every build in turn, or a bisection.
    pub order: Order,
    /// Runs per build (run r uses the scenario's seed + r).
    pub runs: u32,
    /// A change must also exceed this much (bytes, or a count for `expectations`).
    pub min_change: f64,
    /// Never fetch.
    pub offline: bool,
    /// The program that fetches a missing build (`--fetch-script`; else the environment's).
    pub fetch_script: Option<PathBuf>,
    /// Where every run's reports go (`OUT/BUILD/run-R/`).
    pub out: Option<PathBuf>,
}

/// The files a bisect's caller writes into the top of `--out`: no build's folder takes their
/// names.
pub(crate) const BISECT_FILES: [&str; 2] = ["trend.svg", "bisect.txt"];

/// What one build gave.
#[derive(Debug, Clone, Default)]
pub(crate) struct BuildResult {
    /// One figure per run that measured it.
    pub figures: Figures,
    /// One verdict per run (a run whose engine could not be built: engine failed).
    pub verdicts: Vec<VerdictStatus>,
    /// Why the build did not run, or how it ran (capabilities used, fallbacks).
    pub note: String,
}

/// What a bisect found. `E` is the runner's error of a run folder that could not be claimed.
#[derive(Debug)]
pub(crate) struct BisectOutcome<E> {
    /// The watched metric the figure was taken of.
    pub watch: String,
    /// Every build's name, oldest first.
    pub labels: Vec<String>,
    /// What each build gave; `None` for builds the bisection skipped.
    pub results: Vec<Option<BuildResult>>,
    /// The first changed build and the build it was compared with.
    pub first_change: Option<(usize, usize)>,
    /// The run folder that could not be claimed, which stopped the runs.
    pub stopped: Option<E>,
}

impl<E> BisectOutcome<E> {
    /// Whether any build measured the figure.
    pub(crate) fn measured(&self) -> bool {
        self.results
            .iter()
            .flatten()
            .any(|r| !r.figures.0.is_empty())
    }
}

/// Why one run of a build gave no verdict.
#[derive(Debug)]
pub(crate) enum RunFailure<E> {
    /// Its folder could not be claimed: nothing more runs, and the bisect ends with this error.
    Unclaimed(E),
    /// The engine could not be built: the run counts as an engine failure, with this text.
    Failed(String),
}

/// Runs one scenario of the bisect, as `leakloop run FILE --out FOLDER --quiet` would, and
/// writes its reports into `folder` when there is one.
pub(crate) trait ScenarioRunner {
    /// The error of a folder that cannot be claimed.
    type Error;

    /// Claims `folder`, runs `scenario` and writes its reports.
    fn run(
        &self,
        scenario: &Scenario,
        folder: Option<PathBuf>,
    ) -> Result<(RunRecord, Verdict), RunFailure<Self::Error>>;
}

/// What a bisect tells its caller while it runs.
#[derive(Debug)]
pub(crate) enum BisectEvent<'a> {
    /// A missing build is being fetched.
    Fetching {
        /// Its version.
        version: &'a str,
        /// The program fetching it.
        script: &'a std::path::Path,
    },
    /// A run of a build ended with a verdict.
    Ran {
        /// The build.
        label: &'a str,
        /// Which run, from 1.
        run: u32,
        /// Runs per build.
        runs: u32,
        /// Its figure, if it measured one.
        figure: Option<f64>,
        /// Its verdict.
        status: VerdictStatus,
    },
    /// A run of a build gave no verdict.
    Failed {
        /// The build.
        label: &'a str,
        /// Which run, from 1.
        run: u32,
        /// Runs per build.
        runs: u32,
        /// Why (its first line).
        note: &'a str,
    },
}

/// Resolves the builds of `options`, checks those on disk, then measures them in order (see the
/// module doc). Builds that cannot be named or run are refused before anything runs.
pub(crate) fn bisect<R: ScenarioRunner>(
    options: &BisectOptions,
    runner: &R,
    progress: &dyn Fn(BisectEvent<'_>),
) -> Result<BisectOutcome<R::Error>, BisectError> {
    let scenario = &options.scenario;
    let watch = match &options.watch {
        Some(w) => w.clone(),
        None => scenario
            .watch
            .first()
            .cloned()
            .unwrap_or_else(|| "rss".to_owned()),
    };
    let builds = resolve(scenario, &options.versions)?;
    if builds.is_empty() {
        return Err(BisectError::NoBuild {
            versions: options.versions.clone(),
        });
    }
    // Libraries already on disk are checked before anything runs: a build that cannot run a
    // step of the scenario is bad input, as in `run`.
    for build in &builds {
        if let Build::Library(lib) = build {
            check_library(&with_build(scenario, build), None).map_err(|refusal| {
                BisectError::Refused {
                    build: lib.version.clone(),
                    refusal,
                }
            })?;
        }
    }

    let labels: Vec<String> = builds.iter().map(Build::label).collect();
    // Each build's run folders under --out: its label made a safe, distinct name.
    let folders = unique_slugs(labels.iter().map(String::as_str), &BISECT_FILES);
    let mut results: Vec<Option<BuildResult>> = vec![None; builds.len()];
    let mut stopped = None;
    let visit = Visit {
        options,
        watch: &watch,
        runner,
        progress,
    };
    let found = search(builds.len(), options.order, options.min_change, |i| {
        let result = visit.measure(&builds[i], &folders[i], &mut stopped);
        let figures = result.figures.clone();
        results[i] = Some(result);
        figures
    });
    Ok(BisectOutcome {
        watch,
        labels,
        results,
        first_change: found.first_change,
        stopped,
    })
}

/// The scenario set up to run on `build`.
fn with_build(scenario: &Scenario, build: &Build) -> Scenario {
    let mut s = scenario.clone();
    match build {
        Build::Library(lib) => {
            // Absolute, so that the worker process finds it whatever its working directory.
            s.engine.lib =
                Some(std::path::absolute(&lib.path).unwrap_or_else(|_| lib.path.clone()));
        }
        Build::Profile(name) => s.engine.profile = Some(name.clone()),
        Build::Unfetched(_) => {}
    }
    s
}

/// What every build's runs share.
struct Visit<'a, R: ScenarioRunner> {
    options: &'a BisectOptions,
    watch: &'a str,
    runner: &'a R,
    progress: &'a dyn Fn(BisectEvent<'_>),
}

impl<R: ScenarioRunner> Visit<'_, R> {
    /// Runs the runs of one build (fetching it first when needed). A run folder (under `--out`,
    /// in `folder`) that cannot be claimed goes into `stopped`, and nothing more runs.
    fn measure(&self, build: &Build, folder: &str, stopped: &mut Option<R::Error>) -> BuildResult {
        let options = self.options;
        let label = build.label();
        if stopped.is_some() {
            return BuildResult {
                note: "not run: an output folder could not be claimed".into(),
                ..Default::default()
            };
        }
        let build = match build {
            Build::Unfetched(v) if options.offline => {
                return BuildResult {
                    note: format!("not fetched (offline): {}", fetch_command(v)),
                    ..Default::default()
                }
            }
            Build::Unfetched(v) => {
                let Some(script) = fetch_script(options.fetch_script.as_deref()) else {
                    return BuildResult {
                        note: format!(
                            "not fetched (no --fetch-script): fetch it with `{}`",
                            fetch_command(v)
                        ),
                        ..Default::default()
                    };
                };
                (self.progress)(BisectEvent::Fetching {
                    version: v,
                    script: &script,
                });
                match fetch(&script, v) {
                    Ok(lib) => Build::Library(lib),
                    Err(why) => {
                        return BuildResult {
                            note: format!("not fetched: {why}"),
                            ..Default::default()
                        }
                    }
                }
            }
            b => b.clone(),
        };
        let base = with_build(&options.scenario, &build);
        if let Err(why) = check_library(&base, None) {
            return BuildResult {
                note: why.to_string(),
                ..Default::default()
            };
        }
        let mut result = BuildResult::default();
        for r in 0..options.runs {
            let mut s = base.clone();
            s.seed = options.scenario.seed.wrapping_add(u64::from(r));
            let run_folder = options
                .out
                .as_ref()
                .map(|d| d.join(folder).join(format!("run-{}", r + 1)));
            match self.runner.run(&s, run_folder) {
                Ok((record, verdict)) => {
                    result.verdicts.push(verdict.status);
                    let figure = options.metric.of(self.watch, &record, &verdict);
                    if let Some(v) = figure {
                        result.figures.0.push(v);
                    }
                    let details = &record.backend.details;
                    if let RunOutcome::EngineFailed { turn, step, error } = &record.outcome {
                        result.note = first_line(&format!(
                            "engine failed at turn {turn} ({step}): {}",
                            error.message
                        ));
                    } else if let Some(used) = details.get("capabilities_used") {
                        result.note = match details.get("degraded") {
                            Some(d) => format!("uses {used}; degraded: {d}"),
                            None => format!("uses {used}"),
                        };
                    }
                    (self.progress)(BisectEvent::Ran {
                        label: &label,
                        run: r + 1,
                        runs: options.runs,
                        figure,
                        status: verdict.status,
                    });
                }
                Err(RunFailure::Unclaimed(e)) => {
                    result.note = "not run: its output folder could not be claimed".into();
                    *stopped = Some(e);
                    break;
                }
                Err(RunFailure::Failed(text)) => {
                    result.verdicts.push(VerdictStatus::EngineFailed);
                    result.note = first_line(&text);
                    (self.progress)(BisectEvent::Failed {
                        label: &label,
                        run: r + 1,
                        runs: options.runs,
                        note: &result.note,
                    });
                }
            }
        }
        result
    }
}

/// The first line of `text`, control characters shown as `?`, at most 300 characters: a note
/// in one table cell.
fn first_line(text: &str) -> String {
    text.lines()
        .next()
        .unwrap_or_default()
        .chars()
        .map(|c| if c.is_control() { '?' } else { c })
        .take(300)
        .collect()
}
