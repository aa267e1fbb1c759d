//! Android's `dumpsys meminfo <package|pid>` output, parsed: the detailed table (Native Heap,
//! Gfx dev, GL mtrack, EGL mtrack, Unknown, TOTAL, ... with whatever columns the Android version
//! prints) and the App Summary (Java Heap, Native Heap, Code, Stack, Graphics, Private Other,
//! System and the TOTAL lines). Pure parsing: reading the output from a device is elsewhere.
//!
//! The format differs between Android versions: columns come and go (Rss Total from Android 11,
//! the Pss Clean/Shared columns with `-d`, SwapPss or Swapped Dirty), the summary's total line is
//! `TOTAL:` (up to Android 10) or `TOTAL PSS:`/`TOTAL RSS:`, swap is `TOTAL SWAP PSS:` or
//! `TOTAL SWAP (KB):`. Columns are therefore named from the two header lines of each table, and
//! sections the parser does not read (Objects, SQL, DATABASES, Dalvik Details, ...) are skipped.
//! Values are printed in KB (KiB); they are converted to bytes once, here.

mod metrics;
#[cfg(test)]
mod tests;

pub use metrics::METRIC_ROWS;

use std::collections::BTreeMap;
use std::sync::OnceLock;

use regex::Regex;

use crate::input::{printable, shorten};

/// The most bytes of dumpsys output parsed at once: one package's output is a few kB; a whole
/// `dumpsys meminfo -a` of every process stays well below this.
pub const MAX_INPUT_BYTES: usize = 4 * 1024 * 1024;

/// Bytes in one of the KB that dumpsys prints.
const KIB: u64 = 1024;

/// The most characters of an offending line quoted in an error.
const QUOTE_CHARS: usize = 80;

/// Why dumpsys output could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DumpsysError {
    /// The input is over [`MAX_INPUT_BYTES`].
    #[error("dumpsys output is {len} bytes, over the limit of {max} bytes")]
    TooLarge {
        /// The input's length.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// A line of a table or of the App Summary could not be read.
    #[error("dumpsys output, line {line}: {what}")]
    Malformed {
        /// 1-based line number.
        line: usize,
        /// What is wrong, with the line quoted (shortened, control characters escaped).
        what: String,
    },
    /// Neither a memory table nor an App Summary was found.
    #[error("no dumpsys meminfo table or App Summary found in the output")]
    NothingFound,
}

/// One column of the detailed table, named from its two header lines.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Column {
    /// `Pss Total`.
    PssTotal,
    /// `Pss Clean` (with `-d`).
    PssClean,
    /// `Shared Dirty`.
    SharedDirty,
    /// `Private Dirty`.
    PrivateDirty,
    /// `Shared Clean`.
    SharedClean,
    /// `Private Clean`.
    PrivateClean,
    /// `SwapPss Dirty` (devices whose swap reports PSS).
    SwapPssDirty,
    /// `Swap Dirty` or `Swapped Dirty` (devices whose swap does not report PSS).
    SwapDirty,
    /// `Rss Total` (Android 11 and later).
    RssTotal,
    /// `Heap Size`.
    HeapSize,
    /// `Heap Alloc`.
    HeapAlloc,
    /// `Heap Free`.
    HeapFree,
    /// A column this parser does not know, by its two header words.
    Other(String),
}

impl Column {
    fn from_header(top: &str, bottom: &str) -> Column {
        match (top, bottom) {
            ("Pss", "Total") => Column::PssTotal,
            ("Pss", "Clean") => Column::PssClean,
            ("Shared", "Dirty") => Column::SharedDirty,
            ("Private", "Dirty") => Column::PrivateDirty,
            ("Shared", "Clean") => Column::SharedClean,
            ("Private", "Clean") => Column::PrivateClean,
            ("SwapPss", "Dirty") => Column::SwapPssDirty,
            ("Swap", "Dirty") | ("Swapped", "Dirty") => Column::SwapDirty,
            ("Rss", "Total") => Column::RssTotal,
            ("Heap", "Size") => Column::HeapSize,
            ("Heap", "Alloc") => Column::HeapAlloc,
            ("Heap", "Free") => Column::HeapFree,
            _ => Column::Other(format!("{top} {bottom}")),
        }
    }
}

/// One row of the detailed table: its name as printed (`Native Heap`, `GL mtrack`, `TOTAL`) and
/// the values it prints, in bytes; a row that leaves the Heap columns blank has no entry for them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableRow {
    /// The row's name.
    pub name: String,
    /// Values in bytes, by column.
    pub values: BTreeMap<Column, u64>,
}

