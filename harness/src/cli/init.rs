//! `leakloop init`: writes a starter scenario for a backend, commented, with the metrics that
//! backend can see on this platform (from the metric registry) and default expectations filled
//! in, ready for `leakloop check` and `leakloop run`.

use std::io::Write;
use std::path::{Path, PathBuf};

use leakloop_metrics::{Metric, Platform, ProbeKind, Unit, REGISTRY};

use crate::cli::output;
use crate::cli::{CliError, Exit, Outcome};

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
    let takes_command = matches!(args.backend, InitBackend::Exec | InitBackend::Attach);
    if !takes_command && !args.command.is_empty() {
        return Err(CliError::bad_input(format!(
            "`init {}` takes no command after `--` (only exec and attach do)",
            backend_name(args.backend)
        )));
    }
    if args.backend == InitBackend::Exec && args.command.is_empty() {
        return Err(CliError::bad_input(
            "`init exec` needs the driver: `leakloop init exec -- python3 my_driver.py`",
        ));
    }
    if args.model.is_some() && args.backend != InitBackend::LitertLm {
        return Err(CliError::bad_input("--model is for `init litert-lm` only"));
    }
    let text = starter(args.backend, &args.command, args.model.as_deref());
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

fn backend_name(backend: InitBackend) -> &'static str {
    match backend {
        InitBackend::Sim => "sim",
        InitBackend::LitertLm => "litert-lm",
        InitBackend::Exec => "exec",
        InitBackend::Attach => "attach",
    }
}

/// The metrics `backend` can give on this platform, in registry order: what the runner's probes
/// read here, what the engine reports itself, and the times.
fn metrics_for(backend: InitBackend) -> Vec<&'static Metric> {
    let here = Platform::current();
    REGISTRY
        .iter()
        .filter(|m| {
            let probed = m.runner_probe(here, |_| true).is_some();
            let reported = match backend {
                InitBackend::Sim => m.provided_by(ProbeKind::Simulator),
                InitBackend::LitertLm => m.provided_by(ProbeKind::EngineHeap),
                InitBackend::Exec | InitBackend::Attach => false,
            };
            // An attached process has no steps the runner times: only its turn time exists.
            let timed = match backend {
                InitBackend::Attach => m.name == leakloop_metrics::names::TURN_TIME,
                _ => m.provided_by(ProbeKind::Clock),
            };
            probed || reported || timed
        })
        .collect()
}

