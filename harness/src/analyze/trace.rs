//! Memory traces recorded elsewhere, for `leakloop analyze`: a CSV of post-close samples or a
//! leakloop `report.json`.
//!
//! CSV layout: the first non-comment line is the header; its first column is `turn`, every other
//! column is a metric in bytes. One row per turn, turns strictly increasing (gaps allowed, up to
//! [`MAX_TRACE_TURN`]), the first row being the baseline (normally turn 0, after load); the
//! baseline turn may be repeated on the first rows to give several baseline samples (their median
//! is the baseline). Lines starting with `#` are comments and blank lines are skipped. Values are
//! non-negative integers or decimal numbers (rounded to bytes) below `u64::MAX` (a counter that
//! saturated at `u64::MAX` no longer measures anything).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::input::{read_bounded, utf8_text, MAX_REPORT_BYTES};
use crate::runner::RunRecord;

use super::dumpsys_trace::{load_folder, load_log, looks_like_dumpsys, ProcessSelector};
use super::series::MetricSeries;

/// The largest turn number a trace may use: 2^53, the largest integer every turn difference and
/// slope computation represents exactly.
pub const MAX_TRACE_TURN: u64 = 1 << 53;

/// A loaded trace.
#[derive(Debug, Clone)]
pub struct Trace {
    /// Each metric's post-close series.
    pub metrics: BTreeMap<String, MetricSeries>,
    /// The run record, when the trace was a leakloop report.
    pub record: Option<RunRecord>,
}

/// Why a trace could not be read.
#[derive(Debug, thiserror::Error)]
#[error("{path}: {kind}")]
pub struct TraceError {
    /// The trace file.
    pub path: PathBuf,
    /// What was wrong.
    pub kind: TraceErrorKind,
}

/// What was wrong with a trace.
#[derive(Debug, thiserror::Error)]
pub enum TraceErrorKind {
    /// The file could not be read (missing, not a regular file, too large).
    #[error("{0}")]
    Input(crate::input::InputErrorKind),
    /// The file is not UTF-8 text.
    #[error("line {line}, column {column}: {0}", line = .0.line, column = .0.column)]
    Encoding(crate::input::NotUtf8),
    /// A CSV problem at a line (1-based), optionally in a named column.
    #[error("line {line}{}: {message}", column.as_ref().map(|c| format!(", column `{c}`")).unwrap_or_default())]
    Csv {
        /// The line in the file.
        line: u64,
        /// The column, when one is at fault.
        column: Option<String>,
        /// What is wrong.
        message: String,
    },
    /// The file has a header but no data rows, or a report without samples.
    #[error("no data rows: a trace needs at least the baseline row (turn 0)")]
    Empty,
    /// A report whose samples cannot be a series (out of order, saturated).
    #[error("{0}")]
    Samples(String),
    /// A JSON report that the report reader refused (layout, version, numbers, verdict).
    #[error("not a leakloop report: {}", report_detail(.0))]
    Report(Box<crate::report::ReportError>),
    /// `dumpsys meminfo` output that could not be parsed (the line is named).
    #[error("{0}")]
    Dumpsys(crate::probe::dumpsys::DumpsysError),
    /// A dumpsys capture that cannot be a trace (file names, several processes, missing rows).
    #[error("{0}")]
    Capture(String),
}

/// A refused report's message after `not a leakloop report: `, which the reader's own refusal of
/// a file that is no report at all already begins with.
fn report_detail(error: &crate::report::ReportError) -> String {
    let detail = error.detail();
    match detail.strip_prefix("not a leakloop report: ") {
        Some(rest) => rest.to_owned(),
        None => detail,
    }
}

/// Reads a trace: a leakloop `report.json` when the file starts with `{`, a CSV otherwise. The
/// file must be a regular file of at most [`MAX_REPORT_BYTES`]; a byte-order mark is skipped.
pub fn load_trace(path: &Path) -> Result<Trace, TraceError> {
    load_trace_with(path, None)
}

