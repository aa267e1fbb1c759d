//! `leakloop run`.

use crate::cli::{CliError, Exit};

/// Arguments of `leakloop run`.
#[derive(Debug, clap::Args)]
pub(crate) struct RunArgs {}

pub(crate) fn run(_args: RunArgs) -> Result<Exit, CliError> {
    Err(CliError::bad_input(
        "`leakloop run` is not available in this build yet",
    ))
}
