//! history.html: per scenario (those with a regression first) the trend of each metric's
//! figures across the builds with the first rise marked, the changes found, and a table of the
//! builds whose runs link to their folders (relative links, so the page and the build folders
//! can be moved together).

use std::fmt::Write as _;
use std::path::{Component, Path, PathBuf};

use super::page::{document, inline_svg, status_class};
use crate::history::History;
use crate::report::escape::html;
use crate::report::history::BuildReports;
use crate::report::history_table::finding_line;
use crate::report::render_trends_svg;

/// Renders history.html, to be written into `out` (the links are relative to it).
pub(crate) fn render_history_html(
    history: &History,
    builds: &[BuildReports],
    out: &Path,
) -> String {
    let labels = &history.labels;
    let mut body = format!(
        "<h1>leakloop history: {} builds, {} scenario(s)</h1>\n<p id=\"summary\">{}</p>\n",
        labels.len(),
        history.scenarios.len(),
        match history.regressions() {
            0 => "No regression beyond the builds' own spread.".to_owned(),
            n => format!("{n} regression(s)."),
        }
    );
    let regressed = |name: &str| {
        history
            .findings
            .iter()
            .any(|f| f.scenario == name && f.change.is_rise())
    };
    let mut scenarios: Vec<_> = history.scenarios.iter().collect();
    scenarios.sort_by_key(|s| !regressed(&s.scenario));
    for scenario in scenarios {
        let name = &scenario.scenario;
        let bad = regressed(name);
        let _ = writeln!(
            body,
            "<section class=\"scenario{}\" data-scenario=\"{}\">\n<h2>{} \
             <span class=\"status {}\">{}</span></h2>",
            if bad { " fail" } else { "" },
            html(name),
            html(name),
            status_class(Some(!bad)),
            if bad { "regression" } else { "steady" }
        );
        let findings: Vec<_> = history
            .findings
            .iter()
            .filter(|f| &f.scenario == name)
            .collect();
        if !findings.is_empty() {
            body.push_str("<ul class=\"changes\">\n");
            for f in findings {
                let _ = writeln!(
                    body,
                    "<li class=\"{}\">{}</li>",
                    status_class(Some(!f.change.is_rise())),
                    html(&finding_line(f, labels))
                );
            }
            body.push_str("</ul>\n");
        }
        match render_trends_svg(&scenario.trends) {
            Ok(svg) => {
                let _ = writeln!(body, "<div class=\"plot\">{}</div>", inline_svg(&svg));
            }
            Err(e) => {
                let _ = writeln!(
                    body,
                    "<p>The plot could not be drawn: {}</p>",
                    html(&e.to_string())
                );
            }
        }
        body.push_str(&runs_table(name, labels, builds, out));
        body.push_str("</section>\n");
    }
    document("leakloop history", &body)
}

/// A row per build: its label and a link to each of its runs of `scenario`.
fn runs_table(scenario: &str, labels: &[String], builds: &[BuildReports], out: &Path) -> String {
    let mut table = String::from(
        "<table class=\"builds\">\n<tr><th>build</th><th>date</th><th>runs</th></tr>\n",
    );
    for (label, build) in labels.iter().zip(builds) {
        let runs = build
            .runs
            .get(scenario)
            .map(Vec::as_slice)
            .unwrap_or_default();
        let links: Vec<String> = runs
            .iter()
            .map(|r| {
                let folder = r.path.parent().unwrap_or(Path::new("."));
                format!(
                    "<a href=\"{}\">{}</a>",
                    html(&href(&relative(out, folder))),
                    html(r.status.as_str())
                )
            })
            .collect();
        let _ = writeln!(
            table,
            "<tr><td>{}</td><td>{}</td><td>{}</td></tr>",
            html(label),
            html(&build.date().unwrap_or_else(|| "-".to_owned())),
            if links.is_empty() {
                "-".to_owned()
            } else {
                links.join(" ")
            }
        );
    }
    table.push_str("</table>\n");
    table
}

/// `to` as a path relative to the folder `from` (both made absolute first; the parts they
/// share dropped, a `..` per remaining part of `from`).
fn relative(from: &Path, to: &Path) -> PathBuf {
    let absolute = |p: &Path| {
        std::fs::canonicalize(p).unwrap_or_else(|_| {
            std::env::current_dir()
                .map(|d| d.join(p))
                .unwrap_or_else(|_| p.to_path_buf())
        })
    };
    let (from, to) = (absolute(from), absolute(to));
    let (a, b): (Vec<Component>, Vec<Component>) =
        (from.components().collect(), to.components().collect());
    let shared = a.iter().zip(&b).take_while(|(x, y)| x == y).count();
    let mut path: PathBuf = a[shared..].iter().map(|_| Component::ParentDir).collect();
    path.extend(&b[shared..]);
    path
}

/// A relative path as a URL path: each part percent-encoded where URLs need it, `/` between.
fn href(path: &Path) -> String {
    let mut out = String::new();
    for part in path.components() {
        if !out.is_empty() {
            out.push('/');
        }
        for byte in part.as_os_str().to_string_lossy().bytes() {
            match byte {
                b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                    out.push(byte as char)
                }
                b => {
                    let _ = write!(out, "%{b:02X}");
                }
            }
        }
    }
    if out.is_empty() {
        out.push('.');
    }
    out.push('/');
    out
}
