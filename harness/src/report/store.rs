//! The sample store: every sample of a run, once, in `samples.parquet` next to its report.json
//! (see docs/report-format.md, "The sample store").
//!
//! Layout ([`parquet`]): one row per sample, columns `turn`, `phase`, `epoch`, `t_ms`, one
//! column per metric (bytes; null: the sample has no such metric), `extra` (a JSON object of the
//! metrics of a sample that were not known when the columns were chosen, null almost always)
//! and `key` (the turn's session id or shape, null: none). Integers are delta-encoded and every
//! column chunk zstd-compressed: a leaky simulator run takes about 10 bytes a sample. Column
//! names in [`RESERVED_COLUMNS`] are never metrics; a reader looks columns up by name.
//!
//! Written as the run goes ([`StoreWriter`]): at the end of each slow turn, and at least every
//! [`FLUSH_EVERY`] while rows are pending, the pending rows reach the disk. When they are many
//! (fast turns: a simulator's million) they become a row group followed by a footer that names
//! every row group so far, so the file is readable up to there whatever happens next; when they
//! are few (a real engine's turn) they are appended to a journal, `samples.tail.jsonl` (one JSON
//! sample a line), which is emptied each time its rows go into a row group and removed when the
//! run finishes. A killed run thus leaves a Parquet file readable up to its last footer and a
//! journal of what followed; [`read_folder_samples`] reads both (and says the store was cut).
//! Parquet readers (pandas, polars, DuckDB) read a finished store directly; DuckDB and pyarrow
//! read the row groups of a killed one too, up to its last footer, when told where it ends.
//!
//! report.json (format 5) references the store by name, row count and SHA-256 of its bytes
//! ([`StoreRef`]); every reader of samples comes here ([`read_samples`]), which also reads the
//! older forms (the `samples.csv.zst` of format 4, samples embedded in report.json,
//! samples.jsonl).

mod csv;
pub mod parquet;

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::input::{read_bounded, MAX_REPORT_BYTES};
use crate::report::artifacts::{SAMPLES_CSV_ZST, SAMPLES_JSONL, SAMPLES_STORE, SAMPLES_TAIL};
use crate::report::out_dir::{create_folder, remove_if_present, FILE_MODE};
use crate::report::ReportError;
use crate::runner::{Sample, Samples};

pub use parquet::RESERVED_COLUMNS;

/// The longest a flushed turn waits before its rows reach the file, when turns come faster
/// than this (a simulator); slower turns (a real engine) are flushed at the end of each.
pub const FLUSH_EVERY: Duration = Duration::from_millis(100);

/// Pending rows from which a flush writes a row group rather than the journal: fewer would make
/// many small row groups, each with a footer naming all before it.
pub const GROUP_ROWS: usize = 8192;

/// Rows pending at most: a flush is forced when this many were taken since the last one (a row
/// group of at most this many rows; about 200 bytes each in memory).
const MAX_PENDING_ROWS: usize = 65_536;

/// How report.json (format 4 and later) names its sample store.
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

/// The most metric cells (samples times metric columns, [`Samples::metric_cells`]) a file's
/// samples are read with. A column costs about 0.3 bytes a row even where it is empty, so a
/// foreign file declaring thousands of mostly empty metrics over millions of rows would take
/// gigabytes; 2^30 cells bounds the columns to about 320 MiB where they are empty, and is over a
/// hundred times what a million-turn run of the simulator's metrics holds.
pub const MAX_SAMPLE_CELLS: u64 = 1 << 30;

/// Appends a sample read from a file, refusing one that takes the samples past
/// [`MAX_SAMPLE_CELLS`] (the message says why; the reader adds where).
pub(crate) fn push_read(samples: &mut Samples, sample: &Sample) -> Result<(), String> {
    push_within(samples, sample, MAX_SAMPLE_CELLS)
}

/// [`push_read`] with another bound than [`MAX_SAMPLE_CELLS`].
pub(crate) fn push_within(
    samples: &mut Samples,
    sample: &Sample,
    cells: u64,
) -> Result<(), String> {
    samples.push(sample);
    within(samples, cells)
}

