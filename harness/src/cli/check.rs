//! `leakloop check`.

use crate::cli::{CliError, Exit};

/// Arguments of `leakloop check`.
#[derive(Debug, clap::Args)]
pub(crate) struct CheckArgs {}

pub(crate) fn run(_args: CheckArgs) -> Result<Exit, CliError> {
    Err(CliError::bad_input(
        "`leakloop check` is not available in this build yet",
    ))
}
