//! `leakloop analyze`.

use crate::cli::{CliError, Exit};

/// Arguments of `leakloop analyze`.
#[derive(Debug, clap::Args)]
pub(crate) struct AnalyzeArgs {}

pub(crate) fn run(_args: AnalyzeArgs) -> Result<Exit, CliError> {
    Err(CliError::bad_input(
        "`leakloop analyze` is not available in this build yet",
    ))
}
