//! `leakloop history DIR...`: the reports of successive builds (one folder per build, oldest
//! first: a run's `--out` folder or a suite folder), per scenario and metric a table of the growth
//! per turn and the plateau size over the builds, the changes beyond the builds' own spread
//! (`analyze::find_changes`) with the first build of each, and a trend plot per scenario. A
//! rise of either figure is a regression and ends the command with exit 1. The comparison is the
//! library's (`crate::history`); here the builds are read, the table printed and the plots
//! written.

use std::fmt::Write as _;
use std::path::PathBuf;

use crate::analyze::{ChangeOptions, VerdictStatus, DEFAULT_WINDOW};
use crate::cli::output;
use crate::cli::table::aligned;
use crate::cli::{CliError, Exit, Outcome};
use crate::history::{judge, Figure, Finding, MetricHistory};
use crate::report::history::{read_build, BuildReports, RunFigures};
use crate::report::safe_path::unique_slugs;
use crate::report::{format_signed_bytes, render_trends_svg, write_atomic, ReportError, Trend};

/// Arguments of `leakloop history`.
#[derive(Debug, clap::Args)]
pub(crate) struct HistoryArgs {
    /// One folder per build, oldest first: a run's `--out` folder, a suite folder (per-scenario
    /// report.json files in its subfolders), or several runs of a build.
    #[arg(required = true, value_name = "DIR")]
    pub dirs: Vec<PathBuf>,
    /// Builds in the window after a candidate change (the builds before it: twice as many).
    #[arg(long, default_value_t = DEFAULT_WINDOW as u32, value_parser = clap::value_parser!(u32).range(2..=100))]
    pub window: u32,
    /// A change must also exceed this much (bytes per turn for growth, bytes for plateaus;
    /// e.g. `4KiB`).
    #[arg(long, value_name = "SIZE")]
    pub min_change: Option<String>,
    /// Only these metrics (default: every analysed metric).
    #[arg(long = "metric", value_name = "METRIC")]
    pub metrics: Vec<String>,
    /// Write history.txt (the table) and one trend plot per scenario (`SCENARIO.svg`) here.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
}

/// A `--min-change`-style size flag in bytes (0 when absent); a bad size names the flag.
pub(crate) fn min_change_flag(flag: &str, text: Option<&str>) -> Result<f64, CliError> {
    match text {
        Some(text) => Ok(leakloop_units::parse_size(text)
            .map_err(|e| CliError::bad_input(e.one_line(flag, text)))?
            as f64),
        None => Ok(0.0),
    }
}

/// A figure's value as the table shows it: bytes per turn for growth, bytes for a plateau.
fn show(figure: Figure, value: f64) -> String {
    match figure {
        Figure::Growth => leakloop_units::format_bytes_per_turn(value),
        Figure::Plateau => format_signed_bytes(value),
    }
}

pub(crate) fn run(args: HistoryArgs) -> Result<Outcome, CliError> {
    let min_change = min_change_flag("--min-change", args.min_change.as_deref())?;
    if args.dirs.len() < 2 {
        return Err(CliError::bad_input(
            "history needs the folders of at least two builds",
        ));
    }
    let options = ChangeOptions {
        window: args.window as usize,
        back_window: 2 * args.window as usize,
        min_change,
        ..ChangeOptions::default()
    };
    // Created before anything is judged: a folder that cannot be made is an output failure.
    if let Some(out) = &args.out {
        // A signal while the plots are written leaves no temporary file in --out.
        crate::cli::interrupt::install_for_writes("history").map_err(|e| {
            CliError::Output(anyhow::anyhow!("cannot watch for SIGINT and SIGTERM: {e}"))
        })?;
        std::fs::create_dir_all(out).map_err(|source| ReportError::Write {
            path: out.clone(),
            source,
        })?;
    }
    let mut builds = Vec::with_capacity(args.dirs.len());
    for dir in &args.dirs {
        let build = read_build(dir).map_err(|e| CliError::from(e).context("history"))?;
        for note in &build.skipped {
            output::note(&format!("history: skipped {note}"));
        }
        builds.push(build);
    }
    let history = judge(&builds, &options, &args.metrics);
    let labels = &history.labels;
    let mut text = format!(
        "history: {} builds ({} .. {}), {} scenario(s); a change is a shift beyond the builds' \
         spread over {} builds against the {} before (Mann-Whitney, p < {})\n",
        builds.len(),
        labels[0],
        labels[labels.len() - 1],
        history.scenarios.len(),
        options.window,
        options.back_window,
        options.alpha
    );
    for scenario in &history.scenarios {
        for metric in &scenario.metrics {
            render_block(&mut text, &scenario.scenario, metric, labels, &builds);
        }
    }
    for f in &history.findings {
        let _ = writeln!(text, "{}", finding_line(f, labels));
    }
    let regressions = history.regressions();
    let _ = writeln!(
        text,
        "{}",
        match regressions {
            0 => "history: no regression beyond the builds' own spread".to_owned(),
            n => format!("history: {n} regression(s)"),
        }
    );
    let plots: Vec<(String, Vec<Trend>)> = history
        .scenarios
        .into_iter()
        .map(|s| (s.scenario, s.trends))
        .collect();
    output::print(&text);
    if let Some(out) = &args.out {
        write_outputs(out, &text, &plots);
    }
    Ok(Outcome::Verdict(if regressions > 0 {
        Exit::ExpectationFailed
    } else {
        Exit::Pass
    }))
}