/// One row of the App Summary: its name without the colon, its PSS and RSS in bytes where
/// printed (`Private Other` and `System` have no RSS; `Unknown` has only RSS).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SummaryRow {
    /// PSS in bytes.
    pub pss: Option<u64>,
    /// RSS in bytes.
    pub rss: Option<u64>,
}

/// The App Summary's total line.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SummaryTotals {
    /// `TOTAL PSS:` (or `TOTAL:` on older Androids), bytes.
    pub pss: Option<u64>,
    /// `TOTAL RSS:`, bytes.
    pub rss: Option<u64>,
    /// `TOTAL SWAP PSS:`, bytes.
    pub swap_pss: Option<u64>,
    /// `TOTAL SWAP (KB):` (swap without PSS accounting), bytes.
    pub swap: Option<u64>,
}

/// One process's meminfo.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProcessMemInfo {
    /// The pid from the `** MEMINFO in pid N [name] **` line, if there was one.
    pub pid: Option<u32>,
    /// The process name from that line.
    pub process: Option<String>,
    /// The detailed table's rows in printed order (empty for an App Summary alone).
    pub table: Vec<TableRow>,
    /// The App Summary rows by name (empty where the output has no summary).
    pub summary: BTreeMap<String, SummaryRow>,
    /// The App Summary's totals.
    pub totals: SummaryTotals,
}

impl ProcessMemInfo {
    /// The detailed table's row called `name` (`Native Heap`, `TOTAL`), if printed.
    pub fn row(&self, name: &str) -> Option<&TableRow> {
        self.table.iter().find(|r| r.name == name)
    }

    /// The value of table row `name` in `column`, bytes.
    pub fn value(&self, name: &str, column: &Column) -> Option<u64> {
        self.row(name).and_then(|r| r.values.get(column).copied())
    }

    /// The App Summary row `name` (`Native Heap`, `Graphics`), if printed.
    pub fn summary_row(&self, name: &str) -> Option<SummaryRow> {
        self.summary.get(name).copied()
    }

    fn is_empty(&self) -> bool {
        self.table.is_empty() && self.summary.is_empty() && self.totals == SummaryTotals::default()
    }
}

/// Parses the output of `dumpsys meminfo` for one package or pid (a package may have several
/// processes, each its own `** MEMINFO in pid ... **` block; an excerpt holding only an App
/// Summary gives one process without pid). Never panics; errors name the line.
pub fn parse(text: &str) -> Result<Vec<ProcessMemInfo>, DumpsysError> {
    if text.len() > MAX_INPUT_BYTES {
        return Err(DumpsysError::TooLarge {
            len: text.len(),
            max: MAX_INPUT_BYTES,
        });
    }
    let mut parser = Parser::default();
    let lines: Vec<&str> = text.lines().collect();
    let mut i = 0;
    while i < lines.len() {
        i = parser.line(&lines, i)?;
    }
    parser.finish()
}

/// Where the parser is.
#[derive(Debug, Default)]
enum State {
    /// Outside anything it reads (the preamble, Objects, SQL, ...).
    #[default]
    Skipping,
    /// In the detailed table, with its columns.
    Table(Vec<Column>),
    /// In the App Summary; `columns` holds the end offsets of the Pss(KB) and Rss(KB) headers.
    Summary {
        pss_end: Option<usize>,
        rss_end: Option<usize>,
    },
}

#[derive(Debug, Default)]
struct Parser {
    done: Vec<ProcessMemInfo>,
    current: ProcessMemInfo,
    state: State,
}

fn malformed(line: usize, what: &str, text: &str) -> DumpsysError {
    DumpsysError::Malformed {
        line: line + 1,
        what: format!(
            "{what}: \"{}\"",
            printable(&shorten(text.trim(), QUOTE_CHARS))
        ),
    }
}

fn kib(line: usize, token: &str, text: &str) -> Result<u64, DumpsysError> {
    token
        .parse::<u64>()
        .ok()
        .and_then(|kb| kb.checked_mul(KIB))
        .ok_or_else(|| malformed(line, &format!("\"{token}\" is not a size in KB"), text))
}

