//! The Parquet side of the sample store: the schema of `samples.parquet`, the writing of one row
//! group of samples (and of a footer after it, so that the file reads up to there if the run is
//! killed before the next), and the reading of such a file back into samples, a cut one
//! included.
//!
//! Columns: `turn` and `epoch` (UINT_32, delta-encoded), `phase` (string, dictionary), `t_ms`
//! (double, byte-stream-split), one optional UINT_64 column per metric (delta-encoded), `extra`
//! (optional string: a JSON object of the metrics a sample had that were not known when the
//! columns were chosen) and `key` (optional string, dictionary). Every column chunk is compressed
//! with zstd; there are no statistics and no page index (a store is read whole).

use std::io::Write;
use std::sync::Arc;

use bytes::Bytes;
use parquet::basic::{
    Compression, Encoding, IntType, LogicalType, Repetition, Type as PhysicalType, ZstdLevel,
};
use parquet::column::reader::ColumnReader;
use parquet::column::writer::ColumnWriter;
use parquet::data_type::ByteArray;
use parquet::file::metadata::{FileMetaData, ParquetMetaData, ParquetMetaDataWriter};
use parquet::file::properties::{EnabledStatistics, WriterProperties, WriterVersion};
use parquet::file::reader::{FileReader, RowGroupReader};
use parquet::file::serialized_reader::SerializedFileReader;
use parquet::file::writer::SerializedFileWriter;
use parquet::schema::types::{ColumnPath, SchemaDescriptor, Type};

use crate::report::store::{missing_column, push_within, Column, MAX_SAMPLE_CELLS};
use crate::runner::{Phase, Sample, Samples};

/// Columns that are never metrics: the sample's own fields, the overflow column, and the
/// request key some runs record per turn.
pub const RESERVED_COLUMNS: &[&str] = &["turn", "phase", "epoch", "t_ms", "extra", "key"];

/// The zstd level of every column chunk (zstd's default): the delta-packed columns are already
/// near their entropy, so higher levels save little and cost the turn loop.
const LEVEL: i32 = 3;

/// The Parquet file writer of a store.
pub type FileWriter<W> = SerializedFileWriter<W>;

