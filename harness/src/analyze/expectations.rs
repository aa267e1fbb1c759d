//! Checks a scenario's expectations against the analysis: per metric the tolerance, the warm-up
//! budget, the growth limit and the maximum (amounts in the metric's unit: bytes or time), and create/delete balance from the call ledger.
//!
//! - `tolerance`: the fitted level at the last turn (robust to spikes and noise; the highest over
//!   load epochs) must stay within `baseline + warmup_budget + tolerance`.
//! - `warmup_budget`: the one-time rise (fitted steady level at the settling turn minus the
//!   baseline) must stay within the budget. Without a fit (too few samples) the highest sample is
//!   used instead.
//! - `max_growth_per_turn`: judged on the upper bound of the slope's confidence interval, not on
//!   the point estimate; a slope that cannot be bounded fails, because the limit is not shown.
//! - `max`: no sample of the series may exceed it (a ceiling such as a latency budget).
//! - `balanced`: every kind in the ledger has as many deletes as creates; each unbalanced kind is
//!   its own failed expectation naming the counts and the turn where it went off balance.

use crate::engine::Ledger;
use crate::scenario::MetricExpectation;

use super::checks::ExpectationKind;
use super::series::MetricSeries;
use super::units::{amount, confidence_percent, signed_amount};
use super::verdict::{ExpectationResult, MetricAnalysis};

/// Checks one metric's expectations.
pub(crate) fn check_metric(
    metric: &str,
    expectation: &MetricExpectation,
    analysis: Option<&MetricAnalysis>,
    series: &MetricSeries,
) -> Vec<ExpectationResult> {
    let mut results = Vec::new();
    let Some(analysis) = analysis.filter(|_| !series.is_empty()) else {
        for (kind, present) in [
            (ExpectationKind::Tolerance, expectation.tolerance.is_some()),
            (
                ExpectationKind::WarmupBudget,
                expectation.warmup_budget.is_some(),
            ),
            (
                ExpectationKind::MaxGrowthPerTurn,
                expectation.max_growth_per_turn.is_some(),
            ),
            (ExpectationKind::Max, expectation.max.is_some()),
        ] {
            if present {
                results.push(ExpectationResult {
                    name: kind.name_for(metric),
                    passed: false,
                    expected: format!("samples of `{metric}`"),
                    measured: "no samples of this metric were taken".to_owned(),
                    turn: None,
                });
            }
        }
        return results;
    };
    let baseline = analysis.baseline as f64;
    let budget = expectation.warmup_budget.unwrap_or(0);
    if let Some(tolerance) = expectation.tolerance {
        let tolerance = tolerance.bytes_for(analysis.baseline);
        let limit = baseline + (budget + tolerance) as f64;
        let end = analysis.fitted_end_bytes.unwrap_or(analysis.last as f64);
        let passed = end <= limit;
        let budget_text = if budget > 0 {
            format!(" + warm-up budget {}", amount(metric, budget as f64))
        } else {
            String::new()
        };
        results.push(ExpectationResult {
            name: ExpectationKind::Tolerance.name_for(metric),
            passed,
            expected: format!(
                "at most baseline {} + tolerance {}{budget_text} = {}",
                amount(metric, baseline),
                amount(metric, tolerance as f64),
                amount(metric, limit)
            ),
            measured: format!(
                "level {} at the last turn ({} over the baseline)",
                amount(metric, end),
                signed_amount(metric, end - baseline)
            ),
            turn: (!passed).then(|| first_sustained_crossing(series, limit)),
        });
    }
    if let Some(budget) = expectation.warmup_budget {
        let (rise, turn) = match analysis.rise_bytes {
            Some(rise) => (rise, analysis.steady_from_turn),
            None => series
                .points()
                .skip(1)
                .max_by_key(|p| p.1)
                .map_or((0.0, None), |p| (p.1 as f64 - baseline, Some(p.0))),
        };
        let passed = rise <= budget as f64;
        results.push(ExpectationResult {
            name: ExpectationKind::WarmupBudget.name_for(metric),
            passed,
            expected: format!("one-time rise of at most {}", amount(metric, budget as f64)),
            measured: format!(
                "rose {} by turn {}",
                signed_amount(metric, rise),
                turn.unwrap_or(0)
            ),
            turn: if passed { None } else { turn },
        });
    }
    if let Some(limit) = expectation.max_growth_per_turn {
        let level = confidence_percent(analysis.confidence);
        let (passed, measured) = match analysis.slope_interval {
            Some((lo, hi)) => (
                hi <= limit as f64,
                format!(
                    "{} per turn ({level} CI {}..{})",
                    signed_amount(metric, analysis.slope_bytes_per_turn),
                    signed_amount(metric, lo),
                    signed_amount(metric, hi)
                ),
            ),
            None => (
                false,
                format!(
                    "cannot be bounded from {} samples ({})",
                    analysis.points, analysis.reason
                ),
            ),
        };
        results.push(ExpectationResult {
            name: ExpectationKind::MaxGrowthPerTurn.name_for(metric),
            passed,
            expected: format!(
                "at most {} per turn (upper {level} bound)",
                amount(metric, limit as f64)
            ),
            measured,
            turn: if passed {
                None
            } else {
                analysis.steady_from_turn
            },
        });
    }
    if let Some(max) = expectation.max {
        // Judged on every sample, not on a fit: a ceiling (a latency budget) is broken by the
        // one turn that went over it.
        let highest = series.points().max_by_key(|p| p.1);
        let over = series.points().find(|p| p.1 > max);
        results.push(ExpectationResult {
            name: ExpectationKind::Max.name_for(metric),
            passed: over.is_none(),
            expected: format!("at most {} in every turn", amount(metric, max as f64)),
            measured: match highest {
                Some((turn, value)) => {
                    format!("highest {} at turn {turn}", amount(metric, value as f64))
                }
                None => "no samples".to_owned(),
            },
            turn: over.map(|p| p.0),
        });
    }
    results
}

/// The first turn from which every sample stays above `limit` (the last turn if none does).
fn first_sustained_crossing(series: &MetricSeries, limit: f64) -> u64 {
    let points: Vec<(u64, u64)> = series.points().collect();
    let mut first = points.last().map_or(0, |p| p.0);
    for (turn, value) in points.iter().rev() {
        if (*value as f64) <= limit {
            break;
        }
        first = *turn;
    }
    first
}

/// Checks create/delete balance: one result per unbalanced kind, or one passing result.
pub(crate) fn check_balanced(ledger: &Ledger) -> Vec<ExpectationResult> {
    let imbalances = ledger.imbalances();
    if imbalances.is_empty() {
        return vec![ExpectationResult {
            name: ExpectationKind::Balanced.name_for(""),
            passed: true,
            expected: "every create has its delete".to_owned(),
            measured: format!("{} kinds balanced", ledger.totals.len()),
            turn: None,
        }];
    }
    imbalances
        .into_iter()
        .map(|i| ExpectationResult {
            name: ExpectationKind::Balanced.name_for(&i.kind),
            passed: false,
            expected: format!("as many deletes of `{}` as creates", i.kind),
            measured: format!(
                "{} created, {} deleted ({:+} live){}",
                i.created,
                i.deleted,
                i.created as i64 - i.deleted as i64,
                i.first_turn
                    .map_or_else(String::new, |t| format!(", off balance from turn {t}"))
            ),
            turn: i.first_turn.map(u64::from),
        })
        .collect()
}
