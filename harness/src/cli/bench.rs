//! `leakloop bench`: benchmarks that print figures (no pass/fail on timings).

use crate::bench::{
    render_analysis_cost, render_markdown, render_overhead, run_analysis_cost, run_detection,
    run_overhead, DetectionConfig,
};
use crate::cli::{CliError, Exit};

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
        /// Series per row of the table.
        #[arg(long, default_value_t = 2000, value_parser = clap::value_parser!(u32).range(1..))]
        series: u32,
        /// Seed of the synthetic series.
        #[arg(long, default_value_t = 1)]
        seed: u64,
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

pub(crate) fn run(args: BenchArgs) -> Result<Exit, CliError> {
    match args.which {
        BenchCommand::Detection { series, seed } => {
            let config = DetectionConfig {
                series_per_cell: series,
                seed,
            };
            let start = std::time::Instant::now();
            let rows = run_detection(&config);
            print!("{}", render_markdown(&rows, &config));
            eprintln!(
                "{} series in {:.1} s",
                u64::from(series) * rows.len() as u64,
                start.elapsed().as_secs_f64()
            );
            Ok(Exit::Pass)
        }
        BenchCommand::Analysis { max_samples } => {
            print!("{}", render_analysis_cost(&run_analysis_cost(max_samples)));
            Ok(Exit::Pass)
        }
        BenchCommand::Runner { turns } => {
            let rows = run_overhead(turns).map_err(|e| CliError::Engine(e.into()))?;
            print!("{}", render_overhead(&rows));
            Ok(Exit::Pass)
        }
    }
}
