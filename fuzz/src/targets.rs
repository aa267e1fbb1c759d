//! The readers under test and what counts as a good answer from each.

use std::path::Path;

use leakloop::analyze::{parse_csv, TraceErrorKind};
use leakloop::report::ReportError;
use leakloop::scenario::{parse_scenario_bytes, ScenarioErrorKind};

/// A reader of user files.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Target {
    /// The scenario loader (`leakloop check`, `run`).
    Scenario,
    /// The trace reader of `leakloop analyze`: a CSV, or a report.json when it starts with `{`.
    Trace,
    /// The report.json reader of `leakloop report`.
    Report,
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
    pub const ALL: [Target; 3] = [Target::Scenario, Target::Trace, Target::Report];

    /// The target's name on the command line and in `fixtures/fuzz/`.
    pub fn name(self) -> &'static str {
        match self {
            Target::Scenario => "scenario",
            Target::Trace => "trace",
            Target::Report => "report",
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
        }
    }

    /// Runs the reader on `bytes`.
    pub fn run(self, bytes: &[u8]) -> Outcome {
        match self {
            Target::Scenario => scenario(bytes),
            Target::Trace => trace(bytes),
            Target::Report => report(bytes),
        }
    }
}

fn scenario(bytes: &[u8]) -> Outcome {
    match parse_scenario_bytes(bytes, Path::new("fuzz.yaml")) {
        Ok(_) => Outcome::Accepted,
        // An empty file has no place to point at; everything else does.
        Err(e) if e.kind() == ScenarioErrorKind::Empty || e.location().is_some() => {
            Outcome::Refused(e.to_string())
        }
        Err(e) => Outcome::Unlocated(e.to_string()),
    }
}

/// The trace reader works on text: bytes that are not UTF-8 are refused before it (by the file
/// read, which hard limits and encoding checks belong to), so they are read here as lossy text.
fn trace(bytes: &[u8]) -> Outcome {
    let text = String::from_utf8_lossy(bytes);
    let result = if text.trim_start().starts_with('{') {
        leakloop::analyze::parse_report(&text).map(|_| ())
    } else {
        parse_csv(&text).map(|_| ())
    };
    match result {
        Ok(()) => Outcome::Accepted,
        Err(kind) => {
            let message = kind.to_string();
            let located = match &kind {
                TraceErrorKind::Csv { line, .. } => *line >= 1,
                TraceErrorKind::Empty => true,
                TraceErrorKind::Report(m) => report_message_is_located(m),
                TraceErrorKind::Io(_) => false,
            };
            if located {
                Outcome::Refused(message)
            } else {
                Outcome::Unlocated(message)
            }
        }
    }
}

/// The analyzer's report reader names a line (invalid JSON), a key path (`at `record.x``), or a
/// whole-file problem (no `format_version` or `record`, a version it does not read).
pub(crate) fn report_message_is_located(message: &str) -> bool {
    message.contains(" at line ")
        || message.starts_with("invalid JSON at line ")
        || message.starts_with("at `record.")
        || message.starts_with("missing `format_version`")
        || message.starts_with("missing `record`")
        || message.starts_with("format_version ")
}

fn report(bytes: &[u8]) -> Outcome {
    let text = String::from_utf8_lossy(bytes);
    match leakloop::report::parse_report(Path::new("report.json"), &text) {
        Ok(_) => Outcome::Accepted,
        Err(e) => {
            let located = match &e {
                ReportError::Parse { line, .. } => *line >= 1,
                // A top level that is not an object, or no or an unknown format_version.
                ReportError::FormatVersion { .. } => true,
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
