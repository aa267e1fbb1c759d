//! `--baseline OLD_DIR` for a suite's scenarios: the library's [`session::Baseline`], its note
//! printed and its errors mapped to exit codes.

use std::path::Path;

use crate::analyze::Verdict;
use crate::cli::output;
use crate::cli::CliError;
use crate::runner::RunRecord;
use crate::scenario::Scenario;
use crate::session;

/// The previous run a new one is compared with.
#[derive(Debug)]
pub(crate) struct Baseline(session::Baseline);

impl Baseline {
    /// Reads the baseline of `scenario` from `dir` (see [`session::Baseline::load`]) and says
    /// when the scenario file changed since.
    pub(crate) fn load(
        dir: &Path,
        scenario: &Scenario,
        min_change: Option<&str>,
    ) -> Result<Baseline, CliError> {
        let baseline = session::Baseline::load(dir, scenario, min_change)?;
        if let Some(note) = baseline.note() {
            output::note(&note);
        }
        Ok(Baseline(baseline))
    }

    /// Adds the baseline checks to `verdict` (see [`session::Baseline::apply`]).
    pub(crate) fn apply(&self, record: &RunRecord, verdict: &mut Verdict) {
        self.0.apply(record, verdict);
    }
}
