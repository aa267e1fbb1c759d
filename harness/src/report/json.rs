//! report.json: the versioned, machine-readable record of one run (see docs/report-format.md and
//! docs/report.schema.json). Writing borrows the record; reading checks `format_version` before
//! anything else so that a report from a newer leakloop fails with a clear message.

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::analyze::{derive_status, Verdict, VerdictStatus};
use crate::input::{read_bounded, utf8_text, MAX_REPORT_BYTES};
use crate::report::store::{read_referenced, StoreRef};
use crate::report::{verdict_in_words, ReportError};
use crate::runner::{
    FormatVersion, RunRecord, OLDEST_REPORT_FORMAT_VERSION, REPORT_FORMAT_VERSION,
};

/// The report.json layout this build writes (see [`REPORT_FORMAT_VERSION`]); it reads this one
/// and every one back to [`OLDEST_REPORT_FORMAT_VERSION`].
pub const FORMAT_VERSION: u32 = REPORT_FORMAT_VERSION;

/// The leakloop version written into every report.
pub const LEAKLOOP_VERSION: &str = env!("CARGO_PKG_VERSION");

/// A parsed report.json.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReportFile {
    /// Layout version ([`FORMAT_VERSION`]).
    pub format_version: u32,
    /// The leakloop version that wrote it.
    pub leakloop_version: String,
    /// Everything the run measured.
    pub record: RunRecord,
    /// The analyzer's verdict.
    pub verdict: Verdict,
}

#[derive(Serialize)]
struct ReportRef<'a> {
    format_version: u32,
    leakloop_version: &'a str,
    record: RecordOut<'a>,
    verdict: &'a Verdict,
}

/// The record as report.json holds it: with its samples, or (format 4) with a reference to the
/// store that holds them.
enum RecordOut<'a> {
    Embedded(&'a RunRecord),
    Stored(StoredRecord<'a>),
}

impl Serialize for RecordOut<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            RecordOut::Embedded(record) => record.serialize(serializer),
            RecordOut::Stored(record) => record.serialize(serializer),
        }
    }
}

/// [`RunRecord`]'s fields, in its order, with `samples` a [`StoreRef`]
/// (`every_record_field_is_written_with_a_store` checks that none is missing).
#[derive(Serialize)]
struct StoredRecord<'a> {
    scenario: &'a crate::scenario::Scenario,
    backend: &'a crate::engine::BackendInfo,
    samples: &'a StoreRef,
    ledger: &'a crate::engine::Ledger,
    turns_completed: u32,
    engine_errors: &'a [(u32, String, crate::engine::EngineError)],
    outcome: &'a crate::runner::RunOutcome,
    #[serde(skip_serializing_if = "Option::is_none")]
    early_stop: Option<&'a crate::runner::EarlyStop>,
    #[serde(skip_serializing_if = "Option::is_none")]
    provenance: Option<&'a crate::runner::Provenance>,
}

impl<'a> StoredRecord<'a> {
    fn new(record: &'a RunRecord, store: &'a StoreRef) -> Self {
        let RunRecord {
            scenario,
            backend,
            samples: _,
            ledger,
            turns_completed,
            engine_errors,
            outcome,
            early_stop,
            provenance,
        } = record;
        StoredRecord {
            scenario,
            backend,
            samples: store,
            ledger,
            turns_completed: *turns_completed,
            engine_errors,
            outcome,
            early_stop: early_stop.as_ref(),
            provenance: provenance.as_ref(),
        }
    }
}

/// Renders report.json (compact: one line, with a trailing newline) with its samples embedded,
/// for a report that has no folder (`run --format json`); indentation would double it.
pub fn render_report_json(record: &RunRecord, verdict: &Verdict) -> Result<String, ReportError> {
    let render_error = |message: String| ReportError::Render {
        artifact: "report.json",
        message,
    };
    let mut bytes = Vec::new();
    write_report_json(&mut bytes, record, verdict, None)
        .map_err(|e| render_error(e.to_string()))?;
    // serde_json writes UTF-8 only.
    String::from_utf8(bytes).map_err(|e| render_error(e.to_string()))
}

