//! `leakloop bench`: benchmarks that print figures (no pass/fail on timings).

use std::path::{Path, PathBuf};

use crate::bench::{
    attribution_row_skipped, bare_loop_resources, render_analysis_cost, render_bare_loop,
    render_history_bench, render_markdown, render_overhead, render_scale, render_sequential,
    run_analysis_cost, run_bare_loop_comparison, run_detection, run_history_bench, run_overhead,
    run_scale, run_sequential, scale_child, BareLoopConfig, BareLoopError, DetectionConfig,
    HistoryBenchConfig, ScaleError, SequentialConfig, ATTRIBUTION_ROW,
};
use crate::bench::{
    render_stability, run_stability, ExpectedVerdict, StabilityError, StabilityScenario,
    MAX_LOAD_THREADS,
};
use crate::bench::{render_suite_bench, run_suite_bench, SuiteBenchError, SuiteBenchRow};
use crate::cli::output;
use crate::cli::overrides::OverrideArgs;
use crate::cli::run::{claim_out, Printer};
use crate::cli::suite::{default_jobs, plan, run_plan, SuiteOptions};
use crate::cli::{CliError, Outcome};
use crate::report::{write_suite_reports, SuiteReport};
use crate::scenario::{load_scenario_with, Overrides, MAX_SCENARIO_BYTES};

/// Arguments of `leakloop bench`.
#[derive(Debug, clap::Args)]
pub(crate) struct BenchArgs {
    #[command(subcommand)]
    which: BenchCommand,
}

/// The one-line help of `leakloop bench`, naming every benchmark [`BenchCommand`] has, so that
/// the list cannot fall behind it.
pub(crate) fn about() -> String {
    use clap::Subcommand as _;
    let names: Vec<String> = BenchCommand::augment_subcommands(clap::Command::new("bench"))
        .get_subcommands()
        .filter(|c| !c.is_hide_set())
        .map(|c| c.get_name().to_owned())
        .collect();
    format!("Run benchmarks that print figures: {}", names.join(", "))
}

#[derive(Debug, clap::Subcommand)]
enum BenchCommand {
    /// Detection power and false-positive rates of the analyzer next to naive detectors, on
    /// seeded synthetic series; prints a Markdown table.
    Detection {
        /// Series per row of the table (default 2000; 200 with `--sequential`).
        #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
        series: Option<u32>,
        /// Seed of the synthetic series.
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// Judge the series as `stop: decided` runs: turns to a verdict and error rates per
        /// row, for runs of at most 20, 40 and 100 turns.
        #[arg(long)]
        sequential: bool,
    },
    /// `leakloop history` at nightly scale: BUILDS x SCENARIOS synthesized runs (default 365 x
    /// 200, a year of nightlies) as folders and in a SQLite results database; prints the time
    /// and peak RSS of history from each (docs/results-db.md).
    HistoryScale {
        /// Builds.
        #[arg(long, default_value_t = 365, value_parser = clap::value_parser!(u32).range(2..=10_000))]
        builds: u32,
        /// Scenarios per build.
        #[arg(long, default_value_t = 200, value_parser = clap::value_parser!(u32).range(1..=10_000))]
        scenarios: u32,
    },
    /// False alarms of `leakloop history` on builds that differ only by noise, and how often it
    /// finds a step at its first build (synthetic figures and simulator runs); prints a
    /// Markdown table.
    History {
        /// Histories per row.
        #[arg(long, default_value_t = 200, value_parser = clap::value_parser!(u32).range(1..=100_000))]
        histories: u32,
        /// Builds per history.
        #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u32).range(4..=1000))]
        builds: u32,
        /// Seed of the noise and the simulator runs.
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// The scan's false-alarm rate per direction (as `history` uses it by default).
        #[arg(long, default_value_t = crate::analyze::DEFAULT_ALPHA)]
        alpha: f64,
        /// Spreads a change must exceed (as `history` uses by default).
        #[arg(long, default_value_t = crate::analyze::DEFAULT_SPREAD_FACTOR)]
        spread_factor: f64,
    },
    /// How long the analyzer takes on series of 1e3 to 1e6 samples, with reload epochs and with
    /// sparse turn numbers up to 2^53; prints a Markdown table.
    Analysis {
        /// The longest series timed, in samples.
        #[arg(long, default_value_t = 1_000_000, value_parser = clap::value_parser!(u64).range(1_000..=1_000_000))]
        max_samples: u64,
    },
    /// The runner's own cost per turn and per engine call, in process and through a worker
    /// process, on the simulator; prints a Markdown table.
    Runner {
        /// Turns per configuration.
        #[arg(long, default_value_t = 2000, value_parser = clap::value_parser!(u32).range(1..=crate::scenario::MAX_TURNS as i64))]
        turns: u32,
    },
    /// leakloop's per-turn cost on the real LiteRT-LM CPU engine next to a bare C loop making
    /// the same C-API calls (compiled with `cc`), the two taking turns in blocks on one CPU, with
    /// a second bare loop as the control; prints the times and their ratio. Skips, saying so,
    /// without the library or the model.
    Overhead(OverheadArgs),
    /// What a suite of simulator scenarios costs: `leakloop run DIR --out OUT -j N` on a
    /// generated suite (clean and leaky profiles, 10 turns each), in this process; prints wall
    /// time, peak RSS and what the suite adds per scenario as a Markdown table.
    Suite {
        /// Scenarios in the generated suite.
        #[arg(long, default_value_t = 200, value_parser = clap::value_parser!(u32).range(1..=10_000))]
        scenarios: u32,
        /// Scenarios at once (default: the cores).
        #[arg(long, short = 'j', value_parser = clap::value_parser!(u32).range(1..=1024))]
        jobs: Option<u32>,
    },
    /// How steady each scenario's verdict is: runs it N times (each through its own session, in
    /// its own folder), with K busy threads of the benchmark's own when asked, and prints the
    /// runs per verdict word, the false FAILs, the runs per class word of each metric and the
    /// spread (min, median, max) of its growth per turn and of the upper bound.
    Stability(StabilityArgs),
    /// What a run costs as it grows: run time, analysis time, report time, peak RSS and report
    /// sizes of a leaky simulator run at 1e3..1e6 turns, without and with reloads (each in a
    /// fresh process); prints a Markdown table.
    Scale {
        /// The longest run measured (the lengths are 1e3, 1e4, 1e5 and 1e6 turns up to it).
        #[arg(long, default_value_t = 1_000_000, value_parser = clap::value_parser!(u32).range(1000..=1_000_000))]
        max_turns: u32,
        /// Runs one configuration in this process and prints its row as JSON (used by the
        /// benchmark itself, one process per configuration).
        #[arg(long, hide = true, requires = "child_out")]
        child_turns: Option<u32>,
        /// The reload period of that configuration.
        #[arg(long, hide = true, default_value_t = 0)]
        child_reload_every: u32,
        /// Where that configuration writes its reports.
        #[arg(long, hide = true)]
        child_out: Option<PathBuf>,
    },
}

