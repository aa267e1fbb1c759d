//! The HTML pages in a real browser: `leakloop report DIR` writes report.html and
//! `leakloop history --out DIR` writes history.html; Debian's `chromium`, headless, opens each
//! from disk with no network, and the test checks that the page loads without a console error,
//! that the failing metric (report.html) or the regressed scenario (history.html) comes first in
//! the DOM the browser built, and that its plots were drawn (SVG lines with points in that DOM). A screenshot
//! of each page goes to `LEAKLOOP_PAGE_SCREENSHOTS` when set (CI keeps that folder as an
//! artifact), else into the test's temporary folder. Without chromium the test says
//! `SKIPPED: chromium (apt-get install chromium)`; `LEAKLOOP_REQUIRE_CHROMIUM=1` (set by CI)
//! makes that a failure.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use leakloop::engine::skip_or_require;
use leakloop::process::output::{run_capped, Finished};
use leakloop::report::examples::leak_run;
use leakloop::report::write_reports;

use crate::common::streams;
use crate::history::{leakloop, simulate_build};

/// Makes a missing chromium a failure instead of a skip.
const REQUIRE_CHROMIUM_ENV: &str = "LEAKLOOP_REQUIRE_CHROMIUM";
/// Where screenshots of the pages go, when set.
const SCREENSHOTS_ENV: &str = "LEAKLOOP_PAGE_SCREENSHOTS";
/// A hang guard: a page that loads takes a second or two.
const BROWSER_TIMEOUT: Duration = Duration::from_secs(90);

/// The browser's command, if one is installed.
fn chromium() -> Option<&'static str> {
    ["chromium", "chromium-browser"].into_iter().find(|name| {
        Command::new(name)
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success())
    })
}

/// Runs headless `browser` on `page` with `mode` (`--dump-dom` or `--screenshot=...`), its
/// profile in `profile`, no network and console messages logged to stderr.
fn open(browser: &str, page: &Path, profile: &Path, mode: &str) -> Finished {
    let mut command = Command::new(browser);
    command
        .args([
            "--headless",
            // Root in CI containers: chromium refuses to start its sandbox there.
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--disable-extensions",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--proxy-server=127.0.0.1:9",
            "--proxy-bypass-list=<-loopback>",
            "--enable-logging=stderr",
            "--v=0",
            "--window-size=1280,2400",
            "--virtual-time-budget=2000",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .arg(mode)
        .arg(format!("file://{}", page.display()));
    run_capped(command, BROWSER_TIMEOUT, 16 << 20)
        .unwrap_or_else(|e| panic!("{browser} on {}: {e}", page.display()))
}

/// Opens `page`, checks it loaded cleanly, returns its DOM and writes its screenshot as `shot`.
fn load(browser: &str, page: &Path, shot: &str, scratch: &Path) -> String {
    let dom = open(browser, page, &scratch.join("profile-dom"), "--dump-dom");
    assert!(dom.status.success(), "{}: {}", page.display(), dom.stderr);
    for bad in ["CONSOLE", "Uncaught", "Refused to"] {
        let line = dom.stderr.lines().find(|l| l.contains(bad));
        assert!(line.is_none(), "{}: {line:?}", page.display());
    }
    let folder =
        std::env::var_os(SCREENSHOTS_ENV).map_or_else(|| scratch.to_path_buf(), PathBuf::from);
    std::fs::create_dir_all(&folder).unwrap();
    let png = folder.join(shot);
    let taken = open(
        browser,
        page,
        &scratch.join("profile-shot"),
        &format!("--screenshot={}", png.display()),
    );
    assert!(taken.status.success(), "{}", taken.stderr);
    let size = std::fs::metadata(&png).map_or(0, |m| m.len());
    assert!(size > 10_000, "{}: {size} bytes", png.display());
    dom.stdout
}

/// How many lines the browser's DOM draws: `<polyline points="...">` (what the plots' SVG writer
/// emits for a series) or `<path d="...">` with coordinates in them.
fn drawn_lines(dom: &str) -> usize {
    [("<polyline", " points=\""), ("<path", " d=\"")]
        .iter()
        .map(|(element, attribute)| {
            dom.match_indices(element)
                .filter(|(at, _)| {
                    let tag = &dom[*at..dom[*at..].find('>').map_or(dom.len(), |e| at + e)];
                    tag.split(attribute)
                        .nth(1)
                        .is_some_and(|v| v.split('"').next().is_some_and(|v| v.trim().len() > 2))
                })
                .count()
        })
        .sum()
}

#[test]
fn report_and_history_pages_load_in_a_headless_browser() {
    let Some(browser) = chromium() else {
        skip_or_require(REQUIRE_CHROMIUM_ENV, "chromium (apt-get install chromium)");
        return;
    };
    let scratch = tempfile::tempdir().unwrap();

    // report.html of a failing run.
    let run = scratch.path().join("run");
    let (record, verdict) = leak_run();
    write_reports(&run, &record, &verdict).unwrap();
    let out = leakloop(&["report", run.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1), "{:?}", streams(&out));
    let dom = load(
        browser,
        &run.join("report.html"),
        "report.png",
        scratch.path(),
    );
    let first_row = dom.split("<tr class=\"").nth(1).expect("a metric row");
    assert!(
        first_row.starts_with("fail"),
        "the failing metric first: {first_row}"
    );
    assert!(dom.contains("<svg"), "the memory plot is in the page");
    assert!(drawn_lines(&dom) > 0, "the memory plot draws nothing");

    // history.html of builds whose leak starts at build 6.
    let builds: Vec<PathBuf> = (0..12)
        .map(|i| {
            let dir = scratch.path().join(format!("nightly/b{i:02}"));
            simulate_build(&dir, i, Some(6), 300);
            dir
        })
        .collect();
    let pages = scratch.path().join("nightly/history");
    let mut args = vec!["history".to_owned()];
    args.extend(builds.iter().map(|d| d.display().to_string()));
    args.extend(["--out".to_owned(), pages.display().to_string()]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = leakloop(&args);
    assert_eq!(out.status.code(), Some(1), "{:?}", streams(&out));
    let dom = load(
        browser,
        &pages.join("history.html"),
        "history.png",
        scratch.path(),
    );
    let first = dom.split("data-scenario=\"").nth(1).expect("a scenario");
    assert!(first.starts_with("history-sim\""), "{first}");
    assert!(dom.contains("REGRESSION"), "the regression is marked");
    assert!(
        dom.contains("href=\"../b06/\""),
        "a link to build b06's run"
    );
    assert!(drawn_lines(&dom) > 0, "the trend plot draws nothing");
}
