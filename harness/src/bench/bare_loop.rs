//! `leakloop bench overhead`: leakloop's per-turn cost on the real LiteRT-LM engine next to a
//! bare C loop making the same C-API calls (`bench/bare-loop/litert_lm_turns.c`, compiled with
//! `cc` when the benchmark runs). Both run the same model, prompt and token limits on the CPU.
//! The two loops take turns in blocks of a few turns, both engines loaded, so that each block of
//! leakloop's is compared with the bare loop's block next to it in time: a shared machine's speed
//! moves by a third from one second to the next (two processes of the bare loop alone, run one
//! after the other, differ that much), and loops timed one after the other compare those moments
//! more than the loops. A round's ratio is the sum of leakloop's blocks over the sum of the bare
//! loop's; the median over the rounds is printed. Two more rows run the C loop with the least an
//! out-of-process sampler does each turn (its allocator's statistics and one or five pipe round
//! trips to a second process that reads its /proc statm): the floor under leakloop's worker, so
//! that the worker's ratio is read against what sampling must cost, not against nothing. Where
//! heaptrack is installed, a row with attribution on (`run --attribute`, the worker under
//! heaptrack) says what it adds; without heaptrack that row is skipped, saying so.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::attribution::{heaptrack_missing, AttributionSource, HeaptrackSource};
use crate::engine::litert_lm::{discover_library, LibraryLocation};
use crate::engine::{build_engine, build_on_target_in};
use crate::process::pipes::{Chunk, LineReader, LineWriter};
use crate::process::tail::{Drain, StderrTail};
use crate::process::{Process, KILL_GRACE};
use crate::runner::{run_scenario, Phase, RunObserver, RunOutcome, Sample};
use crate::scenario::parse_scenario;
use leakloop_metrics::names;

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
    /// Turns per block: the loops alternate after this many measured turns.
    pub block: u32,
    /// Whether both loops (and leakloop's worker) run on one CPU: the engine's threads then
    /// never take a second core in some blocks and not in others.
    pub one_cpu: bool,
    /// The engine's CPU threads in both loops (`None`: the library's own choice). On one CPU a
    /// pool of several threads spends most of the turn waiting for each other, and how long
    /// depends on what else ran on the CPU between turns (see docs/benchmarks.md).
    pub threads: Option<u32>,
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
    /// The median over the rounds of this mode's time over the bare loop's blocks next to its
    /// own (1 for the bare loop).
    pub ratio: f64,
    /// The smallest and largest of the rounds' ratios.
    pub ratio_range: (f64, f64),
    /// Where a turn's time went, as this loop timed its steps (means over every round).
    pub steps: StepTimes,
}

/// Seconds per turn in each step of a turn, and outside them. The bare loop's `open`,
/// `generate` and `close` make the C calls leakloop's LiteRT-LM engine makes in its steps of
/// those names (leakloop's `send` only keeps the prompt for `generate`); leakloop's step times
/// are the runner's, so through a worker they include the call's round trip.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct StepTimes {
    /// Opening the conversation.
    pub open: f64,
    /// leakloop's `send` step (the bare loop has none: 0).
    pub send: f64,
    /// Sending the message, reading the reply and counting its tokens.
    pub generate: f64,
    /// Deleting the conversation.
    pub close: f64,
    /// The turn's time outside the steps: for leakloop its samples and its bookkeeping.
    pub rest: f64,
}

impl StepTimes {
    fn add(&mut self, other: &StepTimes) {
        self.open += other.open;
        self.send += other.send;
        self.generate += other.generate;
        self.close += other.close;
    }

