//! `leakloop bench scale`: what a run costs as it grows. Each configuration (turns, with or
//! without reloads) runs the simulator end to end (turn loop with the sample store streamed,
//! analysis, reports) in a fresh process, so that its peak resident memory is its own; this
//! module holds the configurations, the scenario they run, the run of one configuration (in the
//! child: [`scale_child`]), the child's start from the parent ([`scale_in_child`]) and the table
//! they print.

use std::fmt::Write as _;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::report::{PLOT_SVG, REPORT_JSON, SAMPLES_STORE};
use crate::scenario::{parse_scenario, Scenario, ScenarioError};
use crate::session::{Session, SessionError, SessionObserver};

/// Why a scale configuration has no row.
#[derive(Debug, thiserror::Error)]
pub enum ScaleError {
    /// The generated scenario is invalid.
    #[error(transparent)]
    Scenario(#[from] ScenarioError),
    /// The run failed.
    #[error(transparent)]
    Session(#[from] SessionError),
    /// The child or its temporary folder could not be started or made.
    #[error(transparent)]
    Io(#[from] std::io::Error),
    /// The child failed.
    #[error("the {turns}-turn configuration failed ({status}): {stdout}")]
    Child {
        /// Its turns.
        turns: u32,
        /// How it ended.
        status: std::process::ExitStatus,
        /// What it printed, trimmed.
        stdout: String,
    },
    /// The child's row is not the JSON of a row.
    #[error(transparent)]
    Row(#[from] serde_json::Error),
}

/// The run lengths measured by default.
pub const SCALE_TURNS: &[u32] = &[1_000, 10_000, 100_000, 1_000_000];

/// The reload period of the "with reloads" rows (the slow case).
pub const SCALE_RELOAD_EVERY: u32 = 1999;

/// What one configuration measured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScaleRow {
    /// Turns run.
    pub turns: u32,
    /// Reload period (0: none).
    pub reload_every: u32,
    /// Samples recorded.
    pub samples: usize,
    /// Seconds in the turn loop (engine built, samples streamed to the sample store).
    pub run_seconds: f64,
    /// Seconds in the analysis.
    pub analyze_seconds: f64,
    /// Seconds writing report.json, junit.xml, plot.svg and summary.md.
    pub report_seconds: f64,
    /// Peak resident memory of the process when its turn loop ended, in bytes (`None` where the
    /// OS does not tell).
    pub run_peak_rss: Option<u64>,
    /// Peak resident memory of the process that ran it, in bytes (`None` where the OS does not
    /// tell).
    pub peak_rss: Option<u64>,
    /// Size of report.json, in bytes.
    pub report_json: u64,
    /// Size of plot.svg, in bytes.
    pub plot_svg: u64,
    /// Size of the sample store (samples.parquet), in bytes.
    pub samples_store: u64,
}

impl ScaleRow {
    /// Total wall time of the configuration.
    pub fn total_seconds(&self) -> f64 {
        self.run_seconds + self.analyze_seconds + self.report_seconds
    }
}

/// The leaky simulator scenario every configuration runs: the field's per-turn chat on the
/// Android OpenCL profile (native heap +110 MiB a turn), sampled after load and close. The
/// length is set after validation, since the DSL caps scenarios at
/// [`crate::scenario::MAX_TURNS`] turns and this benchmark drives the runner past it.
pub fn scale_scenario(turns: u32, reload_every: u32) -> Result<Scenario, ScenarioError> {
    let text = "name: bench-scale\n\
         engine: {backend: sim, profile: android-opencl-leak}\n\
         turns: 10\n\
         turn:\n  - open: {}\n  - send: {prompt: \"Summarize the notes.\"}\n  - generate: {max_output_tokens: 16}\n  - close: {}\n\
         sample: {after: [load, close]}\n\
         watch: [native_heap, gpu]\n\
         expect:\n  balanced: true\n  native_heap: {max_growth_per_turn: 1MiB}\n  gpu: {warmup_budget: 2GiB}\n";
    let mut scenario = parse_scenario(text, Path::new("<bench scale>"))?;
    scenario.turns = turns;
    scenario.reload_every = reload_every;
    Ok(scenario)
}

/// The rows as a Markdown table, with the time per turn so that linear growth shows as a
/// constant column.
pub fn render_scale(rows: &[ScaleRow]) -> String {
    let mut out = String::from(
        "| turns | reloads | samples | run | analysis | reports | total | per turn | peak RSS after the loop | peak RSS | report.json | plot.svg | samples.parquet | per sample |\n\
         | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n",
    );
    let size = crate::report::format_bytes;
    for row in rows {
        let _ = writeln!(
            out,
            "| {} | {} | {} | {:.2} s | {:.2} s | {:.2} s | {:.2} s | {:.1} µs | {} | {} | {} | {} | {} | {:.1} B |",
            row.turns,
            match row.reload_every {
                0 => "none".to_owned(),
                k => format!("every {k}"),
            },
            row.samples,
            row.run_seconds,
            row.analyze_seconds,
            row.report_seconds,
            row.total_seconds(),
            row.total_seconds() * 1e6 / f64::from(row.turns.max(1)),
            row.run_peak_rss.map_or_else(|| "n/a".to_owned(), size),
            row.peak_rss.map_or_else(|| "n/a".to_owned(), size),
            size(row.report_json),
            size(row.plot_svg),
            size(row.samples_store),
            row.samples_store as f64 / row.samples.max(1) as f64,
        );
    }
    out
}

/// Runs every configuration up to `max_turns` turns (without reloads, then with them), each in
/// a fresh copy of this program, handing each row to `on_row` as it comes; returns the rows in
/// that order.
pub fn run_scale(
    max_turns: u32,
    mut on_row: impl FnMut(&ScaleRow),
) -> Result<Vec<ScaleRow>, ScaleError> {
    let mut rows = Vec::new();
    for reload_every in [0, SCALE_RELOAD_EVERY] {
        for &turns in SCALE_TURNS.iter().filter(|&&t| t <= max_turns) {
            let row = scale_in_child(turns, reload_every)?;
            on_row(&row);
            rows.push(row);
        }
    }
    Ok(rows)
}

/// Runs one scale configuration in a fresh copy of this program (`leakloop bench scale
/// --child-turns ...`, stderr passed through) and reads back its row.
pub fn scale_in_child(turns: u32, reload_every: u32) -> Result<ScaleRow, ScaleError> {
    let dir = tempfile::tempdir()?;
    let exe = std::env::current_exe()?;
    let output = std::process::Command::new(exe)
        .args(["bench", "scale", "--child-turns", &turns.to_string()])
        .args(["--child-reload-every", &reload_every.to_string()])
        .arg("--child-out")
        .arg(dir.path())
        .stderr(std::process::Stdio::inherit())
        .output()?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    if !output.status.success() {
        return Err(ScaleError::Child {
            turns,
            status: output.status,
            stdout: stdout.trim().to_owned(),
        });
    }
    Ok(serde_json::from_str(stdout.trim())?)
}

/// One scale configuration, end to end in this process, as `leakloop run --out` does it (one
/// [`Session`], which times its phases), shown to `observer`.
pub fn scale_child(
    turns: u32,
    reload_every: u32,
    out: &Path,
    observer: &mut dyn SessionObserver,
) -> Result<ScaleRow, ScaleError> {
    let scenario = scale_scenario(turns, reload_every)?;
    let outcome = Session::new(scenario).out(out).run(observer)?;
    let times = outcome.times;
    let size = |name: &str| std::fs::metadata(out.join(name)).map_or(0, |m| m.len());
    Ok(ScaleRow {
        turns,
        reload_every,
        samples: outcome.record.samples.len(),
        run_seconds: times.run,
        analyze_seconds: times.analyze,
        report_seconds: times.reports,
        run_peak_rss: times.run_peak_rss,
        peak_rss: crate::probe::peak_rss_bytes(),
        report_json: size(REPORT_JSON),
        plot_svg: size(PLOT_SVG),
        samples_store: size(SAMPLES_STORE),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_scenario_goes_past_the_dsl_limit_and_keeps_its_reloads() {
        let s = scale_scenario(1_000_000, SCALE_RELOAD_EVERY).unwrap();
        assert_eq!(s.total_turns(), 1_000_000);
        assert_eq!(s.reload_every, 1999);
        assert!(s.total_turns() > crate::scenario::MAX_TURNS);
    }

    #[test]
    fn renders_one_line_per_row() {
        let row = ScaleRow {
            turns: 1000,
            reload_every: 0,
            samples: 1001,
            run_seconds: 0.01,
            analyze_seconds: 0.02,
            report_seconds: 0.03,
            run_peak_rss: Some(10 << 20),
            peak_rss: Some(20 << 20),
            report_json: 150_000,
            plot_svg: 90_000,
            samples_store: 8_008,
        };
        let table = render_scale(&[row]);
        assert!(table.contains("| 1000 | none | 1001 |"), "{table}");
        assert!(table.contains("60.0 µs"), "{table}");
        assert!(table.contains("| 8.0 B |"), "{table}");
    }
}
