//! The sample store: every sample of a run, once, in `samples.csv.zst` next to its report.json
//! (see docs/report-format.md, "The sample store").
//!
//! Layout: CSV (RFC 4180) compressed as one zstd frame. The header is `turn,phase,epoch,t_ms`,
//! then one column per metric (bytes; an empty cell: the sample has no such metric), then
//! `extra`: a JSON object of the metrics of a sample that were not known when the header was
//! written (empty almost always), then `key`: the turn's session id or shape (empty: none).
//! Column names in [`RESERVED_COLUMNS`] are never metrics; a reader looks columns up by name,
//! so a store without `key` (written before keys existed) reads the same.
//!
//! Written as the run goes ([`StoreWriter`]): rows are compressed as they come and the zstd
//! stream is flushed (complete blocks, decodable without what follows) at the end of each slow
//! turn and at least every [`FLUSH_EVERY`] while rows are pending, so that a run killed mid-way
//! leaves a truncated frame whose flushed blocks hold every sample up to the last flush; fast
//! turns (a simulator's million) share blocks and compress. [`read_store`] reads such a file up to the cut
//! (and says it was cut); pandas, polars and DuckDB read a finished one directly.
//!
//! report.json (format 4) references the store by name, row count and SHA-256 of its bytes
//! ([`StoreRef`]); every reader of samples comes here ([`read_samples`]), which also reads the
//! older forms (samples embedded in report.json, samples.jsonl).

use std::fs::{File, OpenOptions};
use std::io::{BufReader, Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::input::{read_bounded, MAX_REPORT_BYTES};
use crate::report::artifacts::{SAMPLES_JSONL, SAMPLES_STORE};
use crate::report::out_dir::{create_folder, remove_if_present, FILE_MODE};
use crate::report::ReportError;
use crate::runner::{Metrics, Phase, Sample};

/// Columns that are never metrics: the sample's own fields, the overflow column, and the
/// request key some runs record per turn.
pub const RESERVED_COLUMNS: &[&str] = &["turn", "phase", "epoch", "t_ms", "extra", "key"];

/// The longest a flushed turn waits before its rows reach the file, when turns come faster
/// than this (a simulator); slower turns (a real engine) are flushed at the end of each.
pub const FLUSH_EVERY: Duration = Duration::from_millis(100);

/// Rows held before the header is known at most (the header is the metrics of the rows of the
/// first flush).
const MAX_HELD_ROWS: usize = 4096;

/// The zstd level: 3 (zstd's default) compresses a million rows at several hundred MB/s; higher
/// levels save little on these rows and cost the turn loop.
const LEVEL: i32 = 3;

/// How report.json (format 4) names its sample store.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StoreRef {
    /// The store's file name, in the report's folder.
    pub store: String,
    /// How many samples (data rows) it holds.
    pub rows: u64,
    /// SHA-256 of the file's bytes, in lowercase hex.
    pub sha256: String,
}

/// What a store or samples.jsonl held.
#[derive(Debug, Clone, PartialEq)]
pub struct StreamedSamples {
    /// Every complete sample, in order.
    pub samples: Vec<Sample>,
    /// Whether the file ended in the middle of a row or of its compressed stream (the run was
    /// killed while writing it); what followed the last complete row is ignored.
    pub torn_last_line: bool,
}

/// A file writer that hashes what goes through it.
struct Hashed {
    file: File,
    hash: Sha256,
}

impl Write for Hashed {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.file.write(buf)?;
        self.hash.update(&buf[..n]);
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.file.flush()
    }
}

/// Writes a sample store row by row.
pub struct StoreWriter {
    path: PathBuf,
    encoder: zstd::stream::write::Encoder<'static, Hashed>,
    /// The metric columns, once the header is written.
    columns: Option<Vec<&'static str>>,
    /// Rows taken before the header was written.
    held: Vec<Sample>,
    line: Vec<u8>,
    rows: u64,
    unflushed: bool,
    flush_every: Duration,
    last_turn_end: Instant,
}

