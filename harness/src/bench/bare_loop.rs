//! `leakloop bench overhead`: leakloop's per-turn cost on the real LiteRT-LM engine next to a
//! bare C loop making the same C-API calls (`bench/bare-loop/litert_lm_turns.c`, compiled with
//! `cc` when the benchmark runs). Both run the same model, prompt and token limits on the CPU,
//! alternately, and the per-turn times of the measured turns (warm-up excluded, load excluded)
//! are compared: the ratio is what leakloop adds on top of the engine it watches. Where heaptrack
//! is installed, a row with attribution on (`run --attribute`, the worker under heaptrack) says
//! what it adds; without heaptrack that row is skipped, saying so.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::Instant;

use crate::attribution::{heaptrack_missing, AttributionSource, HeaptrackSource};
use crate::engine::litert_lm::{discover_library, LibraryLocation};
use crate::engine::{build_engine, build_on_target_in};
use crate::runner::{run_scenario, Phase, RunObserver, RunOutcome, Sample};
use crate::scenario::parse_scenario;

/// The bare loop's source, carried in the binary so that the benchmark runs from anywhere.
const BARE_LOOP_C: &str = include_str!("../../../bench/bare-loop/litert_lm_turns.c");

/// The prompt both loops send.
const PROMPT: &str = "Summarize the notes about the engine and the cache.";

/// What to run.
#[derive(Debug, Clone)]
pub struct BareLoopConfig {
    /// The library (`None`: discovered as for any run).
    pub lib: Option<PathBuf>,
    /// The `.litertlm` model.
    pub model: PathBuf,
    /// Measured turns per round.
    pub turns: u32,
    /// Warm-up turns per round (not timed).
    pub warmup: u32,
    /// Rounds; each runs the bare loop and every leakloop mode once, and the median is kept.
    pub rounds: u32,
    /// Tokens to generate per turn.
    pub max_output_tokens: u32,
}

/// One measured configuration.
#[derive(Debug, Clone, PartialEq)]
pub struct BareLoopRow {
    /// `bare C loop`, `leakloop (worker)` or `leakloop (in-process)`.
    pub mode: &'static str,
    /// Median seconds per measured turn over the rounds.
    pub seconds_per_turn: f64,
    /// This mode's time per turn over the bare loop's.
    pub ratio: f64,
}

/// Why the benchmark could not run.
#[derive(Debug, thiserror::Error)]
pub enum BareLoopError {
    /// No library or model: the benchmark is skipped, with how to get them.
    #[error("{0}")]
    Missing(String),
    /// Something failed on the way.
    #[error("{0}")]
    Failed(String),
}

/// The library and model the benchmark would use, or why it cannot run.
pub fn bare_loop_resources(config: &BareLoopConfig) -> Result<LibraryLocation, BareLoopError> {
    let library = discover_library(config.lib.as_deref())
        .map_err(|e| BareLoopError::Missing(e.to_string()))?;
    if !config.model.is_file() {
        return Err(BareLoopError::Missing(format!(
            "model {} not found (pass --model; fixtures/models/build_models.py builds the tiny ones)",
            config.model.display()
        )));
    }
    Ok(library)
}

/// The row with attribution on: the worker under heaptrack (`run --attribute`).
pub const ATTRIBUTION_ROW: &str = "leakloop (worker + heaptrack)";

/// Why the [`ATTRIBUTION_ROW`] is left out (heaptrack is not installed, with how to get it), or
/// `None` when it runs.
pub fn attribution_row_skipped() -> Option<String> {
    heaptrack_missing()
}

/// Runs both loops `config.rounds` times and returns the bare loop's row first.
pub fn run_bare_loop_comparison(
    config: &BareLoopConfig,
) -> Result<Vec<BareLoopRow>, BareLoopError> {
    let library = bare_loop_resources(config)?;
    let failed =
        |what: &str, e: &dyn std::fmt::Display| BareLoopError::Failed(format!("{what}: {e}"));
    let work = tempfile::tempdir().map_err(|e| failed("temporary folder", &e))?;
    let binary = compile_bare_loop(work.path())?;
    // (isolate, attribute) per leakloop mode; attribution only where heaptrack is installed.
    let mut modes: Vec<(&'static str, Option<(bool, bool)>)> = vec![
        ("bare C loop", None),
        ("leakloop (worker)", Some((true, false))),
        ("leakloop (in-process)", Some((false, false))),
    ];
    if attribution_row_skipped().is_none() {
        modes.push((ATTRIBUTION_ROW, Some((true, true))));
    }
    let mut times: Vec<Vec<f64>> = vec![Vec::new(); modes.len()];
    for _ in 0..config.rounds.max(1) {
        for (i, (_, mode)) in modes.iter().enumerate() {
            let per_turn = match mode {
                None => run_bare(&binary, &library.path, config, work.path())?,
                Some((isolate, attribute)) => {
                    run_leakloop(&library.path, config, *isolate, *attribute)?
                }
            };
            times[i].push(per_turn);
        }
    }
    let medians: Vec<f64> = times
        .into_iter()
        .map(|mut t| {
            t.sort_by(f64::total_cmp);
            t[t.len() / 2]
        })
        .collect();
    Ok(modes
        .iter()
        .zip(&medians)
        .map(|((mode, _), &seconds_per_turn)| BareLoopRow {
            mode,
            seconds_per_turn,
            ratio: seconds_per_turn / medians[0],
        })
        .collect())
}

