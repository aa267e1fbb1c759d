//! The starter scenario `leakloop init` writes for a backend: commented, with the metrics that
//! backend can see on this platform (from the metric registry) and default expectations filled
//! in. What differs per backend (its `engine:` section, what it reports itself, what it watches)
//! is its row's [`Starter`]; the rest of the text is the same for all.

// Read by the command line only (`leakloop init`).
#![cfg_attr(not(feature = "cli"), allow(dead_code))]

use std::path::Path;

use leakloop_metrics::{Metric, Platform, ProbeKind, Unit, REGISTRY};

use super::Backend;

/// What `leakloop init` was given besides the backend.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct StarterOptions<'a> {
    /// The driver or program with its arguments (after `--`).
    pub command: &'a [String],
    /// The model file (`--model`).
    pub model: Option<&'a Path>,
}

/// Whether a backend's starter takes a command after `--`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CommandUse {
    /// It takes none.
    None,
    /// It takes one and writes a placeholder without it.
    Optional,
    /// It cannot be written without one.
    Required,
}

/// A backend's part of its starter scenario.
#[derive(Debug)]
pub(crate) struct Starter {
    /// Its `engine:` section, each line indented under `engine:`.
    pub engine: fn(&StarterOptions<'_>) -> String,
    /// Whether it takes a command after `--`.
    pub command: CommandUse,
    /// Whether it takes `--model`.
    pub takes_model: bool,
    /// The probe of the metrics its engine reports itself, if it reports any.
    pub reports: Option<ProbeKind>,
    /// Whether leakloop drives its turns (`turn:` steps it times, a call ledger to balance);
    /// an attached program runs its own loop and has only its turn time.
    pub driven: bool,
    /// The metrics watched by default, among those available.
    pub watch: &'static [&'static str],
}

/// A YAML string in single quotes (the one quoting a starter needs: commands and paths).
pub(crate) fn yaml_quoted(text: &str) -> String {
    format!("'{}'", text.replace('\'', "''"))
}

/// A command as a YAML flow list of quoted strings.
pub(crate) fn yaml_command(argv: &[String]) -> String {
    let args: Vec<String> = argv.iter().map(|a| yaml_quoted(a)).collect();
    format!("[{}]", args.join(", "))
}

/// The metrics `starter`'s backend can give on this platform, in registry order: what the
/// runner's probes read here, what the engine reports itself, and the times.
fn metrics_for(starter: &Starter) -> Vec<&'static Metric> {
    let here = Platform::current();
    REGISTRY
        .iter()
        .filter(|m| {
            let probed = m.runner_probe(here, |_| true).is_some();
            let reported = starter.reports.is_some_and(|probe| m.provided_by(probe));
            // An attached process has no steps the runner times: only its turn time exists.
            let timed = if starter.driven {
                m.provided_by(ProbeKind::Clock)
            } else {
                m.name == leakloop_metrics::names::TURN_TIME
            };
            probed || reported || timed
        })
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

/// The starter scenario's text for `backend`, or `None` when it has no starter.
pub(crate) fn starter_text(backend: &Backend, options: &StarterOptions<'_>) -> Option<String> {
    let starter = backend.starter.as_ref()?;
    let name = backend.name;
    let available = metrics_for(starter);
    let watch: Vec<&str> = starter
        .watch
        .iter()
        .copied()
        .filter(|w| available.iter().any(|m| m.name == *w))
        .collect();
    let mut out = format!(
        "# A starter scenario for the `{name}` backend, written by `leakloop init {name}`.\n\
         # Check it with `leakloop check FILE`, run it with `leakloop run FILE --out results`.\n\
         # Every key is described in README.md, *Scenario DSL reference*; editors check it\n\
         # against docs/scenario.schema.json.\n\
         name: my-{name}-scenario\n\
         description: \"What this loop stands for in your app\"\n"
    );
    out.push_str("engine:\n");
    out.push_str(&(starter.engine)(options));
    out.push_str("warmup_turns: 2                # turns whose one-time rise is not judged\n");
    out.push_str("turns: 30\n");
    if starter.driven {
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
    if starter.driven {
        out.push_str("  balanced: true\n");
    }
    for name in &watch {
        let metric = available
            .iter()
            .find(|m| m.name == *name)
            .expect("watched metrics are available ones");
        out.push_str(&format!("  {name}: {}\n", default_limits(metric)));
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::of;
    use crate::backend::registry::REGISTRY as BACKENDS;
    use crate::scenario::{parse_scenario, BackendKind};

    #[test]
    fn every_starter_is_a_valid_scenario_watching_its_turn_time() {
        let command = vec!["python3".to_owned(), "it's driver.py".to_owned()];
        let options = StarterOptions {
            command: &command,
            model: None,
        };
        let mut written = 0;
        for backend in BACKENDS {
            let Some(text) = starter_text(backend, &options) else {
                continue;
            };
            written += 1;
            let scenario = parse_scenario(&text, "/tmp/starter.yaml".as_ref())
                .unwrap_or_else(|e| panic!("{}: {e}\n{text}", backend.name));
            assert_eq!(scenario.engine.backend, backend.kind);
            assert!(scenario.watch.iter().any(|w| w == "turn_time"), "{text}");
            let time = &scenario.expect.metrics["turn_time"];
            assert_eq!(time.max, Some(30_000_000_000));
            assert_eq!(time.max_growth_per_turn, Some(5_000_000));
            for name in &scenario.watch {
                assert!(scenario.expect.metrics.contains_key(name), "{name}");
            }
        }
        assert_eq!(written, 4, "sim, litert-lm, exec and attach have starters");
        let exec = starter_text(of(BackendKind::Exec), &options).expect("exec has a starter");
        assert!(
            exec.contains("command: ['python3', 'it''s driver.py']"),
            "{exec}"
        );
    }
}
