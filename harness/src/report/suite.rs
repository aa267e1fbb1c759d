//! The index of a suite run: one entry per scenario, written as the suite's own `report.json`
//! (a separate document kind, `"kind": "leakloop-suite"`, with its own `suite_format_version`;
//! see docs/report-format.md and docs/suite-report.schema.json), `summary.md` (one row per
//! scenario) and `junit.xml` (one test suite per scenario, built from each scenario's own
//! report.json). The per-scenario reports in the scenario folders are the ordinary run reports.
//!
//! Everything here is rendered from the [`SuiteReport`] and the scenario folders alone, so that
//! `leakloop merge` produces from partitions exactly what a single run of the whole suite writes.

use std::path::Path;

#[cfg(feature = "reports")]
use quick_junit::{NonSuccessKind, Property, Report, TestCase, TestCaseStatus, TestSuite};
use serde::{Deserialize, Serialize};

use crate::analyze::{Classification, Verdict, VerdictStatus};
use crate::input::{read_bounded, utf8_text};
use crate::report::escape::{markdown, markdown_code, markdown_link};
use crate::report::facts::{metric_passed, status_word};
#[cfg(feature = "reports")]
use crate::report::junit::{junit_suite, strip_testsuites_skipped};
use crate::report::safe_path::{contained, NameProblem, UnsafeName};
use crate::report::table::{render_table, Cell};
use crate::report::units::format_per_turn;
#[cfg(feature = "reports")]
use crate::report::{read_report, JUNIT_XML};
use crate::report::{write_atomic, ReportError, REPORT_JSON, SUMMARY_MD};

/// The `kind` of a suite report.json.
pub const SUITE_KIND: &str = "leakloop-suite";

/// The suite report layout this build writes and reads.
pub const SUITE_FORMAT_VERSION: u32 = 1;

/// The largest suite report.json read (about 500 bytes a scenario: some 30,000 scenarios). A
/// larger report.json is never taken for a suite's.
pub const MAX_SUITE_REPORT_BYTES: u64 = 16 << 20;

/// A suite's report.json.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SuiteReport {
    /// Always [`SUITE_KIND`].
    pub kind: String,
    /// Layout version ([`SUITE_FORMAT_VERSION`]).
    pub suite_format_version: u32,
    /// The leakloop version that wrote it.
    pub leakloop_version: String,
    /// The whole suite, before any partition took its share.
    pub suite: SuiteIdentity,
    /// The share of the suite this run ran (`--partition K/N`); `None` for the whole suite (a
    /// whole run, or a merge of every partition).
    pub partition: Option<SuitePartition>,
    /// The worst exit code of the scenarios (0 when there are none).
    pub exit_code: u8,
    /// One entry per scenario run, ordered by `path`.
    pub scenarios: Vec<SuiteEntry>,
}

/// What identifies a suite across partitions and machines.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SuiteIdentity {
    /// How many scenarios the whole suite has.
    pub scenarios: usize,
    /// A hash (FNV-1a, 64 bits, hex) of the sorted scenario paths relative to the suite root:
    /// partitions of the same suite share it.
    pub fingerprint: String,
}

/// One share of a suite: `index` of `count` (1-based).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SuitePartition {
    /// Which share, from 1.
    pub index: u32,
    /// How many shares the suite is split into.
    pub count: u32,
}

/// How a scenario of a suite ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EntryStatus {
    /// Every expectation held.
    Pass,
    /// An expectation failed.
    Fail,
    /// No expectation failed, but one could not be decided within the run.
    Inconclusive,
    /// The engine failed (crashed, hung, could not start).
    EngineFailed,
    /// A signal stopped the run.
    Interrupted,
    /// The scenario never ran: it is invalid, or its folder could not be written.
    Error,
}

impl EntryStatus {
    /// The status of a run with this verdict.
    pub fn of_verdict(status: VerdictStatus) -> Self {
        match status {
            VerdictStatus::Pass => EntryStatus::Pass,
            VerdictStatus::Fail => EntryStatus::Fail,
            VerdictStatus::Inconclusive => EntryStatus::Inconclusive,
            VerdictStatus::EngineFailed => EntryStatus::EngineFailed,
            VerdictStatus::Interrupted => EntryStatus::Interrupted,
        }
    }

