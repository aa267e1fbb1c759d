//! `leakloop bench`.

use crate::cli::{CliError, Exit};

/// Arguments of `leakloop bench`.
#[derive(Debug, clap::Args)]
pub(crate) struct BenchArgs {}

pub(crate) fn run(_args: BenchArgs) -> Result<Exit, CliError> {
    Err(CliError::bad_input(
        "`leakloop bench` is not available in this build yet",
    ))
}