/// The metrics watched by default, among those available.
fn default_watch(backend: InitBackend, available: &[&'static Metric]) -> Vec<&'static str> {
    let wanted: &[&str] = match backend {
        InitBackend::Sim => &["native_heap", "gpu", "turn_time"],
        InitBackend::LitertLm => &["rss", "native_heap", "turn_time"],
        InitBackend::Exec | InitBackend::Attach => &["rss", "anon_rss", "turn_time"],
    };
    wanted
        .iter()
        .copied()
        .filter(|w| available.iter().any(|m| m.name == *w))
        .collect()
}

/// The default limits of a metric, in its unit: memory may rise once (a context, a pool) and
/// then must stay flat; a turn may take seconds but must not slow down turn after turn.
fn default_limits(metric: &Metric) -> &'static str {
    match metric.unit {
        Unit::Bytes => "{tolerance: 16MiB, warmup_budget: 128MiB, max_growth_per_turn: 256KiB}",
        Unit::Nanoseconds => "{max: 30s, max_growth_per_turn: 5ms}",
    }
}

/// A YAML string in single quotes (the one quoting a starter needs: commands and paths).
fn yaml_quoted(text: &str) -> String {
    format!("'{}'", text.replace('\'', "''"))
}

/// The starter scenario's text.
pub(crate) fn starter(backend: InitBackend, command: &[String], model: Option<&Path>) -> String {
    let name = backend_name(backend);
    let available = metrics_for(backend);
    let watch = default_watch(backend, &available);
    let mut out = format!(
        "# A starter scenario for the `{name}` backend, written by `leakloop init {name}`.\n\
         # Check it with `leakloop check FILE`, run it with `leakloop run FILE --out results`.\n\
         # Every key is described in README.md, *Scenario DSL reference*; editors check it\n\
         # against docs/scenario.schema.json.\n\
         name: my-{name}-scenario\n\
         description: \"What this loop stands for in your app\"\n"
    );
    let quoted = |argv: &[String]| {
        let args: Vec<String> = argv.iter().map(|a| yaml_quoted(a)).collect();
        format!("[{}]", args.join(", "))
    };
    out.push_str("engine:\n");
    match backend {
        InitBackend::Sim => out.push_str(
            "  backend: sim\n\
             \x20 profile: cpu-flat          # a clean device; `forgets-delete` leaks (docs/simulator.md)\n",
        ),
        InitBackend::LitertLm => {
            let model = model.map_or_else(
                || yaml_quoted("model.litertlm"),
                |m| yaml_quoted(&m.display().to_string()),
            );
            out.push_str(&format!(
                "  backend: litert-lm\n\
                 \x20 model: {model}   # relative paths are read from this file's folder\n\
                 \x20 device: cpu\n\
                 \x20 max_tokens: 1024\n\
                 \x20 call_timeout: 60s\n"
            ));
        }
        InitBackend::Exec => out.push_str(&format!(
            "  backend: exec\n\
             \x20 # The driver, speaking docs/protocol.md; it runs in this file's folder.\n\
             \x20 command: {}\n\
             \x20 call_timeout: 20s\n",
            quoted(command)
        )),
        InitBackend::Attach => {
            let command = if command.is_empty() {
                "['./my-app']          # your program; it prints `TURN n CLOSED` after each turn"
                    .to_owned()
            } else {
                quoted(command)
            };
            out.push_str(&format!(
                "  backend: attach\n\
                 \x20 # Runs its own turn loop and prints `TURN n CLOSED` after each closed turn\n\
                 \x20 # (docs/attach.md); leakloop samples it at each marker.\n\
                 \x20 command: {command}\n\
                 \x20 markers: {{stream: stdout, timeout: 60s}}\n"
            ));
        }
    }
    out.push_str("warmup_turns: 2                # turns whose one-time rise is not judged\n");
    out.push_str("turns: 30\n");
    if backend != InitBackend::Attach {
        out.push_str(
            "turn:                          # one turn of your app, in order\n\
             \x20 - open: {}\n\
             \x20 - send: {prompt: \"Summarize the notes.\"}\n\
             \x20 - generate: {max_output_tokens: 16}\n\
             \x20 - close: {}\n\
             sample: {after: [load, close]}\n",
        );
    } else {
        out.push_str("sample: {settle: 10ms}\n");
    }
    out.push_str(
        "# What this backend can measure here (docs/metrics.md); list what to judge and plot:\n",
    );
    for m in &available {
        out.push_str(&format!(
            "#   {:<14} {}: {}\n",
            m.name,
            m.unit.name(),
            m.meaning
        ));
    }
    out.push_str(&format!("watch: [{}]\n", watch.join(", ")));
    out.push_str(
        "# Limits, in each metric's unit (sizes for memory, durations for times). `balanced`:\n\
         # every create has its delete, from the call ledger.\n\
         expect:\n",
    );
    if backend != InitBackend::Attach {
        out.push_str("  balanced: true\n");
    }
    for name in &watch {
        let metric = available
            .iter()
            .find(|m| m.name == *name)
            .expect("watched metrics are available ones");
        out.push_str(&format!("  {name}: {}\n", default_limits(metric)));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::{parse_scenario, BackendKind};

    #[test]
    fn every_starter_is_a_valid_scenario_watching_its_turn_time() {
        let command = vec!["python3".to_owned(), "it's driver.py".to_owned()];
        for (backend, kind) in [
            (InitBackend::Sim, BackendKind::Sim),
            (InitBackend::LitertLm, BackendKind::LitertLm),
            (InitBackend::Exec, BackendKind::Exec),
            (InitBackend::Attach, BackendKind::Attach),
        ] {
            let text = starter(backend, &command, None);
            let scenario = parse_scenario(&text, "/tmp/starter.yaml".as_ref())
                .unwrap_or_else(|e| panic!("{backend:?}: {e}\n{text}"));
            assert_eq!(scenario.engine.backend, kind);
            assert!(scenario.watch.iter().any(|w| w == "turn_time"), "{text}");
            let time = &scenario.expect.metrics["turn_time"];
            assert_eq!(time.max, Some(30_000_000_000));
            assert_eq!(time.max_growth_per_turn, Some(5_000_000));
            for name in &scenario.watch {
                assert!(scenario.expect.metrics.contains_key(name), "{name}");
            }
        }
        let exec = starter(InitBackend::Exec, &command, None);
        assert!(
            exec.contains("command: ['python3', 'it''s driver.py']"),
            "{exec}"
        );
    }
}
