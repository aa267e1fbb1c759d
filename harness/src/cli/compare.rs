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

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use leakloop_units::{format_bytes, format_signed_bytes};

use crate::analyze::{Verdict, VerdictStatus};
use crate::cli::interrupt::InFlight;
use crate::cli::output;
use crate::cli::overrides::OverrideArgs;
use crate::cli::run::{claim_out, run_and_analyze, write_out, Format};
use crate::cli::table::aligned;
use crate::cli::Outcome;
use crate::cli::{CliError, Exit};
use crate::engine::litert_lm::{check_library, discover_library};
use crate::runner::{RunOutcome, RunRecord};
use crate::scenario::{load_scenario_with, parse_scenario_with, EngineSpec, Overrides, Scenario};

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
    /// Scenario overrides, applied to both sides as `run` applies them (the engine ones also
    /// to an engine file).
    #[command(flatten)]
    pub overrides: OverrideArgs,
    /// Write each side's reports (report.json, samples.jsonl, ...) to DIR/a and DIR/b.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// No progress bars and no line naming the side that runs.
    #[arg(long, short)]
    pub quiet: bool,
}

/// One side of a comparison: the scenario as it runs there, and how to name it.
struct Side {
    label: &'static str,
    scenario: Scenario,
    /// What runs, for the line printed before the side starts.
    what: String,
}

pub(crate) fn run(args: CompareArgs) -> Result<Outcome, CliError> {
    let scenario = load_scenario_with(&args.scenario, &args.overrides.overrides())?;
    let sides = if args.engines.is_empty() {
        lib_sides(&args, &scenario)?
    } else {
        engine_sides(&args, &scenario)?
    };
    let [a, b] = sides;
    let out = |folder: &str| args.out.as_ref().map(|dir| dir.join(folder));
    let (ra, va) = run_side(a, out("a").as_deref(), args.quiet)?;
    let (rb, vb) = run_side(b, out("b").as_deref(), args.quiet)?;
    output::print(&compare_runs((&ra, &va), (&rb, &vb)));
    if let Some(dir) = &args.out {
        output::println(&format!("reports: {} (a/, b/)", dir.display()));
    }
    Ok(Outcome::Verdict(compare_exit(&va, &vb)))
}

/// `--lib A --lib B`: the scenario on two builds of the LiteRT-LM library.
fn lib_sides(args: &CompareArgs, scenario: &Scenario) -> Result<[Side; 2], CliError> {
    let [a, b] = args.libs.as_slice() else {
        return Err(CliError::bad_input(format!(
            "compare needs exactly two --lib (A and B) or one or two --engine, got {} --lib",
            args.libs.len()
        )));
    };
    if !crate::backend::of(scenario.engine.backend).loads_library {
        return Err(CliError::bad_input(format!(
            "compare swaps the engine library, which only the litert-lm backend loads; {} uses `{}` \
             (--engine FILE swaps the whole engine)",
            args.scenario.display(),
            scenario.engine.backend.as_str()
        )));
    }
    // Both libraries are checked before anything runs, so a typo in B does not cost a run of A.
    let side = |label: &'static str, lib: &PathBuf| -> Result<Side, CliError> {
        let context = || format!("--lib for side {label}");
        let library =
            discover_library(Some(lib)).map_err(|e| CliError::from(e).context(context()))?;
        check_library(scenario, Some(&library.path))
            .map_err(|why| CliError::from(why).context(context()))?;
        let mut scenario = scenario.clone();
        // Absolute, so that the worker process finds it whatever its working directory.
        let path = std::path::absolute(&library.path).unwrap_or_else(|_| library.path.clone());
        scenario.engine.lib = Some(path.clone());
        let what = format!("LiteRT-LM {} ({})", library.version, path.display());
        Ok(Side {
            label,
            scenario,
            what,
        })
    };
    Ok([side("A", a)?, side("B", b)?])
}