    /// These sums as means over `turns` turns of `seconds` in all.
    fn per_turn(&self, seconds: f64, turns: u32) -> StepTimes {
        let n = f64::from(turns.max(1));
        let steps = self.open + self.send + self.generate + self.close;
        StepTimes {
            open: self.open / n,
            send: self.send / n,
            generate: self.generate / n,
            close: self.close / n,
            rest: (seconds - steps) / n,
        }
    }
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
    if config.one_cpu {
        keep_to_one_cpu().map_err(|e| failed("keeping the benchmark to one CPU", &e))?;
    }
    let work = tempfile::tempdir().map_err(|e| failed("temporary folder", &e))?;
    let binary = compile_bare_loop(work.path())?;
    // What runs beside the bare loop: a second bare loop (the control: how far the method is
    // from 1 when both sides are the same program), then leakloop's modes (isolate,
    // attribute); attribution only where heaptrack is installed.
    let mut modes: Vec<(&'static str, Side)> = vec![
        (CONTROL_ROW, Side::CLoop(0)),
        (FLOOR_ONE_TRIP_ROW, Side::CLoop(1)),
        (FLOOR_PER_STEP_ROW, Side::CLoop(5)),
        ("leakloop (worker)", Side::Leakloop(true, false)),
        ("leakloop (in-process)", Side::Leakloop(false, false)),
    ];
    if attribution_row_skipped().is_none() {
        modes.push((ATTRIBUTION_ROW, Side::Leakloop(true, true)));
    }
    // Per round: the bare loop's seconds per turn, and per mode its own and its ratio.
    let mut bare_per_turn = Vec::new();
    let mut per_turn: Vec<Vec<f64>> = vec![Vec::new(); modes.len()];
    let mut ratios: Vec<Vec<f64>> = vec![Vec::new(); modes.len()];
    // Every round's blocks together, for where the time went.
    let mut bare_all = Blocks::default();
    let mut all: Vec<Blocks> = vec![Blocks::default(); modes.len()];
    for _ in 0..config.rounds.max(1) {
        let mut bare_round = Blocks::default();
        for (i, &(_, side)) in modes.iter().enumerate() {
            // A fresh bare loop beside each: both sides start equally fresh (a process's speed
            // drifts over its life by a percent or two).
            let mut bare = BareLoop::start(&binary, &library.path, config, work.path(), 0)?;
            let blocks = match side {
                Side::CLoop(trips) => run_c_loop(
                    &binary,
                    &library.path,
                    config,
                    work.path(),
                    trips,
                    &mut bare,
                )?,
                Side::Leakloop(isolate, attribute) => {
                    run_leakloop(&library.path, config, isolate, attribute, &mut bare)?
                }
            };
            per_turn[i].push(blocks.leakloop_seconds / f64::from(blocks.turns.max(1)));
            ratios[i].push(blocks.leakloop_seconds / blocks.bare_seconds);
            bare_round.add(&blocks);
            all[i].add(&blocks);
            bare.finish();
        }
        bare_per_turn.push(bare_round.bare_seconds / f64::from(bare_round.turns.max(1)));
        bare_all.add(&bare_round);
    }
    let mut rows = vec![BareLoopRow {
        mode: "bare C loop",
        seconds_per_turn: median(&mut bare_per_turn),
        ratio: 1.0,
        ratio_range: (1.0, 1.0),
        steps: bare_all
            .bare_steps
            .per_turn(bare_all.bare_seconds, bare_all.turns),
    }];
    for (i, &(mode, _)) in modes.iter().enumerate() {
        let range = ratios[i]
            .iter()
            .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), &r| {
                (lo.min(r), hi.max(r))
            });
        rows.push(BareLoopRow {
            mode,
            seconds_per_turn: median(&mut per_turn[i]),
            ratio: median(&mut ratios[i]),
            ratio_range: range,
            steps: all[i]
                .leakloop_steps
                .per_turn(all[i].leakloop_seconds, all[i].turns),
        });
    }
    Ok(rows)
}