impl std::fmt::Debug for StoreWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StoreWriter")
            .field("path", &self.path)
            .field("rows", &self.rows)
            .finish_non_exhaustive()
    }
}

impl StoreWriter {
    /// Creates a new, empty `dir/samples.csv.zst` (mode 0666 less the umask), creating `dir` if
    /// needed. An existing file of that name is removed first, and the new one is created
    /// exclusively, so a symlink planted in its place is removed, never written through.
    pub fn create(dir: &Path) -> Result<Self, ReportError> {
        create_folder(dir)?;
        let path = dir.join(SAMPLES_STORE);
        remove_if_present(&path)?;
        let write_error = |source| ReportError::Write {
            path: path.clone(),
            source,
        };
        let file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(FILE_MODE)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&path)
            .map_err(write_error)?;
        let hashed = Hashed {
            file,
            hash: Sha256::new(),
        };
        let encoder = zstd::stream::write::Encoder::new(hashed, LEVEL).map_err(write_error)?;
        let now = Instant::now();
        Ok(Self {
            path,
            encoder,
            columns: None,
            held: Vec::new(),
            line: Vec::with_capacity(256),
            rows: 0,
            unflushed: false,
            flush_every: FLUSH_EVERY,
            last_turn_end: now,
        })
    }

    /// Flushes at the end of every turn, however fast they come (tests of a killed run).
    pub fn flush_every_turn(mut self) -> Self {
        self.flush_every = Duration::ZERO;
        self
    }

    /// The file being written.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Rows taken so far.
    pub fn rows(&self) -> u64 {
        self.rows
    }

    /// Adds one sample.
    pub fn append(&mut self, sample: &Sample) -> std::io::Result<()> {
        self.rows += 1;
        self.unflushed = true;
        match &self.columns {
            None => {
                self.held.push(sample.clone());
                if self.held.len() >= MAX_HELD_ROWS {
                    self.flush()?;
                }
                Ok(())
            }
            Some(_) => self.encode(sample),
        }
    }

    /// A turn ended: flushes when turns are slow (a turn of [`FLUSH_EVERY`] or more: a real
    /// engine's). Fast turns are flushed by [`StoreWriter::flush_pending`], which the session
    /// calls every [`FLUSH_EVERY`] from its own thread, so that an engine that hangs after fast
    /// turns leaves them on disk.
    pub fn turn_ended(&mut self) -> std::io::Result<()> {
        let now = Instant::now();
        let slow = now.duration_since(self.last_turn_end) >= self.flush_every;
        self.last_turn_end = now;
        if self.unflushed && slow {
            self.flush()?;
        }
        Ok(())
    }

    /// Flushes rows taken since the last flush, if any.
    pub fn flush_pending(&mut self) -> std::io::Result<()> {
        if self.unflushed {
            self.flush()?;
        }
        Ok(())
    }

    /// Compresses what is pending into complete blocks and writes them to the file.
    pub fn flush(&mut self) -> std::io::Result<()> {
        if self.columns.is_none() {
            self.write_header()?;
        }
        self.encoder.flush()?;
        self.unflushed = false;
        Ok(())
    }

    /// Ends the frame, syncs the file and returns how report.json references it.
    pub fn finish(mut self) -> std::io::Result<(PathBuf, StoreRef)> {
        if self.columns.is_none() {
            self.write_header()?;
        }
        let hashed = self.encoder.finish()?;
        hashed.file.sync_all()?;
        let sha256 = hex(&hashed.hash.finalize());
        Ok((
            self.path,
            StoreRef {
                store: SAMPLES_STORE.to_owned(),
                rows: self.rows,
                sha256,
            },
        ))
    }

    fn write_header(&mut self) -> std::io::Result<()> {
        let names: std::collections::BTreeSet<&'static str> =
            self.held.iter().flat_map(|s| s.metrics.keys()).collect();
        let columns: Vec<&'static str> = names
            .into_iter()
            .filter(|n| !RESERVED_COLUMNS.contains(n))
            .collect();
        self.line.clear();
        self.line.extend_from_slice(b"turn,phase,epoch,t_ms");
        for name in &columns {
            self.line.push(b',');
            push_field(&mut self.line, name);
        }
        // `key` is always written (an empty cell costs one byte a row): the rows that decide the
        // header may come before the first keyed turn.
        self.line.extend_from_slice(b",extra,key\n");
        self.encoder.write_all(&self.line)?;
        self.columns = Some(columns);
        for sample in std::mem::take(&mut self.held) {
            self.encode(&sample)?;
        }
        Ok(())
    }

    fn encode(&mut self, sample: &Sample) -> std::io::Result<()> {
        let columns = self.columns.as_deref().unwrap_or_default();
        let line = &mut self.line;
        line.clear();
        let _ = write!(
            line,
            "{},{},{},{}",
            sample.turn,
            phase_word(sample.phase),
            sample.epoch,
            sample.t_ms
        );
        let mut extra: Vec<(&str, u64)> = Vec::new();
        let mut next = 0;
        // Both ordered by name: one pass.
        for (name, value) in sample.metrics.iter() {
            match columns[next..].iter().position(|c| *c == name) {
                Some(at) => {
                    for _ in 0..=at {
                        line.push(b',');
                    }
                    let _ = write!(line, "{value}");
                    next += at + 1;
                }
                None => extra.push((name, *value)),
            }
        }
        for _ in next..columns.len() {
            line.push(b',');
        }
        line.push(b',');
        if !extra.is_empty() {
            let object: serde_json::Map<String, serde_json::Value> = extra
                .into_iter()
                .map(|(n, v)| (n.to_owned(), v.into()))
                .collect();
            push_field(line, &serde_json::Value::Object(object).to_string());
        }
        line.push(b',');
        if let Some(key) = &sample.key {
            push_field(line, key);
        }
        line.push(b'\n');
        self.encoder.write_all(line)
    }
}