    /// The word shown in tables.
    pub fn word(&self) -> &'static str {
        match self {
            EntryStatus::Pass => status_word(VerdictStatus::Pass),
            EntryStatus::Fail => status_word(VerdictStatus::Fail),
            EntryStatus::Inconclusive => status_word(VerdictStatus::Inconclusive),
            EntryStatus::EngineFailed => status_word(VerdictStatus::EngineFailed),
            EntryStatus::Interrupted => status_word(VerdictStatus::Interrupted),
            EntryStatus::Error => "error",
        }
    }

    fn mark(&self) -> &'static str {
        match self {
            EntryStatus::Pass => "✅",
            EntryStatus::Fail => "❌",
            EntryStatus::Inconclusive => "❔",
            EntryStatus::EngineFailed => "💥",
            EntryStatus::Interrupted => "⏹️",
            EntryStatus::Error => "⚠️",
        }
    }
}

/// One scenario of a suite.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SuiteEntry {
    /// The scenario file, relative to the suite root, with `/` between folders.
    pub path: String,
    /// Its output folder under the suite's folder.
    pub folder: String,
    /// The scenario's `name`, when it could be read.
    pub name: Option<String>,
    /// How it ended.
    pub status: EntryStatus,
    /// The exit code `leakloop run` gives this scenario alone.
    pub exit_code: u8,
    /// Why it has no verdict (status `error`, or an engine that could not start).
    pub error: Option<String>,
    /// The metric that did worst, when any was analysed.
    pub worst_metric: Option<WorstMetric>,
    /// Expectations checked.
    pub expectations: usize,
    /// Expectations that failed.
    pub expectations_failed: usize,
    /// Wall time from the start of the scenario to its reports written, in seconds.
    pub duration_s: f64,
}

/// The metric of a run that did worst: a failed one first, then by classification (growth,
/// inconclusive, plateau, clean), then by growth per turn.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorstMetric {
    /// The metric's name.
    pub name: String,
    /// Its classification.
    pub classification: Classification,
    /// Its growth per turn (the robust slope after warm-up), in bytes.
    pub growth_per_turn: f64,
    /// Whether its expectations failed (`None`: it has none).
    pub passed: Option<bool>,
}

impl WorstMetric {
    /// The worst metric of `verdict`, if it analysed any.
    pub fn of(verdict: &Verdict) -> Option<WorstMetric> {
        let rank = |c: Classification| match c {
            Classification::Growth => 3,
            Classification::Inconclusive => 2,
            Classification::Plateau => 1,
            Classification::Clean => 0,
        };
        verdict
            .metrics
            .iter()
            .map(|(name, m)| WorstMetric {
                name: name.clone(),
                classification: m.classification,
                growth_per_turn: m.slope_bytes_per_turn,
                passed: metric_passed(verdict, name),
            })
            .max_by(|a, b| {
                let key = |w: &WorstMetric| (w.passed == Some(false), rank(w.classification));
                key(a)
                    .cmp(&key(b))
                    .then(a.growth_per_turn.total_cmp(&b.growth_per_turn))
                    // Equal figures: the first name in order wins, whatever the map order.
                    .then(b.name.cmp(&a.name))
            })
    }
}

impl SuiteReport {
    /// A report of `scenarios` (sorted here by path), whose worst exit code is `exit_code`.
    pub fn new(
        suite: SuiteIdentity,
        partition: Option<SuitePartition>,
        exit_code: u8,
        mut scenarios: Vec<SuiteEntry>,
    ) -> Self {
        scenarios.sort_by(|a, b| a.path.cmp(&b.path));
        Self {
            kind: SUITE_KIND.to_owned(),
            suite_format_version: SUITE_FORMAT_VERSION,
            leakloop_version: crate::report::LEAKLOOP_VERSION.to_owned(),
            suite,
            partition,
            exit_code,
            scenarios,
        }
    }