/// Keeps this thread, and the processes and threads it starts from now on, to the first CPU it
/// may run on.
#[cfg(target_os = "linux")]
fn keep_to_one_cpu() -> std::io::Result<()> {
    // SAFETY: a zeroed cpu_set_t is a valid empty set; both calls read or write only `set`, for
    // the calling thread (pid 0).
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
            return Err(std::io::Error::last_os_error());
        }
        let first = (0..libc::CPU_SETSIZE as usize)
            .find(|&cpu| libc::CPU_ISSET(cpu, &set))
            .ok_or_else(|| std::io::Error::other("no CPU in this thread's affinity"))?;
        libc::CPU_ZERO(&mut set);
        libc::CPU_SET(first, &mut set);
        if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

/// Elsewhere the loops run where the scheduler puts them.
#[cfg(not(target_os = "linux"))]
fn keep_to_one_cpu() -> std::io::Result<()> {
    Ok(())
}

/// The row of the second bare loop, run beside the first as leakloop is.
pub const CONTROL_ROW: &str = "bare C loop (control)";

/// The C loop sampling each turn as cheaply as a sampler in a second process can: its
/// allocator's statistics, and one round trip to the process reading its statm.
pub const FLOOR_ONE_TRIP_ROW: &str = "C loop + sample, 1 round trip";

/// As [`FLOOR_ONE_TRIP_ROW`] with a round trip per step of the turn and one for the sample, as
/// many as leakloop's worker protocol makes (open, send, generate, close, snapshot).
pub const FLOOR_PER_STEP_ROW: &str = "C loop + sample, 5 round trips";

/// What a row runs beside the bare loop.
#[derive(Debug, Clone, Copy)]
enum Side {
    /// A second C loop: bare (the control) for 0, else sampling each turn with this many round
    /// trips to its sampler process (a floor row).
    CLoop(u32),
    /// leakloop, isolated (a worker) or not, with attribution or not.
    Leakloop(bool, bool),
}

/// A second C loop (sampling with `trips` round trips a turn, or bare for 0) in blocks beside
/// `bare`, as [`run_leakloop`] runs leakloop.
fn run_c_loop(
    binary: &Path,
    lib: &Path,
    config: &BareLoopConfig,
    work: &Path,
    trips: u32,
    bare: &mut BareLoop,
) -> Result<Blocks, BareLoopError> {
    let mut other = BareLoop::start(binary, lib, config, work, trips)?;
    let mut blocks = Blocks::default();
    while blocks.turns < config.turns {
        let turns = config.block.max(1).min(config.turns - blocks.turns);
        let theirs = other.turns(turns)?;
        let ours = bare.turns(turns)?;
        blocks.leakloop_seconds += theirs.seconds;
        blocks.leakloop_steps.add(&theirs.steps);
        blocks.bare_seconds += ours.seconds;
        blocks.bare_steps.add(&ours.steps);
        blocks.turns += turns;
    }
    other.finish();
    Ok(blocks)
}

fn failed(what: &str, e: &dyn std::fmt::Display) -> BareLoopError {
    BareLoopError::Failed(format!("{what}: {e}"))
}

/// The median of the rounds (the analysis's; NaN for none).
fn median(values: &mut [f64]) -> f64 {
    crate::analyze::stats::robust::median_in_place(values).unwrap_or(f64::NAN)
}

