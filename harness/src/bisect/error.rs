//! Why `bisect` could not give a table; `cli/error.rs` maps each kind to its exit code.

use crate::engine::litert_lm::{DiscoverError, LibraryRefusal};

/// Why `bisect` could not give a table.
#[derive(Debug, thiserror::Error)]
pub(crate) enum BisectError {
    /// `--versions` could not be turned into builds.
    #[error("--versions: {0}")]
    Builds(String),
    /// A library path in `--versions` is no library.
    #[error("--versions: {0}")]
    Library(DiscoverError),
    /// `--versions` names no build at all.
    #[error("--versions {versions} names no build")]
    NoBuild {
        /// The `--versions` value.
        versions: String,
    },
    /// A library already on disk cannot run a step of the scenario.
    #[error("build {build}: {refusal}")]
    Refused {
        /// The build's label.
        build: String,
        /// What the library lacks.
        refusal: LibraryRefusal,
    },
    /// No build measured the figure (each build's note in the table says why).
    #[error("no build measured {what} (see the table)")]
    NothingMeasured {
        /// The figure.
        what: String,
    },
}
