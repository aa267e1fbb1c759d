//! `leakloop bisect SCENARIO --versions FROM..TO`: one scenario on a series of engine builds (the
//! LiteRT-LM release history, or a sim scenario's own profiles standing for builds), several runs
//! per build, a table of one figure per build with its run-to-run spread, the first build where
//! the figure changed beyond that spread, and a trend plot.

mod builds;
mod search;

use std::fmt::Write as _;
use std::path::PathBuf;

use crate::analyze::VerdictStatus;
use crate::cli::interrupt::InFlight;
use crate::cli::output;
use crate::cli::run::{claim_out, run_and_analyze, write_out, Format};
use crate::cli::table::aligned;
use crate::cli::{CliError, Outcome};
use crate::engine::litert_lm::{check_library, DiscoverError, LibraryRefusal};
use crate::report::safe_path::unique_slugs;
use crate::report::{
    format_bytes, format_signed_bytes, remove_if_present, render_trend_svg, write_atomic, OutDir,
    Trend, TrendPoint,
};
use crate::runner::RunOutcome;
use crate::scenario::{load_scenario_with, Overrides, Scenario};

use builds::{fetch, fetch_command, fetch_script, resolve, Build};
use search::{search, Figures, Metric, Order};

/// Arguments of `leakloop bisect`.
#[derive(Debug, clap::Args)]
pub(crate) struct BisectArgs {
    /// The scenario to run on every build (`litert-lm`, or `sim` with its own `profiles:`).
    pub scenario: PathBuf,
    /// The builds: `FROM..TO` (release names or `nightly`; for a sim scenario, profile names) or
    /// a comma-separated list that may also hold library paths.
    #[arg(long, value_name = "FROM..TO")]
    pub versions: String,
    /// The figure compared across builds.
    #[arg(long, value_enum, default_value = "growth")]
    pub metric: Metric,
    /// The watched metric the figure is taken of (default: the scenario's first watched one).
    #[arg(long, value_name = "METRIC")]
    pub watch: Option<String>,
    /// Bisect: run the first and last build, then halve towards the first change (one step
    /// change assumed), instead of running every build in order.
    #[arg(long)]
    pub bisect: bool,
    /// Runs per build, to measure the run-to-run spread (run r uses the scenario's seed + r).
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=20))]
    pub runs: u32,
    /// A change must also exceed this much (bytes, e.g. `4KiB`; a count for `expectations`).
    #[arg(long, value_name = "SIZE")]
    pub min_change: Option<String>,
    /// Override the number of measured turns.
    #[arg(long)]
    pub turns: Option<u32>,
    /// Override the context size (KV cache) in tokens.
    #[arg(long)]
    pub max_tokens: Option<u32>,
    /// Never fetch: run only the libraries already under target/litert-lm/.
    #[arg(long)]
    pub offline: bool,
    /// Fetch missing LiteRT-LM builds by running this program with the version (as
    /// `ci/fetch-litert-lm.sh VERSION` of a leakloop checkout is run); also LEAKLOOP_FETCH_SCRIPT.
    /// Without either, nothing is fetched: a missing build's note gives the command that fetches
    /// it.
    #[arg(long, value_name = "PATH", conflicts_with = "offline")]
    pub fetch_script: Option<PathBuf>,
    /// Write trend.svg, the table (bisect.txt) and every run's reports (BUILD/run-R/) here.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
}

/// The files `bisect` writes into the top of its `--out` folder.
const BISECT_FILES: [&str; 2] = ["trend.svg", "bisect.txt"];