/// Writes history.txt and the plots; a failure is a warning (the verdict was printed). A plot's
/// file name is its scenario's name made safe (`report::safe_path::unique_slugs`): a name read
/// from a report can never place a file outside `--out`, and two scenarios never share a plot.
fn write_outputs(out: &std::path::Path, text: &str, plots: &[(String, Vec<Trend>)]) {
    let mut written = vec![(out.join("history.txt"), text.to_owned())];
    let files = unique_slugs(plots.iter().map(|(scenario, _)| scenario.as_str()), &[]);
    for ((_, trends), file) in plots.iter().zip(files) {
        match render_trends_svg(trends) {
            Ok(svg) => written.push((out.join(format!("{file}.svg")), svg)),
            Err(e) => output::warning(&e.to_string()),
        }
    }
    for (path, body) in written {
        if let Err(e) = write_atomic(&path, body.as_bytes()) {
            output::warning(&format!("the verdict above stands, but {e}"));
        }
    }
    output::println(&format!("history: trend plots in {}", out.display()));
}

/// One scenario's metric: a row per build with its figures, and what changed.
fn render_block(
    text: &mut String,
    scenario: &str,
    history: &MetricHistory,
    labels: &[String],
    builds: &[BuildReports],
) {
    let metric = &history.metric;
    let _ = writeln!(text, "\nscenario `{scenario}`, metric {metric}");
    let mut rows = vec![[
        "build",
        "date",
        "runs",
        "growth/turn",
        "plateau",
        "verdicts",
        "change",
    ]
    .map(String::from)];
    let (growth, plateau) = (&history.growth, &history.plateau);
    for (i, label) in labels.iter().enumerate() {
        let median = |values: &[f64], figure: Figure| {
            let mut v = values.to_vec();
            v.sort_by(f64::total_cmp);
            match v.len() {
                0 => "-".to_owned(),
                n if n % 2 == 1 => show(figure, v[n / 2]),
                n => show(figure, (v[n / 2 - 1] + v[n / 2]) / 2.0),
            }
        };
        let mut marks = Vec::new();
        for figure in Figure::ALL {
            for c in history
                .series(figure)
                .changes
                .iter()
                .filter(|c| c.build == i)
            {
                marks.push(format!(
                    "{} {}",
                    figure.describe(),
                    if c.is_rise() { "ROSE" } else { "fell" }
                ));
            }
        }
        rows.push([
            label.clone(),
            builds[i].date().unwrap_or_else(|| "-".to_owned()),
            growth.values[i].len().to_string(),
            median(&growth.values[i], Figure::Growth),
            median(&plateau.values[i], Figure::Plateau),
            verdict_words(
                builds[i]
                    .runs
                    .get(scenario)
                    .map(Vec::as_slice)
                    .unwrap_or(&[]),
            ),
            marks.join(", "),
        ]);
    }
    text.push_str(&aligned(&rows, &[0, 1, 5, 6]));
}

/// `2 PASS, 1 FAIL`, counting every run of the build (also those not compared).
fn verdict_words(runs: &[RunFigures]) -> String {
    let mut words = Vec::new();
    for (status, word) in [
        (VerdictStatus::Pass, "PASS"),
        (VerdictStatus::Fail, "FAIL"),
        (VerdictStatus::EngineFailed, "ENGINE FAILED"),
        (VerdictStatus::Interrupted, "INTERRUPTED"),
    ] {
        let n = runs.iter().filter(|r| r.status == status).count();
        if n > 0 {
            words.push(format!("{n} {word}"));
        }
    }
    if words.is_empty() {
        "-".to_owned()
    } else {
        words.join(", ")
    }
}

fn finding_line(f: &Finding, labels: &[String]) -> String {
    let c = &f.change;
    let range = |r: &std::ops::Range<usize>| match r.len() {
        1 => labels[r.start].clone(),
        _ => format!("{}..{}", labels[r.start], labels[r.end - 1]),
    };
    format!(
        "{}: `{}` {} {} from build {}: {} (median of {}) against {} (median of {}); spread {}, \
         Mann-Whitney p = {:.2e}",
        if c.is_rise() {
            "REGRESSION"
        } else {
            "improvement"
        },
        f.scenario,
        f.metric,
        f.figure.describe(),
        labels[c.build],
        show(f.figure, c.after_median),
        range(&c.after),
        show(f.figure, c.before_median),
        range(&c.before),
        show(f.figure, c.spread).trim_start_matches('+'),
        c.p_value
    )
}
