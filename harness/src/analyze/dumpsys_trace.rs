//! Android `dumpsys meminfo` captures as traces for `leakloop analyze`: a folder of per-turn dump
//! files, or one log holding several `** MEMINFO in pid N [name] **` blocks in order.
//!
//! Folder: every entry not starting with `.` must be a regular file whose name, before its last
//! extension, holds exactly one run of digits: that number is the file's turn (`turn-0.txt`,
//! `003.txt`, `dump_12`). Turn 0 (the baseline) must be there; two files with the same turn, a
//! name without digits or with two runs of digits (`pixel4a-turn-3.txt`) are refused. Log: block
//! k is turn k.
//!
//! Metrics, in bytes (the parser converts the printed KB once):
//! [`dumpsys::METRIC_ROWS`] says which row each metric comes from. A package's dump may hold several
//! processes: then `--process NAME|PID` must select one (no guess is made); the error names them.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::input::{printable, read_bounded, shorten, utf8_text};
use crate::probe::dumpsys::{self, ProcessMemInfo};

use super::series::MetricSeries;
use super::trace::{Trace, TraceError, TraceErrorKind};

/// The most dump files a capture folder may hold.
pub const MAX_DUMP_FILES: usize = 100_000;

/// How many process names an error lists at most.
const LISTED_PROCESSES: usize = 8;

/// Which process of a multi-process dump to read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProcessSelector {
    /// By the name in `** MEMINFO in pid N [name] **`.
    Name(String),
    /// By the pid.
    Pid(u32),
}

impl ProcessSelector {
    /// A pid when `text` is a number, else a name.
    pub fn parse(text: &str) -> ProcessSelector {
        text.parse::<u32>().map_or_else(
            |_| ProcessSelector::Name(text.to_owned()),
            ProcessSelector::Pid,
        )
    }

    fn matches(&self, info: &ProcessMemInfo) -> bool {
        match self {
            ProcessSelector::Name(name) => info.process.as_deref() == Some(name.as_str()),
            ProcessSelector::Pid(pid) => info.pid == Some(*pid),
        }
    }
}

/// True when `text` looks like `dumpsys meminfo` output rather than a CSV.
pub fn looks_like_dumpsys(text: &str) -> bool {
    text.lines().any(|l| {
        let l = l.trim();
        l == "App Summary" || l.starts_with("** MEMINFO in pid ")
    })
}

fn capture_error(path: &Path, message: String) -> TraceError {
    TraceError {
        path: path.to_path_buf(),
        kind: TraceErrorKind::Capture(message),
    }
}

/// A process's label in messages: `name (pid N)`.
fn label(info: &ProcessMemInfo) -> String {
    let name = info.process.as_deref().unwrap_or("(no name)");
    let name = printable(&shorten(name, 60)).into_owned();
    match info.pid {
        Some(pid) => format!("{name} (pid {pid})"),
        None => name,
    }
}

/// The one process of `dumps` to read: the selected one, or the only one.
fn select<'a>(
    path: &Path,
    dumps: &'a [ProcessMemInfo],
    process: Option<&ProcessSelector>,
) -> Result<Vec<&'a ProcessMemInfo>, TraceError> {
    if let Some(selector) = process {
        let chosen: Vec<&ProcessMemInfo> = dumps.iter().filter(|d| selector.matches(d)).collect();
        if chosen.is_empty() {
            return Err(capture_error(
                path,
                format!(
                    "no dump of the process given by --process; it holds {}",
                    list_processes(dumps)
                ),
            ));
        }
        return Ok(chosen);
    }
    let first = (dumps[0].pid, dumps[0].process.as_deref());
    if dumps.iter().any(|d| (d.pid, d.process.as_deref()) != first) {
        return Err(capture_error(
            path,
            format!(
                "dumps of several processes: {}; choose one with --process NAME|PID",
                list_processes(dumps)
            ),
        ));
    }
    Ok(dumps.iter().collect())
}

fn list_processes(dumps: &[ProcessMemInfo]) -> String {
    let mut names: Vec<String> = dumps.iter().map(label).collect();
    names.dedup();
    names.sort();
    names.dedup();
    let more = names.len().saturating_sub(LISTED_PROCESSES);
    names.truncate(LISTED_PROCESSES);
    let mut out = names.join(", ");
    if more > 0 {
        out.push_str(&format!(" and {more} more"));
    }
    out
}

fn parse_file(path: &Path) -> Result<Vec<ProcessMemInfo>, TraceError> {
    let error = |kind| TraceError {
        path: path.to_path_buf(),
        kind,
    };
    let bytes = read_bounded(
        path,
        dumpsys::MAX_INPUT_BYTES as u64,
        "a dumpsys meminfo capture is a few kB per dump",
    )
    .map_err(|e| error(TraceErrorKind::Input(e.kind)))?;
    let text = utf8_text(&bytes).map_err(|e| error(TraceErrorKind::Encoding(e)))?;
    parse_text(path, text.strip_prefix('\u{feff}').unwrap_or(text))
}

/// Parses dumpsys text read from `path`.
fn parse_text(path: &Path, text: &str) -> Result<Vec<ProcessMemInfo>, TraceError> {
    let error = |kind| TraceError {
        path: path.to_path_buf(),
        kind,
    };
    let dumps = dumpsys::parse(text).map_err(|e| error(TraceErrorKind::Dumpsys(e)))?;
    let summaries = text.lines().filter(|l| l.trim() == "App Summary").count();
    if summaries > dumps.len() {
        return Err(capture_error(
            path,
            format!(
                "{summaries} App Summary blocks in {} dump(s): a log of several dumps needs the \
                 `** MEMINFO in pid N [name] **` line before each",
                dumps.len()
            ),
        ));
    }
    if dumps.is_empty() {
        return Err(error(TraceErrorKind::Dumpsys(
            dumpsys::DumpsysError::NothingFound,
        )));
    }
    Ok(dumps)
}

