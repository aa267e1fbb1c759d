//! `leakloop bisect SCENARIO --versions FROM..TO`: one scenario on a series of engine builds (the
//! LiteRT-LM release history, or a sim scenario's own profiles standing for builds), several runs
//! per build, a table of one figure per build with its run-to-run spread, the first build where
//! the figure changed beyond that spread, and a trend plot. The search, the table and the plot's
//! points are the library's (`crate::bisect`); here each run goes through a `Session`, and the
//! table is printed and written.

use std::path::PathBuf;

use crate::analyze::Verdict;
use crate::bisect::{
    bisect, table, BisectError, BisectEvent, BisectOptions, Metric, Order, RunFailure,
    ScenarioRunner,
};
use crate::cli::history::min_change_flag;
use crate::cli::output;
use crate::cli::run::{claim_out, Printer};
use crate::cli::{CliError, Outcome};
use crate::report::OutDir;
use crate::runner::RunRecord;
use crate::scenario::{load_scenario_with, Overrides, Scenario};
use crate::session::Session;

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

/// Runs the builds, prints the table, then writes it with the trend plot into `--out`. There is
/// no verdict: the table is the result, so a failure to print or write it is an output failure.
pub(crate) fn run(args: BisectArgs) -> Result<Outcome, CliError> {
    // Claimed before anything runs, as `run` claims its folder: a folder another run holds is
    // refused, and the previous bisect's table and plot are gone before this one starts.
    let out = args.out.as_deref().map(claim_out).transpose()?;
    let result = run_bisect(&args, out.as_ref());
    if let Some(Err(e)) = out.map(OutDir::release) {
        output::warning(&e.to_string());
    }
    result
}

fn run_bisect(args: &BisectArgs, out: Option<&OutDir>) -> Result<Outcome, CliError> {
    if let Some(out) = out {
        table::remove_files(out.dir())?;
    }
    let overrides = Overrides {
        turns: args.turns,
        max_tokens: args.max_tokens,
        ..Overrides::default()
    };
    let scenario = load_scenario_with(&args.scenario, &overrides)?;
    let min_change = min_change_flag("--min-change", args.min_change.as_deref())?;
    let options = BisectOptions {
        scenario,
        versions: args.versions.clone(),
        metric: args.metric,
        watch: args.watch.clone(),
        order: if args.bisect {
            Order::Bisect
        } else {
            Order::Sequential
        },
        runs: args.runs,
        min_change,
        offline: args.offline,
        fetch_script: args.fetch_script.clone(),
        out: args.out.clone(),
    };
    let progress =
        |event: BisectEvent<'_>| output::note(&table::progress_line(args.metric, &event));
    let mut found = bisect(&options, &RunEach, &progress)?;
    let text = table::render_table(&options, &found);
    // Print first, write second: the table is on stdout whatever happens to the folder.
    output::print(&text);
    if let Some(err) = found.stopped.take() {
        return Err(err);
    }
    let watch = &found.watch;
    if let Some(out) = out {
        let plot = table::write_files(out.dir(), &options, &found, &text)?;
        output::println(&format!("trend plot: {}", plot.display()));
    }
    if !found.measured() {
        return Err(BisectError::NothingMeasured {
            what: args.metric.describe(watch),
        }
        .into());
    }
    Ok(Outcome::Done)
}

/// Runs each scenario of the bisect through `run`'s sequence, quietly, into its claimed folder.
struct RunEach;

impl ScenarioRunner for RunEach {
    type Error = CliError;

    fn run(
        &self,
        scenario: &Scenario,
        folder: Option<PathBuf>,
    ) -> Result<(RunRecord, Verdict), RunFailure<CliError>> {
        let out = folder
            .as_deref()
            .map(claim_out)
            .transpose()
            .map_err(RunFailure::Unclaimed)?;
        match Session::new(scenario.clone())
            .claimed_out(out)
            .run(&mut Printer::without_verdict(true))
        {
            Ok(outcome) => Ok((outcome.record, outcome.verdict)),
            Err(e) => Err(RunFailure::Failed(format!("{:#}", CliError::from(e)))),
        }
    }
}