/// Why `bisect` could not give a table; `cli/error.rs` maps each kind to its exit code.
#[derive(Debug, thiserror::Error)]
pub(crate) enum BisectError {
    /// `--versions` could not be turned into builds.
    #[error("--versions: {0}")]
    Builds(String),
    /// A library path in `--versions` is no library.
    #[error("--versions: {0}")]
    Library(DiscoverError),
    /// `--versions` names no build at all.
    #[error("--versions {versions} names no build")]
    NoBuild {
        /// The `--versions` value.
        versions: String,
    },
    /// A library already on disk cannot run a step of the scenario.
    #[error("build {build}: {refusal}")]
    Refused {
        /// The build's label.
        build: String,
        /// What the library lacks.
        refusal: LibraryRefusal,
    },
    /// No build measured the figure (each build's note in the table says why).
    #[error("no build measured {what} (see the table)")]
    NothingMeasured {
        /// The figure.
        what: String,
    },
}

/// What one build gave.
#[derive(Debug, Clone, Default)]
struct BuildResult {
    figures: Figures,
    /// One word per run: PASS, FAIL, ENGINE FAILED.
    verdicts: Vec<&'static str>,
    /// Why the build did not run, or how it ran (capabilities used, fallbacks).
    note: String,
}

/// Runs the builds, prints the table, then writes it with the trend plot into `--out`. There is
/// no verdict: the table is the result, so a failure to print or write it is an output failure.
pub(crate) fn run(args: BisectArgs) -> Result<Outcome, CliError> {
    // Claimed before anything runs, as `run` claims its folder: a folder another run holds is
    // refused, and the previous bisect's table and plot are gone before this one starts.
    let out = args.out.as_deref().map(claim_out).transpose()?;
    let result = bisect(&args, out.as_ref());
    if let Some(Err(e)) = out.map(OutDir::release) {
        output::warning(&e.to_string());
    }
    result
}