/// Whitespace-separated tokens of `line` with the byte offset where each ends.
fn tokens(line: &str) -> Vec<(&str, usize)> {
    let mut out = Vec::new();
    let mut start = None;
    for (i, c) in line.char_indices() {
        match (c.is_whitespace(), start) {
            (true, Some(s)) => {
                out.push((&line[s..i], i));
                start = None;
            }
            (false, None) => start = Some(i),
            _ => {}
        }
    }
    if let Some(s) = start {
        out.push((&line[s..], line.len()));
    }
    out
}

fn totals_regex() -> &'static Regex {
    static RE: OnceLock<Regex> = OnceLock::new();
    RE.get_or_init(|| {
        Regex::new(r"TOTAL( PSS| RSS| SWAP PSS| SWAP \(KB\))?:\s*(\S+)").expect("valid regex")
    })
}

fn meminfo_regex() -> &'static Regex {
    static RE: OnceLock<Regex> = OnceLock::new();
    RE.get_or_init(|| {
        Regex::new(r"^\*\* MEMINFO in pid (\d+) \[(.*)\] \*\*$").expect("valid regex")
    })
}

impl Parser {
    /// Reads the line at `i` (and the ones it owns, e.g. a header's second line); returns the
    /// index of the next line to read.
    fn line(&mut self, lines: &[&str], i: usize) -> Result<usize, DumpsysError> {
        let text = lines[i];
        let trimmed = text.trim();
        if let Some(caps) = meminfo_regex().captures(trimmed) {
            self.start_process(i, &caps[1], &caps[2], text)?;
            return Ok(i + 1);
        }
        if trimmed == "App Summary" {
            self.state = State::Summary {
                pss_end: None,
                rss_end: None,
            };
            return Ok(i + 1);
        }
        if let Some(next) = self.table_header(lines, i) {
            return next;
        }
        match std::mem::take(&mut self.state) {
            State::Skipping => Ok(i + 1),
            State::Table(columns) => {
                if trimmed.is_empty() {
                    return Ok(i + 1);
                }
                if trimmed.chars().all(|c| c == '-' || c.is_whitespace()) {
                    self.state = State::Table(columns);
                    return Ok(i + 1);
                }
                self.table_row(i, text, &columns)?;
                self.state = State::Table(columns);
                Ok(i + 1)
            }
            State::Summary { pss_end, rss_end } => {
                let keep = self.summary_line(i, text, pss_end, rss_end)?;
                if let Some(state) = keep {
                    self.state = state;
                }
                Ok(i + 1)
            }
        }
    }

    fn start_process(
        &mut self,
        i: usize,
        pid: &str,
        name: &str,
        text: &str,
    ) -> Result<(), DumpsysError> {
        let pid = pid
            .parse::<u32>()
            .map_err(|_| malformed(i, "the pid is not a number", text))?;
        let previous = std::mem::take(&mut self.current);
        if !previous.is_empty() || previous.pid.is_some() {
            self.done.push(previous);
        }
        self.current.pid = Some(pid);
        self.current.process = Some(name.to_string());
        self.state = State::Skipping;
        Ok(())
    }

    /// If the line at `i` starts a detailed table's two header lines, reads them and returns the
    /// index after them.
    fn table_header(&mut self, lines: &[&str], i: usize) -> Option<Result<usize, DumpsysError>> {
        let top = tokens(lines[i]);
        if top.first().map(|t| t.0) != Some("Pss") {
            return None;
        }
        let bottom_line = lines.get(i + 1)?;
        let bottom = tokens(bottom_line);
        if bottom.first().map(|t| t.0) != Some("Total") {
            return None;
        }
        if top.len() != bottom.len() {
            return Some(Err(malformed(
                i + 1,
                &format!(
                    "the table header's two lines have {} and {} words",
                    top.len(),
                    bottom.len()
                ),
                bottom_line,
            )));
        }
        let columns = top
            .iter()
            .zip(&bottom)
            .map(|(t, b)| Column::from_header(t.0, b.0))
            .collect();
        self.state = State::Table(columns);
        Some(Ok(i + 2))
    }

    fn table_row(&mut self, i: usize, text: &str, columns: &[Column]) -> Result<(), DumpsysError> {
        let toks = tokens(text);
        let first_value = toks
            .iter()
            .rposition(|t| !t.0.bytes().all(|b| b.is_ascii_digit()))
            .map_or(0, |p| p + 1);
        if first_value == 0 {
            return Err(malformed(i, "a table row without a name", text));
        }
        let values = &toks[first_value..];
        if values.is_empty() {
            return Err(malformed(i, "a table row without values", text));
        }
        if values.len() > columns.len() {
            return Err(malformed(
                i,
                &format!(
                    "{} values in a table of {} columns",
                    values.len(),
                    columns.len()
                ),
                text,
            ));
        }
        let name = toks[..first_value]
            .iter()
            .map(|t| t.0)
            .collect::<Vec<_>>()
            .join(" ");
        let mut row = TableRow {
            name,
            values: BTreeMap::new(),
        };
        for (column, value) in columns.iter().zip(values) {
            row.values.insert(column.clone(), kib(i, value.0, text)?);
        }
        self.current.table.push(row);
        Ok(())
    }