fn compile_bare_loop(dir: &Path) -> Result<PathBuf, BareLoopError> {
    let source = dir.join("litert_lm_turns.c");
    let binary = dir.join("litert_lm_turns");
    std::fs::write(&source, BARE_LOOP_C)
        .map_err(|e| BareLoopError::Failed(format!("writing the bare loop: {e}")))?;
    let cc = std::env::var_os("CC").unwrap_or_else(|| "cc".into());
    let output = std::process::Command::new(&cc)
        .args(["-O2", "-o"])
        .arg(&binary)
        .arg(&source)
        .arg("-ldl")
        .output()
        .map_err(|e| {
            BareLoopError::Missing(format!(
                "no C compiler `{}` ({e}); install one (e.g. `apt-get install gcc`) or set CC",
                cc.to_string_lossy()
            ))
        })?;
    if !output.status.success() {
        return Err(BareLoopError::Failed(format!(
            "compiling the bare loop failed: {}",
            String::from_utf8_lossy(&output.stderr).trim()
        )));
    }
    Ok(binary)
}

/// One round of the bare loop: seconds per measured turn.
fn run_bare(
    binary: &Path,
    lib: &Path,
    config: &BareLoopConfig,
    work: &Path,
) -> Result<f64, BareLoopError> {
    // Like leakloop's engine, the bare loop reads a private copy of the model with its own cache.
    let round = tempfile::tempdir_in(work)
        .map_err(|e| BareLoopError::Failed(format!("temporary folder: {e}")))?;
    let name = config
        .model
        .file_name()
        .unwrap_or("model.litertlm".as_ref());
    let model = round.path().join(name);
    std::fs::copy(&config.model, &model)
        .and_then(|_| std::fs::create_dir_all(round.path().join("cache")))
        .map_err(|e| BareLoopError::Failed(format!("copying the model: {e}")))?;
    let output = std::process::Command::new(binary)
        .arg(lib)
        .arg(&model)
        .arg(round.path().join("cache"))
        .args([
            "1024".to_owned(),
            config.max_output_tokens.to_string(),
            PROMPT.to_owned(),
            config.warmup.to_string(),
            config.turns.to_string(),
        ])
        .output()
        .map_err(|e| BareLoopError::Failed(format!("running the bare loop: {e}")))?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    let seconds = stdout
        .split_whitespace()
        .find_map(|field| field.strip_prefix("seconds="))
        .and_then(|s| s.parse::<f64>().ok());
    match (output.status.success(), seconds) {
        (true, Some(seconds)) => Ok(seconds / f64::from(config.turns.max(1))),
        _ => Err(BareLoopError::Failed(format!(
            "the bare loop failed ({}): {}",
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        ))),
    }
}

/// Times the turns after the warm-up, and tells the attribution source of the sample points (as
/// a session does).
struct TurnClock {
    warmup: u32,
    started: Option<Instant>,
    ended: Option<Instant>,
    source: Option<Box<dyn AttributionSource>>,
}

impl RunObserver for TurnClock {
    fn on_sample(&mut self, sample: &Sample) {
        if let (Some(source), Phase::Load | Phase::Close) = (self.source.as_mut(), sample.phase) {
            source.mark(sample.turn);
        }
    }

    fn on_turn_end(&mut self, turn: u32, total: u32) {
        if turn == self.warmup {
            self.started = Some(Instant::now());
        }
        if turn == total {
            self.ended = Some(Instant::now());
        }
    }
}

