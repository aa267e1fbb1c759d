//! The run loop's side of the sample store ([`SampleStream`]: samples written as the run goes),
//! and the reader of samples.jsonl, the one JSON object per line that leakloop wrote before the
//! store (format 3 and older run folders): it accepts a file whose last line was torn by a kill.

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};

use crate::input::{open_regular, InputError, InputErrorKind, MAX_REPORT_BYTES};
use crate::report::store::{push_read, StoreRef, StoreWriter, StreamedSamples};
use crate::report::ReportError;
use crate::runner::{RunObserver, Sample, Samples};

/// A [`RunObserver`] that writes every sample into the run's sample store
/// (`DIR/samples.parquet`, see [`crate::report::store`]) as the run goes.
///
/// Observer callbacks cannot fail, so the first write error is kept and returned by
/// [`SampleStream::finish`]; later samples are not written after an error.
#[derive(Debug)]
pub struct SampleStream {
    writer: StoreWriter,
    written: usize,
    error: Option<std::io::Error>,
}

impl SampleStream {
    /// Creates a new, empty store in `dir` (mode 0666 less the umask), creating `dir` if
    /// needed. An existing file of that name is removed first, and the new one is created
    /// exclusively, so a symlink planted in its place is removed, never written through.
    pub fn create(dir: &Path) -> Result<Self, ReportError> {
        Ok(Self {
            writer: StoreWriter::create(dir)?,
            written: 0,
            error: None,
        })
    }

    /// Flushes the store at the end of every turn however fast turns come, so that a kill
    /// loses nothing of a turn that ended (tests of killed runs; a real engine's turns are slow
    /// enough to be flushed each anyway).
    pub fn flush_every_turn(self) -> Self {
        Self {
            writer: self.writer.flush_every_turn(),
            ..self
        }
    }

    /// The file being written.
    pub fn path(&self) -> &Path {
        self.writer.path()
    }

    /// How many samples were written so far.
    pub fn written(&self) -> usize {
        self.written
    }

    /// Writes the samples taken since the last flush to the file now, if any (a write error is
    /// kept for [`SampleStream::finish`]).
    pub fn flush_pending(&mut self) {
        if self.error.is_none() {
            if let Err(e) = self.writer.flush_pending() {
                self.error = Some(e);
            }
        }
    }

    /// Ends the store, syncs the file and reports the first write error, if any; returns how
    /// report.json references it.
    pub fn finish(self) -> Result<StoreRef, ReportError> {
        let path: PathBuf = self.writer.path().to_owned();
        let error = |source| ReportError::Write {
            path: path.clone(),
            source,
        };
        if let Some(source) = self.error {
            return Err(error(source));
        }
        self.writer.finish().map(|(_, r)| r).map_err(error)
    }
}

impl RunObserver for SampleStream {
    fn on_sample(&mut self, sample: &Sample) {
        if self.error.is_some() {
            return;
        }
        match self.writer.append(sample) {
            Ok(()) => self.written += 1,
            Err(e) => self.error = Some(e),
        }
    }

    fn on_turn_end(&mut self, _turn: u32, _total: u32) {
        if self.error.is_none() {
            if let Err(e) = self.writer.turn_ended() {
                self.error = Some(e);
            }
        }
    }
}

/// Reads a samples.jsonl (the sample file before the store), ignoring a torn last line; a bad line anywhere else is an error that
/// names the line.
pub(crate) fn read_samples_jsonl(path: &Path) -> Result<StreamedSamples, ReportError> {
    let read_error = |source| ReportError::Read {
        path: path.to_owned(),
        source,
    };
    let file = open_regular(path)?;
    let mut reader = BufReader::new(file.take(MAX_REPORT_BYTES + 1));
    let mut samples = Samples::new();
    let mut buffer = Vec::new();
    let mut number = 0;
    let mut total: u64 = 0;
    loop {
        buffer.clear();
        let n = reader.read_until(b'\n', &mut buffer).map_err(read_error)?;
        total += n as u64;
        if total > MAX_REPORT_BYTES {
            return Err(InputError {
                path: path.to_owned(),
                kind: InputErrorKind::TooLarge {
                    limit: MAX_REPORT_BYTES,
                    hint: "samples.jsonl of a leakloop run is at most a few hundred MB",
                },
            }
            .into());
        }
        if n == 0 {
            return Ok(StreamedSamples {
                samples,
                torn_last_line: false,
            });
        }
        number += 1;
        let complete = buffer.ends_with(b"\n");
        let text = String::from_utf8_lossy(&buffer);
        if text.trim().is_empty() {
            continue;
        }
        match serde_json::from_str::<Sample>(&text) {
            Ok(sample) => {
                if let Err(message) = push_read(&mut samples, &sample) {
                    return Err(ReportError::Parse {
                        path: path.to_owned(),
                        line: number,
                        column: 0,
                        field: None,
                        message,
                    });
                }
            }
            Err(_) if !complete => {
                return Ok(StreamedSamples {
                    samples,
                    torn_last_line: true,
                })
            }
            Err(e) => {
                let mut error = ReportError::parse(path, None, &e);
                if let ReportError::Parse { line, .. } = &mut error {
                    *line = number;
                }
                return Err(error);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::examples::leak_run;
    use crate::report::SAMPLES_JSONL;
    use std::io::Write;

    /// A samples.jsonl as leakloop wrote it before the store.
    fn jsonl(dir: &Path, samples: &[Sample]) -> PathBuf {
        let path = dir.join(SAMPLES_JSONL);
        let mut text = String::new();
        for s in samples {
            text.push_str(&serde_json::to_string(s).unwrap());
            text.push('\n');
        }
        std::fs::write(&path, text).unwrap();
        path
    }

    #[test]
    fn an_older_runs_samples_jsonl_reads_back_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let (record, _) = leak_run();
        let path = jsonl(dir.path(), &record.samples.to_vec());
        let back = crate::report::read_samples(&path).unwrap();
        assert_eq!(back.samples, record.samples);
        assert!(!back.torn_last_line);
    }

    #[test]
    fn a_torn_last_line_is_ignored() {
        let dir = tempfile::tempdir().unwrap();
        let (record, _) = leak_run();
        let path = jsonl(dir.path(), &record.samples.to_vec()[..3]);
        let torn = serde_json::to_string(&record.samples.get(3).unwrap()).unwrap();
        let mut file = std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap();
        file.write_all(&torn.as_bytes()[..torn.len() / 2]).unwrap();
        let back = read_samples_jsonl(&path).unwrap();
        assert_eq!(back.samples, record.samples.to_vec()[..3]);
        assert!(back.torn_last_line);
    }

    #[test]
    fn a_bad_line_in_the_middle_is_an_error_naming_the_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(SAMPLES_JSONL);
        let (record, _) = leak_run();
        let good = serde_json::to_string(&record.samples.get(0).unwrap()).unwrap();
        std::fs::write(&path, format!("{good}\n{{\"turn\": \"x\"}}\n{good}\n")).unwrap();
        let err = read_samples_jsonl(&path).unwrap_err();
        let text = err.to_string();
        assert!(text.contains("samples.jsonl: line 2"), "{text}");
        assert!(text.contains("invalid type"), "{text}");
    }

    #[test]
    fn an_empty_file_has_no_samples() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(SAMPLES_JSONL);
        std::fs::write(&path, "").unwrap();
        let back = read_samples_jsonl(&path).unwrap();
        assert!(back.samples.is_empty());
    }
}
