//! [`TestRun`]: a finished run with its verdict, typed checks, the table and the folder its
//! reports are in; and the assertions whose panic message is the table and that folder.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use tempfile::TempDir;

use crate::analyze::{Check, GrowthPerTurn, Verdict, VerdictStatus};
use crate::report::{render_terminal, ReportError};
use crate::runner::RunRecord;

use super::scenario_test::REPORTS_ENV;

/// Where a run's reports are: a temporary folder removed with the [`TestRun`] unless an
/// assertion failed (or [`TestRun::keep_reports`] was called), or a folder that is always kept.
#[derive(Debug)]
pub(crate) struct Reports {
    dir: PathBuf,
    /// The temporary folder, until it is kept.
    temporary: Mutex<Option<TempDir>>,
}

impl Reports {
    /// `given`, else a subfolder of [`REPORTS_ENV`]'s folder named after the test binary, the
    /// test and the scenario, else a new temporary folder.
    pub(crate) fn for_run(given: Option<PathBuf>, scenario: &str) -> Result<Self, ReportError> {
        let kept = |dir: PathBuf| Self {
            dir,
            temporary: Mutex::new(None),
        };
        if let Some(dir) = given {
            return Ok(kept(dir));
        }
        let binary = std::env::current_exe().ok();
        let binary = binary
            .as_deref()
            .and_then(Path::file_stem)
            .map(|stem| stem.to_string_lossy());
        let label = run_label(binary.as_deref(), std::thread::current().name(), scenario);
        if let Some(root) = std::env::var_os(REPORTS_ENV) {
            return Ok(kept(PathBuf::from(root).join(label)));
        }
        let temporary = tempfile::Builder::new()
            .prefix(&format!("leakloop-{label}-"))
            .tempdir()
            .map_err(|source| ReportError::Write {
                path: std::env::temp_dir(),
                source,
            })?;
        Ok(Self {
            dir: temporary.path().to_owned(),
            temporary: Mutex::new(Some(temporary)),
        })
    }

    pub(crate) fn path(&self) -> &Path {
        &self.dir
    }

    /// Keeps the folder after the run is dropped.
    fn keep(&self) -> &Path {
        let mut temporary = self.temporary.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(dir) = temporary.take() {
            let _kept = dir.keep();
        }
        &self.dir
    }
}

/// A folder name for a run: the test binary's name (cargo's, with its hash: two crates' test
/// binaries of one name differ there), the test's name (from its thread) and the scenario's,
/// with anything but letters, digits, `-` and `_` replaced, so that the reports of two test
/// binaries, or two tests, never share a folder.
pub(super) fn run_label(binary: Option<&str>, test: Option<&str>, scenario: &str) -> String {
    let parts: Vec<&str> = [binary, test.filter(|t| *t != "main"), Some(scenario)]
        .into_iter()
        .flatten()
        .collect();
    let label: String = parts
        .join("-")
        .replace("::", "-")
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .take(160)
        .collect();
    label
}

/// A finished run: what was measured, the verdict, and where the reports are.
#[derive(Debug)]
pub struct TestRun {
    record: RunRecord,
    verdict: Verdict,
    reports: Reports,
    /// Reports that could not be written (the verdict stands).
    problems: Vec<String>,
}

impl TestRun {
    pub(crate) fn new(
        record: RunRecord,
        verdict: Verdict,
        reports: Reports,
        problems: Vec<String>,
    ) -> Self {
        Self {
            record,
            verdict,
            reports,
            problems,
        }
    }

    /// Everything measured: samples, ledger, outcome.
    pub fn record(&self) -> &RunRecord {
        &self.record
    }

    /// The analyzer's verdict.
    pub fn verdict(&self) -> &Verdict {
        &self.verdict
    }

    /// Pass, fail, engine failure or interruption.
    pub fn status(&self) -> VerdictStatus {
        self.verdict.status
    }

    /// Every checked expectation with its numbers, in scenario order.
    pub fn checks(&self) -> Vec<Check> {
        self.verdict.checks(&self.record.scenario.expect)
    }

