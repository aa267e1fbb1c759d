//! The readers under test and what counts as a good answer from each.
//!
//! Each input is written to a file and read by the same function the command reads a user's file
//! with (`load_scenario`, `load_trace`, `read_report`), so the fuzzing covers everything between
//! the file and the result: the regular-file check and size limit, UTF-8 decoding, byte-order
//! marks, and the parser. The dumpsys meminfo parser has no file reader yet (its text comes from
//! a device), so it is given the input's text directly.

use std::cell::RefCell;
use std::path::{Path, PathBuf};

use leakloop::analyze::{load_trace, TraceErrorKind};
use leakloop::fuzzing::{read_driver_replies, read_markers, MAX_LEDGER_KINDS};
use leakloop::probe::dumpsys::{self, DumpsysError};
use leakloop::report::{read_report, read_suite_report, ReportError};
use leakloop::scenario::{load_scenario, ScenarioErrorKind};

/// A reader of user files.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Target {
    /// The scenario loader (`leakloop check`, `run`).
    Scenario,
    /// The trace reader of `leakloop analyze`: a CSV, a report.json when it starts with `{`, or a
    /// `dumpsys meminfo` log (detected by content).
    Trace,
    /// The report.json reader of `leakloop report`.
    Report,
    /// The parser of Android's `dumpsys meminfo` output.
    Dumpsys,
    /// The suite index (a suite's report.json) that `report` and `merge` read from suite and
    /// share folders.
    Suite,
    /// An attached process's output: turn markers and `LEDGER` lines, folded into a ledger at
    /// each turn as attach mode does.
    Markers,
    /// The lines an engine driver writes on stdout, read as protocol replies.
    Replies,
}

/// How a reader answered one input.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// The input was accepted.
    Accepted,
    /// The input was refused with an error that says where, or that is about the whole file.
    Refused(String),
    /// The input was refused with an error that names no place in a file that has one.
    Unlocated(String),
}

impl Target {
    /// Every target, in a fixed order.
    pub const ALL: [Target; 7] = [
        Target::Scenario,
        Target::Trace,
        Target::Report,
        Target::Dumpsys,
        Target::Suite,
        Target::Markers,
        Target::Replies,
    ];

    /// The target's name on the command line and in `fixtures/fuzz/`.
    pub fn name(self) -> &'static str {
        match self {
            Target::Scenario => "scenario",
            Target::Trace => "trace",
            Target::Report => "report",
            Target::Dumpsys => "dumpsys",
            Target::Suite => "suite",
            Target::Markers => "markers",
            Target::Replies => "replies",
        }
    }

    /// The target called `name`.
    pub fn from_name(name: &str) -> Option<Target> {
        Target::ALL.into_iter().find(|t| t.name() == name)
    }

    /// The file extension of a saved input.
    pub fn extension(self) -> &'static str {
        match self {
            Target::Scenario => "yaml",
            Target::Trace => "csv",
            Target::Report => "json",
            Target::Dumpsys => "txt",
            Target::Suite => "json",
            Target::Markers => "txt",
            Target::Replies => "jsonl",
        }
    }

    /// Runs the reader on `bytes`, written to a file first for the readers of files.
    pub fn run(self, bytes: &[u8]) -> Outcome {
        match self {
            Target::Scenario => scenario(&input_file(self, bytes)),
            Target::Trace => trace(&input_file(self, bytes)),
            Target::Report => report(&input_file(self, bytes)),
            Target::Dumpsys => meminfo(bytes),
            Target::Suite => suite(&input_file(self, bytes)),
            Target::Markers => markers(bytes),
            Target::Replies => replies(bytes),
        }
    }
}

thread_local! {
    /// A private folder per thread for the input files, removed when the thread ends.
    static INPUT_DIR: RefCell<Option<tempfile::TempDir>> = const { RefCell::new(None) };
}

/// Writes `bytes` to this thread's input file for `target`, replacing the previous input.
fn input_file(target: Target, bytes: &[u8]) -> PathBuf {
    INPUT_DIR.with(|dir| {
        let mut dir = dir.borrow_mut();
        if dir.is_none() {
            *dir = Some(tempfile::tempdir().expect("a temporary folder for fuzz inputs"));
        }
        let folder = dir
            .as_ref()
            .map(tempfile::TempDir::path)
            .unwrap_or(Path::new("."));
        let path = folder.join(format!("input.{}", target.extension()));
        std::fs::write(&path, bytes).expect("a fuzz input is written");
        path
    })
}

fn scenario(path: &Path) -> Outcome {
    match load_scenario(path) {
        Ok(_) => Outcome::Accepted,
        // An empty file has no place to point at; everything else does.
        Err(e) if e.kind() == ScenarioErrorKind::Empty || e.location().is_some() => {
            Outcome::Refused(e.to_string())
        }
        Err(e) => Outcome::Unlocated(e.to_string()),
    }
}

