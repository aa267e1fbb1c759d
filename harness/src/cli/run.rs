//! `leakloop run`: one scenario, start to finish: build the engine, run the turn loop while
//! streaming samples to disk, analyse, write the reports and map the verdict to an exit code.

use std::path::{Path, PathBuf};

use crate::analyze::{analyze_run, StopWhenDecided, Verdict};
use crate::cli::output;
use crate::cli::{CliError, Exit, Outcome};
use crate::engine::build_engine;
use crate::report::{
    print_terminal, render_report_json, write_reports, Fanout, ProgressObserver, SampleStream,
};
use crate::runner::{
    run_scenario_until, NoObserver, RunAllTurns, RunObserver, RunRecord, StopRule,
};
use crate::scenario::{load_scenario_with, BackendKind, Device, Overrides, Scenario, StopMode};

/// Arguments of `leakloop run`.
#[derive(Debug, clap::Args)]
pub(crate) struct RunArgs {
    /// The scenario file (YAML).
    pub scenario: PathBuf,
    /// Run on another backend than the scenario names.
    #[arg(long, value_enum)]
    pub backend: Option<BackendKind>,
    /// Override the engine profile (simulator or OpenCL engine).
    #[arg(long)]
    pub profile: Option<String>,
    /// Override the model file of a real engine.
    #[arg(long)]
    pub model: Option<PathBuf>,
    /// Engine library to load (e.g. a `liblitert-lm.so`), instead of discovering one.
    #[arg(long)]
    pub lib: Option<PathBuf>,
    /// Override the compute device of a real engine.
    #[arg(long, value_enum)]
    pub device: Option<Device>,
    /// Override the context size (KV cache) in tokens.
    #[arg(long)]
    pub max_tokens: Option<u32>,
    /// Override the number of measured turns (with `--stop decided`, the most that run).
    #[arg(long)]
    pub turns: Option<u32>,
    /// `turns`: run every turn; `decided`: look at the verdict every few turns and stop once
    /// every watched metric is decided (overrides the scenario's `stop`).
    #[arg(long, value_enum)]
    pub stop: Option<StopMode>,
    /// Override the seed.
    #[arg(long)]
    pub seed: Option<u64>,
    /// Write report.json, junit.xml, plot.svg, summary.md and the streamed samples.jsonl here.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// What to print on stdout.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
    /// No progress bar.
    #[arg(long, short)]
    pub quiet: bool,
}

/// What `leakloop run` prints on stdout.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Format {
    /// The verdict table.
    Text,
    /// report.json.
    Json,
}

impl RunArgs {
    /// The scenario values this command line replaces.
    fn overrides(&self) -> Overrides {
        Overrides {
            backend: self.backend,
            profile: self.profile.clone(),
            model: self.model.clone(),
            lib: self.lib.clone(),
            device: self.device,
            max_tokens: self.max_tokens,
            turns: self.turns,
            seed: self.seed,
            stop: self.stop,
        }
    }
}

pub(crate) fn run(args: RunArgs) -> Result<Outcome, CliError> {
    let scenario = load_scenario_with(&args.scenario, &args.overrides())?;
    let (record, verdict) = run_and_analyze(&scenario, args.out.as_deref(), args.quiet)?;
    match args.format {
        Format::Json => match render_report_json(&record, &verdict) {
            Ok(json) => output::println(&json),
            Err(e) => output::warning(&e.to_string()),
        },
        Format::Text => {
            output::write_stdout(|| print_terminal(&record, &verdict));
            if let Some(out) = &args.out {
                output::println(&format!("reports: {}", out.display()));
            }
        }
    }
    Ok(Outcome::Verdict(Exit::of_verdict(verdict.status)))
}

/// Builds the engine, runs the scenario (streaming samples into `out` when given), analyses the
/// record and writes every report. An engine that fails mid-run still yields a record and a
/// verdict; only an engine that cannot be built at all is an error.
pub(crate) fn run_and_analyze(
    scenario: &Scenario,
    out: Option<&Path>,
    quiet: bool,
) -> Result<(RunRecord, Verdict), CliError> {
    let mut engine = build_engine(scenario).map_err(|e| {
        CliError::from(e).context(format!(
            "cannot start the `{}` engine for {}",
            scenario.engine.backend.as_str(),
            scenario_label(scenario)
        ))
    })?;
    let mut progress = ProgressObserver::new(&scenario.name, scenario.total_turns(), quiet);
    let mut stream = out.map(SampleStream::create).transpose()?;
    let record = {
        let mut observers: Vec<&mut dyn RunObserver> = vec![&mut progress];
        let mut none = NoObserver;
        match stream.as_mut() {
            Some(stream) => observers.push(stream),
            None => observers.push(&mut none),
        }
        let mut fanout = Fanout::new(observers);
        let mut run_all = RunAllTurns;
        let mut decided;
        let stop: &mut dyn StopRule = match scenario.stop {
            StopMode::Turns => &mut run_all,
            StopMode::Decided => {
                decided = StopWhenDecided::new(scenario);
                &mut decided
            }
        };
        run_scenario_until(scenario, engine.as_mut(), &mut fanout, stop)
    };
    drop(engine);
    progress.finish();
    if let Some(stream) = stream {
        // The samples are on disk already; a failed final flush is reported but the run's
        // result still stands.
        if let Err(e) = stream.finish() {
            output::warning(&e.to_string());
        }
    }
    let verdict = analyze_run(&record);
    if let Some(dir) = out {
        // The verdict is known: a report that cannot be written is a warning next to it.
        if let Err(e) = write_reports(dir, &record, &verdict) {
            output::warning(&format!("cannot write reports: {e}"));
        }
    }
    Ok((record, verdict))
}

fn scenario_label(scenario: &Scenario) -> String {
    match &scenario.source {
        Some(path) => format!("{} ({})", scenario.name, path.display()),
        None => scenario.name.clone(),
    }
}