/// [`load_trace`], also reading `dumpsys meminfo` captures: a folder of per-turn dump files or a
/// file of dumps (detected by content); `process` selects one process of a package's dumps.
pub fn load_trace_with(
    path: &Path,
    process: Option<&ProcessSelector>,
) -> Result<Trace, TraceError> {
    if std::fs::metadata(path).is_ok_and(|m| m.is_dir()) {
        return load_folder(path, process);
    }
    let error = |kind| TraceError {
        path: path.to_path_buf(),
        kind,
    };
    let bytes = read_bounded(
        path,
        MAX_REPORT_BYTES,
        "a trace is a CSV of samples or a leakloop report.json",
    )
    .map_err(|e| error(TraceErrorKind::Input(e.kind)))?;
    let text = utf8_text(&bytes).map_err(|e| error(TraceErrorKind::Encoding(e)))?;
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    if text.trim_start().starts_with('{') {
        // The one checked reader of report.json: a report is read as `leakloop report` reads
        // it (its version, numbers and stored verdict checked), then only its record is used.
        let record = crate::report::parse_report(path, text)
            .map_err(|e| error(TraceErrorKind::Report(Box::new(e))))?
            .record;
        if let Some((index, name)) = record.samples.iter().enumerate().find_map(|(i, s)| {
            s.metrics
                .iter()
                .find(|(_, v)| **v == u64::MAX)
                .map(|(name, _)| (i, name))
        }) {
            return Err(error(TraceErrorKind::Samples(format!(
                "samples[{index}].metrics.{name}: {}",
                SATURATED
            ))));
        }
        let metrics: BTreeMap<String, MetricSeries> = record
            .metric_names()
            .into_iter()
            .map(|name| {
                MetricSeries::from_record(&record, &name)
                    .map(|series| (name, series))
                    .map_err(|e| error(TraceErrorKind::Samples(e)))
            })
            .collect::<Result<_, _>>()?;
        if metrics.values().all(MetricSeries::is_empty) {
            return Err(error(TraceErrorKind::Empty));
        }
        Ok(Trace {
            metrics,
            record: Some(record),
        })
    } else if looks_like_dumpsys(text) {
        load_log(path, text, process)
    } else {
        let metrics = parse_csv(text).map_err(error)?;
        Ok(Trace {
            metrics,
            record: None,
        })
    }
}