/// `--engine [A.yaml] B.yaml`: the scenario on two engine specs.
fn engine_sides(args: &CompareArgs, scenario: &Scenario) -> Result<[Side; 2], CliError> {
    let from_file = |label: &'static str, file: &PathBuf| -> Result<Side, CliError> {
        let engine = load_engine_file(file, &args.overrides.overrides().engine_only())
            .map_err(|e| e.context(format!("--engine for side {label}")))?;
        let side = Side {
            label,
            what: format!("{} from {}", engine.backend.as_str(), file.display()),
            scenario: Scenario {
                engine,
                ..scenario.clone()
            },
        };
        check_side(&side)?;
        Ok(side)
    };
    // Both sides are loaded and checked before anything runs.
    match args.engines.as_slice() {
        [b] => {
            let a = Side {
                label: "A",
                what: format!("{} from {}", scenario.engine.backend.as_str(), args.scenario.display()),
                scenario: scenario.clone(),
            };
            check_side(&a)?;
            Ok([a, from_file("B", b)?])
        }
        [a, b] => Ok([from_file("A", a)?, from_file("B", b)?]),
        more => Err(CliError::bad_input(format!(
            "compare takes one --engine (B, against the scenario's own engine) or two (A and B), got {}",
            more.len()
        ))),
    }
}

/// A side that loads LiteRT-LM's library must find one that can run the scenario (other backends
/// pass).
fn check_side(side: &Side) -> Result<(), CliError> {
    check_library(&side.scenario, None)
        .map(|_| ())
        .map_err(|why| CliError::from(why).context(format!("side {}", side.label)))
}

/// Reads an engine file: a YAML mapping whose only key is `engine`, written as in a scenario
/// (relative paths resolve against the file's folder). It is validated by the scenario loader,
/// with a one-turn loop appended, so its errors point at its own lines.
/// The engine's values are replaced by `overrides` before validation.
fn load_engine_file(file: &Path, overrides: &Overrides) -> Result<EngineSpec, CliError> {
    let text = std::fs::read_to_string(file).map_err(|e| {
        CliError::bad_input(format!("cannot read engine file {}: {e}", file.display()))
    })?;
    let keys: serde_yaml::Mapping = serde_yaml::from_str(&text).map_err(|e| {
        CliError::bad_input(format!(
            "{}: an engine file is a YAML mapping with one key, `engine`: {e}",
            file.display()
        ))
    })?;
    if let Some(other) = keys.keys().find(|k| k.as_str() != Some("engine")) {
        return Err(CliError::bad_input(format!(
            "{}: an engine file holds only `engine:`, found `{}`",
            file.display(),
            serde_yaml::to_string(other).unwrap_or_default().trim()
        )));
    }
    let name = file
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let loop_text = format!(
        "{text}\nname: {}\nturns: 1\nturn: [{{open: {{}}}}, {{close: {{}}}}]\n",
        serde_json::to_string(&name).unwrap_or_default()
    );
    Ok(parse_scenario_with(&loop_text, file, overrides)?.engine)
}

/// Runs one side's scenario and analyses it; errors say which side failed.
fn run_side(side: Side, out: Option<&Path>, quiet: bool) -> Result<(RunRecord, Verdict), CliError> {
    let Side {
        label,
        scenario,
        what,
    } = side;
    if !quiet {
        output::note(&format!("{label}: {} on {what}", scenario.name));
    }
    let out = out.map(claim_out).transpose()?;
    let (record, verdict, out) =
        run_and_analyze(&scenario, out, quiet, &InFlight::default(), Format::Text)
            .map_err(|e| e.context(format!("side {label} ({what})")))?;
    write_out(out, &record, &verdict);
    Ok((record, verdict))
}

/// The exit code of a comparison: the worse of the two sides (an engine failure is worse than a
/// failed expectation, which is worse than a pass).
pub fn compare_exit(a: &Verdict, b: &Verdict) -> Exit {
    Exit::of_verdict(a.status).max(Exit::of_verdict(b.status))
}

