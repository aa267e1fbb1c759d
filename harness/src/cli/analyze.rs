//! `leakloop analyze`: classifies a memory trace recorded elsewhere (a CSV of post-close samples
//! or a leakloop `report.json`) and prints a table or JSON. The classification is
//! `analyze::classify_trace`'s, the text and JSON the report layer's.
//!
//! Exit codes: 0 when no metric grows enough to matter, 1 when at least one metric is `growth`
//! that matters (beyond `--max-growth-per-turn`, or by default its lower bound over `--horizon`
//! turns beyond the tolerance), 5 when none does but one is `inconclusive` and
//! `--on-inconclusive fail` asks a gate to require every metric shown clean, 2 for a malformed
//! trace or bad arguments.

use std::path::PathBuf;

use crate::analyze::Classification;
use crate::analyze::{
    classify_trace, load_trace_with, MetricAnalysis, ProcessSelector, TraceOptions,
    DEFAULT_HORIZON_TURNS,
};
use crate::cli::output;
use crate::cli::{CliError, Exit, OnInconclusive, Outcome};
use crate::report::{render_analysis_json, render_analysis_text};
use crate::scenario::{parse_tolerance_arg, Tolerance};

/// Arguments of `leakloop analyze`.
#[derive(Debug, clap::Args)]
pub(crate) struct AnalyzeArgs {
    /// The trace: a CSV (`turn,<metric>,...`, turn 0 = baseline, values in bytes, `#` comments),
    /// a leakloop report.json, or an Android `dumpsys meminfo` capture (a folder of per-turn dump
    /// files named by turn, or one file of dumps in turn order).
    trace: PathBuf,
    /// For a dumpsys capture of a package with several processes: the process to read, by name
    /// or pid.
    #[arg(long, value_name = "NAME|PID", value_parser = parse_process)]
    process: Option<ProcessSelector>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    format: Format,
    /// Allowed distance from the baseline: a size (`5MiB`, `2MB`, `1048576`) or a percentage of
    /// the baseline (`2%`). Default: a report's own expectations, else 1% of the baseline (at
    /// least 1 MiB).
    #[arg(long, value_parser = parse_tolerance_arg)]
    tolerance: Option<Tolerance>,
    /// Turns after the baseline to treat as warm-up (default: a report's own, else 0; later
    /// warm-up is found from the data). Must leave samples after it.
    #[arg(long)]
    warmup_turns: Option<u64>,
    /// Growth fails only when the upper bound of its slope exceeds this size per turn (`64KiB`,
    /// like the scenario key `max_growth_per_turn`). Default: a report's own, else the horizon
    /// rule.
    #[arg(long, value_parser = parse_growth)]
    max_growth_per_turn: Option<u64>,
    /// Without a growth limit, growth fails only when its lower bound over this many turns
    /// exceeds the tolerance.
    #[arg(long, default_value_t = DEFAULT_HORIZON_TURNS, value_parser = clap::value_parser!(u64).range(1..))]
    horizon: u64,
    /// What a trace with an `inconclusive` metric (and none that fails) exits with: `pass`
    /// (exit 0, the default: a trace recorded elsewhere is often too short to decide, and
    /// `analyze` is first a diagnosis) or `fail` (exit 5: a gate that must show every metric
    /// clean).
    #[arg(long, value_enum, value_name = "POLICY", default_value_t = OnInconclusive::Pass)]
    on_inconclusive: OnInconclusive,
}

/// Output formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Format {
    /// A compact table with one line per metric and the reasons below it.
    Text,
    /// `{"trace": ..., "metrics": {"<name>": <analysis>}}`.
    Json,
}

pub(crate) fn run(args: AnalyzeArgs) -> Result<Outcome, CliError> {
    let trace = load_trace_with(&args.trace, args.process.as_ref())?;
    if let Some(warmup) = args.warmup_turns {
        let last = trace
            .metrics
            .values()
            .filter_map(|s| s.points().last().map(|p| p.0))
            .max()
            .unwrap_or(0);
        if warmup > last {
            return Err(CliError::bad_input(format!(
                "--warmup-turns {warmup} is beyond the data: {} ends at turn {last}",
                args.trace.display()
            )));
        }
    }
    let options = TraceOptions {
        tolerance: args.tolerance,
        warmup_turns: args.warmup_turns,
        max_growth_per_turn: args.max_growth_per_turn,
        horizon_turns: args.horizon,
    };
    let metrics = classify_trace(&trace, &options);
    let text = match args.format {
        Format::Json => render_analysis_json(&args.trace.display().to_string(), &metrics)
            .map_err(|e| CliError::Output(anyhow::Error::new(e).context("rendering JSON")))?,
        Format::Text => render_analysis_text(&metrics),
    };
    output::println(&text);
    let grows = metrics.values().any(MetricAnalysis::fails);
    let undecided = metrics
        .values()
        .any(|a| a.classification == Classification::Inconclusive);
    Ok(Outcome::Verdict(if grows {
        Exit::ExpectationFailed
    } else if undecided {
        args.on_inconclusive.exit()
    } else {
        Exit::Pass
    }))
}

/// Parses `--process`: a pid when it is a number, else a process name.
fn parse_process(text: &str) -> Result<ProcessSelector, String> {
    if text.is_empty() {
        return Err("an empty process name".to_owned());
    }
    Ok(ProcessSelector::parse(text))
}

/// Parses a growth limit per turn with the one size parser.
fn parse_growth(text: &str) -> Result<u64, String> {
    leakloop_units::parse_size(text).map_err(|e| e.one_line("growth per turn", text))
}
