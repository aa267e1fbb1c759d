//! `leakloop bench`: benchmarks that print figures (no pass/fail on timings).

use crate::bench::{
    render_analysis_cost, render_markdown, render_overhead, render_sequential, run_analysis_cost,
    run_detection, run_overhead, run_sequential, DetectionConfig, SequentialConfig,
};
use crate::cli::output;
use crate::cli::{CliError, Outcome};

/// Arguments of `leakloop bench`.
#[derive(Debug, clap::Args)]
pub(crate) struct BenchArgs {
    #[command(subcommand)]
    which: BenchCommand,
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
        BenchCommand::Analysis { max_samples } => {
            output::print(&render_analysis_cost(&run_analysis_cost(max_samples)));
            Ok(Outcome::Done)
        }
        BenchCommand::Runner { turns } => {
            let rows = run_overhead(turns)?;
            output::print(&render_overhead(&rows));
            Ok(Outcome::Done)
        }
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