/// The phase as the store (and report.json) words it.
fn phase_word(phase: Phase) -> &'static str {
    match phase {
        Phase::Load => "load",
        Phase::Reload => "reload",
        Phase::Open => "open",
        Phase::Generate => "generate",
        Phase::Close => "close",
        Phase::Idle => "idle",
    }
}

/// Appends `text` as one CSV field, quoted when it has to be.
fn push_field(line: &mut Vec<u8>, text: &str) {
    if text.contains([',', '"', '\n', '\r']) {
        line.push(b'"');
        line.extend_from_slice(text.replace('"', "\"\"").as_bytes());
        line.push(b'"');
    } else {
        line.extend_from_slice(text.as_bytes());
    }
}

fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write as _;
    bytes.iter().fold(String::new(), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}

/// Writes `samples` as a finished store in `dir` (a record built or read in memory whose store
/// was not streamed, or is gone), replacing any store there.
pub fn write_store(dir: &Path, samples: &[Sample]) -> Result<StoreRef, ReportError> {
    let mut writer = StoreWriter::create(dir)?;
    let path = writer.path().to_owned();
    let write_error = |source| ReportError::Write {
        path: path.clone(),
        source,
    };
    for sample in samples {
        writer.append(sample).map_err(write_error)?;
    }
    writer.finish().map(|(_, r)| r).map_err(write_error)
}

/// Reads the samples of a file of any form a run wrote: a sample store (`*.csv.zst`) or the
/// samples.jsonl of earlier leakloops. A store cut by a kill is read up to its last complete
/// row; a bad row anywhere else is an error naming its line.
pub fn read_samples(path: &Path) -> Result<StreamedSamples, ReportError> {
    if path.extension().is_some_and(|e| e == "jsonl") {
        return crate::report::samples::read_samples_jsonl(path);
    }
    let bytes = read_bounded(
        path,
        MAX_REPORT_BYTES,
        "a samples.csv.zst of a leakloop run is at most a few tens of MB",
    )?;
    decode(path, &bytes)
}

