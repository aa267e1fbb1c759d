//! `leakloop bench history`: how often `history`'s change search raises a false alarm on builds
//! that differ only by noise, and how often it finds (and places exactly) a step injected at
//! build k. Two sources of figures: synthetic ones (one figure per build: Gaussian or
//! heavy-tailed t(3) noise of scale 1, a step of s scales) and the simulator itself
//! (`fixtures/history/history-sim.yaml`, one run per build with its own seed, profile `leaky`
//! from build k on; both figures of native_heap, growth per turn and plateau, are searched).

use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, Normal, StudentT};

use crate::analyze::{analyze_run, find_changes, known_step_rise, Change, ChangeOptions};
use crate::engine::build_in_process;
use crate::runner::{run_scenario, NoObserver};
use crate::scenario::{parse_scenario, Scenario};

/// The simulated history's scenario (the fixture the tests use).
const SIM_SCENARIO: &str = include_str!("../../../fixtures/history/history-sim.yaml");

/// What the benchmark runs.
#[derive(Debug, Clone, Copy)]
pub struct HistoryBenchConfig {
    /// Histories per row.
    pub histories: u32,
    /// Builds per history.
    pub builds: usize,
    /// The first build of the injected step.
    pub step_at: usize,
    /// Seed of the synthetic noise and of the simulator runs.
    pub seed: u64,
    /// The change search's settings.
    pub options: ChangeOptions,
}

/// One row: a kind of history and how `history` judged it.
#[derive(Debug, Clone, PartialEq)]
pub struct HistoryBenchRow {
    /// Where the figures came from.
    pub source: String,
    /// The injected step, in words (`-` for none).
    pub step: String,
    /// Histories judged.
    pub histories: u32,
    /// Share with any change flagged, rise or fall.
    pub flagged: f64,
    /// Share with a rise flagged anywhere (on noise-only rows: the false-alarm rate, as only a
    /// rise fails `history`).
    pub rose: f64,
    /// Share with a rise flagged at exactly the step's build.
    pub exact: f64,
    /// Share with a rise flagged within one build of it.
    pub within_one: f64,
    /// Share with a rise flagged when the history ends `window` builds after the step (the
    /// alert a nightly raises by then).
    pub by_window: f64,
    /// Share in which a test told where the step is finds a rise (`analyze::known_step_rise`).
    pub oracle: f64,
}

/// Runs every row.
pub fn run_history_bench(config: &HistoryBenchConfig) -> Result<Vec<HistoryBenchRow>, String> {
    let options = config.options;
    let mut rows = Vec::new();
    let mut rng = ChaCha8Rng::seed_from_u64(config.seed);
    let gaussian = Normal::new(0.0, 1.0).map_err(|e| e.to_string())?;
    let heavy = StudentT::new(3.0).map_err(|e| e.to_string())?;
    for (source, steps) in [
        ("Gaussian", &[0.0, 1.0, 2.0, 3.0, 4.0, 6.0][..]),
        ("t(3)", &[0.0, 3.0, 6.0][..]),
    ] {
        for &step in steps {
            let mut judged = Judged::default();
            for _ in 0..config.histories {
                let builds: Vec<Vec<f64>> = (0..config.builds)
                    .map(|i| {
                        let noise = if source == "Gaussian" {
                            gaussian.sample(&mut rng)
                        } else {
                            heavy.sample(&mut rng)
                        };
                        let level = if i >= config.step_at { step } else { 0.0 };
                        vec![level + noise]
                    })
                    .collect();
                judged.add(&[builds], config.step_at, step > 0.0, &options);
            }
            rows.push(judged.row(
                format!("synthetic, {source} noise"),
                if step > 0.0 {
                    format!("{step} x noise")
                } else {
                    "-".to_owned()
                },
                config.histories,
            ));
        }
    }
    let scenario = parse_scenario(SIM_SCENARIO, std::path::Path::new("history-sim.yaml"))
        .map_err(|e| e.to_string())?;
    for leaky in [false, true] {
        let mut judged = Judged::default();
        for _ in 0..config.histories {
            let mut growth = Vec::new();
            let mut plateau = Vec::new();
            for i in 0..config.builds {
                let profile = if leaky && i >= config.step_at {
                    "leaky"
                } else {
                    "steady"
                };
                let (g, p) = simulate(&scenario, profile, rng.random())?;
                growth.push(vec![g]);
                plateau.push(vec![p]);
            }
            judged.add(&[growth, plateau], config.step_at, leaky, &options);
        }
        rows.push(judged.row(
            "simulator, native_heap growth and plateau".to_owned(),
            if leaky {
                "6 KiB/turn leak".to_owned()
            } else {
                "-".to_owned()
            },
            config.histories,
        ));
    }
    Ok(rows)
}

