//! Default expectations: what a run is judged on where its scenario states nothing, so that a
//! watched metric never passes in silence.
//!
//! - A watched size metric with no entry under `expect` gets `<metric>.horizon`: it fails on
//!   growth that matters by the horizon rule, exactly where `leakloop analyze` fails a series
//!   ([`MetricAnalysis::fails`]: growth whose lower bound over [`DEFAULT_HORIZON_TURNS`] turns
//!   exceeds the default tolerance). A time metric gets no default: a turn that takes longer as a
//!   conversation grows is not a leak.
//! - `balanced` is judged by default wherever the run recorded a ledger (it counted at least one
//!   kind of object): an engine that records none has nothing to balance.
//! - The opt-outs are explicit: `expect: {<metric>: {report_only: true}}` and `balanced: false`.
//!
//! Every result a default produced carries `defaulted: true`, so that `check` and the reports can
//! say which expectations the scenario did not write. The defaults are decided here only; the
//! reports render what the verdict says.

use leakloop_metrics::Unit;

use crate::engine::Ledger;
use crate::scenario::{Expectations, Scenario, Tolerance};

use super::checks::ExpectationKind;
use super::classify::{ClassifyOptions, DEFAULT_HORIZON_TURNS};
use super::units::{amount, confidence_percent, signed_amount};
use super::verdict::{ExpectationResult, MetricAnalysis};

/// How a scenario's metric is judged, as `check` shows it before a run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MetricRule {
    /// The limits the scenario wrote under `expect`.
    Written,
    /// The default horizon expectation (no entry under `expect`).
    Defaulted,
    /// `report_only: true`: analysed and reported, judged by nothing.
    ReportOnly,
    /// A time metric without an entry: reported, judged by nothing (no default applies).
    Unjudged,
}

/// The rule a watched or expected `metric` of `expect` is judged by.
pub fn metric_rule(expect: &Expectations, metric: &str) -> MetricRule {
    match expect.metrics.get(metric) {
        Some(e) if e.report_only => MetricRule::ReportOnly,
        Some(_) => MetricRule::Written,
        None if is_time_metric(metric) => MetricRule::Unjudged,
        None => MetricRule::Defaulted,
    }
}

fn is_time_metric(metric: &str) -> bool {
    leakloop_metrics::metric(metric).is_some_and(|m| m.unit == Unit::Nanoseconds)
}

/// Whether `balanced` is judged, and whether by default: written `true`, or not written and the
/// run's ledger counted something.
pub(crate) fn balanced_rule(expect: &Expectations, ledger: &Ledger) -> Option<bool> {
    match expect.balanced {
        Some(true) => Some(false),
        Some(false) => None,
        None => (!ledger.totals.is_empty()).then_some(true),
    }
}

/// The default expectation's name on `metric` (`native_heap.horizon`).
pub fn horizon_name(metric: &str) -> String {
    ExpectationKind::Horizon.name_for(metric)
}

/// What the default expectation asks, in words, for a given tolerance in bytes.
fn horizon_expected(metric: &str, confidence: f64, tolerance: f64) -> String {
    format!(
        "no growth that matters: the lower {} bound of the growth over {} turns within the \
         default tolerance {}",
        confidence_percent(confidence),
        thousands(DEFAULT_HORIZON_TURNS),
        amount(metric, tolerance)
    )
}

/// Checks the default expectation of `metric`: it fails exactly where `leakloop analyze` fails
/// the series.
pub(crate) fn check_horizon(metric: &str, analysis: &MetricAnalysis) -> ExpectationResult {
    let tolerance = ClassifyOptions::default().tolerance_bytes(analysis.baseline) as f64;
    let failed = analysis.fails();
    let interval = analysis
        .slope_interval
        .map_or_else(String::new, |(lo, hi)| {
            format!(
                " ({} CI {}..{})",
                confidence_percent(analysis.confidence),
                signed_amount(metric, lo),
                signed_amount(metric, hi)
            )
        });
    ExpectationResult {
        name: horizon_name(metric),
        passed: !failed,
        expected: horizon_expected(metric, analysis.confidence, tolerance),
        measured: format!(
            "{}: {} per turn{interval}",
            analysis.classification.as_str(),
            signed_amount(metric, analysis.slope_bytes_per_turn)
        ),
        turn: if failed {
            analysis.growth_from_turn()
        } else {
            None
        },
        // The horizon rule decides on the classification, which is always made: growth that
        // matters fails, anything else passes (an undecided series is named in the metric's row).
        inconclusive: false,
        defaulted: true,
    }
}

