//! The sample store of format 4 run folders, `samples.csv.zst`: CSV (RFC 4180) compressed as one
//! zstd frame, header `turn,phase,epoch,t_ms`, one column per metric, then `extra` and `key`.
//! leakloop no longer writes it and reads it here, a frame cut by a kill included.

use std::io::{BufReader, Read};
use std::path::Path;

use serde::Deserialize;

use crate::input::MAX_REPORT_BYTES;
use crate::report::store::{missing_column, push_read, Column, StreamedSamples};
use crate::report::ReportError;
use crate::runner::{Phase, Sample, Samples};

pub fn decode(path: &Path, bytes: &[u8]) -> Result<StreamedSamples, ReportError> {
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
    let mut samples = Samples::new();
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
        let sample = row(columns, &record).map_err(|m| parse_error(line, m))?;
        push_read(&mut samples, &sample).map_err(|m| parse_error(line, m))?;
    }
}

fn header(record: &csv::ByteRecord) -> Result<Vec<Column>, String> {
    let mut columns = Vec::with_capacity(record.len());
    for field in record {
        let name = std::str::from_utf8(field).map_err(|e| format!("header: {e}"))?;
        columns.push(Column::named(name));
    }
    if let Some(word) = missing_column(&columns) {
        return Err(format!(
            "not a leakloop sample store: the header has no `{word}` column"
        ));
    }
    Ok(columns)
}

fn row(columns: &[Column], record: &csv::ByteRecord) -> Result<Sample, String> {
    let mut sample = Sample::placeholder();
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
