use super::*;
use crate::report::examples::leak_run;
use crate::report::test_support::{hostile_run, plant_symlink, PRECIOUS};
use crate::runner::RunObserver;

fn stored(dir: &Path, samples: &[Sample]) -> (PathBuf, StoreRef) {
    let reference = write_store(dir, samples).unwrap();
    (dir.join(SAMPLES_STORE), reference)
}

fn csv_text(path: &Path) -> String {
    let bytes = std::fs::read(path).unwrap();
    String::from_utf8(zstd::decode_all(&bytes[..]).unwrap()).unwrap()
}

#[test]
fn samples_read_back_identically_and_the_reference_names_them() {
    let dir = tempfile::tempdir().unwrap();
    let (record, _) = leak_run();
    let (path, reference) = stored(dir.path(), &record.samples);
    assert_eq!(reference.store, SAMPLES_STORE);
    assert_eq!(reference.rows, record.samples.len() as u64);
    assert_eq!(
        reference.sha256,
        hex(&Sha256::digest(std::fs::read(&path).unwrap()))
    );
    let back = read_samples(&path).unwrap();
    assert_eq!(back.samples, record.samples);
    assert!(!back.torn_last_line);
    let report = dir.path().join("report.json");
    assert_eq!(
        read_referenced(&report, &reference).unwrap(),
        record.samples
    );
}

/// Plain CSV once decompressed: a header of named columns, one row per sample.
#[test]
fn the_store_is_plain_csv_with_one_column_per_metric() {
    let dir = tempfile::tempdir().unwrap();
    let (record, _) = leak_run();
    let (path, _) = stored(dir.path(), &record.samples);
    let text = csv_text(&path);
    let mut lines = text.lines();
    let header = lines.next().unwrap();
    assert!(header.starts_with("turn,phase,epoch,t_ms,"), "{header}");
    assert!(header.ends_with(",extra,key"), "{header}");
    for name in record.metric_names() {
        assert!(header.split(',').any(|c| c == name), "{name}: {header}");
    }
    assert_eq!(lines.count(), record.samples.len());
}

#[test]
fn hostile_metric_names_are_quoted_and_read_back() {
    let dir = tempfile::tempdir().unwrap();
    let (record, _) = hostile_run();
    let (path, _) = stored(dir.path(), &record.samples);
    assert_eq!(read_samples(&path).unwrap().samples, record.samples);
}

