//! samples.jsonl: every sample streamed to disk as one JSON object per line while the run goes on,
//! each line written with one `write` call and flushed, so that a run that crashes or is killed
//! keeps everything it measured. The reader accepts a file whose last line was torn by the kill.

use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use crate::input::{open_regular, InputError, InputErrorKind, MAX_REPORT_BYTES};
use crate::report::artifacts::SAMPLES_JSONL;
use crate::report::out_dir::{create_folder, remove_if_present, FILE_MODE};
use crate::report::ReportError;
use crate::runner::{RunObserver, Sample};

/// A [`RunObserver`] that appends every sample to `DIR/samples.jsonl`.
///
/// Observer callbacks cannot fail, so the first write error is kept and returned by
/// [`SampleStream::finish`]; later samples are not written after an error.
#[derive(Debug)]
pub struct SampleStream {
    path: PathBuf,
    file: File,
    written: usize,
    error: Option<std::io::Error>,
}

impl SampleStream {
    /// Creates a new, empty `dir/samples.jsonl` (mode 0666 less the umask), creating `dir` if
    /// needed. An existing file of that name is removed first, and the new one is created
    /// exclusively, so a symlink planted in its place is removed, never written through.
    pub fn create(dir: &Path) -> Result<Self, ReportError> {
        create_folder(dir)?;
        let path = dir.join(SAMPLES_JSONL);
        remove_if_present(&path)?;
        let file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(FILE_MODE)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&path)
            .map_err(|source| ReportError::Write {
                path: path.clone(),
                source,
            })?;
        Ok(Self {
            path,
            file,
            written: 0,
            error: None,
        })
    }

    /// The file being written.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// How many samples were written so far.
    pub fn written(&self) -> usize {
        self.written
    }

    fn append(&mut self, sample: &Sample) -> std::io::Result<()> {
        let mut line = serde_json::to_vec(sample)?;
        line.push(b'\n');
        // One write per line: a kill tears at most the line being written.
        self.file.write_all(&line)?;
        self.file.flush()
    }

    /// Syncs the file and reports the first write error, if any.
    pub fn finish(self) -> Result<PathBuf, ReportError> {
        let error = |source| ReportError::Write {
            path: self.path.clone(),
            source,
        };
        if let Some(source) = self.error {
            return Err(error(source));
        }
        self.file.sync_all().map_err(error)?;
        Ok(self.path)
    }
}

impl RunObserver for SampleStream {
    fn on_sample(&mut self, sample: &Sample) {
        if self.error.is_some() {
            return;
        }
        match self.append(sample) {
            Ok(()) => self.written += 1,
            Err(e) => self.error = Some(e),
        }
    }
}

/// What a samples.jsonl held.
#[derive(Debug, Clone, PartialEq)]
pub struct StreamedSamples {
    /// Every complete sample, in order.
    pub samples: Vec<Sample>,
    /// Whether the last line was cut off (the run was killed while writing it) and was ignored.
    pub torn_last_line: bool,
}

/// Reads a samples.jsonl, ignoring a torn last line; a bad line anywhere else is an error that
/// names the line.
pub fn read_samples(path: &Path) -> Result<StreamedSamples, ReportError> {
    let read_error = |source| ReportError::Read {
        path: path.to_owned(),
        source,
    };
    let file = open_regular(path)?;
    let mut reader = BufReader::new(file.take(MAX_REPORT_BYTES + 1));
    let mut samples = Vec::new();
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
            Ok(sample) => samples.push(sample),
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
    use crate::report::test_support::{plant_symlink, PRECIOUS};

    fn stream(dir: &Path, samples: &[Sample]) -> PathBuf {
        let mut stream = SampleStream::create(dir).unwrap();
        for s in samples {
            stream.on_sample(s);
        }
        assert_eq!(stream.written(), samples.len());
        stream.finish().unwrap()
    }

    #[test]
    fn streamed_samples_read_back_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let (record, _) = leak_run();
        let path = stream(dir.path(), &record.samples);
        let back = read_samples(&path).unwrap();
        assert_eq!(back.samples, record.samples);
        assert!(!back.torn_last_line);
    }

    #[test]
    fn every_sample_is_on_disk_before_the_stream_is_finished() {
        let dir = tempfile::tempdir().unwrap();
        let (record, _) = leak_run();
        let mut stream = SampleStream::create(dir.path()).unwrap();
        for s in &record.samples[..5] {
            stream.on_sample(s);
        }
        // No finish, no drop: what a killed process leaves behind.
        let back = read_samples(stream.path()).unwrap();
        assert_eq!(back.samples, record.samples[..5]);
        drop(stream);
    }

    #[test]
    fn a_torn_last_line_is_ignored() {
        let dir = tempfile::tempdir().unwrap();
        let (record, _) = leak_run();
        let path = stream(dir.path(), &record.samples[..3]);
        let torn = serde_json::to_string(&record.samples[3]).unwrap();
        let mut file = std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap();
        file.write_all(&torn.as_bytes()[..torn.len() / 2]).unwrap();
        let back = read_samples(&path).unwrap();
        assert_eq!(back.samples, record.samples[..3]);
        assert!(back.torn_last_line);
    }

    #[test]
    fn a_bad_line_in_the_middle_is_an_error_naming_the_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(SAMPLES_JSONL);
        let (record, _) = leak_run();
        let good = serde_json::to_string(&record.samples[0]).unwrap();
        std::fs::write(&path, format!("{good}\n{{\"turn\": \"x\"}}\n{good}\n")).unwrap();
        let err = read_samples(&path).unwrap_err();
        let text = err.to_string();
        assert!(text.contains("samples.jsonl: line 2"), "{text}");
        assert!(text.contains("invalid type"), "{text}");
    }

    #[test]
    fn a_symlink_planted_as_samples_jsonl_is_replaced_not_written_through() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("out");
        let victim = plant_symlink(&out, SAMPLES_JSONL);
        let (record, _) = leak_run();
        let path = stream(&out, &record.samples[..2]);
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), PRECIOUS);
        assert!(!std::fs::symlink_metadata(&path).unwrap().is_symlink());
        assert_eq!(read_samples(&path).unwrap().samples, record.samples[..2]);
    }

    #[test]
    fn an_empty_file_has_no_samples() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(SAMPLES_JSONL);
        std::fs::write(&path, "").unwrap();
        let back = read_samples(&path).unwrap();
        assert!(back.samples.is_empty());
    }
}