/// Builds the trace from dumps in turn order; `where_` names each dump in messages.
fn to_trace(path: &Path, dumps: &[(u64, String, &ProcessMemInfo)]) -> Result<Trace, TraceError> {
    let Some((_, first_where, first)) = dumps.first() else {
        return Err(capture_error(path, "no dumps".to_owned()));
    };
    let names: Vec<&'static str> = first.metrics().into_keys().collect();
    if names.is_empty() {
        return Err(capture_error(
            path,
            format!("{first_where}: none of the rows leakloop reads (Native Heap, Graphics, TOTAL PSS, ...)"),
        ));
    }
    let mut points: BTreeMap<&'static str, Vec<(u64, u64)>> = BTreeMap::new();
    for (turn, where_, info) in dumps {
        let metrics = info.metrics();
        for name in &names {
            let Some(value) = metrics.get(name) else {
                return Err(capture_error(
                    path,
                    format!("{where_} has no value for `{name}`, which {first_where} has"),
                ));
            };
            points.entry(name).or_default().push((*turn, *value));
        }
    }
    Ok(Trace {
        metrics: points
            .into_iter()
            .map(|(name, p)| (name.to_owned(), MetricSeries::from_points(&p)))
            .collect(),
        record: None,
    })
}

/// A log of several dumps of one process in order (block k = turn k), read from `path` as `text`.
pub fn load_log(
    path: &Path,
    text: &str,
    process: Option<&ProcessSelector>,
) -> Result<Trace, TraceError> {
    let dumps = parse_text(path, text)?;
    let chosen = select(path, &dumps, process)?;
    let dumps: Vec<(u64, String, &ProcessMemInfo)> = chosen
        .into_iter()
        .enumerate()
        .map(|(k, info)| (k as u64, format!("dump {} (turn {k})", k + 1), info))
        .collect();
    to_trace(path, &dumps)
}

/// The turn in a dump file's name: the one run of digits before its last extension.
fn turn_of(name: &str) -> Result<u64, String> {
    let stem = name.rsplit_once('.').map_or(name, |(stem, _)| stem);
    let runs: Vec<&str> = stem
        .split(|c: char| !c.is_ascii_digit())
        .filter(|r| !r.is_empty())
        .collect();
    match runs.as_slice() {
        [one] => one
            .parse::<u64>()
            .ok()
            .filter(|t| *t <= super::MAX_TRACE_TURN)
            .ok_or_else(|| format!("the turn {one} is beyond 2^53")),
        [] => Err("the name holds no turn number".to_owned()),
        _ => Err(format!(
            "the name holds {} numbers ({}); it must hold exactly one, the turn",
            runs.len(),
            runs.join(", ")
        )),
    }
}

/// A folder of per-turn dump files.
pub fn load_folder(path: &Path, process: Option<&ProcessSelector>) -> Result<Trace, TraceError> {
    let entries = std::fs::read_dir(path).map_err(|e| TraceError {
        path: path.to_path_buf(),
        kind: TraceErrorKind::Input(crate::input::InputErrorKind::Open(e)),
    })?;
    let mut files: BTreeMap<u64, PathBuf> = BTreeMap::new();
    for entry in entries {
        let entry = entry.map_err(|e| TraceError {
            path: path.to_path_buf(),
            kind: TraceErrorKind::Input(crate::input::InputErrorKind::Read(e)),
        })?;
        let file = entry.path();
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with('.') {
            continue;
        }
        let turn = turn_of(&name).map_err(|why| {
            capture_error(
                &file,
                format!("{why}: a capture folder holds files named by turn (turn-0.txt, 003.txt)"),
            )
        })?;
        if let Some(other) = files.insert(turn, file.clone()) {
            return Err(capture_error(
                &file,
                format!("turn {turn} again, after {}", other.display()),
            ));
        }
        if files.len() > MAX_DUMP_FILES {
            return Err(capture_error(
                path,
                format!("more than {MAX_DUMP_FILES} dump files"),
            ));
        }
    }
    if files.is_empty() {
        return Err(capture_error(
            path,
            "no dump files: expected files named by turn (turn-0.txt, turn-1.txt, ...)".to_owned(),
        ));
    }
    if !files.contains_key(&0) {
        return Err(capture_error(
            path,
            "no turn-0 file: turn 0 is the baseline".to_owned(),
        ));
    }
    let parsed: Vec<(u64, PathBuf, Vec<ProcessMemInfo>)> = files
        .into_iter()
        .map(|(turn, file)| parse_file(&file).map(|d| (turn, file, d)))
        .collect::<Result<_, _>>()?;
    let mut dumps = Vec::with_capacity(parsed.len());
    for (turn, file, infos) in &parsed {
        let chosen = select(file, infos, process)?;
        if chosen.len() > 1 {
            return Err(capture_error(
                file,
                format!(
                    "{} dumps of {} in one turn's file",
                    chosen.len(),
                    label(chosen[0])
                ),
            ));
        }
        let name = file.file_name().unwrap_or_default().to_string_lossy();
        dumps.push((
            *turn,
            format!("{} (turn {turn})", printable(&name)),
            chosen[0],
        ));
    }
    if process.is_none() {
        let first = label(dumps[0].2);
        if let Some((_, where_, info)) = dumps.iter().find(|d| label(d.2) != first) {
            return Err(capture_error(
                path,
                format!(
                    "{where_} is a dump of {}, turn 0 of {first}; choose one with --process NAME|PID",
                    label(info)
                ),
            ));
        }
    }
    to_trace(path, &dumps)
}

#[cfg(test)]
mod tests;