    /// How many scenarios ended in each status, in words: `3 pass, 1 fail`.
    pub fn counts_line(&self) -> String {
        let statuses = [
            EntryStatus::Pass,
            EntryStatus::Fail,
            EntryStatus::Inconclusive,
            EntryStatus::EngineFailed,
            EntryStatus::Interrupted,
            EntryStatus::Error,
        ];
        let parts: Vec<String> = statuses
            .iter()
            .filter_map(|s| {
                let n = self.scenarios.iter().filter(|e| e.status == *s).count();
                (n > 0).then(|| format!("{n} {}", s.word()))
            })
            .collect();
        if parts.is_empty() {
            "no scenarios".to_owned()
        } else {
            parts.join(", ")
        }
    }

    /// `3 scenarios` or `3 of 10 scenarios (partition 1/4)`.
    pub fn scope_line(&self) -> String {
        match self.partition {
            Some(p) => format!(
                "{} of {} scenarios (partition {}/{})",
                self.scenarios.len(),
                self.suite.scenarios,
                p.index,
                p.count
            ),
            None => format!("{} scenarios", self.scenarios.len()),
        }
    }
}

/// The cells of an entry's row: scenario, verdict, worst metric, its growth, duration.
fn row_cells(entry: &SuiteEntry) -> [String; 5] {
    let (metric, growth) = match &entry.worst_metric {
        Some(w) => (
            format!("{} ({})", w.name, w.classification.as_str()),
            format_per_turn(w.growth_per_turn),
        ),
        None => ("-".to_owned(), "-".to_owned()),
    };
    let scenario = match &entry.name {
        Some(name) => format!("{name} ({})", entry.path),
        None => entry.path.clone(),
    };
    [
        scenario,
        entry.status.word().to_owned(),
        metric,
        growth,
        format!("{:.2} s", entry.duration_s),
    ]
}

/// The suite as a plain-text table, with each error below it.
pub fn render_suite_text(report: &SuiteReport) -> String {
    let mut rows = vec![[
        "scenario".to_owned(),
        "verdict".to_owned(),
        "worst metric".to_owned(),
        "growth/turn".to_owned(),
        "duration".to_owned(),
    ]];
    rows.extend(report.scenarios.iter().map(row_cells));
    let rows: Vec<Vec<Cell>> = rows
        .into_iter()
        .map(|row| row.into_iter().map(Cell::plain).collect())
        .collect();
    let mut out = format!("suite: {}\n\n", report.scope_line());
    out.push_str(&render_table(&rows, ""));
    let errors: Vec<String> = report
        .scenarios
        .iter()
        .filter_map(|e| {
            e.error
                .as_ref()
                .map(|why| format!("  {}: {}", e.path, one_line(why)))
        })
        .collect();
    if !errors.is_empty() {
        out.push_str("\nerrors\n");
        out.push_str(&errors.join("\n"));
        out.push('\n');
    }
    out.push_str(&format!("\n{}\n", report.counts_line()));
    out
}

fn one_line(text: &str) -> String {
    crate::input::shorten(&crate::input::printable(&text.replace('\n', " ")), 300).into_owned()
}

/// The suite's summary.md: one row per scenario, each linking to the scenario's own summary.
pub fn render_suite_summary_md(report: &SuiteReport) -> String {
    let worst = report
        .scenarios
        .iter()
        .map(|e| e.status)
        .max_by_key(|s| match s {
            EntryStatus::Pass => 0,
            EntryStatus::Inconclusive => 1,
            EntryStatus::Fail => 2,
            EntryStatus::Interrupted => 3,
            EntryStatus::EngineFailed => 4,
            EntryStatus::Error => 5,
        })
        .unwrap_or(EntryStatus::Pass);
    let mut out = format!(
        "### leakloop suite: {} {}\n\n{}\n\n",
        report.scope_line(),
        worst.mark(),
        report.counts_line()
    );
    out.push_str(
        "| scenario | verdict | worst metric | growth/turn | duration |\n\
         | --- | --- | --- | ---: | ---: |\n",
    );
    for entry in &report.scenarios {
        let [_, verdict, metric, growth, duration] = row_cells(entry);
        let label = markdown_code(entry.name.as_deref().unwrap_or(&entry.path));
        // A scenario that never ran has no summary of its own to link to.
        let label = match entry.status {
            EntryStatus::Error => label,
            _ => format!("[{label}]({}/{SUMMARY_MD})", markdown_link(&entry.folder)),
        };
        out.push_str(&format!(
            "| {label} <br>{} | {} {} | {} | {} | {} |\n",
            markdown_code(&entry.path),
            entry.status.mark(),
            markdown(&verdict),
            markdown(&metric),
            growth,
            duration
        ));
    }
    let errors: Vec<&SuiteEntry> = report
        .scenarios
        .iter()
        .filter(|e| e.error.is_some())
        .collect();
    if !errors.is_empty() {
        out.push_str("\n**Errors**\n\n");
        for e in errors {
            out.push_str(&format!(
                "- {}: {}\n",
                markdown_code(&e.path),
                markdown(&one_line(e.error.as_deref().unwrap_or_default()))
            ));
        }
    }
    out
}

