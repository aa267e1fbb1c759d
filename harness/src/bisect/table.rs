//! What `bisect` shows: the line on stderr for each step, the table of one figure per build with
//! its run-to-run spread and the first change (printed and written to bisect.txt), and the trend
//! plot's points; and the two files of [`BISECT_FILES`] in the top of `--out`.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use super::{BisectEvent, BisectOptions, BisectOutcome, Metric, Order, BISECT_FILES};
use crate::report::{
    aligned, format_bytes, format_signed_bytes, remove_if_present, render_trend_svg, status_counts,
    status_word, write_atomic, ReportError, Trend, TrendPoint,
};

/// Removes a previous bisect's plot and table from `dir`, before this one runs.
pub(crate) fn remove_files(dir: &Path) -> Result<(), ReportError> {
    BISECT_FILES
        .into_iter()
        .try_for_each(|name| remove_if_present(&dir.join(name)))
}

/// Writes the trend plot and the table (`text`, as printed) into `dir`; returns the plot's path.
pub(crate) fn write_files<E>(
    dir: &Path,
    options: &BisectOptions,
    found: &BisectOutcome<E>,
    text: &str,
) -> Result<PathBuf, ReportError> {
    let svg = render_trend_svg(&trend(options, found))?;
    for (name, body) in BISECT_FILES.into_iter().zip([svg.as_str(), text]) {
        write_atomic(&dir.join(name), body.as_bytes())?;
    }
    Ok(dir.join(BISECT_FILES[0]))
}

/// The line on stderr for one step of the bisect.
pub(crate) fn progress_line(metric: Metric, event: &BisectEvent<'_>) -> String {
    match event {
        BisectEvent::Fetching { version, script } => format!(
            "bisect: fetching LiteRT-LM {version} with {}",
            script.display()
        ),
        BisectEvent::Ran {
            label,
            run,
            runs,
            figure,
            status,
        } => format!(
            "bisect: {label} run {run}/{runs}: {} ({})",
            figure.map_or("not measured".to_owned(), |v| show(metric, v)),
            status_word(*status)
        ),
        BisectEvent::Failed {
            label,
            run,
            runs,
            note,
        } => format!("bisect: {label} run {run}/{runs}: {note}"),
    }
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
pub(crate) fn render_table<E>(options: &BisectOptions, found: &BisectOutcome<E>) -> String {
    let (watch, labels, results) = (&found.watch, &found.labels, &found.results);
    let scenario = &options.scenario;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "scenario: {} ({}), {}, {} run(s) per build, {}",
        scenario.name,
        scenario.engine.backend.as_str(),
        options.metric.describe(watch),
        options.runs,
        if options.order == Order::Bisect {
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
        rows.push([
            label.clone(),
            f.0.len().to_string(),
            f.mean().map_or("-".into(), |m| show(options.metric, m)),
            f.range().map_or("-".into(), |(lo, hi)| {
                format!(
                    "{} .. {}",
                    show(options.metric, lo),
                    show(options.metric, hi)
                )
            }),
            f.range()
                .map_or("-".into(), |_| show_spread(options.metric, f.spread())),
            status_counts(r.verdicts.iter().copied()),
            r.note.clone(),
        ]);
    }
    out.push_str(&aligned(&rows, &[0, 5, 6]));
    let _ = writeln!(out);
    match found.first_change {
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
                b.mean().map_or("-".into(), |m| show(options.metric, m)),
                a.mean().map_or("-".into(), |m| show(options.metric, m)),
                labels[prev],
                show_spread(options.metric, a.spread().max(b.spread()))
            );
        }
        None => {
            let _ = writeln!(
                out,
                "no change beyond the run-to-run spread between the builds that ran"
            );
        }
    }
    if options.runs == 1 {
        let _ = writeln!(
            out,
            "(one run per build: no spread was measured; any difference counts as a change)"
        );
    }
    out
}

/// The trend plot of the builds that ran: each build's figures, the first change marked.
fn trend<E>(options: &BisectOptions, found: &BisectOutcome<E>) -> Trend {
    let what = options.metric.describe(&found.watch);
    Trend {
        title: format!(
            "{}: {what} across builds ({} runs each)",
            options.scenario.name, options.runs
        ),
        metric: what,
        bytes: options.metric.is_bytes(),
        points: found
            .labels
            .iter()
            .zip(&found.results)
            .map(|(label, r)| TrendPoint {
                label: label.clone(),
                values: r.as_ref().map(|r| r.figures.0.clone()).unwrap_or_default(),
            })
            .collect(),
        first_change: found.first_change.map(|(i, _)| i),
    }
}
