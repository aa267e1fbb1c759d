//! report.html: one run's verdict, its metrics with the failing ones first, the memory plot with
//! its trend and limits, the ledger and the provenance.

use std::fmt::Write as _;

use super::page::{document, inline_svg, status_class};
use crate::analyze::{Verdict, VerdictStatus};
use crate::report::escape::html;
use crate::report::facts::{
    backend_line, empty_ledger_text, metric_passed, turns_line, verdict_line,
};
use crate::report::provenance::describe;
use crate::report::units::{format_rate_with_interval_of, format_value};
use crate::report::{render_plot_svg, ReportError};
use crate::runner::RunRecord;

/// Renders report.html for a run.
pub(crate) fn render_run_html(
    record: &RunRecord,
    verdict: &Verdict,
) -> Result<String, ReportError> {
    let (status, line) = verdict_line(record, verdict);
    let passed = match status {
        VerdictStatus::Pass => Some(true),
        VerdictStatus::Fail => Some(false),
        _ => None,
    };
    let name = &record.scenario.name;
    let mut body = format!(
        "<h1>leakloop: {} <span class=\"status {}\">{}</span></h1>\n\
         <p id=\"verdict\">{}</p>\n<p>{}; {}</p>\n",
        html(name),
        status_class(passed),
        html(status.as_str()),
        html(&line),
        html(&backend_line(record)),
        html(&turns_line(record)),
    );
    body.push_str(&metrics_table(verdict));
    let failed: Vec<_> = verdict.expectations.iter().filter(|e| !e.passed).collect();
    if !failed.is_empty() {
        body.push_str("<h2>Failed or undecided expectations</h2>\n<ul id=\"failed\">\n");
        for e in failed {
            let _ = writeln!(
                body,
                "<li><code>{}</code>: expected {}; measured {}</li>",
                html(&e.name),
                html(&e.expected),
                html(&e.measured)
            );
        }
        body.push_str("</ul>\n");
    }
    let plot = render_plot_svg(record, verdict)?;
    let _ = writeln!(
        body,
        "<h2>Memory</h2>\n<div class=\"plot\" id=\"memory-plot\">{}</div>",
        inline_svg(&plot)
    );
    body.push_str(&ledger(record));
    if let Some(p) = &record.provenance {
        body.push_str("<details open><summary>Provenance</summary>\n<table id=\"provenance\">\n");
        for (label, text) in describe(p) {
            let _ = writeln!(
                body,
                "<tr><th>{}</th><td>{}</td></tr>",
                html(label),
                html(&text)
            );
        }
        body.push_str("</table>\n</details>\n");
    }
    Ok(document(&format!("leakloop: {name}"), &body))
}

/// The metrics, those whose expectations failed first (then the others, by name).
fn metrics_table(verdict: &Verdict) -> String {
    if verdict.metrics.is_empty() {
        return "<p>No metrics were analysed.</p>\n".to_owned();
    }
    let mut rows: Vec<_> = verdict
        .metrics
        .iter()
        .map(|(name, m)| (metric_passed(verdict, name), name, m))
        .collect();
    // Failed (Some(false)) before undecided (None) before passed (Some(true)); stable by name.
    rows.sort_by_key(|(passed, _, _)| match passed {
        Some(false) => 0,
        None => 1,
        Some(true) => 2,
    });
    let mut out = String::from(
        "<table id=\"metrics\">\n<tr><th>metric</th><th>baseline</th><th>after warm-up</th>\
         <th>last</th><th>growth/turn</th><th>class</th><th>result</th></tr>\n",
    );
    for (passed, name, m) in rows {
        let result = match passed {
            Some(true) => "pass",
            Some(false) => "fail",
            None => "-",
        };
        let _ = writeln!(
            out,
            "<tr class=\"{}\"><td><code>{}</code></td><td class=\"num\">{}</td>\
             <td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td>\
             <td>{}</td><td>{result}</td></tr>",
            status_class(passed),
            html(name),
            html(&format_value(name, m.baseline)),
            html(
                &m.after_warmup
                    .map_or("-".to_owned(), |v| format_value(name, v))
            ),
            html(&format_value(name, m.last)),
            html(&format_rate_with_interval_of(
                name,
                m.slope_bytes_per_turn,
                m.slope_interval
            )),
            html(m.classification.as_str()),
        );
    }
    out.push_str("</table>\n");
    out
}

/// The call ledger: every kind with its counts, the unbalanced ones marked.
fn ledger(record: &RunRecord) -> String {
    let totals = &record.ledger.totals;
    if totals.is_empty() {
        return format!(
            "<h2>Ledger</h2>\n<p>{}.</p>\n",
            html(empty_ledger_text(record))
        );
    }
    let unbalanced = record.ledger.imbalances();
    let mut out = String::from(
        "<h2>Ledger</h2>\n<table id=\"ledger\">\n<tr><th>kind</th><th>created</th>\
         <th>deleted</th><th>balance</th></tr>\n",
    );
    for (kind, counts) in totals {
        let state = match unbalanced.iter().find(|i| &i.kind == kind) {
            Some(i) => format!(
                "unbalanced{}",
                i.first_turn
                    .map_or(String::new(), |t| format!(", since turn {t}"))
            ),
            None => "balanced".to_owned(),
        };
        let _ = writeln!(
            out,
            "<tr class=\"{}\"><td><code>{}</code></td><td class=\"num\">{}</td>\
             <td class=\"num\">{}</td><td>{state}</td></tr>",
            if state == "balanced" { "pass" } else { "fail" },
            html(kind),
            counts.created,
            counts.deleted
        );
    }
    out.push_str("</table>\n");
    out
}