/// The trace reader of `leakloop analyze`: a CSV, a report.json when it starts with `{`, or a
/// `dumpsys meminfo` log (detected by content).
fn trace(path: &Path) -> Outcome {
    match load_trace(path) {
        Ok(_) => Outcome::Accepted,
        Err(e) => {
            let message = e.to_string();
            let located = match &e.kind {
                TraceErrorKind::Csv { line, .. } => *line >= 1,
                TraceErrorKind::Encoding(not_utf8) => not_utf8.line >= 1,
                TraceErrorKind::Empty => true,
                TraceErrorKind::Report(e) => report_error_is_located(e),
                // Names the sample: `samples[i]...`.
                TraceErrorKind::Samples(m) => m.starts_with("samples["),
                // dumpsys text: a line (`line N`), or a whole-file problem (too large, nothing
                // found).
                TraceErrorKind::Dumpsys(_) => true,
                // A dumpsys capture that cannot be a trace names the dump or the processes.
                TraceErrorKind::Capture(_) => true,
                // The file was written just before: failing to read it says nothing of where.
                TraceErrorKind::Input(_) => false,
            };
            if located {
                Outcome::Refused(message)
            } else {
                Outcome::Unlocated(message)
            }
        }
    }
}

/// Whether the report reader's refusal says where: a line, a field, or a whole-file problem
/// (no or an unknown `format_version`, a verdict its expectations contradict). `leakloop
/// report` and `leakloop analyze` read report.json through the same reader.
pub(crate) fn report_error_is_located(e: &ReportError) -> bool {
    match e {
        ReportError::Parse { line, .. } => *line >= 1,
        // Names the field.
        ReportError::Implausible { .. } => true,
        // A top level that is not an object, or no or an unknown format_version.
        ReportError::FormatVersion { .. } => true,
        // The stored and the derived status, both named.
        ReportError::Inconsistent { .. } => true,
        _ => false,
    }
}

fn report(path: &Path) -> Outcome {
    match read_report(path) {
        Ok(report) => {
            // A report that reads is rendered as `leakloop report` renders it: the numbers in
            // it must not panic any renderer.
            let (record, verdict) = (&report.record, &report.verdict);
            let _ = leakloop::report::render_terminal(record, verdict);
            let _ = leakloop::report::render_summary_md(record, verdict);
            let _ = leakloop::report::render_plot_svg(record, verdict);
            let _ = leakloop::report::render_junit(record, verdict);
            Outcome::Accepted
        }
        Err(e) => {
            if report_error_is_located(&e) {
                Outcome::Refused(e.to_string())
            } else {
                Outcome::Unlocated(e.to_string())
            }
        }
    }
}

/// The dumpsys parser on the input's text (invalid UTF-8 replaced, as a device's output would be
/// read): every refusal must name its line or be about the whole input.
fn meminfo(bytes: &[u8]) -> Outcome {
    match dumpsys::parse(&String::from_utf8_lossy(bytes)) {
        Ok(_) => Outcome::Accepted,
        Err(e @ DumpsysError::Malformed { line, .. }) if line >= 1 => {
            Outcome::Refused(e.to_string())
        }
        Err(e @ (DumpsysError::TooLarge { .. } | DumpsysError::NothingFound)) => {
            Outcome::Refused(e.to_string())
        }
        Err(e) => Outcome::Unlocated(e.to_string()),
    }
}

/// The suite index reader: a file that is not a suite index is passed over (`Ok(None)`); one
/// that says it is a suite index but cannot be read names the line or the key path.
fn suite(path: &Path) -> Outcome {
    match read_suite_report(path) {
        Ok(_) => Outcome::Accepted,
        Err(e) => {
            let located = match &e {
                ReportError::Parse { line, field, .. } => *line >= 1 || field.is_some(),
                ReportError::FormatVersion { .. } => true,
                // Names the entry (`scenarios[i].folder`) and why it cannot be a file name.
                ReportError::UnsafeName(_) => true,
                _ => false,
            };
            if located {
                Outcome::Refused(e.to_string())
            } else {
                Outcome::Unlocated(e.to_string())
            }
        }
    }
}

/// An attached process's output. Breaks a rule when the board or the ledger keeps more than
/// the stream could justify (more markers than lines, more ledger kinds than the cap), or when a
/// break in the order of turns is described without naming its lines.
fn markers(bytes: &[u8]) -> Outcome {
    let read = read_markers(bytes);
    let reading = &read.reading;
    if reading.markers > reading.lines || reading.too_long > reading.lines {
        return Outcome::Unlocated(format!("counted more than it read: {reading:?}"));
    }
    if reading.ledger_kinds > MAX_LEDGER_KINDS || read.ledger_kinds > MAX_LEDGER_KINDS {
        return Outcome::Unlocated(format!(
            "kept {} ledger kinds on the board and {} in the ledger, beyond the cap of {}",
            reading.ledger_kinds, read.ledger_kinds, MAX_LEDGER_KINDS
        ));
    }
    if let Some(error) = &read.count_error {
        // Names the kind and both counts: about that ledger line, wherever it was.
        return Outcome::Refused(error.clone());
    }
    match &reading.violation {
        None => Outcome::Accepted,
        Some(v) if v.contains("line") => Outcome::Refused(v.clone()),
        Some(v) => Outcome::Unlocated(v.clone()),
    }
}

/// A driver's stdout, line by line: each refused line is quoted in its message.
fn replies(bytes: &[u8]) -> Outcome {
    match read_driver_replies(bytes).into_iter().find_map(Result::err) {
        None => Outcome::Accepted,
        Some(message) => Outcome::Refused(message),
    }
}