fn status_word(v: &Verdict) -> &'static str {
    match v.status {
        VerdictStatus::Pass => "PASS",
        VerdictStatus::Fail => "FAIL",
        VerdictStatus::EngineFailed => "ENGINE FAILED",
        VerdictStatus::Interrupted => "INTERRUPTED",
    }
}

/// The backend, its version and what tells two sides of one backend apart: the library, else the
/// simulator's profile.
fn side_label(record: &RunRecord) -> String {
    let details = &record.backend.details;
    let lib = details
        .get("library")
        .map(|l| format!(" ({l})"))
        .or_else(|| details.get("profile").map(|p| format!(" (profile {p})")))
        .unwrap_or_default();
    format!("{} {}{lib}", record.backend.backend, record.backend.version)
}

fn outcome_line(record: &RunRecord) -> String {
    match &record.outcome {
        RunOutcome::Completed => format!("completed {} turns", record.turns_completed),
        RunOutcome::EngineFailed { turn, step, error } => {
            format!("engine failed at turn {turn} ({step}): {error}")
        }
        RunOutcome::Interrupted { signal, turn } => {
            format!("interrupted by {signal} at turn {turn}")
        }
    }
}

/// Every value that tells the two sides' engines apart: the engine specs as they ran
/// (`engine.model`, `engine.exec.options.threads`, ...) and what each engine said about itself
/// (`backend.version`, `backend.details.library`, ...), as rows of name, A's value, B's value
/// (`-` where a side has none).
fn spec_differences(a: &RunRecord, b: &RunRecord) -> Vec<[String; 3]> {
    let fields = |record: &RunRecord| {
        let mut fields = BTreeMap::new();
        if let Ok(engine) = serde_json::to_value(&record.scenario.engine) {
            flatten("engine", &engine, &mut fields);
        }
        if let Ok(backend) = serde_json::to_value(&record.backend) {
            flatten("backend", &backend, &mut fields);
        }
        fields
    };
    let (fa, fb) = (fields(a), fields(b));
    let names: BTreeSet<&String> = fa.keys().chain(fb.keys()).collect();
    let shown = |value: Option<&String>| value.cloned().unwrap_or_else(|| "-".to_owned());
    names
        .into_iter()
        .filter(|name| fa.get(*name) != fb.get(*name))
        .map(|name| [name.clone(), shown(fa.get(name)), shown(fb.get(name))])
        .collect()
}

/// `value`'s scalars under dotted names starting with `prefix`; nulls are left out, so that an
/// absent value and a null one read the same.
fn flatten(prefix: &str, value: &serde_json::Value, into: &mut BTreeMap<String, String>) {
    match value {
        serde_json::Value::Null => {}
        serde_json::Value::Object(map) => {
            for (key, value) in map {
                flatten(&format!("{prefix}.{key}"), value, into);
            }
        }
        serde_json::Value::Array(items) => {
            let all_scalars = items.iter().all(|v| !v.is_object() && !v.is_array());
            if all_scalars {
                let joined: Vec<String> = items.iter().map(scalar_text).collect();
                into.insert(prefix.to_owned(), joined.join(" "));
            } else {
                for (i, item) in items.iter().enumerate() {
                    flatten(&format!("{prefix}.{i}"), item, into);
                }
            }
        }
        scalar => {
            into.insert(prefix.to_owned(), scalar_text(scalar));
        }
    }
}

/// A JSON scalar as a person writes it: strings without quotes.
fn scalar_text(value: &serde_json::Value) -> String {
    match value {
        serde_json::Value::String(text) => text.clone(),
        other => other.to_string(),
    }
}