/// A metric first seen after the header was written goes to `extra` and reads back.
#[test]
fn a_metric_that_appears_late_is_kept_in_extra() {
    let dir = tempfile::tempdir().unwrap();
    let (mut record, _) = leak_run();
    let mut writer = StoreWriter::create(dir.path()).unwrap();
    writer.append(&record.samples[0]).unwrap();
    writer.flush().unwrap();
    let last = record.samples.len() - 1;
    record.samples[last].metrics.insert("late_metric", 42);
    for s in &record.samples[1..] {
        writer.append(s).unwrap();
    }
    let (path, reference) = writer.finish().unwrap();
    assert_eq!(reference.rows, record.samples.len() as u64);
    assert!(csv_text(&path).contains(r#""{""late_metric"":42}""#));
    assert_eq!(read_samples(&path).unwrap().samples, record.samples);
}

/// The per-turn `key` column is read wherever it stands, and never taken for a metric.
#[test]
fn the_key_column_is_read_wherever_it_stands() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(SAMPLES_STORE);
    let csv = "turn,phase,epoch,t_ms,native_heap,key,extra\n\
               0,load,1,0.5,100,,\n\
               1,close,1,12,200,chat-7,\n";
    std::fs::write(&path, zstd::encode_all(csv.as_bytes(), 3).unwrap()).unwrap();
    let back = read_samples(&path).unwrap().samples;
    assert_eq!(back.len(), 2);
    assert_eq!(back[1].turn, 1);
    assert_eq!(back[1].phase, Phase::Close);
    assert_eq!(back[1].t_ms, 12.0);
    assert_eq!(back[1].metrics.keys().collect::<Vec<_>>(), ["native_heap"]);
    assert_eq!(back[0].key, None);
    assert_eq!(back[1].key.as_deref(), Some("chat-7"));
}

/// Keys (a session id, a shape; any text, quoted where CSV needs it) read back as written.
#[test]
fn turn_keys_read_back_as_written() {
    let dir = tempfile::tempdir().unwrap();
    let (mut record, _) = leak_run();
    for (i, sample) in record.samples.iter_mut().enumerate().skip(1) {
        sample.key = Some(match i % 3 {
            0 => format!("sess-{i}"),
            1 => "a,b \"quoted\"".to_owned(),
            _ => "shape 128x4".to_owned(),
        });
    }
    let (path, _) = stored(dir.path(), &record.samples);
    assert_eq!(read_samples(&path).unwrap().samples, record.samples);
}

/// What a killed run leaves: a frame never ended. Every turn flushed is read; the torn end is
/// said.
#[test]
fn a_store_never_finished_holds_every_flushed_turn() {
    let dir = tempfile::tempdir().unwrap();
    let (record, _) = leak_run();
    let mut stream = crate::report::SampleStream::create(dir.path())
        .unwrap()
        .flush_every_turn();
    for s in &record.samples[..5] {
        stream.on_sample(s);
    }
    stream.on_turn_end(4, 8);
    // No finish: what a killed process leaves behind.
    let back = read_samples(stream.path()).unwrap();
    assert_eq!(back.samples, record.samples[..5]);
    assert!(back.torn_last_line);
    drop(stream);
}

#[test]
fn a_store_cut_anywhere_reads_up_to_a_complete_row() {
    let dir = tempfile::tempdir().unwrap();
    let (record, _) = leak_run();
    let mut writer = StoreWriter::create(dir.path()).unwrap();
    let mut ends = Vec::new();
    for s in &record.samples {
        writer.append(s).unwrap();
        writer.flush().unwrap();
        ends.push(std::fs::metadata(writer.path()).unwrap().len());
    }
    let (path, _) = writer.finish().unwrap();
    let bytes = std::fs::read(&path).unwrap();
    let cut_path = dir.path().join("cut.csv.zst");
    for cut in 0..bytes.len() {
        std::fs::write(&cut_path, &bytes[..cut]).unwrap();
        let back = read_samples(&cut_path).unwrap();
        // Every row flushed before the cut, and none torn.
        let flushed = ends.iter().filter(|&&end| end as usize <= cut).count();
        assert_eq!(back.samples.len(), flushed, "cut at {cut}");
        assert_eq!(back.samples, record.samples[..flushed]);
    }
}

#[test]
fn a_bad_row_is_an_error_naming_its_line() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(SAMPLES_STORE);
    let csv = "turn,phase,epoch,t_ms,native_heap,extra\n0,load,1,0,100,\n1,bogus,1,2,200,\n";
    std::fs::write(&path, zstd::encode_all(csv.as_bytes(), 3).unwrap()).unwrap();
    let err = read_samples(&path).unwrap_err().to_string();
    assert!(err.contains("samples.csv.zst: line 3"), "{err}");
    assert!(err.contains("bogus"), "{err}");
    std::fs::write(&path, b"not zstd at all").unwrap();
    assert!(read_samples(&path).is_err());
}

#[test]
fn a_replaced_store_is_refused_by_its_digest() {
    let dir = tempfile::tempdir().unwrap();
    let (record, _) = leak_run();
    let (_, reference) = stored(dir.path(), &record.samples);
    let _ = write_store(dir.path(), &record.samples[..3]).unwrap();
    let err = read_referenced(&dir.path().join("report.json"), &reference).unwrap_err();
    assert!(matches!(err, ReportError::Implausible { .. }), "{err:?}");
    assert!(err.to_string().contains("replaced or altered"), "{err}");
    let outside = StoreRef {
        store: "../samples.csv.zst".to_owned(),
        ..reference
    };
    let err = read_referenced(&dir.path().join("report.json"), &outside).unwrap_err();
    assert!(err.to_string().contains("not a file name"), "{err}");
}

#[test]
fn a_symlink_planted_as_the_store_is_replaced_not_written_through() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let victim = plant_symlink(&out, SAMPLES_STORE);
    let (record, _) = leak_run();
    let (path, _) = stored(&out, &record.samples[..2]);
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), PRECIOUS);
    assert!(!std::fs::symlink_metadata(&path).unwrap().is_symlink());
    assert_eq!(read_samples(&path).unwrap().samples, record.samples[..2]);
}

#[test]
fn an_empty_file_has_no_samples() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(SAMPLES_STORE);
    std::fs::write(&path, "").unwrap();
    let back = read_samples(&path).unwrap();
    assert!(back.samples.is_empty());
    let (path, reference) = stored(dir.path(), &[]);
    assert_eq!(reference.rows, 0);
    assert!(read_samples(&path).unwrap().samples.is_empty());
}

#[test]
fn phases_are_worded_as_report_json_words_them() {
    use Phase::*;
    for phase in [Load, Reload, Open, Generate, Close, Idle] {
        assert_eq!(
            serde_json::to_value(phase).unwrap(),
            phase_word(phase),
            "{phase:?}"
        );
    }
}