/// One expectation as `check` shows it before a run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlannedExpectation {
    /// Its name (`native_heap.max_growth_per_turn`, `balanced`), or the metric's for a metric
    /// judged by nothing.
    pub name: String,
    /// What it asks, in words.
    pub rule: String,
    /// Whether a default put it there (the scenario did not write it).
    pub defaulted: bool,
}

/// The expectations `scenario` will be judged on, in the order a verdict lists them, with
/// which are defaults; a metric judged by nothing is listed with why.
pub fn planned_expectations(scenario: &Scenario) -> Vec<PlannedExpectation> {
    let expect = &scenario.expect;
    let mut out = Vec::new();
    let planned = |name: String, rule: &str, defaulted: bool| PlannedExpectation {
        name,
        rule: rule.to_owned(),
        defaulted,
    };
    match expect.balanced {
        Some(true) => out.push(planned(
            "balanced".into(),
            "every create has its delete",
            false,
        )),
        Some(false) => out.push(planned("balanced".into(), "off (`balanced: false`)", false)),
        None => out.push(planned(
            "balanced".into(),
            "every create has its delete, where the run records a ledger",
            true,
        )),
    }
    for (kind, most) in &expect.max_live {
        out.push(PlannedExpectation {
            name: ExpectationKind::MaxLive.name_for(kind),
            rule: format!("at most {most} `{kind}` alive at once"),
            defaulted: false,
        });
    }
    let mut names = scenario.watched_metrics();
    for name in expect.metrics.keys() {
        if !names.contains(name) {
            names.push(name.clone());
        }
    }
    for metric in names {
        match metric_rule(expect, &metric) {
            MetricRule::Written => {
                let e = &expect.metrics[&metric];
                let limits = [
                    (
                        ExpectationKind::Tolerance,
                        e.tolerance.map(|t| match t {
                            Tolerance::Bytes(b) => {
                                format!("{} from the baseline", amount(&metric, b as f64))
                            }
                            Tolerance::Percent(p) => format!("{p}% from the baseline"),
                        }),
                    ),
                    (
                        ExpectationKind::WarmupBudget,
                        e.warmup_budget.map(|b| amount(&metric, b as f64)),
                    ),
                    (
                        ExpectationKind::MaxGrowthPerTurn,
                        e.max_growth_per_turn
                            .map(|l| format!("{} per turn", amount(&metric, l as f64))),
                    ),
                    (
                        ExpectationKind::Max,
                        e.max.map(|m| amount(&metric, m as f64)),
                    ),
                ];
                for (kind, limit) in limits {
                    if let Some(limit) = limit {
                        out.push(PlannedExpectation {
                            name: kind.name_for(&metric),
                            rule: format!("at most {limit}"),
                            defaulted: false,
                        });
                    }
                }
            }
            MetricRule::Defaulted => out.push(PlannedExpectation {
                name: horizon_name(&metric),
                rule: format!(
                    "no growth that matters over {} turns (opt out: `expect: {{{metric}: \
                     {{report_only: true}}}}`)",
                    thousands(DEFAULT_HORIZON_TURNS)
                ),
                defaulted: true,
            }),
            MetricRule::ReportOnly => out.push(planned(
                metric,
                "reported only (`report_only: true`)",
                false,
            )),
            MetricRule::Unjudged => out.push(planned(
                metric,
                "reported only (a time metric gets no default expectation)",
                false,
            )),
        }
    }
    out.push(planned(
        super::run::ENGINE_ERRORS.to_owned(),
        "no engine errors other than scripted faults",
        false,
    ));
    out
}

/// A whole number with thousands separators: `1,000`.
pub(crate) fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests;