    /// The checked expectation named `name` (`rss.max_growth_per_turn`, `balanced.sim/conversation`).
    pub fn check(&self, name: &str) -> Option<Check> {
        self.checks().into_iter().find(|c| c.name == name)
    }

    /// The expectations that failed.
    pub fn failed_checks(&self) -> Vec<Check> {
        self.checks().into_iter().filter(|c| !c.passed).collect()
    }

    /// The growth per turn of `metric` with its interval, when it was analysed.
    pub fn growth(&self, metric: &str) -> Option<GrowthPerTurn> {
        self.verdict.growth(metric)
    }

    /// The verdict table `leakloop run` prints, as plain text.
    pub fn table(&self) -> String {
        anstream::adapter::strip_str(&render_terminal(&self.record, &self.verdict)).to_string()
    }

    /// The folder holding report.json, summary.md and samples.parquet (junit.xml and plot.svg
    /// too with the `reports` feature). A temporary one is removed when the run is dropped,
    /// unless it is kept.
    pub fn reports_dir(&self) -> &Path {
        self.reports.path()
    }

    /// Keeps the report folder after the run is dropped; returns it.
    pub fn keep_reports(&self) -> &Path {
        self.reports.keep()
    }

    /// Panics unless every expectation held (status `pass`). The panic message is the verdict
    /// table and the folder where the reports were kept.
    ///
    /// ```should_panic
    /// use leakloop::scenario::EngineSpec;
    /// use leakloop::testing::ScenarioTest;
    ///
    /// // Every conversation is left undeleted: `balanced` fails, and so does the assertion.
    /// let reports = tempfile::tempdir().unwrap();
    /// ScenarioTest::chat("kept", EngineSpec::sim("forgets-delete"))
    ///     .turns(5)
    ///     .expect_balanced()
    ///     .reports_in(reports.path())
    ///     .run()
    ///     .assert_pass();
    /// ```
    #[track_caller]
    pub fn assert_pass(&self) -> &Self {
        self.assert_status(VerdictStatus::Pass)
    }

    /// Panics unless the run failed on its expectations (status `fail`: not an engine failure).
    #[track_caller]
    pub fn assert_fail(&self) -> &Self {
        self.assert_status(VerdictStatus::Fail)
    }

    /// Panics unless the verdict's status is `status`.
    #[track_caller]
    pub fn assert_status(&self, status: VerdictStatus) -> &Self {
        if self.verdict.status != status {
            self.fail(&format!(
                "expected the verdict {}, got {}",
                status.as_str(),
                self.verdict.status.as_str()
            ));
        }
        self
    }

    /// Panics unless the expectation `name` was checked and failed.
    #[track_caller]
    pub fn assert_check_failed(&self, name: &str) -> &Self {
        match self.check(name) {
            Some(check) if !check.passed => self,
            Some(_) => self.fail(&format!("expected `{name}` to fail, but it held")),
            None => self.fail(&format!(
                "expected `{name}` to fail, but no such expectation was checked"
            )),
        }
    }

    /// Panics unless the expectation `name` was checked and held.
    #[track_caller]
    pub fn assert_check_passed(&self, name: &str) -> &Self {
        match self.check(name) {
            Some(check) if check.passed => self,
            Some(_) => self.fail(&format!("expected `{name}` to hold, but it failed")),
            None => self.fail(&format!(
                "expected `{name}` to hold, but no such expectation was checked"
            )),
        }
    }

    /// Keeps the reports and panics with `headline`, the table and the report folder.
    #[track_caller]
    fn fail(&self, headline: &str) -> ! {
        let dir = self.keep_reports();
        panic!("{}", self.failure_message(headline, dir));
    }

    fn failure_message(&self, headline: &str, dir: &Path) -> String {
        let mut text = format!(
            "leakloop: {}: {headline}\n\n{}\nreports kept in {}",
            self.record.scenario.name,
            self.table().trim_end(),
            dir.display()
        );
        for problem in &self.problems {
            text.push_str(&format!("\n(some reports are missing: {problem})"));
        }
        text
    }
}
