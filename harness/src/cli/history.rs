//! `leakloop history DIR...`: the reports of successive builds (one folder per build, oldest
//! first: a run's `--out` folder or a suite folder), per scenario and metric a table of the growth
//! per turn and the plateau size over the builds, the changes beyond the builds' own spread
//! (`analyze::find_changes`) with the first build of each, and a trend plot per scenario. A
//! rise of either figure is a regression and ends the command with exit 1. The comparison is the
//! library's (`crate::history`), the text and the files are the report layer's
//! (`report::render_history`, `report::write_history_files`); here the flags are read and the
//! results printed.

use std::path::PathBuf;

use crate::analyze::{ChangeOptions, BACK_WINDOW_FACTOR, DEFAULT_WINDOW};
use crate::cli::output;
use crate::cli::{CliError, Exit, Outcome};
use crate::history::judge;
use crate::report::history::read_build;
use crate::report::{render_history, write_history_files, ReportError};
use crate::results_db::{open_existing, read_builds};

/// Arguments of `leakloop history`.
#[derive(Debug, clap::Args)]
pub(crate) struct HistoryArgs {
    /// One folder per build, oldest first: a run's `--out` folder, a suite folder (per-scenario
    /// report.json files in its subfolders), or several runs of a build.
    #[arg(
        required_unless_present = "db",
        conflicts_with = "db",
        value_name = "DIR"
    )]
    pub dirs: Vec<PathBuf>,
    /// Read the builds from this results database (`--record`) instead of folders: a SQLite
    /// file or a `postgres://` URL; its runs are grouped by build id, oldest build date first.
    #[arg(long, value_name = "DB")]
    pub db: Option<String>,
    /// Only this scenario.
    #[arg(long, value_name = "NAME")]
    pub scenario: Option<String>,
    /// Builds in the window after a candidate change: a change is judged once this many builds
    /// follow it (the builds before it: up to three times as many).
    #[arg(long, default_value_t = DEFAULT_WINDOW as u32, value_parser = clap::value_parser!(u32).range(2..=100))]
    pub window: u32,
    /// A change must also exceed this much (bytes per turn for growth, bytes for plateaus;
    /// e.g. `4KiB`).
    #[arg(long, value_name = "SIZE")]
    pub min_change: Option<String>,
    /// Only these metrics (default: every analysed metric).
    #[arg(long = "metric", value_name = "METRIC")]
    pub metrics: Vec<String>,
    /// Write history.txt (the table) and one trend plot per scenario (`SCENARIO.svg`) here.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
}

/// A `--min-change`-style size flag in bytes (0 when absent); a bad size names the flag.
pub(crate) fn min_change_flag(flag: &str, text: Option<&str>) -> Result<f64, CliError> {
    match text {
        Some(text) => Ok(leakloop_units::parse_size(text)
            .map_err(|e| CliError::bad_input(e.one_line(flag, text)))?
            as f64),
        None => Ok(0.0),
    }
}

pub(crate) fn run(args: HistoryArgs) -> Result<Outcome, CliError> {
    let min_change = min_change_flag("--min-change", args.min_change.as_deref())?;
    if args.db.is_none() && args.dirs.len() < 2 {
        return Err(CliError::bad_input(
            "history needs the folders of at least two builds",
        ));
    }
    let options = ChangeOptions {
        window: args.window as usize,
        back_window: BACK_WINDOW_FACTOR * args.window as usize,
        min_change,
        ..ChangeOptions::default()
    };
    // Created before anything is judged: a folder that cannot be made is an output failure.
    if let Some(out) = &args.out {
        // A signal while the plots are written leaves no temporary file in --out.
        crate::cli::interrupt::install_for_writes("history").map_err(|e| {
            CliError::Output(anyhow::anyhow!("cannot watch for SIGINT and SIGTERM: {e}"))
        })?;
        std::fs::create_dir_all(out).map_err(|source| ReportError::Write {
            path: out.clone(),
            source,
        })?;
    }
    let mut builds = Vec::with_capacity(args.dirs.len());
    for dir in &args.dirs {
        let build = read_build(dir).map_err(|e| CliError::from(e).context("history"))?;
        for note in &build.skipped {
            output::note(&format!("history: skipped {note}"));
        }
        builds.push(build);
    }
    if let Some(db) = &args.db {
        let mut store = open_existing(db).map_err(|e| CliError::from(e).context("history"))?;
        builds = read_builds(store.as_mut(), args.scenario.as_deref())
            .map_err(|e| CliError::from(e).context("history"))?;
        if builds.len() < 2 {
            return Err(CliError::bad_input(format!(
                "history: {db} holds {} build(s){}: history needs at least two",
                builds.len(),
                args.scenario
                    .as_deref()
                    .map(|s| format!(" of scenario `{s}`"))
                    .unwrap_or_default()
            )));
        }
    } else if let Some(scenario) = &args.scenario {
        for build in &mut builds {
            build.runs.retain(|name, _| name == scenario);
        }
    }
    let history = judge(&builds, &options, &args.metrics);
    let text = render_history(&history, &builds, &options);
    output::print(&text);
    if let Some(out) = &args.out {
        for problem in write_history_files(out, &text, &history, &builds) {
            output::warning(&problem);
        }
        output::println(&format!(
            "history: trend plots and history.html in {}",
            out.display()
        ));
    }
    let regressions = history.regressions();
    Ok(Outcome::Verdict(if regressions > 0 {
        Exit::ExpectationFailed
    } else {
        Exit::Pass
    }))
}
