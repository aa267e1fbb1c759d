//! The analyzer's output types: per-metric classifications, expectation results and the verdict.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::analyze::cache_or_leak::KeyedGrowth;
use crate::analyze::reason::Reason;

/// What a metric's post-close series does. The default is `Inconclusive`: nothing is claimed
/// before the data supports it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Classification {
    /// Stays within tolerance of the baseline.
    Clean,
    /// A one-time rise or a bounded warm-up that stops.
    Plateau,
    /// Keeps rising with the turn count after warm-up.
    Growth,
    /// Too few turns or too much noise to decide.
    #[default]
    Inconclusive,
}

impl MetricAnalysis {
    /// Whether this metric fails `leakloop analyze`: growth that matters.
    pub fn fails(&self) -> bool {
        self.classification == Classification::Growth && self.growth_matters != Some(false)
    }

    /// The turn where the growth began: where the samples join the rising line (see the
    /// classifier's onset), which may be before the steady part its slope was fitted on; the
    /// steady part's first turn when the reason does not say.
    pub fn growth_from_turn(&self) -> Option<u64> {
        match &self.reason {
            Reason::Growth { rise, .. } => Some(rise.from_turn),
            _ => self.steady_from_turn,
        }
    }
}

impl Classification {
    /// The word used in reports and JSON.
    pub fn as_str(&self) -> &'static str {
        match self {
            Classification::Clean => "clean",
            Classification::Plateau => "plateau",
            Classification::Growth => "growth",
            Classification::Inconclusive => "inconclusive",
        }
    }
}

/// A one-time rise that settled.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct PlateauInfo {
    /// Size of the rise above the baseline, in bytes.
    pub size_bytes: i64,
    /// The turn from which the series stays on the plateau (within 4 noise deviations or half the
    /// tolerance of its level), which may be before `steady_from_turn`.
    pub settled_at_turn: u64,
}

/// The analysis of one metric.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct MetricAnalysis {
    /// The verdict word.
    pub classification: Classification,
    /// Value at turn 0 (after load), in bytes.
    pub baseline: u64,
    /// Value after the warm-up turns (or after the detected settling turn), in bytes.
    pub after_warmup: Option<u64>,
    /// Last post-close value, in bytes.
    pub last: u64,
    /// Robust slope after warm-up, in bytes per turn.
    pub slope_bytes_per_turn: f64,
    /// Confidence interval of the slope, in bytes per turn.
    pub slope_interval: Option<(f64, f64)>,
    /// Confidence level of the interval (e.g. 0.95).
    pub confidence: f64,
    /// The one-time rise, when there is one.
    pub plateau: Option<PlateauInfo>,
    /// For `inconclusive`: how many turns would be needed to decide (a run length planned for 80%
    /// power at the present slope, level and noise, so that it does not recede turn by turn).
    pub turns_needed: Option<u64>,
    /// Number of post-close points the analysis used.
    pub points: usize,
    /// Why this classification was chosen, with its numbers; written as one sentence in
    /// report.json (the report layer words it).
    pub reason: Reason,
    /// Robust noise scale of one sample (from the MAD of first differences), in bytes.
    #[serde(default)]
    pub noise_bytes: f64,
    /// One-sided Mann-Kendall p-value for an increasing trend after warm-up.
    #[serde(default)]
    pub trend_p_value: Option<f64>,
    /// The first turn of the steady part the slope was fitted on (where warm-up ended).
    #[serde(default)]
    pub steady_from_turn: Option<u64>,
    /// The rise of the fitted steady level above the baseline at `steady_from_turn` (the one-time
    /// rise that warm-up budgets are judged on), in bytes; negative when memory fell.
    #[serde(default)]
    pub rise_bytes: Option<f64>,
    /// The fitted level at the last turn (the highest over load epochs), in bytes.
    #[serde(default)]
    pub fitted_end_bytes: Option<f64>,
    /// Turns whose sample was an isolated spike and was replaced before fitting.
    #[serde(default)]
    pub spike_turns: Vec<u64>,
    /// Number of load epochs (1 + reloads).
    #[serde(default)]
    pub epochs: u32,
    /// For `growth`: whether it is large enough to matter (its slope beyond the
    /// `max_growth_per_turn` cap, or its lower bound over the horizon beyond the tolerance);
    /// `None` for other classifications and in reports written before this field existed (whose
    /// growth counts as mattering).
    #[serde(default)]
    pub growth_matters: Option<bool>,
    /// For a keyed run (`sessions:`, marker keys) whose metric grew or rose to a plateau: whether
    /// the growth follows new keys (a cache filling) or every request (missing eviction, a
    /// leak); absent otherwise and in reports written before it existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub keyed_growth: Option<KeyedGrowth>,
}