/// The samples recorded in the run folder `dir`: its store, else its samples.jsonl; `None`
/// when it has neither.
pub fn read_folder_samples(dir: &Path) -> Result<Option<StreamedSamples>, ReportError> {
    for name in [SAMPLES_STORE, SAMPLES_JSONL] {
        let path = dir.join(name);
        if path.exists() {
            return read_samples(&path).map(Some);
        }
    }
    Ok(None)
}

/// Reads the store a format 4 report (at `report`) references, checking that it is the file
/// the report was written with.
pub fn read_referenced(report: &Path, reference: &StoreRef) -> Result<Vec<Sample>, ReportError> {
    let implausible = |message: String| ReportError::Implausible {
        path: report.to_owned(),
        field: "record.samples".to_owned(),
        message,
    };
    let plain = Path::new(&reference.store);
    let mut parts = plain.components();
    if !matches!(
        (parts.next(), parts.next()),
        (Some(std::path::Component::Normal(_)), None)
    ) {
        return Err(implausible(format!(
            "store `{}` is not a file name in the report's folder",
            crate::input::printable(&reference.store)
        )));
    }
    let path = report
        .parent()
        .unwrap_or(Path::new("."))
        .join(&reference.store);
    let bytes = read_bounded(
        &path,
        MAX_REPORT_BYTES,
        "a samples.csv.zst of a leakloop run is at most a few tens of MB",
    )?;
    let digest = hex(&Sha256::digest(&bytes));
    if digest != reference.sha256 {
        return Err(implausible(format!(
            "{} is not the store this report was written with (its SHA-256 is {digest}, the \
             report names {}): it was replaced or altered",
            path.display(),
            crate::input::printable(&reference.sha256)
        )));
    }
    let read = decode(&path, &bytes)?;
    if read.torn_last_line || read.samples.len() as u64 != reference.rows {
        return Err(implausible(format!(
            "{} holds {} rows{}, the report names {}",
            path.display(),
            read.samples.len(),
            if read.torn_last_line {
                " and is cut off"
            } else {
                ""
            },
            reference.rows
        )));
    }
    Ok(read.samples)
}

/// Where each column of a store goes.
enum Column {
    Turn,
    Phase,
    Epoch,
    TMs,
    Extra,
    /// The turn's session id or shape.
    Key,
    Metric(String),
    /// A column this leakloop does not know (a later one): skipped.
    Other,
}

fn decode(path: &Path, bytes: &[u8]) -> Result<StreamedSamples, ReportError> {
    let parse_error = |line: u64, message: String| ReportError::Parse {
        path: path.to_owned(),
        line: line as usize,
        column: 0,
        field: None,
        message,
    };
    let decoder =
        zstd::stream::read::Decoder::with_buffer(BufReader::new(bytes)).map_err(|source| {
            ReportError::Read {
                path: path.to_owned(),
                source,
            }
        })?;
    let mut reader = csv::ReaderBuilder::new()
        .has_headers(false)
        .flexible(false)
        .from_reader(LimitedRead::new(decoder));
    let mut record = csv::ByteRecord::new();
    let mut samples = Vec::new();
    let mut columns: Option<Vec<Column>> = None;
    loop {
        let line = reader.position().line();
        match reader.read_byte_record(&mut record) {
            Ok(false) => {
                return Ok(StreamedSamples {
                    samples,
                    torn_last_line: false,
                })
            }
            Ok(true) => {}
            Err(e) => {
                if let csv::ErrorKind::Io(io) = e.kind() {
                    if io.kind() == std::io::ErrorKind::UnexpectedEof {
                        // A stream cut by a kill: what came before the cut stands.
                        return Ok(StreamedSamples {
                            samples,
                            torn_last_line: true,
                        });
                    }
                }
                return Err(parse_error(line, e.to_string()));
            }
        }
        let Some(columns) = &columns else {
            columns = Some(header(&record).map_err(|m| parse_error(line, m))?);
            continue;
        };
        samples.push(row(columns, &record).map_err(|m| parse_error(line, m))?);
    }
}