/// The Parquet schema of a store whose metric columns are `metrics`.
fn schema(metrics: &[&'static str]) -> parquet::errors::Result<Type> {
    let unsigned = |bit_width| {
        LogicalType::Integer(IntType {
            bit_width,
            is_signed: false,
        })
    };
    let mut fields = vec![
        Type::primitive_type_builder("turn", PhysicalType::INT32)
            .with_repetition(Repetition::REQUIRED)
            .with_logical_type(Some(unsigned(32)))
            .build()?,
        Type::primitive_type_builder("phase", PhysicalType::BYTE_ARRAY)
            .with_repetition(Repetition::REQUIRED)
            .with_logical_type(Some(LogicalType::String))
            .build()?,
        Type::primitive_type_builder("epoch", PhysicalType::INT32)
            .with_repetition(Repetition::REQUIRED)
            .with_logical_type(Some(unsigned(32)))
            .build()?,
        Type::primitive_type_builder("t_ms", PhysicalType::DOUBLE)
            .with_repetition(Repetition::REQUIRED)
            .build()?,
    ];
    for name in metrics {
        fields.push(
            Type::primitive_type_builder(name, PhysicalType::INT64)
                .with_repetition(Repetition::OPTIONAL)
                .with_logical_type(Some(unsigned(64)))
                .build()?,
        );
    }
    for name in ["extra", "key"] {
        fields.push(
            Type::primitive_type_builder(name, PhysicalType::BYTE_ARRAY)
                .with_repetition(Repetition::OPTIONAL)
                .with_logical_type(Some(LogicalType::String))
                .build()?,
        );
    }
    Type::group_type_builder("leakloop_samples")
        .with_fields(fields.into_iter().map(Arc::new).collect())
        .build()
}

/// How each column is encoded: integers delta-packed (a memory series moves by small steps),
/// times byte-stream-split, the phase and key as a dictionary.
fn properties(metrics: &[&'static str]) -> parquet::errors::Result<WriterProperties> {
    let mut builder = WriterProperties::builder()
        .set_writer_version(WriterVersion::PARQUET_1_0)
        .set_created_by(format!("leakloop {}", env!("CARGO_PKG_VERSION")))
        .set_compression(Compression::ZSTD(ZstdLevel::try_new(LEVEL)?))
        .set_statistics_enabled(EnabledStatistics::None)
        .set_offset_index_disabled(true)
        .set_dictionary_enabled(false);
    for name in ["turn", "epoch"].iter().chain(metrics) {
        builder = builder.set_column_encoding(
            ColumnPath::from(vec![(*name).to_owned()]),
            Encoding::DELTA_BINARY_PACKED,
        );
    }
    builder = builder.set_column_encoding(ColumnPath::from("t_ms"), Encoding::BYTE_STREAM_SPLIT);
    for name in ["phase", "key"] {
        builder = builder.set_column_dictionary_enabled(ColumnPath::from(name), true);
    }
    Ok(builder.build())
}

/// Starts a Parquet file with metric columns `metrics` on `sink` (writes the leading magic).
pub fn start<W: Write + Send>(
    sink: W,
    metrics: &[&'static str],
) -> parquet::errors::Result<FileWriter<W>> {
    SerializedFileWriter::new(
        sink,
        Arc::new(schema(metrics)?),
        Arc::new(properties(metrics)?),
    )
}

/// The phase as the store (and report.json) words it.
pub fn phase_word(phase: Phase) -> &'static str {
    match phase {
        Phase::Load => "load",
        Phase::Reload => "reload",
        Phase::Open => "open",
        Phase::Generate => "generate",
        Phase::Close => "close",
        Phase::Idle => "idle",
    }
}

fn phase_of(word: &[u8]) -> Option<Phase> {
    Some(match word {
        b"load" => Phase::Load,
        b"reload" => Phase::Reload,
        b"open" => Phase::Open,
        b"generate" => Phase::Generate,
        b"close" => Phase::Close,
        b"idle" => Phase::Idle,
        _ => return None,
    })
}

/// One optional column being filled: values and definition levels (1: present, 0: null).
#[derive(Default)]
struct Optional<T> {
    values: Vec<T>,
    defined: Vec<i16>,
}

impl<T> Optional<T> {
    fn push(&mut self, value: Option<T>) {
        match value {
            Some(v) => {
                self.values.push(v);
                self.defined.push(1);
            }
            None => self.defined.push(0),
        }
    }
}

/// Writes `samples` as one row group, then (when `footer`) a footer naming every row group so
/// far, so that the file reads up to here however the run ends. `metrics` are the file's metric
/// columns.
pub fn write_group<W: Write + Send>(
    writer: &mut FileWriter<W>,
    metrics: &[&'static str],
    samples: &Samples,
    footer: bool,
) -> parquet::errors::Result<()> {
    let n = samples.len();
    // The u32 and u64 fields are stored as Parquet's signed integers of their width with an
    // unsigned logical type: the bits are the same.
    let turn: Vec<i32> = (0..n)
        .map(|row| samples.turn(row).unwrap_or(0) as i32)
        .collect();
    let epoch: Vec<i32> = (0..n).map(|row| samples.epoch(row) as i32).collect();
    let t_ms: Vec<f64> = (0..n)
        .map(|row| samples.time_ms(row).unwrap_or(0.0))
        .collect();
    let phase: Vec<ByteArray> = samples
        .phases()
        .iter()
        .map(|p| ByteArray::from(phase_word(*p)))
        .collect();
    let columns: Vec<Optional<i64>> = metrics
        .iter()
        .map(|name| {
            let mut column = Optional::default();
            match samples.metric(name) {
                Some(values) => {
                    for value in values.iter() {
                        column.push(value.map(|v| v as i64));
                    }
                }
                None => column.defined.resize(n, 0),
            }
            column
        })
        .collect();
    // Metrics first seen after the file's columns were chosen go into `extra`, as JSON.
    let others: Vec<(&'static str, crate::runner::MetricValues<'_>)> = samples
        .metric_names()
        .filter(|name| !metrics.contains(name))
        .filter_map(|name| samples.metric(name).map(|values| (name, values)))
        .collect();
    let mut extra = Optional::<ByteArray>::default();
    let mut key = Optional::<ByteArray>::default();
    for row in 0..n {
        let object: serde_json::Map<String, serde_json::Value> = others
            .iter()
            .filter_map(|(name, values)| values.get(row).map(|v| ((*name).to_owned(), v.into())))
            .collect();
        extra.push(
            (!object.is_empty()).then(|| {
                ByteArray::from(serde_json::Value::Object(object).to_string().into_bytes())
            }),
        );
        key.push(samples.key(row).map(ByteArray::from));
    }
    let mut group = writer.next_row_group()?;
    let mut at = 0;
    while let Some(mut column) = group.next_column()? {
        match column.untyped() {
            ColumnWriter::Int32ColumnWriter(w) => {
                let values = if at == 0 { &turn } else { &epoch };
                w.write_batch(values, None, None)?;
            }
            ColumnWriter::DoubleColumnWriter(w) => {
                w.write_batch(&t_ms, None, None)?;
            }
            ColumnWriter::ByteArrayColumnWriter(w) => {
                if at == 1 {
                    w.write_batch(&phase, None, None)?;
                } else {
                    let column = if at == 4 + metrics.len() {
                        &extra
                    } else {
                        &key
                    };
                    w.write_batch(&column.values, Some(&column.defined), None)?;
                }
            }
            ColumnWriter::Int64ColumnWriter(w) => {
                let column = &columns[at - 4];
                w.write_batch(&column.values, Some(&column.defined), None)?;
            }
            _ => unreachable!("the store's schema has no other column types"),
        }
        column.close()?;
        at += 1;
    }
    group.close()?;
    if footer {
        write_footer(writer)?;
    }
    Ok(())
}

/// Writes a footer of the row groups written so far into the file's byte stream (Parquet readers
/// find column chunks by their offsets, so bytes between row groups are skipped), and flushes.
fn write_footer<W: Write + Send>(writer: &mut FileWriter<W>) -> parquet::errors::Result<()> {
    let groups = writer.flushed_row_groups().to_vec();
    let rows = groups.iter().map(|g| g.num_rows()).sum();
    let file = FileMetaData::new(
        1,
        rows,
        writer.properties().created_by().to_owned().into(),
        None,
        Arc::new(SchemaDescriptor::new(
            writer.schema_descr().root_schema_ptr(),
        )),
        None,
    );
    let metadata = ParquetMetaData::new(file, groups);
    let mut footer = Vec::new();
    ParquetMetaDataWriter::new(&mut footer, &metadata).finish()?;
    writer.write_all(&footer)?;
    writer.flush()?;
    Ok(())
}

/// What a Parquet store held.
#[derive(Debug)]
pub struct ReadParquet {
    /// Every sample, in order.
    pub samples: Samples,
    /// Rows of the last row group (a journal that repeats them is a copy, see the store).
    pub last_group_rows: usize,
    /// The file did not end with a footer: it was read up to the last footer in it.
    pub cut: bool,
}

/// The most samples a store is read with: a footer that claims more (a damaged or foreign file)
/// is refused before anything is allocated for them (a sample takes about 60 bytes in memory).
pub const MAX_ROWS: i64 = 20_000_000;

/// Reads a store's Parquet bytes. A file with no footer at its end (a run killed while writing
/// a row group) is read up to the last footer in it; an empty file holds no samples. A file the
/// Parquet reader cannot take (even one that makes it panic) is an error, never a crash.
pub fn read(bytes: Vec<u8>) -> Result<ReadParquet, String> {
    read_within(bytes, MAX_SAMPLE_CELLS)
}

/// [`read`], refusing more than `cells` metric values.
pub(super) fn read_within(bytes: Vec<u8>, cells: u64) -> Result<ReadParquet, String> {
    std::panic::catch_unwind(move || read_unguarded(bytes, cells)).unwrap_or_else(|_| {
        Err("not a readable Parquet file: the Parquet reader failed on it".to_owned())
    })
}

fn read_unguarded(bytes: Vec<u8>, cells: u64) -> Result<ReadParquet, String> {
    if bytes.is_empty() {
        return Ok(ReadParquet {
            samples: Samples::new(),
            last_group_rows: 0,
            cut: false,
        });
    }
    let bytes = Bytes::from(bytes);
    let whole = SerializedFileReader::new(bytes.clone());
    let (reader, cut) = match whole {
        Ok(reader) => (reader, false),
        Err(first) => {
            if bytes.ends_with(b"PAR1") || !bytes.starts_with(b"PAR1") {
                return Err(format!("not a readable Parquet file: {first}"));
            }
            (
                last_footer(&bytes).ok_or_else(|| {
                    format!("cut before its first footer: no sample can be read ({first})")
                })?,
                true,
            )
        }
    };
    let rows = reader
        .metadata()
        .row_groups()
        .iter()
        .try_fold(0i64, |sum, g| {
            sum.checked_add(g.num_rows())
                .filter(|n| (0..=MAX_ROWS).contains(n))
        });
    let Some(rows) = rows else {
        return Err(format!(
            "its footer claims more than {MAX_ROWS} samples (or a negative count): not a \
             leakloop sample store"
        ));
    };
    // Refused before anything is allocated for them, as too many rows are.
    let schema = reader.metadata().file_metadata().schema_descr();
    let metrics = (0..schema.num_columns())
        .filter(|&c| matches!(Column::named(schema.column(c).name()), Column::Metric(_)))
        .count() as u64;
    if (rows as u64).saturating_mul(metrics) > cells {
        return Err(format!(
            "its footer claims {rows} samples of {metrics} metrics, more than {cells} values: \
             not a leakloop sample store"
        ));
    }
    let mut samples = Samples::new();
    let mut last_group_rows = 0;
    for g in 0..reader.num_row_groups() {
        let group = reader.get_row_group(g).map_err(|e| e.to_string())?;
        last_group_rows = read_group(group.as_ref(), &mut samples, cells)?;
    }
    Ok(ReadParquet {
        samples,
        last_group_rows,
        cut,
    })
}

/// The file up to the last footer that reads, searched from the end.
fn last_footer(bytes: &Bytes) -> Option<SerializedFileReader<Bytes>> {
    let mut end = bytes.len();
    while end > 8 {
        let at = bytes[4..end].windows(4).rposition(|w| w == b"PAR1")? + 4;
        if let Ok(reader) = SerializedFileReader::new(bytes.slice(..at + 4)) {
            return Some(reader);
        }
        end = at + 3;
    }
    None
}

/// Rows decoded at a time from every column of a row group: what a group costs in memory
/// while it is read, whatever number of rows its footer declares (a column of one repeated
/// value holds millions of rows in a few bytes).
const BATCH: usize = 65_536;

/// Reads a row group into `samples`, [`BATCH`] rows at a time; returns its rows.
fn read_group(
    group: &dyn RowGroupReader,
    samples: &mut Samples,
    cells: u64,
) -> Result<usize, String> {
    let rows = usize::try_from(group.metadata().num_rows())
        .map_err(|_| "a row group of a negative number of rows".to_owned())?;
    let schema = group.metadata().schema_descr();
    let mut columns = Vec::with_capacity(group.num_columns());
    let mut readers = Vec::with_capacity(group.num_columns());
    for c in 0..group.num_columns() {
        let name = schema.column(c).name().to_owned();
        let column = Column::named(&name);
        let wrong =
            |what: &str| format!("column `{}` is not {what}", crate::input::printable(&name));
        let reader = group.get_column_reader(c).map_err(|e| e.to_string())?;
        let fits = matches!(
            (&column, &reader),
            (
                Column::Turn | Column::Epoch,
                ColumnReader::Int32ColumnReader(_)
            ) | (Column::TMs, ColumnReader::DoubleColumnReader(_))
                | (Column::Metric(_), ColumnReader::Int64ColumnReader(_))
                | (
                    Column::Phase | Column::Extra | Column::Key,
                    ColumnReader::ByteArrayColumnReader(_)
                )
                | (Column::Other, _)
        );
        if !fits {
            return Err(wrong(match column {
                Column::Metric(_) => "a column of 64-bit integers",
                Column::Turn | Column::Epoch => "a column of 32-bit integers",
                Column::TMs => "a column of doubles",
                _ => "a column of strings",
            }));
        }
        columns.push(column);
        readers.push((name, reader));
    }
    if let Some(word) = missing_column(&columns) {
        return Err(format!(
            "not a leakloop sample store: it has no `{word}` column"
        ));
    }
    let mut done = 0;
    while done < rows {
        let want = BATCH.min(rows - done);
        let mut chunk: Vec<Sample> = (0..want).map(|_| Sample::placeholder()).collect();
        for (column, (name, reader)) in columns.iter().zip(&mut readers) {
            read_batch(column, name, reader, &mut chunk)?;
        }
        for sample in &chunk {
            push_within(samples, sample, cells)?;
        }
        done += want;
    }
    Ok(rows)
}

/// Reads the next `chunk.len()` rows of one column into the chunk's samples.
fn read_batch(
    column: &Column,
    name: &str,
    reader: &mut ColumnReader,
    chunk: &mut [Sample],
) -> Result<(), String> {
    let n = chunk.len();
    let wrong = |what: &str| format!("column `{}` is not {what}", crate::input::printable(name));
    match (column, reader) {
        (Column::Turn, ColumnReader::Int32ColumnReader(r)) => {
            let values = read_all(n, |k, d, v| r.read_records(k, Some(d), None, v))?;
            for (sample, v) in chunk.iter_mut().zip(values.each()) {
                sample.turn = v.ok_or_else(|| wrong("filled"))? as u32;
            }
        }
        (Column::Epoch, ColumnReader::Int32ColumnReader(r)) => {
            let values = read_all(n, |k, d, v| r.read_records(k, Some(d), None, v))?;
            for (sample, v) in chunk.iter_mut().zip(values.each()) {
                sample.epoch = v.ok_or_else(|| wrong("filled"))? as u32;
            }
        }
        (Column::TMs, ColumnReader::DoubleColumnReader(r)) => {
            let values = read_all(n, |k, d, v| r.read_records(k, Some(d), None, v))?;
            for (sample, v) in chunk.iter_mut().zip(values.each()) {
                sample.t_ms = v.ok_or_else(|| wrong("filled"))?;
            }
        }
        (Column::Phase, ColumnReader::ByteArrayColumnReader(r)) => {
            let values = read_all(n, |k, d, v| r.read_records(k, Some(d), None, v))?;
            for (sample, v) in chunk.iter_mut().zip(values.each()) {
                let word = v.ok_or_else(|| wrong("filled"))?;
                sample.phase = phase_of(word.data()).ok_or_else(|| {
                    format!(
                        "phase `{}` is not one of load, reload, open, generate, close, idle",
                        crate::input::shorten(&String::from_utf8_lossy(word.data()), 40)
                    )
                })?;
            }
        }
        (Column::Metric(metric), ColumnReader::Int64ColumnReader(r)) => {
            let values = read_all(n, |k, d, v| r.read_records(k, Some(d), None, v))?;
            for (sample, v) in chunk.iter_mut().zip(values.each()) {
                if let Some(v) = v {
                    sample.metrics.insert(metric, v as u64);
                }
            }
        }
        (Column::Extra, ColumnReader::ByteArrayColumnReader(r)) => {
            let values = read_all(n, |k, d, v| r.read_records(k, Some(d), None, v))?;
            for (sample, v) in chunk.iter_mut().zip(values.each()) {
                if let Some(text) = v {
                    let extra: std::collections::BTreeMap<String, u64> =
                        serde_json::from_slice(text.data()).map_err(|e| format!("extra: {e}"))?;
                    sample.metrics.extend(extra);
                }
            }
        }
        (Column::Key, ColumnReader::ByteArrayColumnReader(r)) => {
            let values = read_all(n, |k, d, v| r.read_records(k, Some(d), None, v))?;
            for (sample, v) in chunk.iter_mut().zip(values.each()) {
                if let Some(text) = v {
                    let text = std::str::from_utf8(text.data()).map_err(|e| format!("key: {e}"))?;
                    sample.key = Some(text.to_owned());
                }
            }
        }
        // Columns leakloop does not know are skipped; the types were checked before reading.
        _ => {}
    }
    Ok(())
}

/// A column read whole: its values, and which rows have one.
struct Read<T> {
    values: Vec<T>,
    defined: Vec<i16>,
    rows: usize,
}

impl<T> Read<T> {
    /// Each row's value, `None` where it has none.
    fn each(self) -> impl Iterator<Item = Option<T>> {
        let mut values = self.values.into_iter();
        let required = self.defined.is_empty();
        let mut levels = self.defined.into_iter();
        (0..self.rows).map(move |_| {
            let present = required || levels.next() == Some(1);
            if present {
                values.next()
            } else {
                None
            }
        })
    }
}

/// Reads the next `rows` records of a column (asking for at most the records still missing).
fn read_all<T>(
    rows: usize,
    mut next: impl FnMut(
        usize,
        &mut Vec<i16>,
        &mut Vec<T>,
    ) -> parquet::errors::Result<(usize, usize, usize)>,
) -> Result<Read<T>, String> {
    let mut values = Vec::with_capacity(rows);
    let mut defined = Vec::new();
    let mut read = 0;
    while read < rows {
        let (records, _, _) =
            next(rows - read, &mut defined, &mut values).map_err(|e| e.to_string())?;
        if records == 0 {
            return Err(format!(
                "a column holds {read} of its row group's {rows} rows"
            ));
        }
        read += records;
    }
    Ok(Read {
        values,
        defined,
        rows,
    })
}
