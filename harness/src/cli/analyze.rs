//! `leakloop analyze`: classifies a memory trace recorded elsewhere (a CSV of post-close samples
//! or a leakloop `report.json`) and prints a table or JSON.
//!
//! Exit codes: 0 when no metric grows enough to matter, 1 when at least one metric is `growth`
//! that matters (beyond `--max-growth-per-turn`, or by default its lower bound over `--horizon`
//! turns beyond the tolerance), 2 for a malformed trace or bad arguments.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::PathBuf;

use serde::Serialize;

use crate::analyze::{
    classify, final_levels, load_trace_with, units, ClassifyOptions, Levels, MetricAnalysis,
    ProcessSelector, Trace, DEFAULT_HORIZON_TURNS,
};
use crate::cli::output;
use crate::cli::{CliError, Exit, Outcome};
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
}

/// Output formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Format {
    /// A compact table with one line per metric and the reasons below it.
    Text,
    /// `{"trace": ..., "metrics": {"<name>": <analysis>}}`.
    Json,
}

/// The JSON output.
#[derive(Debug, Serialize)]
struct AnalyzeOutput<'a> {
    trace: String,
    metrics: &'a BTreeMap<String, MetricAnalysis>,
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
    let metrics = analyze_trace(&trace, &args);
    let text = match args.format {
        Format::Json => {
            let out = AnalyzeOutput {
                trace: args.trace.display().to_string(),
                metrics: &crate::report::render_reasons(&metrics),
            };
            serde_json::to_string_pretty(&out)
                .map_err(|e| CliError::Output(anyhow::Error::new(e).context("rendering JSON")))?
        }
        Format::Text => render_table(&metrics),
    };
    output::println(&text);
    let grows = metrics.values().any(MetricAnalysis::fails);
    Ok(Outcome::Verdict(if grows {
        Exit::ExpectationFailed
    } else {
        Exit::Pass
    }))
}

/// Classifies every metric of the trace; a report's own scenario supplies the defaults.
fn analyze_trace(trace: &Trace, args: &AnalyzeArgs) -> BTreeMap<String, MetricAnalysis> {
    trace
        .metrics
        .iter()
        .filter(|(_, series)| !series.is_empty())
        .map(|(name, series)| {
            let scenario = trace.record.as_ref().map(|r| &r.scenario);
            // A report of a `stop: decided` run is judged at the levels its run was judged at.
            let levels = trace
                .record
                .as_ref()
                .map_or_else(Levels::default, final_levels);
            let expectation = scenario.and_then(|s| s.expect.metrics.get(name));
            let options = ClassifyOptions {
                tolerance: args
                    .tolerance
                    .or_else(|| expectation.and_then(|e| e.tolerance)),
                warmup_turns: args
                    .warmup_turns
                    .or(scenario.map(|s| u64::from(s.warmup_turns)))
                    .unwrap_or(0),
                max_growth_per_turn: args
                    .max_growth_per_turn
                    .or_else(|| expectation.and_then(|e| e.max_growth_per_turn)),
                reload_every: scenario.map_or(0, |s| s.reload_every),
                horizon_turns: args.horizon,
                confidence: levels.confidence,
                trend_alpha: levels.trend_alpha,
            };
            (name.clone(), classify(series, &options))
        })
        .collect()
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

fn render_table(metrics: &BTreeMap<String, MetricAnalysis>) -> String {
    let header = [
        "metric",
        "class",
        "baseline",
        "last",
        "slope/turn",
        "interval",
        "plateau",
        "turns",
    ];
    let rows: Vec<[String; 8]> = metrics
        .iter()
        .map(|(name, m)| {
            [
                crate::input::printable(name).into_owned(),
                m.classification.as_str().to_owned(),
                human(name, m.baseline as f64, false),
                human(name, m.last as f64, false),
                human(name, m.slope_bytes_per_turn, true),
                m.slope_interval.map_or_else(
                    || "-".to_owned(),
                    |(lo, hi)| format!("{}..{}", human(name, lo, true), human(name, hi, true)),
                ),
                m.plateau.map_or_else(
                    || "-".to_owned(),
                    |p| {
                        format!(
                            "{} @{}",
                            human(name, p.size_bytes as f64, true),
                            p.settled_at_turn
                        )
                    },
                ),
                m.turns_needed
                    .map_or_else(|| "-".to_owned(), |n| format!("need {n}")),
            ]
        })
        .collect();
    let mut widths: Vec<usize> = header.iter().map(|h| h.len()).collect();
    for row in &rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    let line = |cells: &[String]| -> String {
        cells
            .iter()
            .zip(&widths)
            .map(|(c, w)| format!("{c:<w$}"))
            .collect::<Vec<_>>()
            .join("  ")
            .trim_end()
            .to_owned()
    };
    let header: Vec<String> = header.iter().map(|h| (*h).to_owned()).collect();
    let _ = writeln!(out, "{}", line(&header));
    for row in &rows {
        let _ = writeln!(out, "{}", line(row));
    }
    let _ = writeln!(out);
    for (name, m) in metrics {
        let _ = writeln!(
            out,
            "{name}: {}",
            crate::report::render_reason(name, &m.reason)
        );
    }
    out.trim_end().to_owned()
}

/// An amount of `metric` in its own unit (a time metric's as a time), with a `+` on rises when
/// `signed`.
fn human(metric: &str, value: f64, signed: bool) -> String {
    if signed {
        units::signed_amount(metric, value)
    } else {
        units::amount(metric, value)
    }
}

#[cfg(test)]
mod tests {
    use rstest::rstest;

    use super::*;

    #[rstest]
    #[case("5MiB", Tolerance::Bytes(5 << 20))]
    #[case("2 MB", Tolerance::Bytes(2_000_000))]
    #[case("4096", Tolerance::Bytes(4096))]
    #[case("2%", Tolerance::Percent(2.0))]
    fn tolerances(#[case] text: &str, #[case] expected: Tolerance) {
        assert_eq!(parse_tolerance_arg(text), Ok(expected));
    }

    /// Regression: `--tolerance` was read by another parser than the DSL's, which took `5Mib`,
    /// `5m` and `0.5B`; the DSL refuses them, and so does the command line, in the same words.
    #[rstest]
    #[case(
        "five",
        "bad tolerance `five`: expected a size as a number followed by a unit"
    )]
    #[case("-2%", "bad tolerance `-2%`: a percentage cannot be negative")]
    #[case(
        "3 parsecs",
        "bad tolerance `3 parsecs`: unknown size unit `parsecs`; expected one of"
    )]
    #[case(
        "5Mib",
        "bad tolerance `5Mib`: unknown size unit `Mib`; did you mean `MiB`?"
    )]
    #[case(
        "5m",
        "bad tolerance `5m`: unknown size unit `m`; expected one of `B`, `KB`"
    )]
    #[case("0.5B", "bad tolerance `0.5B`: a size in bytes is a whole number")]
    fn bad_tolerances(#[case] text: &str, #[case] message: &str) {
        let err = parse_tolerance_arg(text).unwrap_err();
        assert!(err.starts_with(message), "{err}");
    }
}
