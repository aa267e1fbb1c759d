use super::parquet::phase_word;
use super::*;
use crate::report::examples::leak_run;
use crate::report::test_support::{hostile_run, plant_symlink, PRECIOUS};
use crate::runner::{Phase, RunObserver};

fn stored(dir: &Path, samples: impl Into<Samples>) -> (PathBuf, StoreRef) {
    let reference = write_store(dir, &samples.into()).unwrap();
    (dir.join(SAMPLES_STORE), reference)
}

/// The column names of a Parquet store.
fn column_names(path: &Path) -> Vec<String> {
    use ::parquet::file::reader::FileReader;
    let reader = ::parquet::file::serialized_reader::SerializedFileReader::new(
        std::fs::File::open(path).unwrap(),
    )
    .unwrap();
    let schema = reader.metadata().file_metadata().schema_descr();
    schema
        .columns()
        .iter()
        .map(|c| c.name().to_owned())
        .collect()
}

/// `n` samples of a leaky run, each with its own turn.
fn many(n: usize) -> Vec<Sample> {
    let (record, _) = leak_run();
    let template = record.samples.get(1).unwrap();
    (0..n)
        .map(|i| {
            let mut s = template.clone();
            s.turn = i as u32;
            s.t_ms = i as f64 * 1.5;
            s.metrics.insert("native_heap", 1_000_000 + 4096 * i as u64);
            s
        })
        .collect()
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

/// A Parquet file of named columns, one row per sample, and no journal once finished.
#[test]
fn the_store_is_parquet_with_one_column_per_metric() {
    let dir = tempfile::tempdir().unwrap();
    let (record, _) = leak_run();
    let (path, _) = stored(dir.path(), &record.samples);
    let bytes = std::fs::read(&path).unwrap();
    assert!(bytes.starts_with(b"PAR1") && bytes.ends_with(b"PAR1"));
    let columns = column_names(&path);
    assert_eq!(columns[..4], ["turn", "phase", "epoch", "t_ms"]);
    assert_eq!(columns[columns.len() - 2..], ["extra", "key"]);
    for name in record.metric_names() {
        assert!(columns.contains(&name.to_owned()), "{name}: {columns:?}");
    }
    assert!(!dir.path().join(SAMPLES_TAIL).exists());
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
    for _ in 0..GROUP_ROWS {
        writer.append(&record.samples.get(0).unwrap()).unwrap();
    }
    // The columns are chosen by the first row group.
    writer.flush().unwrap();
    let last = record.samples.len() - 1;
    record.samples.modify_each(|row, sample| {
        if row == last {
            sample.metrics.insert("late_metric", 42);
        }
    });
    for s in &record.samples.to_vec()[1..] {
        writer.append(s).unwrap();
    }
    let (path, reference) = writer.finish().unwrap();
    let mut expected = vec![record.samples.get(0).unwrap(); GROUP_ROWS];
    expected.extend_from_slice(&record.samples.to_vec()[1..]);
    record.samples = expected.into();
    assert_eq!(reference.rows, record.samples.len() as u64);
    assert!(!column_names(&path).contains(&"late_metric".to_owned()));
    assert_eq!(read_samples(&path).unwrap().samples, record.samples);
}

/// Format 4's CSV store: the per-turn `key` column is read wherever it stands, and never taken
/// for a metric.
#[test]
fn the_key_column_of_a_csv_store_is_read_wherever_it_stands() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(SAMPLES_CSV_ZST);
    let csv = "turn,phase,epoch,t_ms,native_heap,key,extra\n\
               0,load,1,0.5,100,,\n\
               1,close,1,12,200,chat-7,\n";
    std::fs::write(&path, zstd::encode_all(csv.as_bytes(), 3).unwrap()).unwrap();
    let back = read_samples(&path).unwrap().samples.to_vec();
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
    record.samples.modify_each(|i, sample| {
        if i > 0 {
            sample.key = Some(match i % 3 {
                0 => format!("sess-{i}"),
                1 => "a,b \"quoted\"".to_owned(),
                _ => "shape 128x4".to_owned(),
            });
        }
    });
    let (path, _) = stored(dir.path(), &record.samples);
    assert_eq!(read_samples(&path).unwrap().samples, record.samples);
}

/// What a killed run of slow turns leaves: an empty store and a journal. Every turn flushed is
/// read; the cut is said.
#[test]
fn a_store_never_finished_holds_every_flushed_turn() {
    let dir = tempfile::tempdir().unwrap();
    let (record, _) = leak_run();
    let mut stream = crate::report::SampleStream::create(dir.path())
        .unwrap()
        .flush_every_turn();
    for s in &record.samples.to_vec()[..5] {
        stream.on_sample(s);
    }
    stream.on_turn_end(4, 8);
    // No finish: what a killed process leaves behind.
    let back = read_samples(stream.path()).unwrap();
    assert_eq!(back.samples, record.samples.to_vec()[..5]);
    assert!(back.torn_last_line);
    drop(stream);
}

