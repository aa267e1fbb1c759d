//! `leakloop run`: one scenario, start to finish: build the engine, run the turn loop while
//! streaming samples to disk, analyse, write the reports and map the verdict to an exit code.

use std::path::{Path, PathBuf};

use anyhow::anyhow;

use crate::analyze::{analyze_run, Verdict, VerdictStatus};
use crate::cli::{CliError, Exit};
use crate::engine::build_engine;
use crate::report::{
    print_terminal, render_report_json, write_reports, Fanout, ProgressObserver, SampleStream,
};
use crate::runner::{run_scenario, NoObserver, RunObserver, RunRecord};
use crate::scenario::{load_scenario, BackendKind, Device, Scenario};

/// Arguments of `leakloop run`.
#[derive(Debug, clap::Args)]
pub(crate) struct RunArgs {
    /// The scenario file (YAML).
    pub scenario: PathBuf,
    /// Run on another backend than the scenario names.
    #[arg(long, value_parser = ["sim", "litert-lm", "opencl"])]
    pub backend: Option<String>,
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
    #[arg(long, value_parser = ["cpu", "gpu"])]
    pub device: Option<String>,
    /// Override the context size (KV cache) in tokens.
    #[arg(long)]
    pub max_tokens: Option<u32>,
    /// Override the number of measured turns.
    #[arg(long)]
    pub turns: Option<u32>,
    /// Override the seed.
    #[arg(long)]
    pub seed: Option<u64>,
    /// Write report.json, junit.xml, plot.svg, summary.md and the streamed samples.jsonl here.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// `text`: the verdict table; `json`: report.json on stdout.
    #[arg(long, default_value = "text", value_parser = ["text", "json"])]
    pub format: String,
    /// No progress bar.
    #[arg(long, short)]
    pub quiet: bool,
}

pub(crate) fn run(args: RunArgs) -> Result<Exit, CliError> {
    let mut scenario = load_scenario(&args.scenario).map_err(CliError::bad_input)?;
    apply_overrides(&mut scenario, &args)?;
    let (record, verdict) = run_and_analyze(&scenario, args.out.as_deref(), args.quiet)?;
    if args.format == "json" {
        let json = render_report_json(&record, &verdict).map_err(|e| CliError::Engine(e.into()))?;
        println!("{json}");
    } else {
        print_terminal(&record, &verdict).map_err(|e| CliError::Engine(e.into()))?;
        if let Some(out) = &args.out {
            println!("reports: {}", out.display());
        }
    }
    Ok(exit_for(&verdict))
}

/// The exit code a verdict maps to.
pub(crate) fn exit_for(verdict: &Verdict) -> Exit {
    match verdict.status {
        VerdictStatus::Pass => Exit::Pass,
        VerdictStatus::Fail => Exit::ExpectationFailed,
        VerdictStatus::EngineFailed => Exit::EngineFailed,
    }
}

/// Builds the engine, runs the scenario (streaming samples into `out` when given), analyses the
/// record and writes every report. An engine that fails mid-run still yields a record and a
/// verdict; only an engine that cannot be built at all is an error.
pub(crate) fn run_and_analyze(
    scenario: &Scenario,
    out: Option<&Path>,
    quiet: bool,
) -> Result<(RunRecord, Verdict), CliError> {
    run_and_analyze_timed(scenario, out, quiet, &mut PhaseTimes::default())
}

/// Wall time of each phase of [`run_and_analyze`], in seconds (for `leakloop bench scale`).
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct PhaseTimes {
    /// Building the engine and the turn loop, samples streamed.
    pub run: f64,
    /// The analysis.
    pub analyze: f64,
    /// Writing the reports.
    pub reports: f64,
    /// Peak resident memory when the turn loop ended, in bytes, where the OS tells.
    pub run_peak_rss: Option<u64>,
}

