//! `leakloop run`: one scenario, start to finish: claim the output folder, build the engine, run
//! the turn loop while streaming samples to disk, analyse, print the verdict, write the reports
//! and map the verdict to an exit code. SIGINT and SIGTERM end it with a partial report
//! (`interrupt.rs`).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::anyhow;

use crate::analyze::{analyze_run, Verdict, VerdictStatus};
use crate::cli::interrupt::{self, InFlight, Pending};
use crate::cli::{CliError, Exit};
use crate::engine::build_engine;
use crate::report::{
    print_terminal, render_report_json, write_reports, Fanout, OutDir, ProgressObserver,
    SampleStream,
};
use crate::runner::{run_scenario, RunOutcome, RunRecord};
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
    let in_flight = Arc::new(InFlight::default());
    interrupt::install(Arc::clone(&in_flight))
        .map_err(|e| CliError::Engine(anyhow!("cannot watch for SIGINT and SIGTERM: {e}")))?;
    // Claimed before anything can fail: from here on the folder shows no earlier run's verdict,
    // whatever stops this one.
    let out = args.out.as_deref().map(claim_out).transpose()?;
    let scenario = match load_scenario(&args.scenario)
        .map_err(CliError::bad_input)
        .and_then(|mut scenario| apply_overrides(&mut scenario, &args).map(|()| scenario))
    {
        Ok(scenario) => scenario,
        Err(e) => {
            release(out);
            return Err(e);
        }
    };
    let json = args.format == "json";
    let (record, verdict, out) = run_and_analyze(&scenario, out, args.quiet, &in_flight, json)?;
    // Print first, write second: a full disk must not hide the verdict or change the exit code,
    // and a closed stdout must not cost the reports.
    let printed = print_verdict(&record, &verdict, json, out.as_ref());
    write_out(out, &record, &verdict);
    printed?;
    Ok(exit_for(&record, &verdict))
}

/// The exit code a verdict maps to.
pub(crate) fn exit_for(record: &RunRecord, verdict: &Verdict) -> Exit {
    match (verdict.status, &record.outcome) {
        (VerdictStatus::Pass, _) => Exit::Pass,
        (VerdictStatus::Fail, _) => Exit::ExpectationFailed,
        (VerdictStatus::Interrupted, RunOutcome::Interrupted { signal, .. }) => {
            Exit::interrupted(signal)
        }
        (VerdictStatus::EngineFailed | VerdictStatus::Interrupted, _) => Exit::EngineFailed,
    }
}

/// Prints the verdict table (or report.json with `json`), then where the reports go.
pub(crate) fn print_verdict(
    record: &RunRecord,
    verdict: &Verdict,
    json: bool,
    out: Option<&OutDir>,
) -> Result<(), CliError> {
    let stdout_error =
        |e: std::io::Error| CliError::Engine(anyhow!(e).context("writing to stdout"));
    if json {
        let json = render_report_json(record, verdict).map_err(|e| CliError::Engine(e.into()))?;
        writeln!(std::io::stdout(), "{json}").map_err(stdout_error)?;
    } else {
        print_terminal(record, verdict).map_err(|e| CliError::Engine(e.into()))?;
        if let Some(out) = out {
            writeln!(std::io::stdout(), "reports: {}", out.dir().display())
                .map_err(stdout_error)?;
        }
    }
    Ok(())
}

/// Writes every report into the run's claimed folder and releases it. A write failure (a full
/// disk, a read-only folder) is a warning: the verdict stands, and was printed before.
pub(crate) fn write_out(out: Option<OutDir>, record: &RunRecord, verdict: &Verdict) {
    let Some(out) = out else { return };
    // Written with `let _`: a closed stderr must not stop the release below.
    if let Err(e) = write_reports(out.dir(), record, verdict) {
        let _ = writeln!(
            std::io::stderr(),
            "warning: the verdict above stands, but its reports are incomplete: {e}"
        );
    }
    if let Err(e) = out.release() {
        let _ = writeln!(std::io::stderr(), "warning: {e}");
    }
}

/// Claims an output folder for a run (see [`OutDir::claim`]); a busy folder is a usage error.
pub(crate) fn claim_out(dir: &Path) -> Result<OutDir, CliError> {
    OutDir::claim(dir).map_err(CliError::bad_input)
}

/// Releases a claimed folder of a run that ends without reports.
fn release(out: Option<OutDir>) {
    if let Some(Err(e)) = out.map(OutDir::release) {
        eprintln!("warning: {e}");
    }
}

/// Builds the engine, runs the scenario (streaming samples into the claimed `out` folder when
/// given) and analyses the record; returns the folder for [`write_out`]. An engine that fails
/// mid-run still yields a record and a verdict; only an engine that cannot be built at all is an
/// error (and leaves `out` without any report: the previous run's are gone, none are new).
pub(crate) fn run_and_analyze(
    scenario: &Scenario,
    out: Option<OutDir>,
    quiet: bool,
    in_flight: &InFlight,
    json: bool,
) -> Result<(RunRecord, Verdict, Option<OutDir>), CliError> {
    let mut engine = match build_engine(scenario) {
        Ok(engine) => engine,
        Err(e) => {
            release(out);
            return Err(CliError::Engine(anyhow!(
                "cannot start the `{}` engine for {}: {e}",
                scenario.engine.backend.as_str(),
                scenario_label(scenario)
            )));
        }
    };
    let stream = match out.as_ref().map(|out| SampleStream::create(out.dir())) {
        Some(Err(e)) => {
            release(out);
            return Err(CliError::bad_input(e));
        }
        stream => stream.transpose().unwrap_or(None),
    };
    in_flight.start(Pending {
        scenario: scenario.clone(),
        backend: engine.describe(),
        stream,
        samples: Vec::new(),
        out,
        turns_completed: 0,
        json,
    });
    let mut progress = ProgressObserver::new(&scenario.name, scenario.total_turns(), quiet);
    let record = {
        let mut observer = in_flight.observer();
        let mut fanout = Fanout::new(vec![&mut progress, &mut observer]);
        run_scenario(scenario, engine.as_mut(), &mut fanout)
    };
    drop(engine);
    progress.finish();
    let pending = in_flight.finish();
    let (stream, out) = pending.map_or((None, None), |p| (p.stream, p.out));
    if let Some(stream) = stream {
        // The samples are on disk already; a failed final flush is reported but the run's
        // result still stands.
        if let Err(e) = stream.finish() {
            eprintln!("warning: {e}");
        }
    }
    let verdict = analyze_run(&record);
    Ok((record, verdict, out))
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