/// Parses a CSV trace into one series per metric column.
pub fn parse_csv(text: &str) -> Result<BTreeMap<String, MetricSeries>, TraceErrorKind> {
    let mut reader = csv::ReaderBuilder::new()
        .comment(Some(b'#'))
        .trim(csv::Trim::All)
        .flexible(true)
        .has_headers(false)
        .from_reader(text.as_bytes());
    let mut records = reader.records();
    let csv_error = |e: csv::Error| TraceErrorKind::Csv {
        line: e.position().map_or(0, |p| p.line()),
        column: None,
        message: e.to_string(),
    };
    let header = match records.next() {
        Some(record) => record.map_err(csv_error)?,
        None => {
            return Err(TraceErrorKind::Csv {
                line: 1,
                column: None,
                message: "no header line: expected `turn,<metric>,...`".to_owned(),
            })
        }
    };
    // The reader's position for a first record that follows comments is not its line, so count.
    let header_line = text
        .lines()
        .position(|l| !l.trim().is_empty() && !l.trim_start().starts_with('#'))
        .map_or(1, |i| i as u64 + 1);
    let columns: Vec<String> = header.iter().map(str::to_owned).collect();
    validate_header(&columns, header_line)?;
    let metrics = &columns[1..];
    let mut series: Vec<Vec<(u64, u64)>> = vec![Vec::new(); metrics.len()];
    let mut baselines: Vec<Vec<u64>> = vec![Vec::new(); metrics.len()];
    let mut previous_turn: Option<u64> = None;
    let mut first_turn: Option<u64> = None;
    for record in records {
        let record = record.map_err(csv_error)?;
        let line = record.position().map_or(0, |p| p.line());
        if record.len() != columns.len() {
            return Err(TraceErrorKind::Csv {
                line,
                column: None,
                message: format!(
                    "expected {} fields ({}), found {}",
                    columns.len(),
                    columns.join(","),
                    record.len()
                ),
            });
        }
        let turn_text = &record[0];
        let turn_error = |message: String| TraceErrorKind::Csv {
            line,
            column: Some("turn".to_owned()),
            message,
        };
        let turn: u64 = turn_text
            .parse()
            .ok()
            .filter(|t| *t <= MAX_TRACE_TURN)
            .ok_or_else(|| {
                turn_error(format!(
                    "`{turn_text}` is not a turn number (an integer from 0 to 2^53)"
                ))
            })?;
        // Repeating the first (baseline) turn on the first rows gives several baseline samples.
        let repeats_baseline = previous_turn == Some(turn) && series[0].is_empty();
        if let Some(previous) = previous_turn.filter(|p| turn <= *p && !repeats_baseline) {
            let why = if turn == previous {
                "turns must not repeat (only the baseline turn may, on the first rows)"
            } else {
                "turns must increase"
            };
            return Err(turn_error(format!(
                "turn {turn} after turn {previous}: {why}"
            )));
        }
        let is_baseline = previous_turn.is_none() || repeats_baseline;
        previous_turn = Some(turn);
        first_turn.get_or_insert(turn);
        for (index, name) in metrics.iter().enumerate() {
            let value = parse_bytes(&record[index + 1]).map_err(|message| TraceErrorKind::Csv {
                line,
                column: Some(name.clone()),
                message,
            })?;
            if is_baseline {
                baselines[index].push(value);
            } else {
                series[index].push((turn, value));
            }
        }
    }
    let Some(baseline_turn) = first_turn else {
        return Err(TraceErrorKind::Empty);
    };
    Ok(metrics
        .iter()
        .cloned()
        .zip(series.iter().zip(&baselines).map(|(points, baseline)| {
            MetricSeries::with_baseline_samples(baseline, points, baseline_turn)
        }))
        .collect())
}

fn validate_header(columns: &[String], line: u64) -> Result<(), TraceErrorKind> {
    let header_error = |message: String| TraceErrorKind::Csv {
        line,
        column: None,
        message,
    };
    if !columns
        .first()
        .is_some_and(|c| c.eq_ignore_ascii_case("turn"))
    {
        return Err(header_error(format!(
            "the first column must be `turn`, found `{}`",
            columns.first().map_or("", String::as_str)
        )));
    }
    if columns.len() < 2 {
        return Err(header_error("no metric columns after `turn`".to_owned()));
    }
    for (i, name) in columns.iter().enumerate().skip(1) {
        if name.is_empty() {
            return Err(header_error(format!("column {} has no name", i + 1)));
        }
        if name.chars().any(crate::input::is_unprintable) {
            return Err(header_error(format!(
                "column {} is named `{}`, with control characters; a metric name is plain text",
                i + 1,
                crate::input::printable(name)
            )));
        }
        if columns[..i].contains(name) {
            return Err(header_error(format!("column `{name}` appears twice")));
        }
    }
    Ok(())
}

/// Why a sample of `u64::MAX` is refused.
const SATURATED: &str = "the value is 2^64 - 1, a counter that saturated: it no longer measures \
                         the memory";