/// The suite's junit.xml: for each scenario, its own run's test suite (read from its folder's
/// report.json under `root`), named by its path so that two files with the same scenario name
/// stay apart; a scenario without a report is one test suite with one errored test case that
/// says why.
#[cfg(feature = "reports")]
pub fn render_suite_junit(root: &Path, report: &SuiteReport) -> Result<String, ReportError> {
    let mut junit = Report::new("leakloop");
    for entry in &report.scenarios {
        let report_path = root.join(&entry.folder).join(REPORT_JSON);
        let mut suite = match (&entry.error, report_path.is_file()) {
            (None, true) => {
                let run = read_report(&report_path)?;
                junit_suite(&run.record, &run.verdict)
            }
            _ => error_suite(entry),
        };
        suite.name = entry.path.as_str().into();
        suite.add_property(Property::new("scenario_path", entry.path.as_str()));
        suite.set_time(std::time::Duration::from_secs_f64(
            entry.duration_s.max(0.0),
        ));
        junit.add_test_suite(suite);
    }
    let xml = junit.to_string().map_err(|e| ReportError::Render {
        artifact: JUNIT_XML,
        message: e.to_string(),
    })?;
    Ok(strip_testsuites_skipped(&crate::report::escape::xml(&xml)))
}

#[cfg(feature = "reports")]
fn error_suite(entry: &SuiteEntry) -> TestSuite {
    let mut suite = TestSuite::new(entry.path.as_str());
    let why = entry.error.as_deref().unwrap_or(
        "the scenario has no report.json: its run did not finish or its reports could not be \
         written",
    );
    let mut status = TestCaseStatus::non_success(NonSuccessKind::Error);
    status
        .set_type(entry.status.word())
        .set_message(one_line(why));
    let mut case = TestCase::new("scenario", status);
    case.set_classname(entry.name.as_deref().unwrap_or(&entry.path));
    suite.add_test_case(case);
    suite
}

/// Writes the suite's report.json, summary.md and junit.xml into `root` (junit.xml read from the
/// scenario folders under it, with the `reports` feature only). Every file is tried; the failures are returned together.
pub fn write_suite_reports(root: &Path, report: &SuiteReport) -> Result<(), ReportError> {
    let mut failed = Vec::new();
    let json = serde_json::to_string_pretty(report)
        .map(|mut s| {
            s.push('\n');
            s
        })
        .map_err(|e| ReportError::Render {
            artifact: REPORT_JSON,
            message: e.to_string(),
        });
    if let Err(e) = json.and_then(|json| write_atomic(&root.join(REPORT_JSON), json.as_bytes())) {
        failed.push(e);
    }
    let summary = render_suite_summary_md(report);
    if let Err(e) = write_atomic(&root.join(SUMMARY_MD), summary.as_bytes()) {
        failed.push(e);
    }
    #[cfg(feature = "reports")]
    {
        let junit = render_suite_junit(root, report)
            .and_then(|xml| write_atomic(&root.join(JUNIT_XML), xml.as_bytes()));
        if let Err(e) = junit {
            failed.push(e);
        }
    }
    match failed.len() {
        0 => Ok(()),
        1 => Err(failed.remove(0)),
        _ => Err(ReportError::Several { errors: failed }),
    }
}