/// [`run_and_analyze`], timing each phase into `times`.
pub(crate) fn run_and_analyze_timed(
    scenario: &Scenario,
    out: Option<&Path>,
    quiet: bool,
    times: &mut PhaseTimes,
) -> Result<(RunRecord, Verdict), CliError> {
    let started = std::time::Instant::now();
    let mut engine = build_engine(scenario).map_err(|e| {
        CliError::Engine(anyhow!(
            "cannot start the `{}` engine for {}: {e}",
            scenario.engine.backend.as_str(),
            scenario_label(scenario)
        ))
    })?;
    let mut progress = ProgressObserver::new(&scenario.name, scenario.total_turns(), quiet);
    let mut stream = out
        .map(|dir| {
            std::fs::create_dir_all(dir).map_err(|e| {
                CliError::bad_input(format!("cannot create {}: {e}", dir.display()))
            })?;
            SampleStream::create(dir).map_err(CliError::bad_input)
        })
        .transpose()?;
    let record = {
        let mut observers: Vec<&mut dyn RunObserver> = vec![&mut progress];
        let mut none = NoObserver;
        match stream.as_mut() {
            Some(stream) => observers.push(stream),
            None => observers.push(&mut none),
        }
        let mut fanout = Fanout::new(observers);
        run_scenario(scenario, engine.as_mut(), &mut fanout)
    };
    drop(engine);
    progress.finish();
    if let Some(stream) = stream {
        // The samples are on disk already; a failed final flush is reported but the run's
        // result still stands.
        if let Err(e) = stream.finish() {
            eprintln!("warning: {e}");
        }
    }
    times.run = started.elapsed().as_secs_f64();
    times.run_peak_rss = crate::probe::peak_rss_bytes();
    let started = std::time::Instant::now();
    let verdict = analyze_run(&record);
    times.analyze = started.elapsed().as_secs_f64();
    let started = std::time::Instant::now();
    if let Some(dir) = out {
        write_reports(dir, &record, &verdict)
            .map_err(|e| CliError::bad_input(format!("cannot write reports: {e}")))?;
    }
    times.reports = started.elapsed().as_secs_f64();
    Ok((record, verdict))
}

fn scenario_label(scenario: &Scenario) -> String {
    match &scenario.source {
        Some(path) => format!("{} ({})", scenario.name, path.display()),
        None => scenario.name.clone(),
    }
}

/// Applies command-line overrides, then re-checks what the DSL validator checks for the engine.
fn apply_overrides(scenario: &mut Scenario, args: &RunArgs) -> Result<(), CliError> {
    let engine = &mut scenario.engine;
    if let Some(backend) = &args.backend {
        let backend = match backend.as_str() {
            "sim" => BackendKind::Sim,
            "litert-lm" => BackendKind::LitertLm,
            _ => BackendKind::Opencl,
        };
        if backend != engine.backend {
            engine.backend = backend;
            // A scenario's profile belongs to its own backend; real engines run isolated.
            engine.profile = None;
            engine.isolate = backend != BackendKind::Sim;
        }
    }
    if let Some(profile) = &args.profile {
        engine.profile = Some(profile.clone());
    }
    if let Some(model) = &args.model {
        engine.model = Some(model.clone());
    }
    if let Some(lib) = &args.lib {
        engine.lib = Some(lib.clone());
    }
    if let Some(device) = &args.device {
        engine.device = if device == "gpu" {
            Device::Gpu
        } else {
            Device::Cpu
        };
    }
    if let Some(max_tokens) = args.max_tokens {
        if max_tokens == 0 {
            return Err(CliError::bad_input("--max-tokens must be at least 1"));
        }
        engine.max_tokens = max_tokens;
    }
    if let Some(turns) = args.turns {
        if turns == 0 || turns.saturating_add(scenario.warmup_turns) > crate::scenario::MAX_TURNS {
            return Err(CliError::bad_input(format!(
                "--turns must be between 1 and {} minus the warm-up turns",
                crate::scenario::MAX_TURNS
            )));
        }
        scenario.turns = turns;
    }
    if let Some(seed) = args.seed {
        scenario.seed = seed;
    }
    let engine = &scenario.engine;
    match engine.backend {
        BackendKind::Sim if engine.profile.is_none() => Err(CliError::bad_input(
            "the sim backend needs a profile: pass --profile (e.g. cpu-flat)",
        )),
        BackendKind::LitertLm if engine.model.is_none() => Err(CliError::bad_input(
            "the litert-lm backend needs a model: pass --model PATH.litertlm",
        )),
        _ => Ok(()),
    }
}