/// Arguments of `leakloop bench stability`.
#[derive(Debug, clap::Args)]
struct StabilityArgs {
    /// The scenario files, each run `--runs` times.
    #[arg(required = true, value_name = "SCENARIO")]
    scenarios: Vec<PathBuf>,
    /// Runs per scenario.
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u32).range(1..=1000))]
    runs: u32,
    /// Busy threads the benchmark keeps spinning while the runs go on (the load of a shared CI
    /// machine).
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u32).range(0..=MAX_LOAD_THREADS as i64))]
    load: u32,
    /// The verdict every run should reach (default: the one a scenario's header comment states,
    /// `# Expected: PASS ...` or `# Expected: FAIL ...`, else pass); a run that fails where pass
    /// is expected is a false FAIL.
    #[arg(long, value_enum)]
    expect: Option<Expect>,
    /// Keep every run's reports here, in NAME/run-NN, NAME the scenario's name (default: a
    /// temporary folder, removed at the end).
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
    /// Engine library to load (e.g. a `liblitert-lm.so`), instead of discovering one.
    #[arg(long)]
    lib: Option<PathBuf>,
    /// The scenario overrides `run` takes.
    #[command(flatten)]
    scenario_overrides: OverrideArgs,
}

/// `--expect`'s values.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
enum Expect {
    /// Every run should pass.
    Pass,
    /// Every run should fail.
    Fail,
}

impl From<Expect> for ExpectedVerdict {
    fn from(expect: Expect) -> Self {
        match expect {
            Expect::Pass => ExpectedVerdict::Pass,
            Expect::Fail => ExpectedVerdict::Fail,
        }
    }
}

/// Arguments of `leakloop bench overhead`.
#[derive(Debug, clap::Args)]
struct OverheadArgs {
    /// Engine library (default: discovered, as for `run`).
    #[arg(long)]
    lib: Option<PathBuf>,
    /// Model file.
    #[arg(long, default_value = "fixtures/models/tiny-qwen2-f32.litertlm")]
    model: PathBuf,
    /// Measured turns per round.
    #[arg(long, default_value_t = 200, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    turns: u32,
    /// Warm-up turns per round (not timed).
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=1000))]
    warmup: u32,
    /// Rounds (the median is printed).
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..=100))]
    rounds: u32,
    /// Turns per block: leakloop and the bare loop take turns in blocks of this many.
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    block: u32,
    /// Let the loops use every CPU (by default both, and leakloop's worker, run on one: with a
    /// second core the engine's threads run faster in some blocks than in others).
    #[arg(long)]
    all_cpus: bool,
    /// The engine's CPU threads in both loops, 0 for the library's own choice [default: 1 on
    /// one CPU, the library's own choice with --all-cpus]
    #[arg(long, value_parser = clap::value_parser!(u32).range(0..=1024))]
    threads: Option<u32>,
    /// Tokens generated per turn.
    #[arg(long, default_value_t = 16, value_parser = clap::value_parser!(u32).range(1..=4096))]
    max_output_tokens: u32,
}