/// The first field of any report.json, read to tell a suite's from a run's.
#[derive(Deserialize)]
struct KindProbe {
    kind: Option<serde_json::Value>,
}

/// Reads `path` as a suite report.json: `Ok(None)` when it is not one (a run's report.json, or
/// a file larger than any suite report), an error when it says it is a suite report but cannot
/// be read as one.
pub fn read_suite_report(path: &Path) -> Result<Option<SuiteReport>, ReportError> {
    match std::fs::metadata(path) {
        Ok(meta) if meta.len() > MAX_SUITE_REPORT_BYTES => return Ok(None),
        _ => {}
    }
    let bytes = read_bounded(
        path,
        MAX_SUITE_REPORT_BYTES,
        "a suite report.json is at most 16 MiB",
    )?;
    let Ok(text) = utf8_text(&bytes) else {
        return Ok(None);
    };
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let is_suite = serde_json::from_str::<KindProbe>(text)
        .ok()
        .and_then(|p| p.kind)
        .is_some_and(|k| k.as_str() == Some(SUITE_KIND));
    if !is_suite {
        return Ok(None);
    }
    let mut deserializer = serde_json::Deserializer::from_str(text);
    let report: SuiteReport = serde_path_to_error::deserialize(&mut deserializer)
        .map_err(|e| ReportError::parse(path, Some(e.path().to_string()), e.inner()))?;
    if report.suite_format_version != SUITE_FORMAT_VERSION {
        return Err(ReportError::FormatVersion {
            path: path.to_owned(),
            message: format!(
                "suite report suite_format_version {} was written by leakloop {}; this leakloop \
                 ({}) reads suite_format_version {SUITE_FORMAT_VERSION}",
                report.suite_format_version,
                crate::input::shorten(&crate::input::printable(&report.leakloop_version), 40),
                crate::report::LEAKLOOP_VERSION
            ),
        });
    }
    check_folders(path, &report)?;
    Ok(Some(report))
}

