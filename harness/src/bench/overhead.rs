//! The harness's own cost: how long the runner takes per turn and per engine call, in process and
//! through a worker process, how long the analysis takes, and how much memory the runner's
//! records hold. These are figures to watch across releases, not pass/fail checks.

use std::fmt::Write as _;
use std::path::Path;
use std::time::Instant;

use crate::analyze::analyze_run;
use crate::engine::{build_engine, EngineError};
use crate::probe::probe_process;
use crate::runner::{run_scenario, NoObserver};
use crate::scenario::{parse_scenario, ScenarioError};

/// One measured configuration.
#[derive(Debug, Clone, PartialEq)]
pub struct OverheadRow {
    /// `in-process` or `worker`.
    pub mode: &'static str,
    /// Turns run.
    pub turns: u32,
    /// Engine calls the runner made (load, open, send, generate, close, snapshot, unload).
    pub engine_calls: u64,
    /// Wall time of the whole run, in seconds.
    pub run_seconds: f64,
    /// Wall time of the analysis, in seconds.
    pub analyze_seconds: f64,
    /// Samples recorded.
    pub samples: usize,
    /// Growth of this process's resident memory across the run, in bytes (records, ledger).
    pub runner_rss_growth: i64,
}

/// What can stop the benchmark.
#[derive(Debug, thiserror::Error)]
pub enum OverheadError {
    /// The built-in scenario did not parse (a bug).
    #[error(transparent)]
    Scenario(#[from] ScenarioError),
    /// The engine could not be started.
    #[error(transparent)]
    Engine(#[from] EngineError),
}

fn scenario_text(turns: u32, isolate: bool) -> String {
    format!(
        "name: bench-overhead\n\
         engine: {{backend: sim, profile: cpu-flat, isolate: {isolate}}}\n\
         turns: {turns}\n\
         turn:\n  - open: {{}}\n  - send: {{tokens: [32, 128]}}\n  - generate: {{max_output_tokens: 16}}\n  - close: {{}}\n\
         expect:\n  balanced: true\n  native_heap: {{max_growth_per_turn: 64KiB}}\n"
    )
}

/// Runs the simulator `turns` turns in process and in a worker process.
pub fn run_overhead(turns: u32) -> Result<Vec<OverheadRow>, OverheadError> {
    [("in-process", false), ("worker", true)]
        .into_iter()
        .map(|(mode, isolate)| {
            let scenario = parse_scenario(
                &scenario_text(turns, isolate),
                Path::new("<bench overhead>"),
            )?;
            let mut engine = build_engine(&scenario)?;
            let rss = || {
                probe_process(std::process::id())
                    .ok()
                    .and_then(|m| m.get("rss").copied())
                    .unwrap_or(0) as i64
            };
            let rss_before = rss();
            let started = Instant::now();
            let record = run_scenario(&scenario, engine.as_mut(), &mut NoObserver);
            let run_seconds = started.elapsed().as_secs_f64();
            let started = Instant::now();
            let verdict = analyze_run(&record);
            let analyze_seconds = started.elapsed().as_secs_f64();
            std::hint::black_box(&verdict);
            // Per turn: open, send, generate, close and the close sample's snapshot (which also
            // brings the ledger up to date); plus load, its sample, unload and the last snapshot.
            let engine_calls = u64::from(turns) * 5 + 4;
            Ok(OverheadRow {
                mode,
                turns,
                engine_calls,
                run_seconds,
                analyze_seconds,
                samples: record.samples.len(),
                runner_rss_growth: rss() - rss_before,
            })
        })
        .collect()
}

/// The rows as a Markdown table.
pub fn render_overhead(rows: &[OverheadRow]) -> String {
    let mut out = String::from(
        "| mode | turns | per turn | per engine call | analysis | samples | runner RSS growth |\n\
         | --- | ---: | ---: | ---: | ---: | ---: | ---: |\n",
    );
    for row in rows {
        let _ = writeln!(
            out,
            "| {} | {} | {:.1} µs | {:.1} µs | {:.1} ms | {} | {} |",
            row.mode,
            row.turns,
            row.run_seconds * 1e6 / f64::from(row.turns.max(1)),
            row.run_seconds * 1e6 / row.engine_calls as f64,
            row.analyze_seconds * 1e3,
            row.samples,
            crate::report::format_signed_bytes(row.runner_rss_growth as f64),
        );
    }
    out
}