fn bisect(args: &BisectArgs, out: Option<&OutDir>) -> Result<Outcome, CliError> {
    if let Some(out) = out {
        for name in BISECT_FILES {
            remove_if_present(&out.dir().join(name))?;
        }
    }
    let overrides = Overrides {
        turns: args.turns,
        max_tokens: args.max_tokens,
        ..Overrides::default()
    };
    let scenario = load_scenario_with(&args.scenario, &overrides)?;
    let min_change = match &args.min_change {
        Some(text) => leakloop_units::parse_size(text)
            .map_err(|e| CliError::bad_input(e.one_line("--min-change", text)))?
            as f64,
        None => 0.0,
    };
    let watch = match &args.watch {
        Some(w) => w.clone(),
        None => scenario
            .watch
            .first()
            .cloned()
            .unwrap_or_else(|| "rss".to_owned()),
    };
    let builds = resolve(&scenario, &args.versions)?;
    if builds.is_empty() {
        return Err(BisectError::NoBuild {
            versions: args.versions.clone(),
        }
        .into());
    }
    // Libraries already on disk are checked before anything runs: a build that cannot run a
    // step of the scenario is bad input, as in `run`.
    for build in &builds {
        if let Build::Library(lib) = build {
            check_library(&with_build(&scenario, build), None).map_err(|refusal| {
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
    let order = if args.bisect {
        Order::Bisect
    } else {
        Order::Sequential
    };
    let mut results: Vec<Option<BuildResult>> = vec![None; builds.len()];
    // The first run folder that could not be claimed: no build runs after it, and the command
    // ends with it once the table of what did run is printed.
    let mut failure: Option<CliError> = None;
    let found = search(builds.len(), order, min_change, |i| {
        let result = measure(
            &scenario,
            &builds[i],
            &folders[i],
            args,
            &watch,
            &mut failure,
        );
        let figures = result.figures.clone();
        results[i] = Some(result);
        figures
    });

    let table = render_table(
        &scenario,
        args,
        &watch,
        &labels,
        &results,
        found.first_change,
    );
    // Print first, write second: the table is on stdout whatever happens to the folder.
    output::print(&table);
    if let Some(err) = failure {
        return Err(err);
    }
    if let Some(out) = out {
        let trend = Trend {
            title: format!(
                "{}: {} across builds ({} runs each)",
                scenario.name,
                args.metric.describe(&watch),
                args.runs
            ),
            metric: args.metric.describe(&watch),
            bytes: args.metric.is_bytes(),
            points: labels
                .iter()
                .zip(&results)
                .map(|(label, r)| TrendPoint {
                    label: label.clone(),
                    values: r.as_ref().map(|r| r.figures.0.clone()).unwrap_or_default(),
                })
                .collect(),
            first_change: found.first_change.map(|(i, _)| i),
        };
        let svg = render_trend_svg(&trend)?;
        for (name, body) in BISECT_FILES.into_iter().zip([svg.as_str(), table.as_str()]) {
            write_atomic(&out.dir().join(name), body.as_bytes())?;
        }
        output::println(&format!(
            "trend plot: {}",
            out.dir().join(BISECT_FILES[0]).display()
        ));
    }
    let ran = results.iter().flatten().any(|r| !r.figures.0.is_empty());
    if !ran {
        return Err(BisectError::NothingMeasured {
            what: args.metric.describe(&watch),
        }
        .into());
    }
    Ok(Outcome::Done)
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

/// Runs `args.runs` runs of the scenario on one build (fetching it first when needed). A run
/// folder (under `--out`, in `folder`) that cannot be claimed goes into `failure`, and nothing
/// more runs.
fn measure(
    scenario: &Scenario,
    build: &Build,
    folder: &str,
    args: &BisectArgs,
    watch: &str,
    failure: &mut Option<CliError>,
) -> BuildResult {
    let label = build.label();
    if failure.is_some() {
        return BuildResult {
            note: "not run: an output folder could not be claimed".into(),
            ..Default::default()
        };
    }
    let build = match build {
        Build::Unfetched(v) if args.offline => {
            return BuildResult {
                note: format!("not fetched (offline): {}", fetch_command(v)),
                ..Default::default()
            }
        }
        Build::Unfetched(v) => {
            let Some(script) = fetch_script(args.fetch_script.as_deref()) else {
                return BuildResult {
                    note: format!(
                        "not fetched (no --fetch-script): fetch it with `{}`",
                        fetch_command(v)
                    ),
                    ..Default::default()
                };
            };
            output::note(&format!(
                "bisect: fetching LiteRT-LM {v} with {}",
                script.display()
            ));
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
    let base = with_build(scenario, &build);
    if let Err(why) = check_library(&base, None) {
        return BuildResult {
            note: why.to_string(),
            ..Default::default()
        };
    }
    let mut result = BuildResult::default();
    for r in 0..args.runs {
        let mut s = base.clone();
        s.seed = scenario.seed.wrapping_add(u64::from(r));
        let run_folder = args
            .out
            .as_ref()
            .map(|d| d.join(folder).join(format!("run-{}", r + 1)));
        let out = match run_folder.as_deref().map(claim_out).transpose() {
            Ok(out) => out,
            Err(e) => {
                result.note = "not run: its output folder could not be claimed".into();
                *failure = Some(e);
                break;
            }
        };
        match run_and_analyze(&s, out, true, &InFlight::default(), Format::Text) {
            Ok((record, verdict, out)) => {
                write_out(out, &record, &verdict);
                let word = match verdict.status {
                    VerdictStatus::Pass => "PASS",
                    VerdictStatus::Fail => "FAIL",
                    VerdictStatus::EngineFailed => "ENGINE FAILED",
                    VerdictStatus::Interrupted => "INTERRUPTED",
                };
                result.verdicts.push(word);
                if let Some(v) = args.metric.of(watch, &record, &verdict) {
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
                output::note(&format!(
                    "bisect: {label} run {}/{}: {} ({word})",
                    r + 1,
                    args.runs,
                    args.metric
                        .of(watch, &record, &verdict)
                        .map_or("not measured".to_owned(), |v| show(args.metric, v))
                ));
            }
            Err(e) => {
                result.verdicts.push("ENGINE FAILED");
                result.note = first_line(&format!("{e:#}"));
                output::note(&format!(
                    "bisect: {label} run {}/{}: {}",
                    r + 1,
                    args.runs,
                    result.note
                ));
            }
        }
    }
    result
}

fn first_line(text: &str) -> String {
    text.lines()
        .next()
        .unwrap_or_default()
        .chars()
        .map(|c| if c.is_control() { '?' } else { c })
        .take(300)
        .collect()
}

/// A spread (never negative): bytes or a count, per turn for growth.
fn show_spread(metric: Metric, value: f64) -> String {
    let bytes = format_bytes(value.max(0.0).round() as u64);
    match metric {
        Metric::Growth => format!("{bytes}/turn"),
        Metric::Plateau | Metric::Peak => bytes,
        Metric::Expectations => format!("{value:.1}"),
    }
}

fn show(metric: Metric, value: f64) -> String {
    match metric {
        Metric::Growth => leakloop_units::format_bytes_per_turn(value),
        Metric::Plateau => format_signed_bytes(value),
        Metric::Peak => format_bytes(value.max(0.0).round() as u64),
        Metric::Expectations => format!("{value:.1}"),
    }
}

/// The table `bisect` prints (and writes to bisect.txt).
fn render_table(
    scenario: &Scenario,
    args: &BisectArgs,
    watch: &str,
    labels: &[String],
    results: &[Option<BuildResult>],
    first_change: Option<(usize, usize)>,
) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "scenario: {} ({}), {}, {} run(s) per build, {}",
        scenario.name,
        scenario.engine.backend.as_str(),
        args.metric.describe(watch),
        args.runs,
        if args.bisect {
            "bisection"
        } else {
            "every build in order"
        }
    );
    let mut rows = vec![[
        "build",
        "runs",
        "mean",
        "min .. max",
        "spread",
        "verdicts",
        "notes",
    ]
    .map(String::from)];
    for (label, result) in labels.iter().zip(results) {
        let Some(r) = result else {
            rows.push([
                label.clone(),
                "-".into(),
                "-".into(),
                "-".into(),
                "-".into(),
                "-".into(),
                "not run (bisection skipped it)".into(),
            ]);
            continue;
        };
        let f = &r.figures;
        let mut verdicts: Vec<String> = Vec::new();
        for word in ["PASS", "FAIL", "ENGINE FAILED", "INTERRUPTED"] {
            let n = r.verdicts.iter().filter(|v| **v == word).count();
            if n > 0 {
                verdicts.push(format!("{n} {word}"));
            }
        }
        rows.push([
            label.clone(),
            f.0.len().to_string(),
            f.mean().map_or("-".into(), |m| show(args.metric, m)),
            f.range().map_or("-".into(), |(lo, hi)| {
                format!("{} .. {}", show(args.metric, lo), show(args.metric, hi))
            }),
            f.range()
                .map_or("-".into(), |_| show_spread(args.metric, f.spread())),
            if verdicts.is_empty() {
                "-".into()
            } else {
                verdicts.join(", ")
            },
            r.note.clone(),
        ]);
    }
    out.push_str(&aligned(&rows, &[0, 5, 6]));
    let _ = writeln!(out);
    match first_change {
        Some((i, prev)) => {
            let get = |k: usize| {
                results[k]
                    .as_ref()
                    .map(|r| r.figures.clone())
                    .unwrap_or_default()
            };
            let (a, b) = (get(prev), get(i));
            let _ = writeln!(
                out,
                "first change: {} ({} against {} in {}; larger run-to-run spread {})",
                labels[i],
                b.mean().map_or("-".into(), |m| show(args.metric, m)),
                a.mean().map_or("-".into(), |m| show(args.metric, m)),
                labels[prev],
                show_spread(args.metric, a.spread().max(b.spread()))
            );
        }
        None => {
            let _ = writeln!(
                out,
                "no change beyond the run-to-run spread between the builds that ran"
            );
        }
    }
    if args.runs == 1 {
        let _ = writeln!(
            out,
            "(one run per build: no spread was measured; any difference counts as a change)"
        );
    }
    out
}