fn compile_bare_loop(dir: &Path) -> Result<PathBuf, BareLoopError> {
    let source = dir.join("litert_lm_turns.c");
    let binary = dir.join("litert_lm_turns");
    std::fs::write(&source, BARE_LOOP_C)
        .map_err(|e| BareLoopError::Failed(format!("writing the bare loop: {e}")))?;
    let cc = std::env::var_os("CC").unwrap_or_else(|| "cc".into());
    let output = Command::new(&cc)
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

/// How long the bare loop may take to load and warm up, and then per turn of a block.
const BARE_START_LIMIT: Duration = Duration::from_secs(300);
const BARE_TURN_LIMIT: Duration = Duration::from_secs(10);

/// The longest line the bare loop prints (`seconds=... tokens=... open=... generate=... close=...`).
const BARE_LINE_BYTES: u64 = 256;

/// The bare loop running, its engine loaded and warmed up, waiting for blocks of turns.
struct BareLoop {
    process: Process,
    stdin: Option<LineWriter>,
    stdout: LineReader,
    /// The last lines of its stderr, for an error message, and the thread draining it.
    stderr: StderrTail,
    drain: Option<Drain>,
    /// The round's folder (the model's copy and its cache); removed when the loop ends.
    _round: tempfile::TempDir,
}

impl BareLoop {
    /// Starts the bare loop on a private copy of the model with its own cache (as leakloop's
    /// engine reads one) and waits until it has loaded and run its warm-up turns; with `trips`
    /// above 0 it samples each turn through that many round trips (the C file's TRIPS).
    fn start(
        binary: &Path,
        lib: &Path,
        config: &BareLoopConfig,
        work: &Path,
        trips: u32,
    ) -> Result<Self, BareLoopError> {
        let round = tempfile::tempdir_in(work).map_err(|e| failed("temporary folder", &e))?;
        let name = config
            .model
            .file_name()
            .unwrap_or("model.litertlm".as_ref());
        let model = round.path().join(name);
        std::fs::copy(&config.model, &model)
            .and_then(|_| std::fs::create_dir_all(round.path().join("cache")))
            .map_err(|e| failed("copying the model", &e))?;
        let mut command = Command::new(binary);
        command
            .arg(lib)
            .arg(&model)
            .arg(round.path().join("cache"))
            .args([
                "1024".to_owned(),
                config.max_output_tokens.to_string(),
                PROMPT.to_owned(),
                config.warmup.max(1).to_string(),
                config.threads.unwrap_or(0).to_string(),
                trips.to_string(),
            ])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut process = Process::spawn(command, libc::SIGKILL)
            .map_err(|e| failed("running the bare loop", &e))?;
        let pipes = (
            process.take_stdin(),
            process.take_stdout(),
            process.take_stderr(),
        );
        let (Some(stdin), Some(stdout), Some(child_stderr)) = pipes else {
            unreachable!("all three pipes were requested");
        };
        let stderr = StderrTail::default();
        let drain = Some(stderr.drain(child_stderr));
        let mut bare = BareLoop {
            process,
            stdin: Some(LineWriter::start(stdin).map_err(|e| failed("the bare loop's stdin", &e))?),
            stdout: LineReader::start(stdout, BARE_LINE_BYTES)
                .map_err(|e| failed("the bare loop's stdout", &e))?,
            stderr,
            drain,
            _round: round,
        };
        let ready = bare.line(Instant::now() + BARE_START_LIMIT)?;
        if ready.trim() != "ready" {
            return Err(bare.failure(&format!("it said `{}` instead of `ready`", ready.trim())));
        }
        Ok(bare)
    }

    /// Runs `turns` turns; their wall time and their steps' times, as the bare loop measured them.
    fn turns(&mut self, turns: u32) -> Result<BareBlock, BareLoopError> {
        let deadline = Instant::now() + BARE_TURN_LIMIT * turns.max(1);
        let request = format!("{turns}\n");
        let written = match self.stdin.as_mut() {
            Some(stdin) => stdin.write(request.as_bytes(), deadline).is_ok(),
            None => false,
        };
        if !written {
            return Err(self.failure("it stopped reading its stdin"));
        }
        let line = self.line(deadline)?;
        parse_block(&line).ok_or_else(|| self.failure(&format!("it answered `{}`", line.trim())))
    }

    fn line(&mut self, deadline: Instant) -> Result<String, BareLoopError> {
        match self.stdout.next(deadline) {
            Some(Chunk::Line(bytes)) => Ok(String::from_utf8_lossy(&bytes).into_owned()),
            Some(Chunk::Closed(_)) => Err(self.failure("it ended")),
            None => Err(self.failure("it did not answer in time")),
        }
    }

    /// An error naming what happened, with the last lines of the bare loop's stderr.
    fn failure(&mut self, what: &str) -> BareLoopError {
        self.process.kill(KILL_GRACE);
        if let Some(drain) = self.drain.take() {
            drain.finish(KILL_GRACE);
        }
        BareLoopError::Failed(format!(
            "the bare loop failed ({what}){}",
            self.stderr.render("its stderr")
        ))
    }

    /// Closes its stdin, which unloads the engine and ends it; killed if it does not end soon.
    fn finish(mut self) {
        self.stdin = None;
        if self.process.wait_timeout(KILL_GRACE).is_none() {
            self.process.kill(KILL_GRACE);
        }
    }
}

/// One block of the bare loop's turns, as it timed them.
#[derive(Debug, Default, Clone, Copy, PartialEq)]
struct BareBlock {
    seconds: f64,
    /// Summed over the block's turns (`rest` unused).
    steps: StepTimes,
}

/// The bare loop's answer for a block, `seconds=S tokens=N open=S generate=S close=S`: `None`
/// unless every time is there, finite and not negative, and the block's time is positive.
fn parse_block(line: &str) -> Option<BareBlock> {
    let field = |name: &str| {
        line.split_whitespace()
            .find_map(|f| f.strip_prefix(name)?.strip_prefix('='))
            .and_then(|s| s.parse::<f64>().ok())
            .filter(|s| s.is_finite() && *s >= 0.0)
    };
    Some(BareBlock {
        seconds: field("seconds").filter(|s| *s > 0.0)?,
        steps: StepTimes {
            open: field("open")?,
            send: 0.0,
            generate: field("generate")?,
            close: field("close")?,
            rest: 0.0,
        },
    })
}

/// The blocks of one leakloop run and of the bare loop beside them.
#[derive(Debug, Default, Clone, Copy)]
struct Blocks {
    turns: u32,
    leakloop_seconds: f64,
    /// The steps of leakloop's measured turns (or the control loop's), summed.
    leakloop_steps: StepTimes,
    bare_seconds: f64,
    bare_steps: StepTimes,
}

impl Blocks {
    fn add(&mut self, other: &Blocks) {
        self.turns += other.turns;
        self.leakloop_seconds += other.leakloop_seconds;
        self.leakloop_steps.add(&other.leakloop_steps);
        self.bare_seconds += other.bare_seconds;
        self.bare_steps.add(&other.bare_steps);
    }
}

/// Times leakloop's turns after the warm-up in blocks, running the bare loop's block of as many
/// turns after each (outside leakloop's time), and tells the attribution source of the sample
/// points (as a session does).
struct BlockClock<'a> {
    warmup: u32,
    block: u32,
    bare: &'a mut BareLoop,
    /// When leakloop's block in progress began.
    block_started: Option<Instant>,
    /// The turn its block began after.
    block_from: u32,
    blocks: Blocks,
    error: Option<BareLoopError>,
    source: Option<Box<dyn AttributionSource>>,
}

