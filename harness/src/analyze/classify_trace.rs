//! A trace recorded elsewhere classified metric by metric, as `leakloop analyze` does: the
//! options given on the command line win, then a report's own scenario (its expectations, warm-up
//! and reload period, and the levels a `stop: decided` run was judged at), then the defaults.

use std::collections::BTreeMap;

use super::{classify, final_levels, ClassifyOptions, Levels, MetricAnalysis, Trace};
use crate::scenario::Tolerance;

/// What the caller sets for every metric of a trace; `None` leaves it to the report or the
/// default.
#[derive(Debug, Clone, Copy)]
pub(crate) struct TraceOptions {
    /// Allowed distance from the baseline.
    pub tolerance: Option<Tolerance>,
    /// Turns after the baseline treated as warm-up.
    pub warmup_turns: Option<u64>,
    /// A growth limit in bytes per turn.
    pub max_growth_per_turn: Option<u64>,
    /// Turns over which growth without a limit must exceed the tolerance.
    pub horizon_turns: u64,
}

/// Classifies every metric of the trace; a report's own scenario supplies the defaults.
pub(crate) fn classify_trace(
    trace: &Trace,
    args: &TraceOptions,
) -> BTreeMap<String, MetricAnalysis> {
    trace
        .metrics
        .iter()
        .filter(|(_, series)| !series.is_empty())
        .map(|(name, series)| {
            let scenario = trace.record.as_ref().map(|r| &r.scenario);
            // A report of a `stop: decided` run is judged at the levels its run was judged at.
            let levels = trace
                .record
                .as_ref()
                .map_or_else(Levels::default, final_levels);
            let expectation = scenario.and_then(|s| s.expect.metrics.get(name));
            let options = ClassifyOptions {
                tolerance: args
                    .tolerance
                    .or_else(|| expectation.and_then(|e| e.tolerance)),
                warmup_turns: args
                    .warmup_turns
                    .or(scenario.map(|s| u64::from(s.warmup_turns)))
                    .unwrap_or(0),
                max_growth_per_turn: args
                    .max_growth_per_turn
                    .or_else(|| expectation.and_then(|e| e.max_growth_per_turn)),
                reload_every: scenario.map_or(0, |s| s.reload_every),
                horizon_turns: args.horizon_turns,
                confidence: levels.confidence,
                trend_alpha: levels.trend_alpha,
            };
            (name.clone(), classify(series, &options))
        })
        .collect()
}