/// A byte count: a non-negative integer below `u64::MAX`, or a finite non-negative decimal
/// rounded to bytes.
fn parse_bytes(text: &str) -> Result<u64, String> {
    if text.is_empty() {
        return Err("empty value (every row needs every metric)".to_owned());
    }
    if let Ok(value) = text.parse::<u64>() {
        if value == u64::MAX {
            return Err(SATURATED.to_owned());
        }
        return Ok(value);
    }
    match text.parse::<f64>() {
        Ok(v) if v.is_finite() && v >= 0.0 && v < u64::MAX as f64 => Ok(v.round() as u64),
        Ok(v) if v.is_nan() => Err(format!("`{text}` is NaN (not a number), not a byte count")),
        Ok(v) if v.is_infinite() => Err(format!("`{text}` is infinite, not a byte count")),
        Ok(_) => Err(format!(
            "`{text}` is not a byte count (negative or too large)"
        )),
        Err(_) => Err(format!("`{text}` is not a number of bytes")),
    }
}

#[cfg(test)]
mod tests {
    use rstest::rstest;

    use super::*;

    #[test]
    fn reads_comments_blank_lines_and_decimals() {
        let text = "# a trace\n\nturn, rss ,gpu\n0,100,5\n# mid comment\n1,110.4,5\n\n2,1.2e2,6\n";
        let metrics = parse_csv(text).unwrap();
        let rss: Vec<(u64, u64)> = metrics["rss"].points().collect();
        assert_eq!(rss, vec![(0, 100), (1, 110), (2, 120)]);
        assert_eq!(metrics["gpu"].len(), 3);
    }

