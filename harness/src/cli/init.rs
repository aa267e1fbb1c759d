//! `leakloop init`: writes a starter scenario for a backend, commented, with the metrics that
//! backend can see on this platform (from the metric registry) and default expectations filled
//! in, ready for `leakloop check` and `leakloop run`. The text is the backend's own
//! (`backend::starter_text`); this command checks its flags against it, writes and prints.

use std::io::Write;
use std::path::{Path, PathBuf};

use crate::backend::{self, starter_text, CommandUse, StarterOptions};
use crate::cli::output;
use crate::cli::{CliError, Exit, Outcome};
use crate::scenario::BackendKind;

/// The backend a starter scenario is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum InitBackend {
    /// The deterministic simulator: runs anywhere, no setup.
    Sim,
    /// LiteRT-LM through its C API (give the model with `--model`).
    LitertLm,
    /// An external driver speaking docs/protocol.md (`-- COMMAND...`).
    Exec,
    /// A program that runs its own turn loop and prints `TURN n CLOSED` (`-- COMMAND...`).
    Attach,
}

impl InitBackend {
    /// The backend it names.
    fn kind(self) -> BackendKind {
        match self {
            InitBackend::Sim => BackendKind::Sim,
            InitBackend::LitertLm => BackendKind::LitertLm,
            InitBackend::Exec => BackendKind::Exec,
            InitBackend::Attach => BackendKind::Attach,
        }
    }
}

/// Arguments of `leakloop init`.
#[derive(Debug, clap::Args)]
pub(crate) struct InitArgs {
    /// The backend: `sim`, `litert-lm`, `exec -- COMMAND...` or `attach -- COMMAND...`.
    #[arg(value_enum, value_name = "BACKEND")]
    backend: InitBackend,
    /// Write the scenario to FILE (refused when FILE exists, unless --force) instead of
    /// standard output.
    #[arg(long, value_name = "FILE")]
    out: Option<PathBuf>,
    /// Overwrite FILE when it exists.
    #[arg(long, requires = "out")]
    force: bool,
    /// The model file, for `litert-lm`.
    #[arg(long, value_name = "PATH")]
    model: Option<PathBuf>,
    /// The driver (`exec`) or the program to attach to (`attach`), with its arguments.
    #[arg(last = true, value_name = "COMMAND")]
    command: Vec<String>,
}

pub(crate) fn run(args: InitArgs) -> Result<Outcome, CliError> {
    let backend = backend::of(args.backend.kind());
    let name = backend.name;
    let starter = backend
        .starter
        .as_ref()
        .unwrap_or_else(|| panic!("every `init` backend has a starter; {name} has none"));
    if starter.command == CommandUse::None && !args.command.is_empty() {
        return Err(CliError::bad_input(format!(
            "`init {name}` takes no command after `--` (only exec and attach do)"
        )));
    }
    if starter.command == CommandUse::Required && args.command.is_empty() {
        return Err(CliError::bad_input(format!(
            "`init {name}` needs the driver: `leakloop init {name} -- python3 my_driver.py`"
        )));
    }
    if args.model.is_some() && !starter.takes_model {
        return Err(CliError::bad_input("--model is for `init litert-lm` only"));
    }
    let options = StarterOptions {
        command: &args.command,
        model: args.model.as_deref(),
    };
    let text = starter_text(backend, &options).expect("checked above: it has a starter");
    let Some(path) = args.out else {
        output::print(&text);
        return Ok(Outcome::Done);
    };
    write_new(&path, &text, args.force)?;
    output::println(&format!(
        "wrote {}: check it with `leakloop check {0}`, run it with `leakloop run {0} --out results`",
        path.display()
    ));
    Ok(Outcome::Verdict(Exit::Pass))
}

/// Writes `text` to `path`; an existing file is kept (bad input) unless `force`.
fn write_new(path: &Path, text: &str, force: bool) -> Result<(), CliError> {
    let mut options = std::fs::OpenOptions::new();
    options.write(true);
    if force {
        options.create(true).truncate(true);
    } else {
        // Refused atomically: no window between a check and the write.
        options.create_new(true);
    }
    let mut file = options.open(path).map_err(|e| {
        if e.kind() == std::io::ErrorKind::AlreadyExists {
            CliError::bad_input(format!(
                "{} exists; pass --force to overwrite it",
                path.display()
            ))
        } else {
            CliError::Output(anyhow::anyhow!("could not create {}: {e}", path.display()))
        }
    })?;
    file.write_all(text.as_bytes())
        .map_err(|e| CliError::Output(anyhow::anyhow!("could not write {}: {e}", path.display())))
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::ValueEnum as _;

    #[test]
    fn every_backend_init_offers_has_a_starter() {
        for backend in InitBackend::value_variants() {
            let row = backend::of(backend.kind());
            assert!(row.starter.is_some(), "{} has no starter", row.name);
            let name = backend.to_possible_value().expect("no variant is skipped");
            assert_eq!(
                name.get_name(),
                row.name,
                "the value `init` takes is the row's name"
            );
        }
    }
}