/// Streams report.json into `out`, rendering nothing in memory first: with `store`, the samples
/// are that store's (written next to it) and only referenced; without, they are embedded. A
/// failed write keeps its I/O error (a full disk is `StorageFull`), so that the caller can name
/// the file it was for.
pub fn write_report_json(
    out: impl std::io::Write,
    record: &RunRecord,
    verdict: &Verdict,
    store: Option<&StoreRef>,
) -> std::io::Result<()> {
    // The reasons are written as sentences in the metrics' own units; the verdict is small
    // beside the samples.
    let verdict = verdict_in_words(verdict);
    let report = ReportRef {
        format_version: FORMAT_VERSION,
        leakloop_version: LEAKLOOP_VERSION,
        record: match store {
            Some(store) => RecordOut::Stored(StoredRecord::new(record, store)),
            None => RecordOut::Embedded(record),
        },
        verdict: &verdict,
    };
    let mut out = out;
    serde_json::to_writer(&mut out, &report)?;
    out.write_all(b"\n")
}

/// Reads and checks a report.json file.
pub fn read_report(path: &Path) -> Result<ReportFile, ReportError> {
    let bytes = read_bounded(
        path,
        MAX_REPORT_BYTES,
        "a report.json is at most a few hundred MB",
    )?;
    let text = utf8_text(&bytes).map_err(|e| ReportError::Parse {
        path: path.to_owned(),
        line: e.line,
        column: e.column,
        field: None,
        message: e.to_string(),
    })?;
    // A byte-order mark from an editor is not part of the JSON.
    parse_report(path, text.strip_prefix('\u{feff}').unwrap_or(text))
}

/// Parses report.json text and checks that its verdict follows from its expectations. A format 4
/// or 5 report's samples are read from the store it references, in `path`'s folder (the one reader
/// of samples, [`crate::report::store`]), and checked against its digest and row count. The text is parsed into the report once (no intermediate JSON
/// tree): a report of a million turns must not be held twice. Only when that fails is the text
/// scanned again for its `format_version`, so that a report from a newer leakloop asks for an
/// upgrade rather than naming a field it does not know.
pub fn parse_report(path: &Path, text: &str) -> Result<ReportFile, ReportError> {
    let mut deserializer = serde_json::Deserializer::from_str(text);
    match serde_path_to_error::deserialize::<_, ReportFile>(&mut deserializer) {
        Ok(report) => {
            check_version(
                path,
                &serde_json::Value::from(report.format_version),
                Some(&report.leakloop_version),
            )?;
            check_numbers(path, &report)?;
            check_status(path, &report)?;
            let mut report = report;
            if report.record.samples.is_empty() {
                if let Some(store) = store_reference(path, text, report.format_version)? {
                    report.record.samples = read_referenced(path, &store)?;
                }
            }
            Ok(report)
        }
        Err(e) => {
            check_format_version(path, text)?;
            let field = e.path().to_string();
            Err(ReportError::parse(path, Some(field), e.inner()))
        }
    }
}

/// `record.samples` when it is a store reference (the typed parse skipped it); `None` when the
/// samples were embedded. Only reports without embedded samples are scanned again, and those
/// are small.
fn store_reference(path: &Path, text: &str, version: u32) -> Result<Option<StoreRef>, ReportError> {
    #[derive(Deserialize)]
    struct Probe {
        record: RecordProbe,
    }
    #[derive(Deserialize)]
    struct RecordProbe {
        samples: SamplesProbe,
    }
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum SamplesProbe {
        Store(StoreRef),
        // Only its shape matters.
        #[allow(dead_code)]
        Embedded(Vec<serde::de::IgnoredAny>),
    }
    let mut deserializer = serde_json::Deserializer::from_str(text);
    let probe: Probe = serde_path_to_error::deserialize(&mut deserializer)
        .map_err(|e| ReportError::parse(path, Some("record.samples".to_owned()), e.inner()))?;
    match probe.record.samples {
        SamplesProbe::Embedded(_) => Ok(None),
        SamplesProbe::Store(_) if version < 4 => Err(ReportError::Implausible {
            path: path.to_owned(),
            field: "record.samples".to_owned(),
            message: format!(
                "a sample store reference in a format_version {version} report (stores came \
                 with format 4)"
            ),
        }),
        SamplesProbe::Store(store) => Ok(Some(store)),
    }
}

