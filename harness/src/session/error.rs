//! Why a session could not run its scenario at all. A run that starts always ends in a verdict
//! (an engine that fails mid-run is a verdict, not an error); these are the failures before that,
//! each keeping the typed error of the layer it came from so that a caller (the CLI's exit codes,
//! `leakloop::testing`'s messages) can tell them apart.

use crate::engine::litert_lm::LibraryRefusal;
use crate::engine::transport::BuildError;
use crate::report::ReportError;
use crate::scenario::ScenarioError;

use super::baseline::BaselineError;

/// Why a [`Session`](super::Session) could not run its scenario.
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    /// The scenario file is not a valid scenario.
    #[error(transparent)]
    Scenario(#[from] ScenarioError),
    /// The build id or date given for the report is not usable.
    #[error("{0}")]
    BuildStamp(String),
    /// The baseline to judge the run against cannot be used.
    #[error(transparent)]
    Baseline(#[from] BaselineError),
    /// The engine library cannot run a step of the scenario (checked before anything starts).
    #[error(transparent)]
    Refused(#[from] LibraryRefusal),
    /// The engine could not be built or started on its target.
    #[error("cannot start the `{backend}` engine for {scenario}")]
    Start {
        /// The backend.
        backend: &'static str,
        /// The scenario's name, and its file when it has one.
        scenario: String,
        /// What failed: the target (or its transport) or the engine.
        #[source]
        source: BuildError,
    },
    /// The output folder could not be claimed, or its samples file not created.
    #[error(transparent)]
    Out(#[from] ReportError),
}
