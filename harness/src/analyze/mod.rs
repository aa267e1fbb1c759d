//! The analyzer: classifies each metric's post-close series as clean, plateau, growth or
//! inconclusive, and checks the scenario's expectations against the measurements.
//!
//! `classify` judges one series (see `classify.rs` for the method and thresholds);
//! `analyze_run` does so for every watched metric of a run and checks the expectations;
//! `StopWhenDecided` looks at a run while it goes and ends it once every metric is decided
//! (`stop: decided`, alpha spending in `sequential.rs`). Those steps are not API: the
//! documented part is the [`Verdict`] they produce.

mod baseline;
mod below_limit;
mod cache_or_leak;
mod checks;
mod classify;
#[cfg(feature = "cli")]
mod classify_trace;
mod defaults;
mod dumpsys_trace;
mod expectations;
mod history;
mod reason;
mod run;
mod sequential;
mod series;
pub(crate) mod stats;
mod trace;
pub(crate) mod units;
mod verdict;

#[cfg(test)]
pub(crate) mod test_support;

pub use cache_or_leak::{explain_keyed_growth, KeyedExplanation, KeyedGrowth, KEYED_ALPHA};
pub use checks::{Check, ExpectationKind, GrowthPerTurn};
pub use defaults::{metric_rule, planned_expectations, MetricRule, PlannedExpectation};
pub use series::{Epoch, MetricSeries};
pub use verdict::{
    Classification, ExpectationResult, MetricAnalysis, PlateauInfo, Verdict, VerdictStatus,
};

// Not API: the analyzer's steps and tuning constants, public for the command line, the
// benchmarks and the integration tests.
#[doc(hidden)]
pub use crate::probe::dumpsys::METRIC_ROWS;
#[doc(hidden)]
pub use baseline::{baseline_expectations, PLATEAU_Z};
#[doc(hidden)]
pub use classify::{
    classify, ClassifyOptions, CONFIDENCE, DEFAULT_HORIZON_TURNS, DEFAULT_TOLERANCE_FLOOR,
    DEFAULT_TOLERANCE_PERCENT, MIN_RANK_INTERVAL_POINTS, MIN_RATCHET_EPOCHS, MIN_STEADY_POINTS,
    PERSISTENCE_ALPHA, PERSISTENCE_SLOPE_FRACTION, PLATEAU_DRIFT_FRACTION, SPIKE_SIGMAS,
    TREND_ALPHA,
};
#[doc(hidden)]
#[cfg(feature = "cli")]
pub(crate) use classify_trace::{classify_trace, TraceOptions};
// The stability benchmark takes its medians from the analyzer's one median.
#[doc(hidden)]
pub use dumpsys_trace::{ProcessSelector, MAX_DUMP_FILES};
#[doc(hidden)]
pub use history::{
    find_changes, known_step_rise, Change, ChangeOptions, BACK_WINDOW_FACTOR, DEFAULT_ALPHA,
    DEFAULT_SPREAD_FACTOR, DEFAULT_WINDOW,
};
pub use reason::{
    Doubt, EarlyGrowth, EnvelopeOutcome, Envelopes, Interval, IntervalKind, LevelsOutcome, Outlook,
    Pattern, PatternKind, RatchetDoubt, Reason, Rise, Settled, Significance, TooSmall,
};
#[doc(hidden)]
pub use run::{analyze_run, analyze_run_with, derive_status, ENGINE_ERRORS};
#[doc(hidden)]
pub use sequential::{
    extension_levels, final_levels, look_levels, look_schedule, spent, stop_rule_for, undecided,
    ExtendWhileUndecided, Levels, StopWhenDecided, EXTENSION_SHARE, FIRST_LOOK, LOOK_GROWTH,
    MIN_LOOK_STEP,
};
#[cfg(feature = "cli")]
pub(crate) use stats::robust::median;
#[doc(hidden)]
pub use trace::{
    load_trace, load_trace_with, parse_csv, Trace, TraceError, TraceErrorKind, MAX_TRACE_TURN,
};
