//! Time per turn: the wall time of each turn and of each of its steps, recorded as the
//! registry's time metrics (`turn_time`, `open_time`, ...) in the samples of that turn, so that
//! they reach the series, the reports and the expectations like any memory metric.
//!
//! Who measures: the runner, around each engine call, for every backend alike: in process, in a
//! worker, an exec driver. A worker's or driver's step is timed on the parent's side of the
//! round trip rather than inside the worker, so that every backend is measured by the same clock
//! at the same place; the pipe adds a constant few tens of microseconds per call, which moves a
//! level but never a trend. An engine with a simulated clock (the simulator, in process or in a
//! worker, whose replies carry its clock) is timed on that clock instead, so its times are exact
//! and the same on every machine. An attached process runs its own loop: only its turn time
//! exists, from one turn marker to the next (see `engine/attach/board.rs`).
//!
//! `turn_time` of a driven turn is the sum of its engine calls (open, send, generate or cancel,
//! close): the runner's own sampling, settle time and `idle` steps are not the engine's time.
//! Only watched metrics (`watch`, or an expectation) are written, so that a sample stays small.

use std::time::Instant;

use leakloop_metrics::names;

use crate::engine::Engine;
use crate::runner::Metrics;

/// A step of a driven turn that is timed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TimedStep {
    Open,
    Send,
    Generate,
    Cancel,
    Close,
}

/// Metric names in slot order: the turn, then each [`TimedStep`].
const SLOTS: [&str; 6] = [
    names::TURN_TIME,
    names::OPEN_TIME,
    names::SEND_TIME,
    names::GENERATE_TIME,
    names::CANCEL_TIME,
    names::CLOSE_TIME,
];

impl TimedStep {
    fn slot(self) -> usize {
        match self {
            TimedStep::Open => 1,
            TimedStep::Send => 2,
            TimedStep::Generate => 3,
            TimedStep::Cancel => 4,
            TimedStep::Close => 5,
        }
    }
}

/// The times of the turn in progress.
#[derive(Debug, Clone, Default)]
pub(crate) struct TurnTimes {
    /// Which slots are watched.
    watched: [bool; 6],
    /// Nanoseconds per slot, once the step ran in this turn (steps that ran twice add up).
    times: [Option<u64>; 6],
}

impl TurnTimes {
    /// Times for a run watching `watched` (metric names).
    pub(crate) fn for_watched(watched: &[String]) -> Self {
        let mut out = Self::default();
        for (slot, name) in SLOTS.iter().enumerate() {
            out.watched[slot] = watched.iter().any(|w| w == name);
        }
        out
    }

    /// Forgets the previous turn's times.
    pub(crate) fn start_turn(&mut self) {
        self.times = [None; 6];
    }

    /// Adds `nanos` of `step` to this turn.
    pub(crate) fn add(&mut self, step: TimedStep, nanos: u64) {
        for slot in [step.slot(), 0] {
            let now = self.times[slot].unwrap_or(0).saturating_add(nanos);
            self.times[slot] = Some(now);
        }
    }

    /// Sets the whole turn's time (an attached process's marker-to-marker interval).
    pub(crate) fn set_turn(&mut self, nanos: Option<u64>) {
        self.times[0] = nanos;
    }

    /// Writes this turn's watched times into a sample. `turn_done` says whether the turn's time
    /// is complete (after the close); before it only the steps so far are written.
    pub(crate) fn write(&self, metrics: &mut Metrics, turn_done: bool) {
        for (slot, name) in SLOTS.iter().enumerate() {
            if !self.watched[slot] || (slot == 0 && !turn_done) {
                continue;
            }
            if let Some(nanos) = self.times[slot] {
                metrics.insert(name, nanos);
            }
        }
    }
}

/// A reading taken before an engine call: the engine's simulated clock when it has one, else
/// the wall clock.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Stopwatch {
    simulated_ms: Option<f64>,
    at: Instant,
}

impl Stopwatch {
    /// Starts timing a call to `engine`.
    pub(crate) fn start(engine: &dyn Engine) -> Self {
        Self {
            simulated_ms: engine.simulated_clock_ms(),
            at: Instant::now(),
        }
    }