/// Each entry's `folder` is structure (`merge` copies and replaces it, `report` reads it): it
/// must be one plain name inside the suite's folder, and no two entries may share one
/// (`report::safe_path`); otherwise the whole index is refused, naming the entry.
fn check_folders(path: &Path, report: &SuiteReport) -> Result<(), ReportError> {
    let mut seen = std::collections::BTreeSet::new();
    for (i, entry) in report.scenarios.iter().enumerate() {
        let name = format!("scenarios[{i}].folder");
        contained(Path::new(""), &entry.folder, path, &name)?;
        if !seen.insert(entry.folder.to_lowercase()) {
            return Err(UnsafeName {
                file: path.to_owned(),
                entry: name,
                name: entry.folder.clone(),
                problem: NameProblem::Taken,
            }
            .into());
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::examples::{clean_run, leak_run};

    fn entry(path: &str, status: EntryStatus, verdict: Option<&Verdict>) -> SuiteEntry {
        SuiteEntry {
            path: path.to_owned(),
            folder: path.trim_end_matches(".yaml").replace('/', "--"),
            name: Some(
                path.rsplit('/')
                    .next()
                    .unwrap()
                    .trim_end_matches(".yaml")
                    .to_owned(),
            ),
            status,
            exit_code: 0,
            error: None,
            worst_metric: verdict.and_then(WorstMetric::of),
            expectations: 3,
            expectations_failed: usize::from(status == EntryStatus::Fail),
            duration_s: 0.25,
        }
    }

    #[test]
    fn the_worst_metric_is_the_failed_growing_one() {
        let (_, verdict) = leak_run();
        let worst = WorstMetric::of(&verdict).unwrap();
        assert_eq!(worst.classification, Classification::Growth);
        assert_eq!(worst.passed, Some(false));
        assert!(worst.growth_per_turn > 1e6, "{worst:?}");
        let (_, clean) = clean_run();
        let worst = WorstMetric::of(&clean).unwrap();
        assert_ne!(worst.passed, Some(false));
    }

    #[test]
    fn the_suite_report_round_trips_and_is_told_from_a_run_report() {
        let dir = tempfile::tempdir().unwrap();
        let (_, verdict) = leak_run();
        let report = SuiteReport::new(
            SuiteIdentity {
                scenarios: 2,
                fingerprint: "00".into(),
            },
            None,
            1,
            vec![
                entry("b/leak.yaml", EntryStatus::Fail, Some(&verdict)),
                entry("a.yaml", EntryStatus::Pass, None),
            ],
        );
        assert_eq!(report.scenarios[0].path, "a.yaml", "sorted by path");
        write_suite_reports(dir.path(), &report).unwrap();
        let back = read_suite_report(&dir.path().join(REPORT_JSON)).unwrap();
        assert_eq!(back.as_ref(), Some(&report));
        let run_dir = tempfile::tempdir().unwrap();
        let (record, verdict) = leak_run();
        crate::report::write_reports(run_dir.path(), &record, &verdict).unwrap();
        assert_eq!(
            read_suite_report(&run_dir.path().join(REPORT_JSON)).unwrap(),
            None
        );
    }

    #[test]
    fn a_newer_suite_report_asks_for_an_upgrade() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(REPORT_JSON);
        std::fs::write(
            &path,
            r#"{"kind":"leakloop-suite","suite_format_version":9,"leakloop_version":"9.0.0",
               "suite":{"scenarios":0,"fingerprint":"0"},"partition":null,"exit_code":0,
               "scenarios":[]}"#,
        )
        .unwrap();
        let err = read_suite_report(&path).unwrap_err();
        assert!(err.to_string().contains("suite_format_version 9"), "{err}");
    }

    #[test]
    fn summary_md_has_one_row_per_scenario_with_its_worst_metric() {
        let (_, verdict) = leak_run();
        let report = SuiteReport::new(
            SuiteIdentity {
                scenarios: 4,
                fingerprint: "00".into(),
            },
            Some(SuitePartition { index: 2, count: 2 }),
            1,
            vec![
                entry("nightly/leak.yaml", EntryStatus::Fail, Some(&verdict)),
                SuiteEntry {
                    error: Some("line 3: unknown key `turnz`".into()),
                    name: None,
                    ..entry("bad.yaml", EntryStatus::Error, None)
                },
            ],
        );
        let md = render_suite_summary_md(&report);
        crate::report::golden!(insta::assert_snapshot!("suite_summary_md", md));
        let text = render_suite_text(&report);
        crate::report::golden!(insta::assert_snapshot!("suite_text", text));
    }

    /// Regression (issue 20): a merged share's index text (name, path, folder, error) reached
    /// the suite's summary.md and junit.xml as raw markup and control characters.
    #[test]
    fn hostile_index_text_stays_text() {
        let hostile = crate::report::test_support::HOSTILE;
        let (_, verdict) = leak_run();
        let report = SuiteReport::new(
            SuiteIdentity {
                scenarios: 2,
                fingerprint: "00".into(),
            },
            None,
            1,
            vec![
                SuiteEntry {
                    name: Some(format!("n{hostile}")),
                    folder: format!("f) [x](javascript:alert(1)){hostile}"),
                    ..entry(
                        &format!("p{hostile}.yaml"),
                        EntryStatus::Fail,
                        Some(&verdict),
                    )
                },
                SuiteEntry {
                    error: Some(format!("e{hostile}")),
                    ..entry(&format!("q{hostile}.yaml"), EntryStatus::Error, None)
                },
            ],
        );
        let md = render_suite_summary_md(&report);
        let problems = crate::report::escape::check::markdown_problems(&md);
        assert!(problems.is_empty(), "{problems:#?}\n{md}");
        assert!(md.contains("(f%29%20%5Bx%5D%28javascript%3Aalert"), "{md}");
        let work = tempfile::tempdir().unwrap();
        let xml = render_suite_junit(work.path(), &report).unwrap();
        let problems = crate::report::escape::check::xml_problems(&xml);
        assert!(problems.is_empty(), "{problems:#?}\n{xml}");
    }
}
