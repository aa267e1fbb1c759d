//! The one error type of the report module: every failure names the file it concerns.

use std::path::PathBuf;

/// Why a report could not be written or read.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    /// Writing an artifact (or creating its folder) failed.
    #[error("cannot write {}: {source}", path.display())]
    Write {
        /// The file or folder being written.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// Reading a file failed.
    #[error("cannot read {}: {source}", path.display())]
    Read {
        /// The file being read.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// A file to read is missing, not a regular file or too large.
    #[error(transparent)]
    Input(#[from] crate::input::InputError),
    /// A file is not the JSON it should be; `field` is the path of the offending field.
    #[error("{}: line {line}, column {column}{}: {message}", path.display(), field_suffix(field))]
    Parse {
        /// The file being read.
        path: PathBuf,
        /// 1-based line of the error.
        line: usize,
        /// 1-based column of the error.
        column: usize,
        /// Path of the field that did not fit, e.g. `record.samples[3].turn`, when known.
        field: Option<String>,
        /// What was wrong.
        message: String,
    },
    /// report.json lacks `format_version`, or has one this build does not understand.
    #[error("{}: {message}", path.display())]
    FormatVersion {
        /// The report file.
        path: PathBuf,
        /// What is wrong with the version and what to do about it.
        message: String,
    },
    /// The folder holds neither a report.json nor samples (samples.parquet, or an older run's
    /// samples.jsonl).
    #[error("{} holds no report.json and no samples.parquet: is it a `leakloop run --out` folder?", dir.display())]
    NothingToReport {
        /// The folder.
        dir: PathBuf,
    },
    /// Several files could not be written.
    #[error("{}", errors.iter().map(ToString::to_string).collect::<Vec<_>>().join("; "))]
    Several {
        /// One error per file.
        errors: Vec<ReportError>,
    },
    /// Another leakloop process (a run, or a `report` reading it) holds the output folder.
    #[error("{} is in use by another leakloop process (a run writing it, or a report reading it): wait for it to end or choose another --out folder", dir.display())]
    Busy {
        /// The folder.
        dir: PathBuf,
    },
    /// report.json's stored status disagrees with its own outcome and expectations.
    #[error("{}: the stored verdict `{stored}` does not follow from the report's own expectations and outcome (they give `{derived}`): the file was altered or is corrupt", path.display())]
    Inconsistent {
        /// The report file.
        path: PathBuf,
        /// The status the file stores.
        stored: String,
        /// The status its expectations and outcome give.
        derived: String,
    },
    /// A name read from a file cannot be a file name inside its folder (see `safe_path`).
    #[error(transparent)]
    UnsafeName(#[from] crate::report::safe_path::UnsafeName),
    /// A folder walk met a symlink loop, or went past its depth or count limit (see `walk`).
    #[error(transparent)]
    Walk(#[from] crate::walk::WalkError),
    /// report.json parses, but a number in it cannot be true of any run (e.g. more warm-up and
    /// measured turns together than a turn number holds): the file was altered or is corrupt.
    #[error("{}: field `{field}`: {message}: the file was altered or is corrupt", path.display())]
    Implausible {
        /// The report file.
        path: PathBuf,
        /// Path of the offending field, e.g. `record.scenario.warmup_turns`.
        field: String,
        /// What is wrong with it.
        message: String,
    },
    /// Rendering an artifact failed (e.g. the plot).
    #[error("cannot render {artifact}: {message}")]
    Render {
        /// Which artifact.
        artifact: &'static str,
        /// What went wrong.
        message: String,
    },
}

fn field_suffix(field: &Option<String>) -> String {
    match field {
        Some(f) if !f.is_empty() && f != "." => format!(", field `{f}`"),
        _ => String::new(),
    }
}

impl ReportError {
    /// What is wrong with a report that was read, without the leading `<path>: `: for a
    /// caller whose own message names the file already (a trace error says
    /// `<path>: not a leakloop report: ...`).
    pub(crate) fn detail(&self) -> String {
        let text = self.to_string();
        let path = match self {
            ReportError::Parse { path, .. }
            | ReportError::FormatVersion { path, .. }
            | ReportError::Inconsistent { path, .. }
            | ReportError::Implausible { path, .. } => path,
            _ => return text,
        };
        let prefix = format!("{}: ", path.display());
        match text.strip_prefix(&prefix) {
            Some(rest) => rest.to_owned(),
            None => text,
        }
    }

    /// A parse error from serde_json, with the field path when one is known.
    pub(crate) fn parse(
        path: impl Into<PathBuf>,
        field: Option<String>,
        e: &serde_json::Error,
    ) -> Self {
        // serde_json appends " at line L column C" to its message; the fields carry those.
        let full = e.to_string();
        let message = match full.rfind(" at line ") {
            Some(i) => full[..i].to_owned(),
            None => full,
        };
        ReportError::Parse {
            path: path.into(),
            line: e.line(),
            column: e.column(),
            field,
            message,
        }
    }
}