    /// Reads one line of the App Summary; returns the state to keep, or `None` when the summary
    /// ended (after its totals).
    fn summary_line(
        &mut self,
        i: usize,
        text: &str,
        pss_end: Option<usize>,
        rss_end: Option<usize>,
    ) -> Result<Option<State>, DumpsysError> {
        let same = Some(State::Summary { pss_end, rss_end });
        let trimmed = text.trim();
        if trimmed.is_empty() || trimmed.chars().all(|c| c == '-' || c.is_whitespace()) {
            return Ok(same);
        }
        if trimmed.contains("Pss(KB)") || trimmed.contains("Rss(KB)") {
            let find = |label: &str| text.find(label).map(|p| p + label.len());
            return Ok(Some(State::Summary {
                pss_end: find("Pss(KB)"),
                rss_end: find("Rss(KB)"),
            }));
        }
        if trimmed.starts_with("TOTAL") {
            self.totals(i, text)?;
            return Ok(None);
        }
        let Some((name, rest)) = text.split_once(':') else {
            return Err(malformed(i, "an App Summary row without a colon", text));
        };
        let name = name.trim();
        if name.is_empty() {
            return Err(malformed(i, "an App Summary row without a name", text));
        }
        let offset = name_end(text, name) + 1;
        let values: Vec<(&str, usize)> = tokens(rest)
            .into_iter()
            .map(|(t, end)| (t, end + offset))
            .collect();
        let row = match values.as_slice() {
            [(pss, _), (rss, _)] => SummaryRow {
                pss: Some(kib(i, pss, text)?),
                rss: Some(kib(i, rss, text)?),
            },
            [(value, end)] => {
                let value = kib(i, value, text)?;
                if is_nearer(*end, rss_end, pss_end) {
                    SummaryRow {
                        pss: None,
                        rss: Some(value),
                    }
                } else {
                    SummaryRow {
                        pss: Some(value),
                        rss: None,
                    }
                }
            }
            _ => {
                return Err(malformed(
                    i,
                    &format!(
                        "an App Summary row needs one or two values, not {}",
                        values.len()
                    ),
                    text,
                ))
            }
        };
        self.current.summary.insert(name.to_string(), row);
        Ok(same)
    }

    fn totals(&mut self, i: usize, text: &str) -> Result<(), DumpsysError> {
        let mut found = false;
        for caps in totals_regex().captures_iter(text) {
            found = true;
            let value = Some(kib(i, &caps[2], text)?);
            let totals = &mut self.current.totals;
            match caps.get(1).map(|m| m.as_str()) {
                None | Some(" PSS") => totals.pss = value,
                Some(" RSS") => totals.rss = value,
                Some(" SWAP PSS") => totals.swap_pss = value,
                _ => totals.swap = value,
            }
        }
        if found {
            Ok(())
        } else {
            Err(malformed(
                i,
                "an App Summary total line without values",
                text,
            ))
        }
    }

    fn finish(mut self) -> Result<Vec<ProcessMemInfo>, DumpsysError> {
        let last = std::mem::take(&mut self.current);
        if !last.is_empty() || last.pid.is_some() {
            self.done.push(last);
        }
        if self.done.iter().all(ProcessMemInfo::is_empty) {
            return Err(DumpsysError::NothingFound);
        }
        Ok(self.done)
    }
}

/// The byte offset in `line` just after the (trimmed) `name` that starts it.
fn name_end(line: &str, name: &str) -> usize {
    line.find(name).map_or(0, |p| p + name.len())
}

/// Whether a value ending at byte `end` sits nearer to the `near` header column than to `other`
/// (false when `near` is unknown).
fn is_nearer(end: usize, near: Option<usize>, other: Option<usize>) -> bool {
    match (near, other) {
        (Some(n), Some(o)) => end.abs_diff(n) < end.abs_diff(o),
        (Some(_), None) => true,
        _ => false,
    }
}