/// One round of leakloop on the same turn, with the default sampling (after load and close, no
/// settle time) and the metrics a CPU chat scenario watches.
fn run_leakloop(
    lib: &Path,
    config: &BareLoopConfig,
    isolate: bool,
    attribute: bool,
) -> Result<f64, BareLoopError> {
    let text = format!(
        "name: bench-overhead\n\
         engine: {{backend: litert-lm, model: {model:?}, lib: {lib:?}, device: cpu, max_tokens: 1024, isolate: {isolate}}}\n\
         warmup_turns: {warmup}\n\
         turns: {turns}\n\
         turn:\n  - open: {{}}\n  - send: {{prompt: {PROMPT:?}}}\n  - generate: {{max_output_tokens: {max}}}\n  - close: {{}}\n\
         watch: [rss, anon_rss, native_heap]\n\
         expect:\n  balanced: true\n  native_heap: {{max_growth_per_turn: 64KiB}}\n",
        model = config.model.display().to_string(),
        lib = lib.display().to_string(),
        warmup = config.warmup.max(1),
        turns = config.turns,
        max = config.max_output_tokens,
    );
    let failed = |e: &dyn std::fmt::Display| BareLoopError::Failed(format!("leakloop run: {e}"));
    let scenario = parse_scenario(&text, Path::new("<bench overhead>")).map_err(|e| failed(&e))?;
    let source = match attribute {
        true => Some(Box::new(HeaptrackSource::start().map_err(|e| failed(&e))?)),
        false => None,
    };
    let mut engine = match &source {
        Some(source) => {
            build_on_target_in(&scenario, None, &source.env()).map_err(|e| failed(&e))?
        }
        None => build_engine(&scenario).map_err(|e| failed(&e))?,
    };
    let mut clock = TurnClock {
        warmup: config.warmup.max(1),
        started: None,
        ended: None,
        source: source.map(|s| s as Box<dyn AttributionSource>),
    };
    let record = run_scenario(&scenario, engine.as_mut(), &mut clock);
    drop(engine);
    // The recording is read to its end, as a run's would be (its cost is the interpreter's and
    // this thread's, after the timed turns).
    if let Some(source) = clock.source.take() {
        source.finish().map_err(|e| failed(&e))?;
    }
    if let RunOutcome::EngineFailed { error, .. } = &record.outcome {
        return Err(failed(error));
    }
    match (clock.started, clock.ended) {
        (Some(start), Some(end)) => {
            Ok((end - start).as_secs_f64() / f64::from(config.turns.max(1)))
        }
        _ => Err(failed(&"the run ended early")),
    }
}

/// The rows as a Markdown table.
pub fn render_bare_loop(rows: &[BareLoopRow], config: &BareLoopConfig, library: &str) -> String {
    let mut out = format!(
        "LiteRT-LM {library} on the CPU, {} measured turns after {} warm-up, median of {} rounds, \
         {} output tokens\n\n| loop | per turn | ratio to the bare loop |\n| --- | ---: | ---: |\n",
        config.turns,
        config.warmup.max(1),
        config.rounds.max(1),
        config.max_output_tokens
    );
    for row in rows {
        let _ = writeln!(
            out,
            "| {} | {:.3} ms | {:.3}x |",
            row.mode,
            row.seconds_per_turn * 1e3,
            row.ratio
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bare_loop_source_makes_the_calls_leakloop_makes_per_turn() {
        for call in [
            "litert_lm_session_config_create",
            "litert_lm_conversation_config_create",
            "litert_lm_conversation_create",
            "litert_lm_conversation_optional_args_create",
            "litert_lm_conversation_send_message",
            "litert_lm_json_response_get_string",
            "litert_lm_engine_tokenize",
            "litert_lm_conversation_delete",
        ] {
            assert!(BARE_LOOP_C.contains(call), "{call}");
        }
    }

    #[test]
    fn renders_ratios_against_the_first_row() {
        let config = BareLoopConfig {
            lib: None,
            model: PathBuf::from("m.litertlm"),
            turns: 100,
            warmup: 3,
            rounds: 3,
            max_output_tokens: 16,
        };
        let rows = [
            BareLoopRow {
                mode: "bare C loop",
                seconds_per_turn: 0.004,
                ratio: 1.0,
            },
            BareLoopRow {
                mode: "leakloop (worker)",
                seconds_per_turn: 0.0042,
                ratio: 1.05,
            },
        ];
        let table = render_bare_loop(&rows, &config, "0.18.1");
        assert!(
            table.contains("| leakloop (worker) | 4.200 ms | 1.050x |"),
            "{table}"
        );
    }
}