/// One checked expectation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ExpectationResult {
    /// Name, e.g. `balanced`, `native_heap.max_growth_per_turn`.
    pub name: String,
    /// Whether it held.
    pub passed: bool,
    /// Whether the data could not decide it (`passed` is then false): a growth limit inside the
    /// slope's confidence interval, or a slope that could not be bounded. Neither held nor shown
    /// broken; absent (false) in reports written before the three outcomes.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub inconclusive: bool,
    /// What was expected, in words and units.
    pub expected: String,
    /// What was measured, in words and units.
    pub measured: String,
    /// The turn where it failed, when one can be named.
    pub turn: Option<u64>,
    /// Whether a default put it there (the scenario did not write it; see
    /// `analyze/defaults.rs`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub defaulted: bool,
}

impl ExpectationResult {
    /// Whether it was shown broken: neither held nor undecided.
    pub fn failed(&self) -> bool {
        !self.passed && !self.inconclusive
    }
}

/// The overall result.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum VerdictStatus {
    /// Every expectation held.
    Pass,
    /// At least one expectation failed.
    Fail,
    /// No expectation failed, but at least one could not be decided within the run: it was not
    /// shown clean (`--on-inconclusive` says what that exits with).
    Inconclusive,
    /// The engine failed before the run could be judged completely.
    EngineFailed,
    /// The run was stopped by a signal before it ended; what it measured so far is analysed.
    Interrupted,
}

impl Verdict {
    /// Every attribution of the run, native first: heaptrack's, then the driver's.
    pub fn attributions(&self) -> impl Iterator<Item = &crate::attribution::Attribution> {
        self.attribution
            .as_deref()
            .into_iter()
            .chain(self.driver_attribution.as_deref())
    }
}

impl VerdictStatus {
    /// The word used in report.json (`pass`, `fail`, `inconclusive`, `engine_failed`,
    /// `interrupted`).
    pub fn as_str(&self) -> &'static str {
        match self {
            VerdictStatus::Pass => "pass",
            VerdictStatus::Fail => "fail",
            VerdictStatus::Inconclusive => "inconclusive",
            VerdictStatus::EngineFailed => "engine_failed",
            VerdictStatus::Interrupted => "interrupted",
        }
    }
}

/// The analyzer's result for a run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Verdict {
    /// Pass, fail or engine failure.
    pub status: VerdictStatus,
    /// Per-metric analysis, by metric name.
    pub metrics: BTreeMap<String, MetricAnalysis>,
    /// Every expectation checked, in scenario order.
    pub expectations: Vec<ExpectationResult>,
    /// Where the growth was allocated (`run --attribute`); absent without attribution.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attribution: Option<Box<crate::attribution::Attribution>>,
    /// The sites an exec driver recorded in its own language's heap (`tracemalloc`), beside
    /// `attribution` (heaptrack's native sites; this one alone when heaptrack did not run).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub driver_attribution: Option<Box<crate::attribution::Attribution>>,
    /// Live OpenCL objects by kind and creation site, where the OpenCL interposer counted them;
    /// absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cl_objects: Option<Box<crate::attribution::ClObjects>>,
}
