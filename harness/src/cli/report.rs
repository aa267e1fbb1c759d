//! `leakloop report`.

use crate::cli::{CliError, Exit};

/// Arguments of `leakloop report`.
#[derive(Debug, clap::Args)]
pub(crate) struct ReportArgs {}

pub(crate) fn run(_args: ReportArgs) -> Result<Exit, CliError> {
    Err(CliError::bad_input(
        "`leakloop report` is not available in this build yet",
    ))
}
