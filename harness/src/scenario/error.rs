//! Errors from reading and validating a scenario file.

use std::path::PathBuf;

/// A scenario that could not be read or is invalid.
#[derive(Debug, thiserror::Error)]
#[error("{}: {message}", file.display())]
pub struct ScenarioError {
    /// The file (or origin label) the scenario came from.
    pub file: PathBuf,
    /// What is wrong.
    pub message: String,
}