    #[rstest]
    #[case::first_column(
        "step,rss\n0,1\n",
        "line 1: the first column must be `turn`, found `step`"
    )]
    #[case::no_metrics("turn\n0\n", "line 1: no metric columns after `turn`")]
    #[case::duplicate("turn,rss,rss\n0,1,2\n", "line 1: column `rss` appears twice")]
    #[case::control_characters(
        "turn,\u{1b}[31mrss\n0,1\n",
        "line 1: column 2 is named `\\u{1b}[31mrss`, with control characters; a metric name is plain text"
    )]
    #[case::short_row(
        "turn,rss,gpu\n0,1,2\n1,3\n",
        "line 3: expected 3 fields (turn,rss,gpu), found 2"
    )]
    #[case::bad_turn(
        "turn,rss\n0,1\nx,2\n",
        "line 3, column `turn`: `x` is not a turn number (an integer from 0 to 2^53)"
    )]
    #[case::turn_beyond_2_53(
        "turn,rss\n0,1\n9007199254740993,2\n",
        "line 3, column `turn`: `9007199254740993` is not a turn number (an integer from 0 to 2^53)"
    )]
    #[case::turn_repeats(
        "turn,rss\n0,1\n1,1\n1,1\n",
        "line 4, column `turn`: turn 1 after turn 1: turns must not repeat (only the baseline turn \
         may, on the first rows)"
    )]
    #[case::baseline_repeats_after_a_later_turn(
        "turn,rss\n0,1\n0,1\n1,1\n0,1\n",
        "line 5, column `turn`: turn 0 after turn 1: turns must increase"
    )]
    #[case::saturated(
        "turn,rss\n0,1\n1,18446744073709551615\n",
        "line 3, column `rss`: the value is 2^64 - 1, a counter that saturated: it no longer \
         measures the memory"
    )]
    #[case::turns_go_back(
        "turn,rss\n0,1\n2,1\n1,1\n",
        "line 4, column `turn`: turn 1 after turn 2: turns must increase"
    )]
    #[case::bad_value(
        "# c\nturn,rss\n0,1\n1,12MB\n",
        "line 4, column `rss`: `12MB` is not a number of bytes"
    )]
    #[case::negative(
        "turn,rss\n0,-5\n",
        "line 2, column `rss`: `-5` is not a byte count (negative or too large)"
    )]
    #[case::nan(
        "turn,rss\n0,NaN\n",
        "line 2, column `rss`: `NaN` is NaN (not a number), not a byte count"
    )]
    #[case::infinite(
        "turn,rss\n0,inf\n",
        "line 2, column `rss`: `inf` is infinite, not a byte count"
    )]
    #[case::empty_value(
        "turn,rss,gpu\n0,,1\n",
        "line 2, column `rss`: empty value (every row needs every metric)"
    )]
    #[case::no_rows(
        "# only a header\nturn,rss\n",
        "no data rows: a trace needs at least the baseline row (turn 0)"
    )]
    #[case::nothing("# nothing\n", "line 1: no header line: expected `turn,<metric>,...`")]
    fn malformed_csv_names_the_line_and_column(#[case] text: &str, #[case] message: &str) {
        assert_eq!(parse_csv(text).unwrap_err().to_string(), message);
    }

    #[test]
    fn sparse_turns_up_to_2_53_are_kept_as_written() {
        let text = "turn,rss\n0,100\n20000,110\n4294967295,120\n9007199254740992,130\n";
        let points: Vec<(u64, u64)> = parse_csv(text).unwrap()["rss"].points().collect();
        assert_eq!(
            points,
            vec![(0, 100), (20000, 110), (4294967295, 120), (1 << 53, 130)]
        );
    }

    #[test]
    fn repeated_baseline_rows_are_baseline_samples_with_their_median_first() {
        let text = "turn,rss\n0,100\n0,130\n0,90\n0,110\n1,120\n2,121\n";
        let series = &parse_csv(text).unwrap()["rss"];
        assert_eq!(series.baseline_samples, vec![100, 130, 90, 110]);
        assert_eq!(series.baseline_count(), 4);
        let points: Vec<(u64, u64)> = series.points().collect();
        assert_eq!(points, vec![(0, 105), (1, 120), (2, 121)]);
        let single = &parse_csv("turn,rss\n0,100\n1,120\n").unwrap()["rss"];
        assert!(single.baseline_samples.is_empty());
        assert_eq!(single.baseline_count(), 1);
    }

    /// A report.json trace is read by the one checked report reader; its message names the file
    /// once.
    #[rstest]
    #[case::newer_version(
        r#"{"format_version": 6, "record": {}}"#,
        "report format_version 6 was written by leakloop an unknown version"
    )]
    #[case::no_version(r#"{"record": {}}"#, "no `format_version` field")]
    #[case::string_version(
        r#"{"format_version": "1", "record": {}}"#,
        "wrong type of `format_version`: expected a whole number (5), found \"1\""
    )]
    #[case::no_record(r#"{"format_version": 1}"#, "missing field")]
    #[case::bad_record(
        r#"{"format_version": 1, "record": {"samples": 3}}"#,
        "field `record.samples`"
    )]
    #[case::bad_json("{", "line 1, column 1")]
    fn malformed_reports_say_why(#[case] text: &str, #[case] fragment: &str) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("report.json");
        std::fs::write(&path, text).unwrap();
        let message = load_trace(&path).unwrap_err().to_string();
        assert!(message.contains(fragment), "{message}");
        let start = format!("{}: not a leakloop report: ", path.display());
        assert!(message.starts_with(&start), "{message}");
        assert_eq!(
            message.matches(&*path.display().to_string()).count(),
            1,
            "{message}"
        );
    }

    /// Regression: the trace reader had its own report parser, which believed a stored verdict
    /// that its expectations contradict; the checked reader refuses it, as `leakloop report` does.
    #[test]
    fn an_altered_report_is_refused_as_a_trace_too() {
        let (record, mut verdict) = crate::report::examples::leak_run();
        assert_eq!(verdict.status, crate::analyze::VerdictStatus::Fail);
        verdict.status = crate::analyze::VerdictStatus::Pass;
        let text = crate::report::render_report_json(&record, &verdict).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("report.json");
        std::fs::write(&path, text).unwrap();
        let message = load_trace(&path).unwrap_err().to_string();
        assert!(message.contains("the stored verdict `pass`"), "{message}");
    }
}