/// One simulated build: growth per turn and plateau of native_heap.
fn simulate(scenario: &Scenario, profile: &str, seed: u64) -> Result<(f64, f64), String> {
    let mut s = scenario.clone();
    s.seed = seed;
    s.engine.profile = Some(profile.to_owned());
    let mut engine = build_in_process(&s).map_err(|e| e.to_string())?;
    let record = run_scenario(&s, engine.as_mut(), &mut NoObserver);
    let verdict = analyze_run(&record);
    let m = verdict
        .metrics
        .get("native_heap")
        .ok_or("the simulated run has no native_heap")?;
    Ok((
        m.slope_bytes_per_turn,
        m.plateau.map_or(0.0, |p| p.size_bytes as f64),
    ))
}

#[derive(Default)]
struct Judged {
    flagged: u32,
    rose: u32,
    exact: u32,
    within_one: u32,
    by_window: u32,
    oracle: u32,
}

impl Judged {
    /// Judges one history of one or more series (any change in any series counts as flagged; the
    /// step is found when the first series shows a rise at, or next to, `step_at`; the first
    /// series alone is also judged cut `window` builds after the step, and by the test that knows
    /// where the step is).
    fn add(
        &mut self,
        series: &[Vec<Vec<f64>>],
        step_at: usize,
        step: bool,
        options: &ChangeOptions,
    ) {
        let changes: Vec<_> = series.iter().map(|s| find_changes(s, options)).collect();
        if changes.iter().any(|c| !c.is_empty()) {
            self.flagged += 1;
        }
        if changes.iter().flatten().any(Change::is_rise) {
            self.rose += 1;
        }
        if step {
            let rises: Vec<usize> = changes[0]
                .iter()
                .filter(|c| c.is_rise())
                .map(|c| c.build)
                .collect();
            if rises.contains(&step_at) {
                self.exact += 1;
            }
            if rises.iter().any(|&b| b.abs_diff(step_at) <= 1) {
                self.within_one += 1;
            }
            // The same history cut `window` builds after the step: the alert must come by then.
            let cut = &series[0][..(step_at + options.window).min(series[0].len())];
            if find_changes(cut, options)
                .iter()
                .any(|c| c.is_rise() && c.build.abs_diff(step_at) <= 1)
            {
                self.by_window += 1;
            }
            if known_step_rise(&series[0], step_at, options) {
                self.oracle += 1;
            }
        }
    }

    fn row(&self, source: String, step: String, histories: u32) -> HistoryBenchRow {
        let share = |n: u32| f64::from(n) / f64::from(histories.max(1));
        let stepped = step != "-";
        let when_stepped = |n: u32| if stepped { share(n) } else { f64::NAN };
        HistoryBenchRow {
            by_window: when_stepped(self.by_window),
            oracle: when_stepped(self.oracle),
            source,
            histories,
            flagged: share(self.flagged),
            rose: share(self.rose),
            exact: if stepped { share(self.exact) } else { f64::NAN },
            within_one: if stepped {
                share(self.within_one)
            } else {
                f64::NAN
            },
            step,
        }
    }
}

/// The rows as a Markdown table.
pub fn render_history_bench(rows: &[HistoryBenchRow], config: &HistoryBenchConfig) -> String {
    let options = config.options;
    let mut out = format!(
        "{} histories per row, {} builds each, step at build {} (0-based), seed {}; window {} \
         builds after, up to {} before, scan-wide false-alarm rate {} per direction, shift > {} x spread; \
         \"by build k+{}\": the history cut {} builds after the step, rise found within one build; \
         \"told where\": Student's t at the step, p < {}\n\n\
         | figures | step | histories | any change flagged | a rise flagged | rise found at the step | within one build | by build k+{} | told where |\n\
         |---|---:|---:|---:|---:|---:|---:|---:|---:|\n",
        config.histories,
        config.builds,
        config.step_at,
        config.seed,
        options.window,
        options.back_window,
        options.alpha,
        options.spread_factor,
        options.window - 1,
        options.window,
        options.alpha,
        options.window - 1,
    );
    let pct = |x: f64| {
        if x.is_nan() {
            "-".to_owned()
        } else {
            format!("{:.1}%", 100.0 * x)
        }
    };
    for r in rows {
        out.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} |\n",
            r.source,
            r.step,
            r.histories,
            pct(r.flagged),
            pct(r.rose),
            pct(r.exact),
            pct(r.within_one),
            pct(r.by_window),
            pct(r.oracle)
        ));
    }
    out
}