/// Numbers the renderers and analyses add up, checked once here so that a report edited within
/// its types is refused (exit 2) instead of overflowing later. The ledger checks its own when it
/// is read (`Ledger`'s `TryFrom<RawLedger>`).
fn check_numbers(path: &Path, report: &ReportFile) -> Result<(), ReportError> {
    let implausible = |field: &str, message: String| ReportError::Implausible {
        path: path.to_owned(),
        field: field.to_owned(),
        message,
    };
    let scenario = &report.record.scenario;
    if scenario.warmup_turns.checked_add(scenario.turns).is_none() {
        return Err(implausible(
            "record.scenario.warmup_turns",
            format!(
                "{} warm-up turns and {} turns are more turns than a run counts (at most {})",
                scenario.warmup_turns,
                scenario.turns,
                u32::MAX
            ),
        ));
    }
    Ok(())
}

/// The stored status must be the one the report's own outcome and expectations give: a report
/// that says `pass` above failed expectations is refused, never believed.
fn check_status(path: &Path, report: &ReportFile) -> Result<(), ReportError> {
    let derived = derive_status(&report.record.outcome, &report.verdict.expectations);
    if derived == report.verdict.status {
        return Ok(());
    }
    let word = |status: VerdictStatus| {
        serde_json::to_value(status)
            .ok()
            .and_then(|v| v.as_str().map(str::to_owned))
            .unwrap_or_default()
    };
    Err(ReportError::Inconsistent {
        path: path.to_owned(),
        stored: word(report.verdict.status),
        derived: word(derived),
    })
}

/// The two top-level fields that say which layout a report has; every other field is skipped
/// without being built.
#[derive(Deserialize)]
struct VersionProbe {
    format_version: Option<serde_json::Value>,
    leakloop_version: Option<serde_json::Value>,
}

/// Checks `format_version` of report text that did not parse as a report. Text that is not
/// JSON at all passes: the parse error says more.
fn check_format_version(path: &Path, text: &str) -> Result<(), ReportError> {
    if !text.trim_start().starts_with('{') {
        if serde_json::from_str::<serde::de::IgnoredAny>(text).is_err() {
            return Ok(());
        }
        return Err(version_error(
            path,
            "not a leakloop report: the top level is not a JSON object".to_owned(),
        ));
    }
    let Ok(probe) = serde_json::from_str::<VersionProbe>(text) else {
        return Ok(());
    };
    let Some(version) = probe.format_version else {
        return Err(version_error(
            path,
            "not a leakloop report: no `format_version` field".to_owned(),
        ));
    };
    check_version(
        path,
        &version,
        probe.leakloop_version.as_ref().and_then(|v| v.as_str()),
    )
}

fn version_error(path: &Path, message: String) -> ReportError {
    ReportError::FormatVersion {
        path: path.to_owned(),
        message,
    }
}

