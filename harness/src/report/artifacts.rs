//! The artifacts of one run and the function that writes them all into its output folder.

use std::path::{Path, PathBuf};

use crate::analyze::Verdict;
use crate::report::atomic::{write_atomic, write_atomic_with};
use crate::report::out_dir::create_folder;
use crate::report::store::{write_store, StoreRef};
#[cfg(feature = "reports")]
use crate::report::{render_junit, render_plot_svg};
use crate::report::{render_summary_md, write_report_json, ReportError};
use crate::runner::RunRecord;

/// The machine-readable report.
pub const REPORT_JSON: &str = "report.json";
/// One JUnit test case per expectation (written with the `reports` feature).
pub const JUNIT_XML: &str = "junit.xml";
/// Memory per turn per metric (written with the `reports` feature).
pub const PLOT_SVG: &str = "plot.svg";
/// A short table for a pull-request comment.
pub const SUMMARY_MD: &str = "summary.md";
/// Every sample, one JSON object per line: the sample file of format 3 and older run folders,
/// still read ([`crate::report::store::read_samples`]).
pub const SAMPLES_JSONL: &str = "samples.jsonl";
/// The sample store: every sample once, as Parquet, written while the run goes on (see
/// [`crate::report::store`]).
pub const SAMPLES_STORE: &str = "samples.parquet";
/// The journal of a sample store: the samples of the last turns not yet in a row group, left
/// by a killed run (a finished one removes it).
pub const SAMPLES_TAIL: &str = "samples.tail.jsonl";
/// The sample store of format 4 run folders (zstd-compressed CSV), still read.
pub const SAMPLES_CSV_ZST: &str = "samples.csv.zst";

/// Renders and atomically writes report.json, junit.xml, plot.svg and summary.md into `dir`
/// (created if missing); returns the paths written, in that order. junit.xml and plot.svg are
/// written only with the `reports` feature (on with `cli`). One artifact at a time:
/// report.json is streamed to its file, the others are rendered just before they are written,
/// so a long run never holds every artifact in memory at once. Each file is replaced
/// atomically; a rendering error leaves that artifact as it was. A file that cannot be rendered
/// or written (a full disk) does not keep the others from being tried: a CI job may still get
/// its small junit.xml when the large report.json does not fit.
///
/// report.json references the run's sample store: the record's samples are written into a new
/// one first (a record whose samples were not streamed into `dir`; see
/// [`write_reports_with`]).
pub fn write_reports(
    dir: &Path,
    record: &RunRecord,
    verdict: &Verdict,
) -> Result<Vec<PathBuf>, ReportError> {
    write_reports_with(dir, record, verdict, None)
}

/// [`write_reports`], where `store` references the sample store already streamed into `dir`
/// holding exactly the record's samples (`None`: the store is written from the record).
pub fn write_reports_with(
    dir: &Path,
    record: &RunRecord,
    verdict: &Verdict,
    store: Option<&StoreRef>,
) -> Result<Vec<PathBuf>, ReportError> {
    create_folder(dir)?;
    let store = match store {
        Some(store) if store.rows == record.samples.len() as u64 => store.clone(),
        _ => write_store(dir, &record.samples)?,
    };
    let mut written = Vec::with_capacity(4);
    let mut failed = Vec::new();
    let path = dir.join(REPORT_JSON);
    let streamed = write_atomic_with(&path, |out| {
        write_report_json(out, record, verdict, Some(&store)).map_err(|source| ReportError::Write {
            path: path.clone(),
            source,
        })
    });
    match streamed {
        Ok(()) => written.push(path),
        Err(e) => failed.push(e),
    }
    type Render<'a> = &'a dyn Fn() -> Result<String, ReportError>;
    let rest: &[(&str, Render<'_>)] = &[
        #[cfg(feature = "reports")]
        (JUNIT_XML, &|| render_junit(record, verdict)),
        #[cfg(feature = "reports")]
        (PLOT_SVG, &|| render_plot_svg(record, verdict)),
        (SUMMARY_MD, &|| Ok(render_summary_md(record, verdict))),
    ];
    for &(name, render) in rest {
        let path = dir.join(name);
        match render().and_then(|contents| write_atomic(&path, contents.as_bytes())) {
            Ok(()) => written.push(path),
            Err(e) => failed.push(e),
        }
    }
    match failed.len() {
        0 => Ok(written),
        1 => Err(failed.remove(0)),
        _ => Err(ReportError::Several { errors: failed }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::examples::leak_run;
    use crate::report::read_report;

    #[test]
    fn an_artifact_that_cannot_be_written_does_not_stop_the_others() {
        let dir = tempfile::tempdir().unwrap();
        // A non-empty folder where report.json goes: the rename over it fails, even for root.
        std::fs::create_dir_all(dir.path().join(REPORT_JSON).join("x")).unwrap();
        let (record, verdict) = leak_run();
        let err = write_reports(dir.path(), &record, &verdict).unwrap_err();
        assert!(matches!(err, ReportError::Write { .. }), "{err}");
        assert!(err.to_string().contains(REPORT_JSON), "{err}");
        for name in [JUNIT_XML, PLOT_SVG, SUMMARY_MD] {
            assert!(dir.path().join(name).is_file(), "{name} written");
        }
    }

    #[test]
    fn writes_the_four_artifacts_and_the_report_reads_back() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("nested/out");
        let (record, verdict) = leak_run();
        let written = write_reports(&out, &record, &verdict).unwrap();
        let names: Vec<_> = written
            .iter()
            .map(|p| p.file_name().unwrap().to_str().unwrap())
            .collect();
        assert_eq!(names, [REPORT_JSON, JUNIT_XML, PLOT_SVG, SUMMARY_MD]);
        let back = read_report(&out.join(REPORT_JSON)).unwrap();
        assert_eq!(back.verdict, verdict);
        for path in &written {
            assert!(
                std::fs::metadata(path).unwrap().len() > 100,
                "{}",
                path.display()
            );
        }
    }
}
