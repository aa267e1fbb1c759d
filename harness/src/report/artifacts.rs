//! The artifacts of one run and the function that writes them all into its output folder.

use std::path::{Path, PathBuf};

use crate::analyze::Verdict;
use crate::report::atomic::{write_atomic, write_atomic_with};
use crate::report::{
    render_junit, render_plot_svg, render_summary_md, write_report_json, ReportError,
};
use crate::runner::RunRecord;

/// The machine-readable report.
pub const REPORT_JSON: &str = "report.json";
/// One JUnit test case per expectation.
pub const JUNIT_XML: &str = "junit.xml";
/// Memory per turn per metric.
pub const PLOT_SVG: &str = "plot.svg";
/// A short table for a pull-request comment.
pub const SUMMARY_MD: &str = "summary.md";
/// Every sample, one JSON object per line, streamed while the run goes on.
pub const SAMPLES_JSONL: &str = "samples.jsonl";

/// Renders and atomically writes report.json, junit.xml, plot.svg and summary.md into `dir`
/// (created if missing); returns the paths written, in that order. One artifact at a time:
/// report.json is streamed to its file, the others are rendered just before they are written,
/// so a long run never holds every artifact in memory at once. Each file is replaced
/// atomically; a rendering error leaves that artifact (and those after it) as they were.
pub fn write_reports(
    dir: &Path,
    record: &RunRecord,
    verdict: &Verdict,
) -> Result<Vec<PathBuf>, ReportError> {
    std::fs::create_dir_all(dir).map_err(|source| ReportError::Write {
        path: dir.to_owned(),
        source,
    })?;
    let mut written = Vec::with_capacity(4);
    let path = dir.join(REPORT_JSON);
    write_atomic_with(&path, |out| write_report_json(out, record, verdict))?;
    written.push(path);
    type Render<'a> = &'a dyn Fn() -> Result<String, ReportError>;
    let rest: [(&str, Render<'_>); 3] = [
        (JUNIT_XML, &|| render_junit(record, verdict)),
        (PLOT_SVG, &|| render_plot_svg(record, verdict)),
        (SUMMARY_MD, &|| Ok(render_summary_md(record, verdict))),
    ];
    for (name, render) in rest {
        let path = dir.join(name);
        write_atomic(&path, render()?.as_bytes())?;
        written.push(path);
    }
    Ok(written)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::examples::leak_run;
    use crate::report::read_report;

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