impl RunObserver for BlockClock<'_> {
    fn on_sample(&mut self, sample: &Sample) {
        if let (Some(source), Phase::Load | Phase::Close) = (self.source.as_mut(), sample.phase) {
            source.mark(sample.turn);
        }
        // A turn's step times ride on its sample after close, taken before its turn ends.
        if sample.phase == Phase::Close && sample.turn > self.warmup {
            let seconds = |name: &str| sample.metrics.get(name).map_or(0.0, |ns| *ns as f64 / 1e9);
            self.blocks.leakloop_steps.add(&StepTimes {
                open: seconds(names::OPEN_TIME),
                send: seconds(names::SEND_TIME),
                generate: seconds(names::GENERATE_TIME),
                close: seconds(names::CLOSE_TIME),
                rest: 0.0,
            });
        }
    }

    fn on_turn_end(&mut self, turn: u32, total: u32) {
        if self.error.is_some() || turn < self.warmup {
            return;
        }
        if let Some(started) = self.block_started {
            let turns = turn - self.block_from;
            if turns < self.block && turn < total {
                return;
            }
            self.blocks.leakloop_seconds += started.elapsed().as_secs_f64();
            self.blocks.turns += turns;
            match self.bare.turns(turns) {
                Ok(block) => {
                    self.blocks.bare_seconds += block.seconds;
                    self.blocks.bare_steps.add(&block.steps);
                }
                Err(e) => {
                    self.error = Some(e);
                    return;
                }
            }
        }
        self.block_from = turn;
        self.block_started = Some(Instant::now());
    }
}