/// What a killed run of fast turns leaves: row groups, each followed by a footer, then a
/// journal of the rows since. Everything flushed reads back once, and the cut is said.
#[test]
fn a_store_never_finished_reads_its_row_groups_and_its_journal() {
    let dir = tempfile::tempdir().unwrap();
    let samples = many(2 * GROUP_ROWS + 100);
    let mut writer = StoreWriter::create(dir.path()).unwrap();
    for chunk in samples.chunks(GROUP_ROWS) {
        for s in chunk {
            writer.append(s).unwrap();
        }
        writer.flush().unwrap();
    }
    let back = read_samples(writer.path()).unwrap();
    assert!(back.torn_last_line);
    assert_eq!(back.samples.len(), samples.len());
    assert_eq!(back.samples, samples);
    let folder = read_folder_samples(dir.path()).unwrap().unwrap();
    assert_eq!(folder, back);
    // Killed between a row group and the emptying of the journal: the journal's rows, which
    // are in the row group too, are read once.
    let journal = std::fs::read(dir.path().join(SAMPLES_TAIL)).unwrap();
    for s in &samples[..GROUP_ROWS] {
        writer.append(s).unwrap();
    }
    writer.flush().unwrap();
    std::fs::write(dir.path().join(SAMPLES_TAIL), &journal).unwrap();
    let back = read_samples(writer.path()).unwrap();
    let mut expected = samples.clone();
    expected.extend_from_slice(&samples[..GROUP_ROWS]);
    assert_eq!(back.samples.len(), expected.len());
    assert_eq!(back.samples, expected);
}

/// A store cut anywhere (a kill while a row group was written) reads up to the last footer
/// before the cut; what DuckDB or pandas cannot read, leakloop does.
#[test]
fn a_store_cut_anywhere_reads_up_to_its_last_footer() {
    let dir = tempfile::tempdir().unwrap();
    let samples = many(3 * GROUP_ROWS);
    let mut writer = StoreWriter::create(dir.path()).unwrap();
    let mut ends = Vec::new();
    for chunk in samples.chunks(GROUP_ROWS) {
        for s in chunk {
            writer.append(s).unwrap();
        }
        writer.flush().unwrap();
        ends.push(std::fs::metadata(writer.path()).unwrap().len() as usize);
    }
    let (path, _) = writer.finish().unwrap();
    let bytes = std::fs::read(&path).unwrap();
    let cut_path = dir.path().join("cut.parquet");
    let mut cuts: Vec<usize> = (0..bytes.len()).step_by(997).collect();
    for end in &ends {
        cuts.extend([end - 1, *end, end + 1]);
    }
    for cut in cuts {
        std::fs::write(&cut_path, &bytes[..cut]).unwrap();
        let groups = ends.iter().filter(|&&end| end <= cut).count();
        match read_samples(&cut_path) {
            Ok(back) => {
                assert_eq!(back.samples.len(), groups * GROUP_ROWS, "cut at {cut}");
                assert_eq!(back.samples, samples[..groups * GROUP_ROWS]);
                // Cut right after a footer, it is a whole Parquet file of fewer row groups.
                assert_eq!(
                    back.torn_last_line,
                    cut > 0 && !ends.contains(&cut),
                    "cut at {cut}"
                );
            }
            Err(e) => {
                // Only a file cut before its first footer holds nothing to read.
                assert_eq!(groups, 0, "cut at {cut}: {e}");
                assert!(e.to_string().contains("cut.parquet"), "{e}");
            }
        }
    }
}

#[test]
fn a_bad_row_of_a_csv_store_is_an_error_naming_its_line() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(SAMPLES_CSV_ZST);
    let csv = "turn,phase,epoch,t_ms,native_heap,extra\n0,load,1,0,100,\n1,bogus,1,2,200,\n";
    std::fs::write(&path, zstd::encode_all(csv.as_bytes(), 3).unwrap()).unwrap();
    let err = read_samples(&path).unwrap_err().to_string();
    assert!(err.contains("samples.csv.zst: line 3"), "{err}");
    assert!(err.contains("bogus"), "{err}");
    std::fs::write(&path, b"not zstd at all").unwrap();
    assert!(read_samples(&path).is_err());
}

#[test]
fn a_file_that_is_not_parquet_is_an_error_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(SAMPLES_STORE);
    for bytes in [
        &b"not parquet at all"[..],
        b"PAR1 and then nothing",
        b"PAR1xxxxPAR1",
    ] {
        std::fs::write(&path, bytes).unwrap();
        let err = read_samples(&path).unwrap_err().to_string();
        assert!(err.contains("samples.parquet"), "{err}");
    }
}

