//! Reports: the terminal table, report.json, junit.xml, summary.md, the memory plot, the streamed
//! sample store (samples.parquet) and the progress bar; plus the redactor and golden view used by snapshot tests.
//!
//! `leakloop run --out DIR` claims the folder ([`OutDir`]), streams samples through
//! [`SampleStream`], then calls [`write_reports`]; `leakloop report DIR` looks at the folder
//! ([`inspect_out_dir`]) and re-renders from [`read_report`].
//!
//! plot.svg, the trend plots, junit.xml and the progress bar need their own crates and are built
//! only with the `reports` feature (which `cli` turns on); without it a run writes report.json,
//! summary.md and samples.parquet.

#[cfg(feature = "cli")]
mod analyze;
mod artifacts;
mod atomic;
#[cfg(feature = "cli")]
mod compare;
mod error;
mod escape;
/// Test fixtures (finished runs of every kind), for this crate's tests and, through
/// `test-support`, its integration tests; `bench history-scale` (cli) takes its template run
/// from here. Not API.
#[cfg(any(test, feature = "test-support", feature = "cli"))]
#[doc(hidden)]
pub mod examples;
mod facts;
mod fanout;
mod golden_view;
pub mod history;
#[cfg(feature = "cli")]
mod history_table;
#[cfg(feature = "cli")]
mod html;
mod json;
#[cfg(feature = "reports")]
mod junit;
mod notes;
mod out_dir;
mod partial;
#[cfg(feature = "cli")]
mod plain;
#[cfg(feature = "reports")]
mod plot;
#[cfg(feature = "reports")]
mod progress;
pub mod provenance;
mod reasons;
mod redact;
#[cfg(feature = "cli")]
mod reread;
pub mod safe_path;
mod samples;
pub mod store;
mod suite;
mod summary_md;
mod table;
mod terminal;
#[cfg(test)]
pub(crate) mod test_support;
#[cfg(feature = "reports")]
mod trend;
mod units;

#[cfg(feature = "cli")]
pub(crate) use analyze::{render_analysis_json, render_analysis_text};
pub use artifacts::{
    write_reports, write_reports_with, JUNIT_XML, PLOT_SVG, REPORT_JSON, SAMPLES_CSV_ZST,
    SAMPLES_JSONL, SAMPLES_STORE, SAMPLES_TAIL, SUMMARY_MD,
};
#[cfg(feature = "cli")]
pub(crate) use atomic::discard_pending_writes;
pub use atomic::write_atomic;
#[cfg(feature = "cli")]
pub(crate) use compare::compare_runs;
pub use error::ReportError;
pub use fanout::Fanout;
pub use golden_view::golden_view;
#[cfg(feature = "cli")]
pub(crate) use history_table::{render_history, write_history_files};
#[cfg(feature = "cli")]
pub(crate) use html::{render_history_html, render_run_html, HISTORY_HTML, REPORT_HTML};
pub use json::{
    parse_report, read_report, render_report_json, write_report_json, ReportFile, FORMAT_VERSION,
    LEAKLOOP_VERSION,
};
#[cfg(feature = "reports")]
pub use junit::{junit_suite, render_junit, render_junit_suites};
#[cfg(feature = "cli")]
pub(crate) use out_dir::remove_if_present;
pub use out_dir::{inspect_out_dir, FolderView, OutDir, RunState, LOCK_FILE};
pub use partial::{interrupted_record, render_partial};
#[cfg(feature = "cli")]
pub(crate) use plain::{aligned, status_counts, status_word};
#[cfg(feature = "reports")]
pub use plot::render_plot_svg;
#[cfg(feature = "reports")]
pub use progress::ProgressObserver;
pub use reasons::render_reason;
// `leakloop analyze --format json` writes the reasons of a trace's metrics.
#[cfg(feature = "cli")]
pub(crate) use reasons::render_reasons;
pub(crate) use reasons::verdict_in_words;
pub use redact::{Redactor, PROBE};
#[cfg(feature = "cli")]
pub use reread::{
    check_suite_entries, read_out_folder, render_unfinished, rewrite_run_files, EntryCheck,
    SavedFolder,
};
pub use samples::SampleStream;
pub use store::{read_folder_samples, read_samples, StoreRef, StreamedSamples};
#[cfg(feature = "reports")]
pub use suite::render_suite_junit;
pub use suite::{
    read_suite_report, render_suite_summary_md, render_suite_text, write_suite_reports,
    EntryStatus, SuiteEntry, SuiteIdentity, SuitePartition, SuiteReport, WorstMetric,
    MAX_SUITE_REPORT_BYTES, SUITE_FORMAT_VERSION, SUITE_KIND,
};
pub use summary_md::render_summary_md;
pub use terminal::{print_terminal, render_terminal};
#[cfg(feature = "reports")]
pub use trend::{render_trend_svg, render_trends_svg, Trend, TrendPoint};
pub use units::{format_bytes, format_per_turn, format_rate_with_interval, format_signed_bytes};

/// Runs snapshot assertions with their snapshots stored under the workspace's `golden/report/`.
#[cfg(test)]
macro_rules! golden {
    ($($body:tt)*) => {
        insta::with_settings!(
            {snapshot_path => "../../../golden/report", prepend_module_to_snapshot => false},
            { $($body)* }
        )
    };
}
#[cfg(test)]
pub(crate) use golden;