impl From<OverheadArgs> for BareLoopConfig {
    fn from(args: OverheadArgs) -> Self {
        BareLoopConfig {
            lib: args.lib,
            model: args.model,
            turns: args.turns,
            warmup: args.warmup,
            rounds: args.rounds,
            block: args.block,
            one_cpu: !args.all_cpus,
            threads: match args.threads {
                Some(0) => None,
                Some(n) => Some(n),
                None => (!args.all_cpus).then_some(1),
            },
            max_output_tokens: args.max_output_tokens,
        }
    }
}

pub(crate) fn run(args: BenchArgs) -> Result<Outcome, CliError> {
    match args.which {
        BenchCommand::Detection {
            series,
            seed,
            sequential: true,
        } => {
            let config = SequentialConfig {
                series_per_row: series.unwrap_or(200),
                seed,
            };
            let start = std::time::Instant::now();
            let rows = run_sequential(&config);
            output::print(&render_sequential(&rows, &config));
            report_time(config.series_per_row, rows.len(), start);
            Ok(Outcome::Done)
        }
        BenchCommand::Detection { series, seed, .. } => {
            let series = series.unwrap_or(2000);
            let config = DetectionConfig {
                series_per_cell: series,
                seed,
            };
            let start = std::time::Instant::now();
            let rows = run_detection(&config);
            output::print(&render_markdown(&rows, &config));
            report_time(series, rows.len(), start);
            Ok(Outcome::Done)
        }
        BenchCommand::History {
            histories,
            builds,
            seed,
            alpha,
            spread_factor,
        } => {
            let config = HistoryBenchConfig {
                histories,
                builds: builds as usize,
                step_at: builds as usize * 3 / 5,
                seed,
                options: crate::analyze::ChangeOptions {
                    alpha,
                    spread_factor,
                    ..Default::default()
                },
            };
            let start = std::time::Instant::now();
            let rows =
                run_history_bench(&config).map_err(|e| CliError::Engine(anyhow::anyhow!(e)))?;
            output::print(&render_history_bench(&rows, &config));
            output::note(&format!(
                "bench history: {:.1} s",
                start.elapsed().as_secs_f64()
            ));
            Ok(Outcome::Done)
        }
        BenchCommand::Analysis { max_samples } => {
            output::print(&render_analysis_cost(&run_analysis_cost(max_samples)));
            Ok(Outcome::Done)
        }
        BenchCommand::Runner { turns } => {
            let rows = run_overhead(turns)?;
            output::print(&render_overhead(&rows));
            Ok(Outcome::Done)
        }
        BenchCommand::Overhead(args) => {
            let config = BareLoopConfig::from(args);
            let library = match bare_loop_resources(&config) {
                Ok(library) => library,
                Err(e) => {
                    output::note(&format!("SKIPPED: leakloop bench overhead: {e}"));
                    return Ok(Outcome::Done);
                }
            };
            match run_bare_loop_comparison(&config) {
                Ok(rows) => {
                    output::print(&render_bare_loop(&rows, &config, &library.version));
                    if let Some(why) = attribution_row_skipped() {
                        output::note(&format!("SKIPPED: {ATTRIBUTION_ROW}: {why}"));
                    }
                    Ok(Outcome::Done)
                }
                Err(BareLoopError::Missing(why)) => {
                    output::note(&format!("SKIPPED: leakloop bench overhead: {why}"));
                    Ok(Outcome::Done)
                }
                Err(e) => Err(CliError::Engine(e.into())),
            }
        }
        BenchCommand::Scale {
            child_turns: Some(turns),
            child_reload_every,
            child_out: Some(out),
            ..
        } => {
            let row = scale_child(
                turns,
                child_reload_every,
                &out,
                &mut Printer::without_verdict(true),
            )
            .map_err(scale_error)?;
            output::println(&serde_json::to_string(&row).map_err(|e| CliError::Engine(e.into()))?);
            Ok(Outcome::Done)
        }
        BenchCommand::Suite { scenarios, jobs } => {
            let row = bench_suite(scenarios as usize, jobs.map(|j| j as usize))?;
            output::print(&render_suite_bench(&row));
            Ok(Outcome::Done)
        }
        BenchCommand::Stability(args) => bench_stability(args),
        BenchCommand::HistoryScale { builds, scenarios } => {
            let engine = |e: crate::bench::HistoryScaleError| CliError::Engine(e.into());
            let root = tempfile::tempdir().map_err(|e| {
                CliError::Output(anyhow::anyhow!("cannot make a temporary folder: {e}"))
            })?;
            let rows = crate::bench::run_history_scale(
                root.path(),
                builds as usize,
                scenarios as usize,
                &mut |line| output::note(line),
            )
            .map_err(engine)?;
            output::print(&crate::bench::render_history_scale(&rows));
            Ok(Outcome::Done)
        }
        BenchCommand::Scale { max_turns, .. } => {
            let rows = run_scale(max_turns, |row| {
                output::note(&format!(
                    "{} turns, reloads every {}: {:.2} s",
                    row.turns,
                    row.reload_every,
                    row.total_seconds()
                ));
            })
            .map_err(scale_error)?;
            output::print(&render_scale(&rows));
            Ok(Outcome::Done)
        }
    }
}

