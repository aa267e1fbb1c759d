//! `leakloop analyze`'s output: a table with one line per metric and the reasons below it, or
//! JSON of the trace's name and each metric's analysis with its reason in words.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::Serialize;

use super::{render_reason, render_reasons};
use crate::analyze::{units, MetricAnalysis};

/// The JSON output.
#[derive(Debug, Serialize)]
struct AnalyzeOutput<'a> {
    trace: String,
    metrics: &'a BTreeMap<String, MetricAnalysis>,
}

/// `{"trace": ..., "metrics": {"<name>": <analysis>}}`, pretty-printed.
pub(crate) fn render_analysis_json(
    trace: &str,
    metrics: &BTreeMap<String, MetricAnalysis>,
) -> serde_json::Result<String> {
    serde_json::to_string_pretty(&AnalyzeOutput {
        trace: trace.to_owned(),
        metrics: &render_reasons(metrics),
    })
}

/// The text `analyze` prints: a line per metric, then each metric's reason in words.
pub(crate) fn render_analysis_text(metrics: &BTreeMap<String, MetricAnalysis>) -> String {
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
        let _ = writeln!(out, "{name}: {}", render_reason(name, &m.reason));
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
