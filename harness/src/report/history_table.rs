//! `leakloop history`'s text: the header, per scenario and metric a table of the growth per turn
//! and the plateau size of each build with the changes marked, a line per change, and the count
//! of regressions; and the files written into `--out` (history.txt, a trend plot per scenario).

use std::fmt::Write as _;
use std::path::Path;

use super::history::BuildReports;
use super::plain::{aligned, status_counts};
use super::safe_path::unique_slugs;
use super::{
    format_signed_bytes, render_history_html, render_trends_svg, write_atomic, HISTORY_HTML,
};
use crate::analyze::ChangeOptions;
use crate::history::{Figure, Finding, History, MetricHistory};

/// The text `history` prints and writes to history.txt.
pub(crate) fn render_history(
    history: &History,
    builds: &[BuildReports],
    options: &ChangeOptions,
) -> String {
    let labels = &history.labels;
    let mut text = format!(
        "history: {} builds ({} .. {}), {} scenario(s); a change is a shift beyond the builds' \
         spread over {} builds against up to {} before (Student's t over the builds, \
         false-alarm rate per series and direction {})\n",
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
            render_block(&mut text, &scenario.scenario, metric, labels, builds);
        }
    }
    for f in &history.findings {
        let _ = writeln!(text, "{}", finding_line(f, labels));
    }
    let _ = writeln!(
        text,
        "{}",
        match history.regressions() {
            0 => "history: no regression beyond the builds' own spread".to_owned(),
            n => format!("history: {n} regression(s)"),
        }
    );
    text
}

/// Writes history.txt (`text`), history.html and a trend plot per scenario into `out`; returns what could not
/// be rendered or written, each as a sentence (the verdict was printed: these are warnings). A
/// plot's file name is its scenario's name made safe (`unique_slugs`): a name read from a report
/// can never place a file outside `out`, and two scenarios never share a plot.
pub(crate) fn write_history_files(
    out: &Path,
    text: &str,
    history: &History,
    builds: &[BuildReports],
) -> Vec<String> {
    let mut problems = Vec::new();
    let mut written = vec![
        (out.join("history.txt"), text.to_owned()),
        (
            out.join(HISTORY_HTML),
            render_history_html(history, builds, out),
        ),
    ];
    let names = history.scenarios.iter().map(|s| s.scenario.as_str());
    let files = unique_slugs(names, &[]);
    for (scenario, file) in history.scenarios.iter().zip(files) {
        match render_trends_svg(&scenario.trends) {
            Ok(svg) => written.push((out.join(format!("{file}.svg")), svg)),
            Err(e) => problems.push(e.to_string()),
        }
    }
    for (path, body) in written {
        if let Err(e) = write_atomic(&path, body.as_bytes()) {
            problems.push(format!("the verdict above stands, but {e}"));
        }
    }
    problems
}

/// A figure's value as the table shows it: bytes per turn for growth, bytes for a plateau.
fn show(figure: Figure, value: f64) -> String {
    match figure {
        Figure::Growth => leakloop_units::format_bytes_per_turn(value),
        Figure::Plateau => format_signed_bytes(value),
    }
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
            // Every run of the build, also those not compared.
            status_counts(
                builds[i]
                    .runs
                    .get(scenario)
                    .into_iter()
                    .flatten()
                    .map(|r| r.status),
            ),
            marks.join(", "),
        ]);
    }
    text.push_str(&aligned(&rows, &[0, 1, 5, 6]));
}

/// The line that names one change: where it starts, how much, against what.
pub(crate) fn finding_line(f: &Finding, labels: &[String]) -> String {
    let c = &f.change;
    let range = |r: &std::ops::Range<usize>| match r.len() {
        1 => labels[r.start].clone(),
        _ => format!("{}..{}", labels[r.start], labels[r.end - 1]),
    };
    format!(
        "{}: `{}` {} {} from build {}: {} (median of {}) against {} (median of {}); spread {}, \
         scan p = {:.2e}",
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