/// Runs the generated suite as `leakloop run DIR --out OUT -j N --quiet` does.
fn bench_suite(scenarios: usize, jobs: Option<usize>) -> Result<SuiteBenchRow, CliError> {
    let options = SuiteOptions {
        jobs: jobs.unwrap_or_else(default_jobs),
        ..SuiteOptions::default()
    };
    let run_suite = |suite_dir: &Path, out: &Path| -> Result<SuiteReport, CliError> {
        output::note(&format!(
            "{scenarios} scenarios, -j {}: running...",
            options.jobs
        ));
        let plan = plan(&[suite_dir.to_path_buf()], None)?;
        let claimed = claim_out(out)?;
        let report = run_plan(
            &SuiteOptions {
                quiet: true,
                ..options.clone()
            },
            &plan,
            Some(claimed.dir()),
        );
        write_suite_reports(out, &report)?;
        claimed.release()?;
        Ok(report)
    };
    run_suite_bench(scenarios, options.jobs, run_suite).map_err(|e| match e {
        SuiteBenchError::Io(e) => CliError::Engine(e.into()),
        SuiteBenchError::Run(e) => e,
    })
}

/// Loads every scenario (all before the first run, so that a bad file costs no runs), runs them
/// into the claimed `--out` or a temporary folder and prints the table.
fn bench_stability(args: StabilityArgs) -> Result<Outcome, CliError> {
    let overrides = Overrides {
        lib: args.lib.clone(),
        ..args.scenario_overrides.overrides()
    };
    let scenarios = args
        .scenarios
        .iter()
        .map(|path| {
            let scenario = load_scenario_with(path, &overrides)?;
            let expected = match args.expect {
                Some(expect) => expect.into(),
                None => stated_verdict(path).unwrap_or(ExpectedVerdict::Pass),
            };
            Ok(StabilityScenario { scenario, expected })
        })
        .collect::<Result<Vec<_>, CliError>>()?;
    let claimed = args.out.as_deref().map(claim_out).transpose()?;
    let temporary;
    let root = match &claimed {
        Some(claimed) => claimed.dir(),
        None => {
            temporary = tempfile::tempdir().map_err(|e| {
                CliError::Engine(anyhow::anyhow!("cannot make a temporary folder: {e}"))
            })?;
            temporary.path()
        }
    };
    let rows = run_stability(
        &scenarios,
        args.runs,
        args.load,
        root,
        &mut Printer::without_verdict(true),
        |name, n, run| {
            output::note(&format!(
                "{name}: run {n}/{}: {} ({:.1} s)",
                args.runs, run.verdict, run.seconds
            ))
        },
    )
    .map_err(|e| match e {
        StabilityError::Session(e) => e.into(),
        other => CliError::Engine(other.into()),
    })?;
    output::print(&render_stability(&rows, args.load));
    if let Some(claimed) = claimed {
        claimed.release()?;
    }
    Ok(Outcome::Done)
}

/// The verdict the scenario file at `path` states in its header comment, if it states one.
fn stated_verdict(path: &Path) -> Option<ExpectedVerdict> {
    let bytes =
        crate::input::read_bounded(path, MAX_SCENARIO_BYTES, "a scenario is a short YAML file")
            .ok()?;
    ExpectedVerdict::from_header(&String::from_utf8_lossy(&bytes))
}

/// A scale configuration's error: the run's as `leakloop run` maps it, anything else an engine
/// failure.
fn scale_error(e: ScaleError) -> CliError {
    match e {
        ScaleError::Session(e) => e.into(),
        other => CliError::Engine(other.into()),
    }
}

/// How many series a detection table took and how long, on stderr (the table is on stdout).
fn report_time(series_per_row: u32, rows: usize, start: std::time::Instant) {
    output::note(&format!(
        "{} series in {:.1} s",
        u64::from(series_per_row) * rows as u64,
        start.elapsed().as_secs_f64()
    ));
}