fn header(record: &csv::ByteRecord) -> Result<Vec<Column>, String> {
    let mut columns = Vec::with_capacity(record.len());
    for field in record {
        let name = std::str::from_utf8(field).map_err(|e| format!("header: {e}"))?;
        columns.push(match name {
            "turn" => Column::Turn,
            "phase" => Column::Phase,
            "epoch" => Column::Epoch,
            "t_ms" => Column::TMs,
            "extra" => Column::Extra,
            "key" => Column::Key,
            n if RESERVED_COLUMNS.contains(&n) => Column::Other,
            n => Column::Metric(n.to_owned()),
        });
    }
    for (needed, word) in [(0, "turn"), (1, "phase"), (2, "epoch"), (3, "t_ms")] {
        let found = columns.iter().any(|c| {
            matches!(
                (needed, c),
                (0, Column::Turn) | (1, Column::Phase) | (2, Column::Epoch) | (3, Column::TMs)
            )
        });
        if !found {
            return Err(format!(
                "not a leakloop sample store: the header has no `{word}` column"
            ));
        }
    }
    Ok(columns)
}

fn row(columns: &[Column], record: &csv::ByteRecord) -> Result<Sample, String> {
    let mut sample = Sample {
        turn: 0,
        phase: Phase::Load,
        epoch: 0,
        t_ms: 0.0,
        metrics: Metrics::new(),
        key: None,
    };
    for (column, field) in columns.iter().zip(record) {
        let text = std::str::from_utf8(field).map_err(|e| e.to_string())?;
        let bad = |what: &str| format!("`{}` is not {what}", crate::input::shorten(text, 40));
        match column {
            Column::Turn => sample.turn = text.parse().map_err(|_| bad("a turn"))?,
            Column::Phase => {
                sample.phase = Phase::deserialize(serde::de::value::StrDeserializer::<
                    serde::de::value::Error,
                >::new(text))
                .map_err(|e| format!("phase: {e}"))?
            }
            Column::Epoch => sample.epoch = text.parse().map_err(|_| bad("an epoch"))?,
            Column::TMs => sample.t_ms = text.parse().map_err(|_| bad("a time in ms"))?,
            Column::Metric(name) if !text.is_empty() => {
                let value: u64 = text.parse().map_err(|_| bad("a number of bytes"))?;
                sample.metrics.insert(name, value);
            }
            Column::Extra if !text.is_empty() => {
                let extra: std::collections::BTreeMap<String, u64> =
                    serde_json::from_str(text).map_err(|e| format!("extra: {e}"))?;
                sample.metrics.extend(extra);
            }
            Column::Key if !text.is_empty() => sample.key = Some(text.to_owned()),
            Column::Metric(_) | Column::Extra | Column::Key | Column::Other => {}
        }
    }
    Ok(sample)
}

/// Stops decompressing past [`MAX_REPORT_BYTES`] of CSV: a small file that inflates without
/// end is refused, not held.
struct LimitedRead<R> {
    inner: R,
    left: u64,
}

impl<R> LimitedRead<R> {
    fn new(inner: R) -> Self {
        Self {
            inner,
            left: MAX_REPORT_BYTES * 4,
        }
    }
}

impl<R: Read> Read for LimitedRead<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if self.left == 0 {
            return Err(std::io::Error::other(
                "the store inflates past 2 GiB of CSV: not a leakloop sample store",
            ));
        }
        let max = buf
            .len()
            .min(usize::try_from(self.left).unwrap_or(usize::MAX));
        let n = self.inner.read(&mut buf[..max])?;
        self.left -= n as u64;
        Ok(n)
    }
}

#[cfg(test)]
mod tests;