/// One round of leakloop on the same turn, with the default sampling (after load and close, no
/// settle time) and the metrics a CPU chat scenario watches (with its steps' times, which the
/// runner takes anyway), alternating with `bare`.
fn run_leakloop(
    lib: &Path,
    config: &BareLoopConfig,
    isolate: bool,
    attribute: bool,
    bare: &mut BareLoop,
) -> Result<Blocks, BareLoopError> {
    let text = format!(
        "name: bench-overhead\n\
         engine: {{backend: litert-lm, model: {model:?}, lib: {lib:?}, device: cpu, max_tokens: 1024, isolate: {isolate}{threads}}}\n\
         warmup_turns: {warmup}\n\
         turns: {turns}\n\
         turn:\n  - open: {{}}\n  - send: {{prompt: {PROMPT:?}}}\n  - generate: {{max_output_tokens: {max}}}\n  - close: {{}}\n\
         watch: [rss, anon_rss, native_heap, open_time, send_time, generate_time, close_time]\n\
         expect:\n  balanced: true\n  native_heap: {{max_growth_per_turn: 64KiB}}\n",
        model = config.model.display().to_string(),
        lib = lib.display().to_string(),
        warmup = config.warmup.max(1),
        turns = config.turns,
        max = config.max_output_tokens,
        threads = config
            .threads
            .map(|n| format!(", threads: {n}"))
            .unwrap_or_default(),
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
    let mut clock = BlockClock {
        warmup: config.warmup.max(1),
        block: config.block.max(1),
        bare,
        block_started: None,
        block_from: 0,
        blocks: Blocks::default(),
        error: None,
        source: source.map(|s| s as Box<dyn AttributionSource>),
    };
    let record = run_scenario(&scenario, engine.as_mut(), &mut clock);
    drop(engine);
    // The recording is read to its end, as a run's would be (its cost is the interpreter's and
    // this thread's, after the timed turns).
    if let Some(source) = clock.source.take() {
        source.finish().map_err(|e| failed(&e))?;
    }
    if let Some(error) = clock.error {
        return Err(error);
    }
    if let RunOutcome::EngineFailed { error, .. } = &record.outcome {
        return Err(failed(error));
    }
    if clock.blocks.turns != config.turns {
        return Err(failed(&"the run ended early"));
    }
    Ok(clock.blocks)
}

/// The rows as a Markdown table.
pub fn render_bare_loop(rows: &[BareLoopRow], config: &BareLoopConfig, library: &str) -> String {
    let mut out = format!(
        "LiteRT-LM {library} on the CPU ({}), {} measured turns after {} warm-up in blocks of {} \
         alternating with the bare loop's, median of {} rounds, {} output tokens, {}\n\n\
         | loop | per turn | ratio to the bare loop | rounds' ratios |\n| --- | ---: | ---: | ---: |\n",
        match config.threads {
            Some(1) => "1 thread".to_owned(),
            Some(n) => format!("{n} threads"),
            None => "the library's threads".to_owned(),
        },
        config.turns,
        config.warmup.max(1),
        config.block.max(1),
        config.rounds.max(1),
        config.max_output_tokens,
        if config.one_cpu { "on one CPU" } else { "on every CPU" },
    );
    for row in rows {
        let _ = writeln!(
            out,
            "| {} | {:.3} ms | {:.3}x | {:.3}-{:.3} |",
            row.mode,
            row.seconds_per_turn * 1e3,
            row.ratio,
            row.ratio_range.0,
            row.ratio_range.1,
        );
    }
    out.push_str(
        "\nWhere a turn's time goes (µs per turn, mean of every round's measured turns; each loop \
         times its own steps, leakloop's through a worker including the call's round trip; \
         `rest` is the turn outside the steps: leakloop's sample and bookkeeping, the C loop's \
         sample and round trips)\n\n\
         | loop | open | send | generate | close | rest |\n| --- | ---: | ---: | ---: | ---: | ---: |\n",
    );
    let us = |seconds: f64| format!("{:.1}", seconds * 1e6);
    for row in rows {
        let steps = &row.steps;
        let send = match row.mode.starts_with("leakloop") {
            false => "-".to_owned(),
            true => us(steps.send),
        };
        let _ = writeln!(
            out,
            "| {} | {} | {send} | {} | {} | {} |",
            row.mode,
            us(steps.open),
            us(steps.generate),
            us(steps.close),
            us(steps.rest),
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
    fn the_floor_rows_read_what_leakloop_reads_each_turn() {
        // The allocator's statistics in the engine's process (the worker's `native_heap`) and
        // the process's statm from a second process (the runner's `rss`).
        for call in ["mallinfo2()", "/proc/%d/statm", "pread(statm", "fork()"] {
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
            block: 20,
            one_cpu: true,
            threads: Some(1),
            max_output_tokens: 16,
        };
        let rows = [
            BareLoopRow {
                mode: "bare C loop",
                seconds_per_turn: 0.004,
                ratio: 1.0,
                ratio_range: (1.0, 1.0),
                steps: StepTimes {
                    open: 250e-6,
                    generate: 3700e-6,
                    close: 6e-6,
                    rest: 44e-6,
                    ..StepTimes::default()
                },
            },
            BareLoopRow {
                mode: "leakloop (worker)",
                seconds_per_turn: 0.0042,
                ratio: 1.05,
                ratio_range: (1.01, 1.09),
                steps: StepTimes {
                    open: 260e-6,
                    send: 9.5e-6,
                    generate: 3800e-6,
                    close: 20e-6,
                    rest: 110.5e-6,
                },
            },
        ];
        let table = render_bare_loop(&rows, &config, "0.18.1");
        assert!(
            table.contains("| leakloop (worker) | 4.200 ms | 1.050x | 1.010-1.090 |"),
            "{table}"
        );
        assert!(
            table.contains("| bare C loop | 250.0 | - | 3700.0 | 6.0 | 44.0 |"),
            "{table}"
        );
        assert!(
            table.contains("| leakloop (worker) | 260.0 | 9.5 | 3800.0 | 20.0 | 110.5 |"),
            "{table}"
        );
    }

    #[test]
    fn a_block_answer_needs_every_time() {
        let block =
            parse_block("seconds=0.0828 tokens=900 open=0.005 generate=0.0775 close=0.0002\n")
                .unwrap();
        assert_eq!(block.seconds, 0.0828);
        assert_eq!(block.steps.open, 0.005);
        assert_eq!(block.steps.generate, 0.0775);
        assert_eq!(block.steps.close, 0.0002);
        for bad in [
            "seconds=0.08 tokens=900",
            "seconds=0 tokens=9 open=0 generate=0 close=0",
            "seconds=0.08 open=-1 generate=0 close=0",
            "seconds=0.08 open=NaN generate=0 close=0",
            "seconds=0.08 open=0 generate=inf close=0",
            "ready",
        ] {
            assert_eq!(parse_block(bad), None, "{bad}");
        }
    }

    #[test]
    fn times_per_turn_leave_the_rest_outside_the_steps() {
        let sums = StepTimes {
            open: 0.5,
            send: 0.1,
            generate: 8.0,
            close: 0.4,
            rest: 0.0,
        };
        let per_turn = sums.per_turn(10.0, 1000);
        assert_eq!(per_turn.open, 0.0005);
        assert_eq!(per_turn.generate, 0.008);
        assert!((per_turn.rest - 0.001).abs() < 1e-12, "{per_turn:?}");
    }
}