fn within(samples: &Samples, cells: u64) -> Result<(), String> {
    match samples.metric_cells() > cells {
        true => Err(format!(
            "more than {cells} metric values ({} samples of {} metrics): not a leakloop run's \
             samples",
            samples.len(),
            samples.metric_names().count()
        )),
        false => Ok(()),
    }
}

/// What a store or samples.jsonl held.
#[derive(Debug, Clone, PartialEq)]
pub struct StreamedSamples {
    /// Every complete sample, in order.
    pub samples: Samples,
    /// Whether the file ended in the middle of a row or of its compressed stream, or the store
    /// was left unfinished (the run was killed while writing it); what followed the last
    /// complete row is ignored.
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

/// Where the Parquet file stands.
enum Body {
    /// Created, empty: the metric columns are chosen by the first row group.
    Empty(Hashed),
    /// Row groups are being written.
    Writing {
        writer: Box<parquet::FileWriter<Hashed>>,
        metrics: Vec<&'static str>,
    },
    /// Between two states (only while a call runs), or after a failed write.
    Broken,
}

/// Writes a sample store row by row.
pub struct StoreWriter {
    path: PathBuf,
    body: Body,
    /// Rows not yet in a row group.
    pending: Samples,
    /// How many of `pending` (its first ones) are in the journal.
    journaled: usize,
    journal: Option<File>,
    journal_path: PathBuf,
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

/// Creates `path` exclusively (mode 0666 less the umask), never through a symlink; for
/// appending when `append`.
fn create_new(path: &Path, append: bool) -> Result<File, ReportError> {
    remove_if_present(path)?;
    OpenOptions::new()
        .write(true)
        .append(append)
        .create_new(true)
        .mode(FILE_MODE)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
        .map_err(|source| ReportError::Write {
            path: path.to_owned(),
            source,
        })
}

fn parquet_error(e: ::parquet::errors::ParquetError) -> std::io::Error {
    match e {
        ::parquet::errors::ParquetError::External(inner) => {
            match inner.downcast::<std::io::Error>() {
                Ok(io) => *io,
                Err(other) => std::io::Error::other(other),
            }
        }
        other => std::io::Error::other(other),
    }
}

impl StoreWriter {
    /// Creates a new, empty `dir/samples.parquet` (mode 0666 less the umask), creating `dir` if
    /// needed, and removes a journal left there. An existing file of that name is removed first,
    /// and the new one is created exclusively, so a symlink planted in its place is removed,
    /// never written through.
    pub fn create(dir: &Path) -> Result<Self, ReportError> {
        create_folder(dir)?;
        let path = dir.join(SAMPLES_STORE);
        let file = create_new(&path, false)?;
        let journal_path = dir.join(SAMPLES_TAIL);
        remove_if_present(&journal_path)?;
        Ok(Self {
            path,
            body: Body::Empty(Hashed {
                file,
                hash: Sha256::new(),
            }),
            pending: Samples::new(),
            journaled: 0,
            journal: None,
            journal_path,
            line: Vec::with_capacity(256),
            rows: 0,
            unflushed: false,
            flush_every: FLUSH_EVERY,
            last_turn_end: Instant::now(),
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
        self.pending.push(sample);
        if self.pending.len() >= MAX_PENDING_ROWS {
            self.flush()?;
        }
        Ok(())
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

    /// Puts what is pending on disk: as a row group (and a footer) when [`GROUP_ROWS`] or more
    /// rows are pending, else in the journal.
    pub fn flush(&mut self) -> std::io::Result<()> {
        if self.pending.len() >= GROUP_ROWS {
            self.write_group(true)?;
        } else {
            self.journal_pending()?;
        }
        self.unflushed = false;
        Ok(())
    }

    /// Appends the pending rows not yet in the journal to it.
    fn journal_pending(&mut self) -> std::io::Result<()> {
        if self.journaled == self.pending.len() {
            return Ok(());
        }
        if self.journal.is_none() {
            let file = create_new(&self.journal_path, true)
                .map_err(|e| std::io::Error::other(e.to_string()))?;
            self.journal = Some(file);
        }
        self.line.clear();
        for sample in self.pending.iter().skip(self.journaled) {
            serde_json::to_writer(&mut self.line, &sample)?;
            self.line.push(b'\n');
        }
        if let Some(journal) = &mut self.journal {
            journal.write_all(&self.line)?;
        }
        self.journaled = self.pending.len();
        Ok(())
    }

    /// Writes the pending rows as one row group (followed by a footer when `footer`), then
    /// empties the journal, whose rows are now in the file.
    fn write_group(&mut self, footer: bool) -> std::io::Result<()> {
        let (mut writer, metrics) = match std::mem::replace(&mut self.body, Body::Broken) {
            Body::Writing { writer, metrics } => (writer, metrics),
            Body::Empty(sink) => {
                let metrics: Vec<&'static str> = self
                    .pending
                    .metric_names()
                    .filter(|n| !RESERVED_COLUMNS.contains(n))
                    .collect();
                let writer = parquet::start(sink, &metrics).map_err(parquet_error)?;
                (Box::new(writer), metrics)
            }
            Body::Broken => {
                return Err(std::io::Error::other(
                    "an earlier write of this store failed",
                ))
            }
        };
        if !self.pending.is_empty() {
            parquet::write_group(&mut writer, &metrics, &self.pending, footer)
                .map_err(parquet_error)?;
        }
        self.body = Body::Writing { writer, metrics };
        self.pending.clear();
        self.journaled = 0;
        if let Some(journal) = &mut self.journal {
            journal.set_len(0)?;
        }
        Ok(())
    }

    /// Writes what is pending and the final footer, syncs the file, removes the journal and
    /// returns how report.json references the store.
    pub fn finish(mut self) -> std::io::Result<(PathBuf, StoreRef)> {
        self.write_group(false)?;
        let Body::Writing { writer, .. } = std::mem::replace(&mut self.body, Body::Broken) else {
            unreachable!("write_group leaves a writer")
        };
        let hashed = writer.into_inner().map_err(parquet_error)?;
        hashed.file.sync_all()?;
        if self.journal.take().is_some() {
            std::fs::remove_file(&self.journal_path)?;
        }
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
pub fn write_store(dir: &Path, samples: &Samples) -> Result<StoreRef, ReportError> {
    let mut writer = StoreWriter::create(dir)?;
    let path = writer.path().to_owned();
    let write_error = |source| ReportError::Write {
        path: path.clone(),
        source,
    };
    for sample in samples {
        writer.append(&sample).map_err(write_error)?;
    }
    writer.finish().map(|(_, r)| r).map_err(write_error)
}

/// Reads the samples of a file of any form a run wrote: a sample store (`samples.parquet`,
/// with the journal a killed run left next to it; the `*.csv.zst` of format 4) or the
/// samples.jsonl of earlier leakloops. A store cut by a kill is read up to its last complete
/// row; a bad row anywhere else is an error naming its line or column.
pub fn read_samples(path: &Path) -> Result<StreamedSamples, ReportError> {
    let name = path
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or_default();
    if name.ends_with(".jsonl") {
        return crate::report::samples::read_samples_jsonl(path);
    }
    let bytes = read_store_bytes(path)?;
    let mut read = decode_store(path, name, bytes)?;
    let journal = path.with_file_name(SAMPLES_TAIL);
    if read.journaled && journal.exists() {
        let tail = crate::report::samples::read_samples_jsonl(&journal)?;
        let from = read.samples.len() - read.last_group_rows;
        let copied = tail.samples.len() <= read.last_group_rows
            && tail
                .samples
                .iter()
                .enumerate()
                .all(|(i, sample)| read.samples.get(from + i).as_ref() == Some(&sample));
        if !copied {
            for sample in tail.samples.iter() {
                push_read(&mut read.samples, &sample).map_err(|message| ReportError::Parse {
                    path: journal.clone(),
                    line: 0,
                    column: 0,
                    field: None,
                    message,
                })?;
            }
        }
        read.cut = true;
    }
    Ok(StreamedSamples {
        samples: read.samples,
        torn_last_line: read.cut,
    })
}

fn read_store_bytes(path: &Path) -> Result<Vec<u8>, ReportError> {
    Ok(read_bounded(
        path,
        MAX_REPORT_BYTES,
        "the sample store of a leakloop run is at most a few tens of MB",
    )?)
}

/// A store's samples as its bytes hold them.
struct Decoded {
    samples: Samples,
    /// Read up to a cut (a torn last CSV row, a Parquet file without its last footer).
    cut: bool,
    /// Rows of the last Parquet row group (a journal repeating them is a copy).
    last_group_rows: usize,
    /// Whether a journal of later rows may follow (the Parquet store's).
    journaled: bool,
}

/// Decodes a store's bytes by the form its file `name` says: the CSV of format 4
/// (`*.csv.zst`), else Parquet.
fn decode_store(path: &Path, name: &str, bytes: Vec<u8>) -> Result<Decoded, ReportError> {
    if name.ends_with(".csv.zst") {
        let read = csv::decode(path, &bytes)?;
        return Ok(Decoded {
            samples: read.samples,
            cut: read.torn_last_line,
            last_group_rows: 0,
            journaled: false,
        });
    }
    let read = parquet::read(bytes).map_err(|message| ReportError::Parse {
        path: path.to_owned(),
        line: 0,
        column: 0,
        field: None,
        message,
    })?;
    Ok(Decoded {
        samples: read.samples,
        cut: read.cut,
        last_group_rows: read.last_group_rows,
        journaled: true,
    })
}

/// The samples recorded in the run folder `dir`: its store (with the journal of a killed run),
/// else its format 4 store, else its samples.jsonl; `None` when it has none.
pub fn read_folder_samples(dir: &Path) -> Result<Option<StreamedSamples>, ReportError> {
    for name in [SAMPLES_STORE, SAMPLES_CSV_ZST, SAMPLES_JSONL] {
        let path = dir.join(name);
        if path.exists() {
            return read_samples(&path).map(Some);
        }
    }
    if dir.join(SAMPLES_TAIL).exists() {
        // Killed before the store was created (or with it removed): the journal alone.
        return crate::report::samples::read_samples_jsonl(&dir.join(SAMPLES_TAIL)).map(|mut s| {
            s.torn_last_line = true;
            Some(s)
        });
    }
    Ok(None)
}

/// Reads the store a format 4 or 5 report (at `report`) references, checking that it is the
/// file the report was written with.
pub fn read_referenced(report: &Path, reference: &StoreRef) -> Result<Samples, ReportError> {
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
    let bytes = read_store_bytes(&path)?;
    let digest = hex(&Sha256::digest(&bytes));
    if digest != reference.sha256 {
        return Err(implausible(format!(
            "{} is not the store this report was written with (its SHA-256 is {digest}, the \
             report names {}): it was replaced or altered",
            path.display(),
            crate::input::printable(&reference.sha256)
        )));
    }
    let Decoded { samples, cut, .. } = decode_store(&path, &reference.store, bytes)?;
    if cut || samples.len() as u64 != reference.rows {
        return Err(implausible(format!(
            "{} holds {} rows{}, the report names {}",
            path.display(),
            samples.len(),
            if cut { " and is cut off" } else { "" },
            reference.rows
        )));
    }
    Ok(samples)
}

/// Where each column of a store goes (the Parquet store and format 4's CSV name their columns
/// alike).
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

impl Column {
    fn named(name: &str) -> Self {
        match name {
            "turn" => Column::Turn,
            "phase" => Column::Phase,
            "epoch" => Column::Epoch,
            "t_ms" => Column::TMs,
            "extra" => Column::Extra,
            "key" => Column::Key,
            n if RESERVED_COLUMNS.contains(&n) => Column::Other,
            n => Column::Metric(n.to_owned()),
        }
    }
}

/// The first column every store has that `columns` lack, if any.
fn missing_column<'a>(
    columns: impl IntoIterator<Item = &'a Column> + Clone,
) -> Option<&'static str> {
    let has = |wanted: fn(&Column) -> bool| columns.clone().into_iter().any(wanted);
    if !has(|c| matches!(c, Column::Turn)) {
        Some("turn")
    } else if !has(|c| matches!(c, Column::Phase)) {
        Some("phase")
    } else if !has(|c| matches!(c, Column::Epoch)) {
        Some("epoch")
    } else if !has(|c| matches!(c, Column::TMs)) {
        Some("t_ms")
    } else {
        None
    }
}

#[cfg(test)]
mod tests;