#[test]
fn a_replaced_store_is_refused_by_its_digest() {
    let dir = tempfile::tempdir().unwrap();
    let (record, _) = leak_run();
    let (_, reference) = stored(dir.path(), &record.samples);
    let _ = write_store(dir.path(), &Samples::from(&record.samples.to_vec()[..3])).unwrap();
    let err = read_referenced(&dir.path().join("report.json"), &reference).unwrap_err();
    assert!(matches!(err, ReportError::Implausible { .. }), "{err:?}");
    assert!(err.to_string().contains("replaced or altered"), "{err}");
    let outside = StoreRef {
        store: "../samples.parquet".to_owned(),
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
    let (path, _) = stored(&out, &record.samples.to_vec()[..2]);
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), PRECIOUS);
    assert!(!std::fs::symlink_metadata(&path).unwrap().is_symlink());
    // Nor the journal.
    let victim = plant_symlink(&out, SAMPLES_TAIL);
    let mut writer = StoreWriter::create(&out).unwrap();
    writer.append(&record.samples.get(0).unwrap()).unwrap();
    writer.flush().unwrap();
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), PRECIOUS);
    assert!(!std::fs::symlink_metadata(out.join(SAMPLES_TAIL))
        .unwrap()
        .is_symlink());
    let (path, _) = writer.finish().unwrap();
    assert!(!out.join(SAMPLES_TAIL).exists());
    assert_eq!(
        read_samples(&path).unwrap().samples,
        record.samples.to_vec()[..1]
    );
}

#[test]
fn an_empty_file_has_no_samples() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(SAMPLES_STORE);
    std::fs::write(&path, "").unwrap();
    let back = read_samples(&path).unwrap();
    assert!(back.samples.is_empty());
    let (path, reference) = stored(dir.path(), Samples::new());
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

/// Damaged stores (bytes flipped anywhere, by a disk or a hand) are errors or fewer samples,
/// never a crash.
#[test]
fn a_damaged_store_is_an_error_not_a_crash() {
    use rand::{RngExt, SeedableRng};
    let dir = tempfile::tempdir().unwrap();
    let (record, _) = leak_run();
    let (path, _) = stored(dir.path(), &record.samples);
    let bytes = std::fs::read(&path).unwrap();
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(7);
    let damaged = dir.path().join("damaged.parquet");
    for _ in 0..500 {
        let mut copy = bytes.clone();
        for _ in 0..rng.random_range(1..4) {
            let at = rng.random_range(0..copy.len());
            copy[at] = rng.random();
        }
        std::fs::write(&damaged, &copy).unwrap();
        if let Err(e) = read_samples(&damaged) {
            assert!(e.to_string().contains("damaged.parquet"), "{e}");
        }
    }
}

/// A foreign store whose footer declares more metric values than [`MAX_SAMPLE_CELLS`] (rows
/// times metric columns) is refused before anything is allocated for its rows.
#[test]
fn a_store_of_too_many_values_is_refused_before_it_is_read() {
    let dir = tempfile::tempdir().unwrap();
    let (path, _) = stored(dir.path(), many(100));
    let metrics = column_names(&path)
        .iter()
        .filter(|n| !super::parquet::RESERVED_COLUMNS.contains(&n.as_str()))
        .count() as u64;
    assert!(metrics >= 2, "{:?}", column_names(&path));
    let bytes = std::fs::read(&path).unwrap();
    let Err(err) = super::parquet::read_within(bytes.clone(), 100 * metrics - 1) else {
        panic!("read past the bound");
    };
    assert!(
        err.contains(&format!("claims 100 samples of {metrics} metrics")),
        "{err}"
    );
    let read = super::parquet::read_within(bytes, 100 * metrics).unwrap();
    assert_eq!(read.samples.len(), 100);
}

/// Samples read from a file stop at the bound, whatever adds the metrics (columns, `extra`).
#[test]
fn samples_read_stop_at_the_bound_of_metric_values() {
    let rows = many(10);
    let metrics = rows[0].metrics.len() as u64;
    let mut samples = Samples::new();
    let cap = 10 * metrics - 1;
    for (i, sample) in rows.iter().enumerate() {
        let pushed = push_within(&mut samples, sample, cap);
        if i < 9 {
            pushed.unwrap();
        } else {
            let err = pushed.unwrap_err();
            assert!(
                err.contains(&format!("10 samples of {metrics} metrics")),
                "{err}"
            );
        }
    }
    assert!(within(&samples, MAX_SAMPLE_CELLS).is_ok());
}

/// A row group larger than what is decoded at a time (a foreign writer's, or a long run's) reads
/// back whole and in order, a batch at a time.
#[test]
fn a_row_group_of_many_batches_reads_back_whole() {
    let samples: Samples = many(150_000).into();
    let metrics: Vec<&'static str> = samples.metric_names().collect();
    let mut writer = super::parquet::start(Vec::new(), &metrics).unwrap();
    super::parquet::write_group(&mut writer, &metrics, &samples, false).unwrap();
    let bytes = writer.into_inner().unwrap();
    let read = super::parquet::read(bytes).unwrap();
    assert_eq!(read.last_group_rows, 150_000);
    assert_eq!(read.samples.len(), 150_000);
    for row in [0, 65_535, 65_536, 131_072, 149_999] {
        assert_eq!(read.samples.get(row), samples.get(row), "row {row}");
    }
}
