use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::*;
use crate::analyze::{ChangeOptions, VerdictStatus};
use crate::history::judge;
use crate::report::examples::{clean_run, leak_run};
use crate::report::history::{BuildReports, MetricFigures, RunFigures};
use crate::report::redact::Redactor;

/// Snapshots stored with the other report goldens (this file sits one folder deeper).
macro_rules! golden {
    ($($body:tt)*) => {
        insta::with_settings!(
            {snapshot_path => "../../../../golden/report", prepend_module_to_snapshot => false},
            { $($body)* }
        )
    };
}

/// `page` with each inlined plot's drawing left out (the plots have their own goldens) but its
/// element kept, so that a snapshot shows where every plot sits.
fn without_drawings(page: &str) -> String {
    let mut out = String::new();
    let mut rest = page;
    while let Some(start) = rest.find("<svg") {
        let end = rest[start..]
            .find("</svg>")
            .map_or(rest.len(), |e| start + e + 6);
        out.push_str(&rest[..start]);
        out.push_str("<svg>[plot]</svg>");
        rest = &rest[end..];
    }
    out.push_str(rest);
    out
}

fn run_page(run: fn() -> (crate::runner::RunRecord, crate::analyze::Verdict)) -> String {
    let (record, verdict) = run();
    let redactor = Redactor::for_record(&record);
    let (record, verdict) = redactor.redact_run(&record, &verdict);
    redactor.redact_text(&render_run_html(&record, &verdict).expect("the page renders"))
}

#[test]
fn leak_run_page_puts_the_failing_metric_first_and_inlines_its_plot() {
    let page = run_page(leak_run);
    let rows: Vec<&str> = page
        .lines()
        .filter(|l| l.starts_with("<tr class="))
        .collect();
    assert!(rows[0].starts_with("<tr class=\"fail\">"), "{rows:#?}");
    // The plot is the run's own plot.svg, with paths drawn.
    let svg = &page[page.find("<svg").expect("a plot")..];
    assert!(svg.contains("<path") || svg.contains("<polyline"), "{svg}");
    assert!(!page.contains("<?xml"), "an XML declaration inside HTML");
    // Nothing is fetched from anywhere (the SVG namespace URI is a name, not a fetch).
    for outside in [
        " src=",
        "href=\"http",
        "url(",
        "<link",
        "<script",
        "@import",
    ] {
        assert!(!page.contains(outside), "{outside} in the page");
    }
    golden!(insta::assert_snapshot!(
        "html_run_leak",
        without_drawings(&page)
    ));
}

#[test]
fn clean_run_page() {
    let page = run_page(clean_run);
    assert!(page.contains("balanced"), "{page}");
    golden!(insta::assert_snapshot!(
        "html_run_clean",
        without_drawings(&page)
    ));
}

/// Foreign names and messages (a driver's backend name, ledger kinds, errors) never become
/// markup on the page.
#[test]
fn hostile_names_stay_text() {
    let (record, verdict) = crate::report::test_support::hostile_run();
    let page = render_run_html(&record, &verdict).expect("the page renders");
    assert!(page.contains("sim&lt;script&gt;"), "{page}");
    assert!(!page.contains("<script"), "{page}");
    assert!(
        !page.contains('\u{1b}') && !page.contains('\u{0}'),
        "{page}"
    );
}

#[test]
fn the_escaper_leaves_no_markup_and_no_way_out_of_an_attribute() {
    use crate::report::escape::html;
    assert_eq!(
        html("a<b>&\"c'\u{1b}\n"),
        "a&lt;b&gt;&amp;&quot;c&#39;\\u{1b} "
    );
}

/// Builds of two scenarios: `a-steady` (first by name) stays put, `leaky<1>` grows from build 10
/// on.
fn builds() -> Vec<BuildReports> {
    (0..16)
        .map(|i| {
            let run = |scenario: &str, growth: f64| RunFigures {
                path: PathBuf::from(format!("nightly/b{i:02}/{scenario}/report.json")),
                status: VerdictStatus::Pass,
                completed: true,
                metrics: BTreeMap::from([(
                    "native_heap".to_owned(),
                    MetricFigures {
                        growth_per_turn: growth,
                        plateau: 0.0,
                    },
                )]),
                provenance: None,
            };
            let wobble = [0.0, 40.0, -25.0, 10.0, -35.0, 30.0, -5.0, 20.0][i % 8];
            BuildReports {
                dir: PathBuf::from(format!("nightly/b{i:02}")),
                runs: BTreeMap::from([
                    ("a-steady".to_owned(), vec![run("steady", 100.0 + wobble)]),
                    (
                        "leaky<1>".to_owned(),
                        vec![run("leaky", if i < 10 { 100.0 } else { 5000.0 } + wobble)],
                    ),
                ]),
                skipped: Vec::new(),
            }
        })
        .collect()
}

#[test]
fn history_page_shows_the_regressed_scenario_first_with_links_to_each_run() {
    let builds = builds();
    let history = judge(&builds, &ChangeOptions::default(), &[]);
    assert_eq!(history.regressions(), 1, "{:#?}", history.findings);
    let page = render_history_html(&history, &builds, Path::new("nightly/history"));
    let first = page.find("data-scenario=").expect("a scenario");
    assert!(
        page[first..].starts_with("data-scenario=\"leaky&lt;1&gt;\""),
        "{page}"
    );
    assert!(
        page.contains("<a href=\"../b10/leaky/\">pass</a>"),
        "{page}"
    );
    assert!(
        page.contains("REGRESSION: `leaky&lt;1&gt;` native_heap growth per turn from build b10")
    );
    golden!(insta::assert_snapshot!(
        "html_history",
        without_drawings(&page)
    ));
}