fn check_version(
    path: &Path,
    version: &serde_json::Value,
    writer: Option<&str>,
) -> Result<(), ReportError> {
    let (oldest, newest) = (OLDEST_REPORT_FORMAT_VERSION, FORMAT_VERSION);
    match FormatVersion::of(version) {
        FormatVersion::Readable => Ok(()),
        FormatVersion::Newer(n) => {
            let writer = writer.unwrap_or("an unknown version");
            Err(version_error(
                path,
                format!(
                    "report format_version {n} was written by leakloop {writer}; this leakloop \
                     ({LEAKLOOP_VERSION}) reads format_version {oldest} to {newest}: upgrade \
                     leakloop"
                ),
            ))
        }
        FormatVersion::NotANumber => Err(version_error(
            path,
            format!(
                "wrong type of `format_version`: expected a whole number ({newest}), found {}",
                crate::input::shorten(&version.to_string(), 40)
            ),
        )),
        FormatVersion::Older(_) | FormatVersion::NotAWholeNumber => Err(version_error(
            path,
            format!(
                "unsupported `format_version` {version}: this leakloop ({LEAKLOOP_VERSION}) \
                 reads format_version {oldest} to {newest}"
            ),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::examples::{clean_run as clean_record, leak_run as leak_record};

    #[test]
    fn a_rendered_report_reads_back_identically() {
        let (record, verdict) = leak_record();
        let text = render_report_json(&record, &verdict).unwrap();
        let back = parse_report(Path::new("report.json"), &text).unwrap();
        assert_eq!(back.format_version, FORMAT_VERSION);
        assert_eq!(back.leakloop_version, LEAKLOOP_VERSION);
        assert_eq!(back.record, record);
        assert_eq!(back.verdict, verdict);
    }

    /// Frozen reports of every earlier format still read, samples included (golden/report-format).
    #[rstest::rstest]
    #[case::v1(1)]
    #[case::v2(2)]
    #[case::v3(3)]
    #[case::v4(4)]
    fn every_earlier_format_version_still_reads(#[case] version: u32) {
        let folder = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../golden/report-format")
            .join(format!("v{version}"));
        let report = read_report(&folder.join("report.json")).unwrap();
        assert_eq!(report.format_version, version);
        assert!(!report.record.samples.is_empty());
        assert_eq!(report.record.provenance.is_some(), version >= 3);
        let file = match version {
            3 => Some("samples.jsonl"),
            4 => Some("samples.csv.zst"),
            _ => None,
        };
        if let Some(file) = file {
            // The same samples through the one reader of sample files.
            let read = crate::report::read_samples(&folder.join(file)).unwrap();
            assert!(!read.torn_last_line);
            assert_eq!(read.samples, report.record.samples);
        }
    }

    /// Format 4 and later: report.json names the store, and reading it brings the samples back.
    #[test]
    fn a_report_in_a_folder_references_its_store_and_reads_its_samples_back() {
        let dir = tempfile::tempdir().unwrap();
        let (record, verdict) = leak_record();
        crate::report::write_reports(dir.path(), &record, &verdict).unwrap();
        let path = dir.path().join("report.json");
        let value: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        assert_eq!(value["format_version"], 5);
        let samples = &value["record"]["samples"];
        assert_eq!(samples["store"], "samples.parquet");
        assert_eq!(samples["rows"], record.samples.len());
        assert_eq!(samples["sha256"].as_str().unwrap().len(), 64);
        let errors = schema_errors(&value);
        assert!(errors.is_empty(), "{errors:#?}");
        let back = read_report(&path).unwrap();
        assert_eq!(back.record, record);
        // A report whose store is gone or replaced is refused, never read without samples.
        crate::report::store::write_store(dir.path(), &record.samples.to_vec()[..2].into())
            .unwrap();
        let err = read_report(&path).unwrap_err();
        assert!(matches!(err, ReportError::Implausible { .. }), "{err}");
        std::fs::remove_file(dir.path().join("samples.parquet")).unwrap();
        assert!(read_report(&path).is_err());
        // A reference in a report that claims an older format is refused.
        let older = std::fs::read_to_string(&path)
            .unwrap()
            .replace("\"format_version\":5", "\"format_version\":3");
        let err = parse_report(&path, &older).unwrap_err();
        assert!(
            err.to_string().contains("stores came with format 4"),
            "{err}"
        );
    }

    /// The record written with a store has every field of [`RunRecord`] (a field added to the
    /// record and not to [`StoredRecord`] would be lost from every report).
    #[test]
    fn every_record_field_is_written_with_a_store() {
        let (mut record, _) = leak_record();
        record.early_stop = Some(crate::runner::EarlyStop {
            turn: 3,
            max_turns: 9,
            reason: "decided".to_owned(),
        });
        let keys = |value: serde_json::Value| -> Vec<String> {
            value.as_object().unwrap().keys().cloned().collect()
        };
        let store = StoreRef {
            store: "samples.parquet".to_owned(),
            rows: 0,
            sha256: String::new(),
        };
        assert_eq!(
            keys(serde_json::to_value(StoredRecord::new(&record, &store)).unwrap()),
            keys(serde_json::to_value(&record).unwrap())
        );
    }

    #[test]
    fn the_top_level_has_the_contract_keys_in_order() {
        let (record, verdict) = clean_record();
        let text = render_report_json(&record, &verdict).unwrap();
        let value: serde_json::Value = serde_json::from_str(&text).unwrap();
        let keys: Vec<&str> = value
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        assert_eq!(
            keys,
            ["format_version", "leakloop_version", "record", "verdict"]
        );
    }

    /// docs/report.schema.json, compiled.
    fn schema() -> jsonschema::Validator {
        let text = include_str!("../../../docs/report.schema.json");
        let schema: serde_json::Value = serde_json::from_str(text).unwrap();
        jsonschema::validator_for(&schema).unwrap()
    }

    fn schema_errors(value: &serde_json::Value) -> Vec<String> {
        schema()
            .iter_errors(value)
            .map(|e| format!("{} at {}", e, e.instance_path()))
            .collect()
    }

    #[rstest::rstest]
    #[case::leak(crate::report::examples::leak_run())]
    #[case::clean(crate::report::examples::clean_run())]
    #[case::crashed(crate::report::examples::crashed_run())]
    #[case::interrupted(crate::report::examples::interrupted_run())]
    fn rendered_reports_match_the_published_schema(#[case] run: (RunRecord, Verdict)) {
        let text = render_report_json(&run.0, &run.1).unwrap();
        let value: serde_json::Value = serde_json::from_str(&text).unwrap();
        let errors = schema_errors(&value);
        assert!(errors.is_empty(), "{errors:#?}");
    }

    /// A verdict with OpenCL creation sites (a growing one and a constant one) validates.
    #[test]
    fn opencl_creation_sites_match_the_published_schema() {
        use crate::attribution::{ClSiteLive, ClSiteRecorder, ClSites, Frame};
        let (record, mut verdict) = crate::report::examples::leak_run();
        let site = |function: &str, live: u64| ClSiteLive {
            kind: "cl_mem".into(),
            frames: vec![Frame {
                function: Some(function.into()),
                module: "leakloop".into(),
                file: None,
                line: None,
                address: 0,
            }],
            live,
            live_bytes: live * 64,
        };
        let mut recorder = ClSiteRecorder::default();
        for turn in 0..12u32 {
            let sites = vec![
                site("Cache::create", u64::from(turn)),
                site("Weights::create", 1),
            ];
            recorder.record(turn, &ClSites { sites, unsited: 2 });
        }
        verdict.cl_objects = recorder.estimate(1).map(Box::new);
        assert!(verdict.cl_objects.as_ref().unwrap().growing_sites == 1);
        let text = render_report_json(&record, &verdict).unwrap();
        let value: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert!(value["verdict"]["cl_objects"]["sites"][0]["objects_per_turn"].is_object());
        let errors = schema_errors(&value);
        assert!(errors.is_empty(), "{errors:#?}");
    }

    /// Format 3 adds `record.provenance`: it validates against the schema and reads back; a
    /// format 2 report (no provenance) still reads.
    #[test]
    fn provenance_matches_the_schema_and_an_older_report_still_reads() {
        let (mut record, verdict) = crate::report::examples::leak_run();
        let (build, ci) = crate::report::provenance::resolve_build(
            Some("nightly-12"),
            Some("2026-12-01"),
            &|name: &str| (name == "GITHUB_ACTIONS").then(|| "true".to_owned()),
            std::time::SystemTime::now(),
        )
        .unwrap();
        record.provenance = Some(crate::report::provenance::collect(
            &record.scenario,
            &record.backend,
            &build,
            ci.as_ref(),
        ));
        let text = render_report_json(&record, &verdict).unwrap();
        let value: serde_json::Value = serde_json::from_str(&text).unwrap();
        let errors = schema_errors(&value);
        assert!(errors.is_empty(), "{errors:#?}");
        assert_eq!(value["record"]["provenance"]["build"]["id"], "nightly-12");
        let back = parse_report(Path::new("report.json"), &text).unwrap();
        assert_eq!(back.record.provenance, record.provenance);
        let older = rewrite(|v| {
            v["format_version"] = 2.into();
            assert!(v["record"].get("provenance").is_none());
        });
        let back = parse_report(Path::new("report.json"), &older).unwrap();
        assert_eq!(back.format_version, 2);
        assert!(back.record.provenance.is_none());
    }

    #[test]
    fn a_stopped_run_matches_the_schema_and_reads_back() {
        let (mut record, verdict) = crate::report::examples::leak_run();
        record.scenario.stop = crate::scenario::StopMode::Decided;
        record.early_stop = Some(crate::runner::EarlyStop {
            turn: 9,
            max_turns: 101,
            reason: "every watched metric decided".to_owned(),
        });
        let text = render_report_json(&record, &verdict).unwrap();
        let value: serde_json::Value = serde_json::from_str(&text).unwrap();
        let errors = schema_errors(&value);
        assert!(errors.is_empty(), "{errors:#?}");
        let back = parse_report(Path::new("report.json"), &text).unwrap();
        assert_eq!(back.record.early_stop, record.early_stop);
        assert_eq!(
            back.record.scenario.stop,
            crate::scenario::StopMode::Decided
        );
    }

    #[rstest::rstest]
    #[case::unknown_phase("/record/samples/0/phase", "bogus".into())]
    #[case::newer_format("/format_version", (FORMAT_VERSION + 1).into())]
    #[case::unknown_classification("/verdict/metrics/native_heap/classification", "leaky".into())]
    #[case::negative_bytes("/record/samples/1/metrics/native_heap", (-5).into())]
    #[case::fractional_turn("/record/samples/1/turn", 1.5.into())]
    #[case::unknown_outcome("/record/outcome/status", "aborted".into())]
    fn the_schema_rejects_what_readers_would_misread(
        #[case] pointer: &str,
        #[case] replacement: serde_json::Value,
    ) {
        let text = rewrite(|v| *v.pointer_mut(pointer).unwrap() = replacement);
        let value: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert!(
            !schema_errors(&value).is_empty(),
            "{pointer} should be rejected"
        );
    }

    fn rewrite(mutate: impl FnOnce(&mut serde_json::Value)) -> String {
        let (record, verdict) = clean_record();
        let mut value: serde_json::Value =
            serde_json::from_str(&render_report_json(&record, &verdict).unwrap()).unwrap();
        mutate(&mut value);
        serde_json::to_string_pretty(&value).unwrap()
    }

    #[test]
    fn a_newer_format_version_asks_for_an_upgrade() {
        let text = rewrite(|v| v["format_version"] = 6.into());
        let err = parse_report(Path::new("out/report.json"), &text).unwrap_err();
        insta::assert_snapshot!(
            err.to_string().replace(LEAKLOOP_VERSION, "[version]"),
            @"out/report.json: report format_version 6 was written by leakloop [version]; this leakloop ([version]) reads format_version 1 to 5: upgrade leakloop"
        );
        // Also when the newer layout no longer parses as this one.
        let text = rewrite(|v| {
            v["format_version"] = 6.into();
            v["record"]["samples"] = "elsewhere".into();
        });
        let err = parse_report(Path::new("out/report.json"), &text).unwrap_err();
        assert!(err.to_string().contains("upgrade leakloop"), "{err}");
    }

    #[test]
    fn a_missing_format_version_is_not_a_report() {
        let text = rewrite(|v| {
            v.as_object_mut().unwrap().remove("format_version");
        });
        let err = parse_report(Path::new("report.json"), &text).unwrap_err();
        assert!(
            err.to_string().contains("no `format_version` field"),
            "{err}"
        );
    }

    #[test]
    fn a_string_format_version_is_a_wrong_type() {
        let text = rewrite(|v| v["format_version"] = "1".into());
        let err = parse_report(Path::new("report.json"), &text).unwrap_err();
        assert_eq!(
            err.to_string(),
            "report.json: wrong type of `format_version`: expected a whole number (5), found \"1\""
        );
    }

    #[test]
    fn a_byte_order_mark_and_a_fifo_are_handled() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("report.json");
        let text = rewrite(|_| {});
        std::fs::write(&path, format!("\u{feff}{text}")).unwrap();
        assert!(read_report(&path).is_ok());
        let fifo = dir.path().join("fifo.json");
        let made = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap();
        assert!(made.success());
        let err = read_report(&fifo).unwrap_err();
        assert!(matches!(err, ReportError::Input(_)), "{err}");
    }

    #[test]
    fn a_bad_field_is_named_with_its_path_and_line() {
        let text = rewrite(|v| v["record"]["samples"][1]["turn"] = "one".into());
        let err = parse_report(Path::new("report.json"), &text).unwrap_err();
        let ReportError::Parse { field, line, .. } = &err else {
            panic!("expected a parse error, got {err}");
        };
        assert_eq!(field.as_deref(), Some("record.samples[1].turn"));
        assert!(*line > 1);
        assert!(err.to_string().contains("invalid type"), "{err}");
    }

    /// Regression: a report whose status said pass above failed expectations printed PASS.
    #[test]
    fn a_stored_status_that_contradicts_the_expectations_is_refused() {
        let text = rewrite(|v| {
            v["verdict"]["expectations"][0]["passed"] = false.into();
        });
        let err = parse_report(Path::new("out/report.json"), &text).unwrap_err();
        assert!(matches!(err, ReportError::Inconsistent { .. }), "{err}");
        assert_eq!(
            err.to_string(),
            "out/report.json: the stored verdict `pass` does not follow from the report's own \
             expectations and outcome (they give `fail`): the file was altered or is corrupt"
        );
    }

    /// A disk that fills while report.json streams is a write error of that file, not a
    /// rendering error.
    #[test]
    fn a_failed_write_while_streaming_keeps_its_io_error() {
        struct FullDisk;
        impl std::io::Write for FullDisk {
            fn write(&mut self, _: &[u8]) -> std::io::Result<usize> {
                Err(std::io::ErrorKind::StorageFull.into())
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let (record, verdict) = clean_record();
        let err = write_report_json(FullDisk, &record, &verdict, None).unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::StorageFull);
    }

    #[test]
    fn truncated_json_is_a_parse_error_not_a_panic() {
        let (record, verdict) = clean_record();
        let text = render_report_json(&record, &verdict).unwrap();
        let err = parse_report(Path::new("report.json"), &text[..text.len() / 2]).unwrap_err();
        assert!(matches!(err, ReportError::Parse { .. }), "{err}");
    }

    /// Regression (issue 20): more warm-up and measured turns than a u32 holds panicked every
    /// renderer (`total_turns`); the report is refused naming the field.
    #[test]
    fn turns_that_overflow_together_are_refused_naming_the_field() {
        let text = rewrite(|v| v["record"]["scenario"]["warmup_turns"] = u32::MAX.into());
        let err = parse_report(Path::new("out/report.json"), &text).unwrap_err();
        assert!(matches!(err, ReportError::Implausible { .. }), "{err:?}");
        assert!(
            err.to_string()
                .starts_with("out/report.json: field `record.scenario.warmup_turns`: "),
            "{err}"
        );
        let text = rewrite(|v| v["record"]["scenario"]["warmup_turns"] = 7.into());
        assert!(parse_report(Path::new("out/report.json"), &text).is_ok());
    }

    /// Regression (issue 20): a format 1 ledger with a turn listed twice, or a turn of
    /// u32::MAX followed by another, overflowed while being folded into runs; a run ending
    /// before it starts underflowed its length; a run's counts times its length overflowed.
    #[rstest::rstest]
    #[case::duplicate_turn(|v: &mut serde_json::Value| {
        v["record"]["ledger"]["turns"] = serde_json::json!([
            {"turn": 1, "kinds": {"k": {"created": 1, "deleted": 0}}},
            {"turn": 1, "kinds": {"k": {"created": 1, "deleted": 0}}},
        ]);
    }, "`turns[1]`: turn 1 does not follow turn 1")]
    #[case::last_turn(|v: &mut serde_json::Value| {
        v["record"]["ledger"]["turns"] = serde_json::json!([
            {"turn": u32::MAX, "kinds": {"k": {"created": 1, "deleted": 0}}},
            {"turn": u32::MAX, "kinds": {"k": {"created": 0, "deleted": 1}}},
        ]);
    }, "does not follow turn 4294967295")]
    #[case::inverted_run(|v: &mut serde_json::Value| {
        v["record"]["ledger"]["runs"]["k"] =
            serde_json::json!([{"first_turn": 5, "last_turn": 2, "created": 1, "deleted": 0}]);
    }, "`runs.k[0]`: last_turn is before first_turn")]
    #[case::overlapping_runs(|v: &mut serde_json::Value| {
        v["record"]["ledger"]["runs"]["k"] = serde_json::json!([
            {"first_turn": 1, "last_turn": 4, "created": 1, "deleted": 0},
            {"first_turn": 4, "last_turn": 6, "created": 0, "deleted": 1},
        ]);
    }, "`runs.k[1]`: overlaps the run before it")]
    #[case::run_total(|v: &mut serde_json::Value| {
        v["record"]["ledger"]["runs"]["k"] = serde_json::json!([
            {"first_turn": 0, "last_turn": 3, "created": 1u64 << 62, "deleted": 0},
        ]);
    }, "`runs.k[0]`: its counts over its 4 turns pass 18446744073709551615")]
    fn ledger_numbers_no_run_can_have_are_refused(
        #[case] mutate: fn(&mut serde_json::Value),
        #[case] expected: &str,
    ) {
        let text = rewrite(|v| {
            if v["record"]["ledger"]["turns"].is_null() {
                v["record"]["ledger"]["runs"] = serde_json::json!({});
            }
            mutate(v);
            if !v["record"]["ledger"]["turns"].is_null() {
                v["record"]["ledger"]["runs"] = serde_json::json!({});
            }
        });
        let err = parse_report(Path::new("out/report.json"), &text).unwrap_err();
        let message = err.to_string();
        assert!(matches!(err, ReportError::Parse { .. }), "{err:?}");
        assert!(message.contains("field `record.ledger`"), "{message}");
        assert!(message.contains(expected), "{message}");
    }

    /// A driver may report cumulative counts up to 2^64-1 (a run that ends on its impossible
    /// counts keeps them in its report): such a report is read, and its live count saturates.
    #[test]
    fn counts_up_to_the_largest_a_driver_may_report_are_read() {
        let text = rewrite(|v| {
            v["record"]["ledger"]["totals"]["k"] =
                serde_json::json!({"created": u64::MAX, "deleted": 0});
            v["record"]["ledger"]["runs"]["k"] = serde_json::json!([
                {"first_turn": 0, "last_turn": 0, "created": u64::MAX, "deleted": 0},
            ]);
        });
        let report = parse_report(Path::new("out/report.json"), &text).unwrap();
        assert_eq!(report.record.ledger.totals["k"].live(), i64::MAX);
    }
}