    /// Nanoseconds since [`Stopwatch::start`], on the same clock.
    pub(crate) fn nanos(&self, engine: &dyn Engine) -> u64 {
        match (self.simulated_ms, engine.simulated_clock_ms()) {
            (Some(before), Some(after)) => ((after - before).max(0.0) * 1e6).round() as u64,
            _ => u64::try_from(self.at.elapsed().as_nanos()).unwrap_or(u64::MAX),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analyze::analyze_run;
    use crate::engine::build_engine;
    use crate::runner::{run_scenario, NoObserver, Phase, RunRecord};
    use crate::scenario::parse_scenario;

    /// Runs a simulated scenario whose device takes `decode` per token (8 tokens a turn) and
    /// `slowdown` more per earlier generation, watching the time metrics under `expect`.
    fn run_timed(decode: &str, slowdown: &str, expect: &str) -> RunRecord {
        let yaml = format!(
            "name: timed\nseed: 1\nengine: {{backend: sim, profile: slow}}\n\
             profiles:\n  slow:\n    timing: {{load: 1s, first_inference: 0ms, open: 10ms, \
             prefill_per_token: 0ms, decode_per_token: {decode}, close: 5ms, \
             slowdown_per_generation: {slowdown}}}\n\
             turns: 12\n\
             turn: [open: {{}}, send: {{prompt: hi}}, generate: {{max_output_tokens: 8}}, close: {{}}, idle: 1s]\n\
             watch: [turn_time, open_time, generate_time, close_time]\nexpect: {expect}\n"
        );
        let scenario = parse_scenario(&yaml, "timed.yaml".as_ref()).expect("valid scenario");
        let mut engine = build_engine(&scenario).expect("the simulator builds");
        run_scenario(&scenario, engine.as_mut(), &mut NoObserver)
    }

    /// Every post-close sample's value of `metric`, in turn order.
    fn series(record: &RunRecord, metric: &str) -> Vec<u64> {
        record
            .samples
            .iter()
            .filter(|s| s.phase == Phase::Close)
            .filter_map(|s| s.metrics.get(metric).copied())
            .collect()
    }

    const MS: u64 = 1_000_000;

    #[test]
    fn a_slow_generate_shows_in_the_turn_time_and_fails_its_maximum() {
        let record = run_timed("50ms", "0ms", "{turn_time: {max: 300ms}}");
        let turns = series(&record, "turn_time");
        assert_eq!(turns.len(), 12);
        // 8 tokens at 50 ms, plus open and close; the idle second and the sampling are not the
        // engine's time.
        for (turn, generate) in series(&record, "generate_time").iter().enumerate() {
            assert!(*generate >= 400 * MS, "turn {}: {generate}", turn + 1);
        }
        assert!(
            turns.iter().all(|t| (400 * MS..1000 * MS).contains(t)),
            "{turns:?}"
        );
        assert_eq!(series(&record, "open_time")[0], 10 * MS);
        // Not watched: not recorded.
        assert!(series(&record, "send_time").is_empty());
        // A (re)load sample carries no turn's time.
        assert!(record
            .samples
            .iter()
            .filter(|s| s.phase == Phase::Load)
            .all(|s| s.metrics.get("turn_time").is_none()));
        let verdict = analyze_run(&record);
        let max = verdict
            .expectations
            .iter()
            .find(|e| e.name == "turn_time.max")
            .expect("checked");
        assert!(!max.passed, "{max:?}");
        assert_eq!(max.turn, Some(1));
        assert!(max.expected.contains("300 ms"), "{}", max.expected);
        assert!(max.measured.contains(" ms"), "{}", max.measured);

        let fast = run_timed("1ms", "0ms", "{turn_time: {max: 300ms}}");
        assert!(analyze_run(&fast).passed());
    }

    #[test]
    fn latency_that_grows_every_turn_fails_a_growth_limit() {
        let expect = "{turn_time: {max_growth_per_turn: 1ms}}";
        let creeping = run_timed("10ms", "4ms", expect);
        let turns = series(&creeping, "turn_time");
        assert!(turns.windows(2).all(|w| w[1] > w[0]), "{turns:?}");
        let verdict = analyze_run(&creeping);
        let growth = verdict
            .expectations
            .iter()
            .find(|e| e.name == "turn_time.max_growth_per_turn")
            .expect("checked");
        assert!(!growth.passed, "{growth:?}");
        assert!(growth.measured.contains("+4.00 ms"), "{}", growth.measured);

        let steady = run_timed("10ms", "0ms", expect);
        assert!(analyze_run(&steady).passed(), "{:?}", analyze_run(&steady));
    }

    fn watching(names: &[&str]) -> TurnTimes {
        let names: Vec<String> = names.iter().map(|n| n.to_string()).collect();
        TurnTimes::for_watched(&names)
    }

    #[test]
    fn steps_add_up_to_the_turn_and_only_watched_times_are_written() {
        let mut times = watching(&["turn_time", "generate_time"]);
        times.start_turn();
        times.add(TimedStep::Open, 10);
        times.add(TimedStep::Generate, 100);
        times.add(TimedStep::Generate, 50);
        let mut before_close = Metrics::new();
        times.write(&mut before_close, false);
        assert_eq!(before_close.get("generate_time"), Some(&150));
        assert_eq!(before_close.get("turn_time"), None);
        times.add(TimedStep::Close, 5);
        let mut after_close = Metrics::new();
        times.write(&mut after_close, true);
        assert_eq!(after_close.get("turn_time"), Some(&165));
        assert_eq!(after_close.get("open_time"), None, "not watched");
        times.start_turn();
        let mut next_turn = Metrics::new();
        times.write(&mut next_turn, true);
        assert!(next_turn.is_empty());
    }
}
