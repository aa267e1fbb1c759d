//! The turn-loop runner: executes a scenario against an engine in safe release order, counts
//! every create/delete in the ledger and samples memory at the scenario's sampling points; with
//! `stop: decided` a [`StopRule`] may end it once the verdict is decided.

mod clock;
mod metrics;
mod prompt;
mod provenance;
mod record;
mod run_loop;
mod samples;
mod stop;
mod timing;

pub use metrics::{MetricName, Metrics};
pub use provenance::{BuildStamp, CiRun, EngineOrigin, FileDigest, Host, Provenance};
pub use record::{
    FormatVersion, Phase, RunOutcome, RunRecord, Sample, OLDEST_REPORT_FORMAT_VERSION,
    REPORT_FORMAT_VERSION,
};
pub use run_loop::{NoObserver, RunObserver};
pub use samples::{Iter as SamplesIter, MetricValues, Samples};
pub use stop::EarlyStop;

// Not API (a library session runs a scenario): the loop itself and its stop rules, public for
// the command line, the benchmarks and the integration tests.
#[doc(hidden)]
pub use run_loop::{backend_on, run_scenario, run_scenario_on, run_scenario_until};
#[doc(hidden)]
pub use stop::{RunAllTurns, StopRule};
