//! `leakloop compare SCENARIO --lib A --lib B`: the same scenario against two builds of an engine
//! library (e.g. LiteRT-LM 0.18.1 and a nightly), side by side with the difference in growth per
//! turn. This is how a contributor shows that an upstream change fixed (or introduced) a leak.
//!
//! `leakloop compare SCENARIO --engine B.yaml` (or `--engine A.yaml B.yaml`, or `--engine A.yaml
//! --engine B.yaml`) swaps the whole engine instead: the scenario's turn loop on two engine specs,
//! e.g. LiteRT-LM's C API against its Python binding driven through an `exec` driver, so that one
//! table shows whether a layer adds growth that the layer below does not. The table opens with
//! what differs between the two engines (spec and what each said about itself), and `run`'s
//! scenario overrides (`--turns`, `--seed`, ...) apply to both sides.
//!
//! `--attribute` runs both sides with attribution and lists, after the metrics table, the
//! allocation sites that grow in B and not in A (docs/attribution.md).

use std::path::{Path, PathBuf};

use crate::analyze::Verdict;
use crate::cli::output;
use crate::cli::overrides::OverrideArgs;
use crate::cli::run::Printer;
use crate::cli::Outcome;
use crate::cli::{CliError, Exit};
use crate::compare::{
    engine_sides, lib_sides, run_side, spec_differences, CompareError, EngineFileError, Side,
};
use crate::report::compare_runs;
use crate::runner::RunRecord;
use crate::scenario::load_scenario_with;

/// Arguments of `leakloop compare`.
#[derive(Debug, clap::Args)]
pub(crate) struct CompareArgs {
    /// The scenario to run on both sides.
    pub scenario: PathBuf,
    /// An engine library (a `liblitert-lm.so` or a folder holding one); give it twice, A then B.
    #[arg(long = "lib", value_name = "PATH", conflicts_with = "engines")]
    pub libs: Vec<PathBuf>,
    /// A YAML file holding one `engine:` mapping (as in a scenario) to run the scenario on:
    /// `--engine B.yaml` runs the scenario's own engine (A) against B; `--engine A.yaml B.yaml`
    /// (or `--engine A.yaml --engine B.yaml`) runs A against B.
    #[arg(long = "engine", value_name = "FILE", num_args = 1..=2)]
    pub engines: Vec<PathBuf>,
    /// Attribute each side's per-turn growth to allocation sites (as `run --attribute`; also
    /// when the scenario says `engine.attribute: true`) and list the sites that grow in B and
    /// not in A, then those that grow in both, then those that grow in A only.
    #[arg(long)]
    pub attribute: bool,
    /// Scenario overrides, applied to both sides as `run` applies them (the engine ones also
    /// to an engine file).
    #[command(flatten)]
    pub overrides: OverrideArgs,
    /// Write each side's reports (report.json, samples.parquet, ...) to DIR/a and DIR/b.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// No progress bars and no line naming the side that runs.
    #[arg(long, short)]
    pub quiet: bool,
}

pub(crate) fn run(args: CompareArgs) -> Result<Outcome, CliError> {
    let mut overrides = args.overrides.overrides();
    overrides.attribute = args.attribute;
    let scenario = load_scenario_with(&args.scenario, &overrides)?;
    // A scenario that asks for attribution gets it on both sides, an engine file's too: sites
    // are compared only where both sides were attributed.
    overrides.attribute |= scenario.engine.attribute;
    let sides = if args.engines.is_empty() {
        lib_sides(&args.scenario, &scenario, &args.libs)?
    } else {
        engine_sides(&args.scenario, &scenario, &args.engines, &overrides)?
    };
    let [a, b] = sides;
    let out = |folder: &str| args.out.as_ref().map(|dir| dir.join(folder));
    let (ra, va) = show_and_run(a, out("a").as_deref(), args.quiet)?;
    let (rb, vb) = show_and_run(b, out("b").as_deref(), args.quiet)?;
    output::print(&compare_runs(
        (&ra, &va),
        (&rb, &vb),
        &spec_differences(&ra, &rb),
    ));
    if let Some(dir) = &args.out {
        output::println(&format!("reports: {} (a/, b/)", dir.display()));
    }
    Ok(Outcome::Verdict(compare_exit(&va, &vb)))
}

/// Names the side that runs (unless quiet), then runs it with its progress bar.
fn show_and_run(
    side: Side,
    out: Option<&Path>,
    quiet: bool,
) -> Result<(RunRecord, Verdict), CompareError> {
    if !quiet {
        output::note(&format!(
            "{}: {} on {}",
            side.label, side.scenario.name, side.what
        ));
    }
    run_side(side, out, &mut Printer::without_verdict(quiet))
}

/// Each refusal keeps the exit code of its cause, with the side it concerns in front.
impl From<CompareError> for CliError {
    fn from(e: CompareError) -> Self {
        match e {
            CompareError::Library { side, error } => {
                CliError::from(error).context(format!("--lib for side {side}"))
            }
            CompareError::Refused { context, error } => CliError::from(error).context(context),
            CompareError::EngineFile { side, error } => {
                let context = format!("--engine for side {side}");
                match error {
                    EngineFileError::Scenario(e) => CliError::from(e).context(context),
                    other => CliError::bad_input(other).context(context),
                }
            }
            CompareError::Out(e) => (*e).into(),
            CompareError::Run { side, what, error } => {
                CliError::from(*error).context(format!("side {side} ({what})"))
            }
            e @ (CompareError::LibCount { .. }
            | CompareError::NotLitert { .. }
            | CompareError::EngineCount { .. }) => CliError::bad_input(e),
        }
    }
}

/// The exit code of a comparison: the worse of the two sides (an engine failure is worse than a
/// failed expectation, which is worse than a pass).
pub fn compare_exit(a: &Verdict, b: &Verdict) -> Exit {
    Exit::of_verdict(a.status).max(Exit::of_verdict(b.status))
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::analyze::VerdictStatus;

    fn verdict(status: VerdictStatus) -> Verdict {
        Verdict {
            attribution: None,
            driver_attribution: None,
            cl_objects: None,
            status,
            metrics: BTreeMap::new(),
            expectations: vec![],
        }
    }

    #[test]
    fn the_worse_side_decides_the_exit_code() {
        let pass = verdict(VerdictStatus::Pass);
        let failed = verdict(VerdictStatus::Fail);
        let crashed = verdict(VerdictStatus::EngineFailed);
        assert_eq!(compare_exit(&pass, &pass), Exit::Pass);
        assert_eq!(compare_exit(&pass, &failed), Exit::ExpectationFailed);
        assert_eq!(compare_exit(&failed, &crashed), Exit::EngineFailed);
    }
}