/// Renders two runs of one scenario side by side: per metric the classification, the slope after
/// warm-up and how much more (or less) B grows per turn than A; then the expectations, the ledger
/// imbalances and the status of each side.
pub fn compare_runs(a: (&RunRecord, &Verdict), b: (&RunRecord, &Verdict)) -> String {
    let (ra, va) = a;
    let (rb, vb) = b;
    let mut out = String::new();
    let _ = writeln!(out, "scenario: {}", ra.scenario.name);
    let _ = writeln!(out, "  A: {}: {}", side_label(ra), outcome_line(ra));
    let _ = writeln!(out, "  B: {}: {}", side_label(rb), outcome_line(rb));
    let _ = writeln!(out);
    let differences = spec_differences(ra, rb);
    if differences.is_empty() {
        let _ = writeln!(out, "A and B ran the same engine spec");
    } else {
        let mut rows = vec![["differs".to_owned(), "A".to_owned(), "B".to_owned()]];
        rows.extend(differences);
        out.push_str(&aligned(&rows, &[0, 1, 2]));
    }
    let _ = writeln!(out);

    let metrics: BTreeSet<&String> = va.metrics.keys().chain(vb.metrics.keys()).collect();
    let mut rows = vec![[
        "metric".to_owned(),
        "A".to_owned(),
        "A growth/turn".to_owned(),
        "B".to_owned(),
        "B growth/turn".to_owned(),
        "B - A per turn".to_owned(),
    ]];
    for metric in metrics {
        let (ma, mb) = (va.metrics.get(metric), vb.metrics.get(metric));
        let class = |m: Option<&crate::analyze::MetricAnalysis>| {
            m.map_or("-".to_owned(), |m| m.classification.as_str().to_owned())
        };
        let slope = |m: Option<&crate::analyze::MetricAnalysis>| {
            m.map_or("-".to_owned(), |m| {
                format_signed_bytes(m.slope_bytes_per_turn)
            })
        };
        let diff = match (ma, mb) {
            (Some(ma), Some(mb)) => {
                format_signed_bytes(mb.slope_bytes_per_turn - ma.slope_bytes_per_turn)
            }
            _ => "-".to_owned(),
        };
        rows.push([
            metric.clone(),
            class(ma),
            slope(ma),
            class(mb),
            slope(mb),
            diff,
        ]);
    }
    out.push_str(&aligned(&rows, &[0]));

    for (label, record, verdict) in [("A", ra, va), ("B", rb, vb)] {
        let _ = writeln!(out);
        let _ = writeln!(out, "{label}: {}", status_word(verdict));
        for e in &verdict.expectations {
            let turn = e.turn.map(|t| format!(" (turn {t})")).unwrap_or_default();
            let _ = writeln!(
                out,
                "  [{}] {}: expected {}, measured {}{turn}",
                if e.passed { "ok" } else { "FAIL" },
                e.name,
                e.expected,
                e.measured
            );
        }
        for imbalance in record.ledger.imbalances() {
            let since = imbalance
                .first_turn
                .map(|t| format!(", since turn {t}"))
                .unwrap_or_default();
            let _ = writeln!(
                out,
                "  ledger: {} created {} deleted {}{since}",
                imbalance.kind, imbalance.created, imbalance.deleted
            );
        }
        for (name, metric) in &verdict.metrics {
            if let Some(p) = metric.plateau {
                let _ = writeln!(
                    out,
                    "  {name}: one-time rise of {} settled at turn {} (baseline {})",
                    format_signed_bytes(p.size_bytes as f64),
                    p.settled_at_turn,
                    format_bytes(metric.baseline)
                );
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::time::Duration;

    use super::*;
    use crate::analyze::{Classification, ExpectationResult, MetricAnalysis};
    use crate::engine::{BackendInfo, Ledger};
    use crate::scenario::{
        BackendKind, Device, EngineSpec, Expectations, SamplePlan, SamplePoint, Scenario, Step,
    };

    fn record(version: &str, leak: bool) -> RunRecord {
        let mut ledger = Ledger::new();
        for turn in 1..=3 {
            ledger.record_create(turn, "litert-lm/conversation");
            if !leak || turn == 1 {
                ledger.record_delete(turn, "litert-lm/conversation");
            }
        }
        RunRecord {
            scenario: Scenario {
                name: "litert-cpu-chat".into(),
                description: None,
                source: None,
                engine: EngineSpec {
                    backend: BackendKind::LitertLm,
                    profile: None,
                    inline_profiles: BTreeMap::new(),
                    model: None,
                    device: Device::Cpu,
                    max_tokens: 1024,
                    lib: None,
                    call_timeout: Duration::from_secs(60),
                    isolate: true,
                    attach: None,
                    exec: None,
                },
                warmup_turns: 0,
                turns: 3,
                turn: vec![Step::Close],
                reload_every: 0,
                sample: SamplePlan {
                    after: vec![SamplePoint::Load],
                    settle: Duration::ZERO,
                    baseline: 1,
                },
                watch: vec![],
                faults: vec![],
                expect: Expectations::default(),
                seed: 0,
                stop: crate::scenario::StopMode::Turns,
                target: crate::scenario::Target::Local,
                concurrency: None,
            },
            backend: BackendInfo {
                backend: "litert-lm".into(),
                version: version.into(),
                details: BTreeMap::from([(
                    "library".to_owned(),
                    format!("target/litert-lm/{version}/liblitert-lm.so"),
                )]),
            },
            samples: vec![],
            ledger,
            turns_completed: 3,
            engine_errors: vec![],
            outcome: RunOutcome::Completed,
            early_stop: None,
            provenance: None,
        }
    }

    fn analysis(class: Classification, slope: f64, plateau: Option<i64>) -> MetricAnalysis {
        MetricAnalysis {
            classification: class,
            baseline: 64 << 20,
            after_warmup: None,
            last: 66 << 20,
            slope_bytes_per_turn: slope,
            slope_interval: None,
            confidence: 0.95,
            plateau: plateau.map(|size_bytes| crate::analyze::PlateauInfo {
                size_bytes,
                settled_at_turn: 1,
            }),
            turns_needed: None,
            points: 31,
            reason: Default::default(),
            epochs: 1,
            ..MetricAnalysis::default()
        }
    }

    fn verdict(status: VerdictStatus, rss_slope: f64, passed: bool) -> Verdict {
        Verdict {
            status,
            metrics: BTreeMap::from([
                (
                    "rss".to_owned(),
                    analysis(
                        if passed {
                            Classification::Plateau
                        } else {
                            Classification::Growth
                        },
                        rss_slope,
                        passed.then_some(1_500_000),
                    ),
                ),
                (
                    "native_heap".to_owned(),
                    analysis(Classification::Clean, 12.0, None),
                ),
            ]),
            expectations: vec![ExpectationResult {
                name: "rss.max_growth_per_turn".into(),
                passed,
                expected: "<= 64 KiB/turn".into(),
                measured: leakloop_units::format_bytes_per_turn(rss_slope),
                turn: (!passed).then_some(2),
            }],
        }
    }

    #[test]
    fn renders_a_fixed_build_next_to_a_leaking_one() {
        let (ra, va) = (
            record("0.18.1", true),
            verdict(VerdictStatus::Fail, 541_000.0, false),
        );
        let (rb, vb) = (
            record("0.19.0.dev20261026", false),
            verdict(VerdictStatus::Pass, 1_900.0, true),
        );
        let text = compare_runs((&ra, &va), (&rb, &vb));
        insta::assert_snapshot!(text);
        assert_eq!(compare_exit(&va, &vb), Exit::ExpectationFailed);
    }

    #[test]
    fn the_worse_side_decides_the_exit_code() {
        let pass = verdict(VerdictStatus::Pass, 0.0, true);
        let failed = verdict(VerdictStatus::EngineFailed, 0.0, true);
        assert_eq!(compare_exit(&pass, &pass), Exit::Pass);
        assert_eq!(compare_exit(&pass, &failed), Exit::EngineFailed);
    }
}
