//! `stop: decided`: look at the verdict every few turns and stop once every watched metric is
//! decided, with the false-positive rate held across the repeated looks.
//!
//! # Looks
//!
//! With `N` measured turns at most (the scenario's `turns`; warm-up turns come first and are
//! never looked at), the looks fall after `m_1 = min(`[`FIRST_LOOK`]`, N)` measured turns, then
//! `m_{k+1} = max(m_k + `[`MIN_LOOK_STEP`]`, ceil(`[`LOOK_GROWTH`]` * m_k))`, and always at `N`.
//! A geometric schedule stops at most 25% later than the first turn at which the data decide,
//! keeps the number of looks logarithmic in `N` (20 for `N = 1000`), and bounds the analysis
//! work of all looks together by about five times that of the last one.
//!
//! # Alpha spending
//!
//! Each look's growth test runs at its share of the analyzer's one-sided level `alpha =`
//! [`TREND_ALPHA`], spent by the Lan-DeMets Pocock-type function of the information fraction
//! `t = m / N`:
//!
//! ```text
//! spent(t) = ln(1 + (e - 1) t),   spent(0) = 0, spent(1) = 1
//! alpha_k  = alpha * (spent(t_k) - spent(t_{k-1}))
//! ```
//!
//! The nominal level of look `k` is that increment itself, so by the union bound the chance
//! that any look calls `growth` on a series without one is at most `sum alpha_k = alpha`,
//! whatever the correlation between looks. (The exact Lan-DeMets boundaries give each look a
//! higher level by integrating over the joint law of the looks' statistics; that law is the
//! Brownian motion of a cumulative z statistic, which the Mann-Kendall test after a data-driven
//! warm-up search is not. The union bound needs no such law and costs some power.)
//! Pocock-type spending rather than O'Brien-Fleming-type because the Mann-Kendall p-value has
//! a floor set by the number of samples (a perfect ramp of 6 samples gives p = 0.0043, of 8
//! 0.00042): O'Brien-Fleming spending (`spent(t) = 2 (1 - Phi(z_{1-alpha/2} / sqrt t)) /
//! alpha`) gives the first looks levels no short series can reach, and an obvious leak would
//! run to the end.
//!
//! The same spending applies to the other error, calling `clean` or `plateau` on a series that
//! leaves its tolerance: the slope interval and the bounds on the rise are taken at the look's
//! confidence `1 - (1 - `[`CONFIDENCE`]`) * (spent(t_k) - spent(t_{k-1}))`. The verdict of a
//! stopped run is the verdict of the look that stopped it; a run that reached `N` (or ended in
//! an engine failure) is judged with what is left of both budgets, so the last analysis spends
//! the rest.
//!
//! # Decided
//!
//! A metric is decided when its word would not change on the longer run, and neither would its
//! expectations. With `T` the tolerance, `hi` the slope interval's upper bound at the look's
//! confidence and `L` the measured turns the run could still take:
//!
//! - `growth` is decided (the trend test already reached this look's level);
//! - `clean` only if the level at the last turn plus `max(hi, 0) * L` stays within `T`, and a
//!   `plateau` only if `max(hi, 0) * L <= T`: a leak too small for this look's trend test must
//!   not be accepted as clean, nor hide behind a large one-time rise (the classifier lets a
//!   plateau drift by 10% of its rise over the turns it has seen);
//! - a `max_growth_per_turn` limit lies outside the slope interval (`hi <= limit`, passes, or
//!   `lo > limit`, fails), and a growing metric with a `tolerance` has either crossed the limit
//!   already or stays under it to the last allowed turn even at `hi`.
//!
//! The run stops at the first look at which every analysed metric is decided, or earlier, at the
//! first look at which one decided metric fails one of its expectations (a longer run cannot
//! turn that back into a pass, whatever the undecided metrics do); with no metric to analyse it
//! never stops early. Deciding `clean` thus needs the slope bounded tightly enough for
//! the remaining turns, so the longer the maximum, the later a clean run stops.

mod extend;

pub use extend::{extension_levels, ExtendWhileUndecided, EXTENSION_SHARE};

use crate::runner::{RunAllTurns, RunRecord, StopRule};
use crate::scenario::{MetricExpectation, Scenario, StopMode};

use super::classify::{ClassifyOptions, CONFIDENCE, TREND_ALPHA};
use super::expectations::Judged;
use super::run::analyze_run_with;
use super::units::probability;
use super::verdict::{Classification, MetricAnalysis, Verdict};

/// The first look comes after this many measured turns (fewer samples cannot reach the trend
/// test's level at any look).
pub const FIRST_LOOK: u32 = 6;
/// Each look comes at least this factor of measured turns after the one before.
pub const LOOK_GROWTH: f64 = 1.25;
/// ... and at least this many turns after it.
pub const MIN_LOOK_STEP: u32 = 2;

/// The significance levels one analysis runs at.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Levels {
    /// One-sided level of the trend test for `growth`.
    pub trend_alpha: f64,
    /// Two-sided confidence level of the slope interval (and one-sided of the rise bounds).
    pub confidence: f64,
}

impl Default for Levels {
    /// The levels of a run that is looked at once, at its end.
    fn default() -> Self {
        Self {
            trend_alpha: TREND_ALPHA,
            confidence: CONFIDENCE,
        }
    }
}

impl Levels {
    /// The levels for the share `spent` (0..=1) of both error budgets.
    fn spending(spent: f64) -> Self {
        Self {
            trend_alpha: TREND_ALPHA * spent,
            confidence: 1.0 - (1.0 - CONFIDENCE) * spent,
        }
    }
}

/// The Pocock-type spending function: the share of the error budget spent by information
/// fraction `t` (clamped to 0..=1).
pub fn spent(t: f64) -> f64 {
    (1.0 + (std::f64::consts::E - 1.0) * t.clamp(0.0, 1.0)).ln()
}

/// The looks of a run of at most `max_measured` measured turns, in measured turns; the last is
/// `max_measured` itself. Empty when `max_measured` is 0.
pub fn look_schedule(max_measured: u32) -> Vec<u32> {
    looks_between(FIRST_LOOK, max_measured)
}

/// The looks of a run that looks first after `first` measured turns (at most `max_measured`)
/// and then on the same geometric schedule; the last is `max_measured`. Empty when
/// `max_measured` is 0.
pub fn looks_between(first: u32, max_measured: u32) -> Vec<u32> {
    let mut looks = Vec::new();
    if max_measured == 0 {
        return looks;
    }
    let mut m = first.clamp(1, max_measured);
    while m < max_measured {
        looks.push(m);
        let grown = (f64::from(m) * LOOK_GROWTH).ceil() as u32;
        m = grown.max(m + MIN_LOOK_STEP).min(max_measured);
    }
    looks.push(max_measured);
    looks
}

/// The share of the budgets one analysis of a run with `max_measured` measured turns at most
/// (looking after the measured turns `looks`) may spend after `measured` turns: a scheduled look
/// spends the increment since the look before it; the last analysis of a run (`last`) spends
/// all that is left.
fn share(measured: u32, looks: &[u32], max_measured: u32, last: bool) -> f64 {
    let t = |m: u32| f64::from(m) / f64::from(max_measured.max(1));
    let before = looks
        .iter()
        .copied()
        .take_while(|&m| m < measured)
        .last()
        .unwrap_or(0);
    let upto = if last { 1.0 } else { t(measured) };
    spent(upto) - spent(t(before))
}

/// The levels a look after `measured` of at most `max_measured` measured turns runs at.
pub fn look_levels(measured: u32, max_measured: u32) -> Levels {
    Levels::spending(share(
        measured,
        &look_schedule(max_measured),
        max_measured,
        false,
    ))
}

/// The measured turns after which a run of `scenario` is looked at: from the first look
/// ([`FIRST_LOOK`]) with `stop: decided`, from `turns` (its minimum) when it extends to
/// `max_turns`; empty for a run that is looked at once, at its end.
pub(crate) fn scenario_looks(scenario: &Scenario) -> Vec<u32> {
    let max = scenario.max_measured_turns();
    match scenario.stop {
        StopMode::Decided => looks_between(FIRST_LOOK, max),
        StopMode::Turns if scenario.extends() => looks_between(scenario.turns, max),
        StopMode::Turns => Vec::new(),
    }
}

/// The levels a finished run is judged at: the default for `stop: turns` without `max_turns`;
/// with `stop: decided` or a run that may extend, those of the look that stopped it, or what is
/// left of the budgets when it was not stopped.
pub fn final_levels(record: &RunRecord) -> Levels {
    let scenario = &record.scenario;
    let looks = scenario_looks(scenario);
    if looks.is_empty() {
        return Levels::default();
    }
    let measured = record
        .early_stop
        .as_ref()
        .map_or(record.turns_completed, |s| s.turn)
        .saturating_sub(scenario.warmup_turns);
    let last = record.early_stop.is_none();
    if scenario.extends_by_default() {
        return extension_levels(
            measured,
            &looks,
            scenario.turns,
            scenario.max_measured_turns(),
            last,
        );
    }
    Levels::spending(share(measured, &looks, scenario.max_measured_turns(), last))
}

/// Why a metric is not decided yet, or `None` when it is (see the module documentation).
/// `tolerance` is the metric's tolerance in bytes (as the classifier used it), `turns_left` the
/// measured turns the run could still take.
pub fn undecided(
    analysis: &MetricAnalysis,
    expectation: Option<&MetricExpectation>,
    tolerance: f64,
    turns_left: u32,
) -> Option<&'static str> {
    let interval = analysis.slope_interval;
    let hi = interval.map_or(f64::INFINITY, |(_, hi)| hi.max(0.0));
    let drift = if turns_left == 0 {
        0.0
    } else {
        hi * f64::from(turns_left)
    };
    match analysis.classification {
        Classification::Inconclusive => return Some("inconclusive"),
        Classification::Growth => {}
        Classification::Clean => {
            let end = analysis.fitted_end_bytes.unwrap_or(analysis.last as f64);
            let risen = (end - analysis.baseline as f64).max(0.0);
            if risen + drift > tolerance {
                return Some(
                    "clean so far, but the slope could leave the tolerance by the maximum",
                );
            }
        }
        Classification::Plateau => {
            if drift > tolerance {
                return Some(
                    "a plateau so far, but the slope could still climb beyond the tolerance",
                );
            }
        }
    }
    let expectation = expectation?;
    if let Some(limit) = expectation.max_growth_per_turn {
        let limit = limit as f64;
        let decided = interval.is_some_and(|(lo, hi)| {
            super::expectations::growth_limit_outcome(lo, hi, limit) != Judged::Undecided
        });
        if !decided {
            return Some("growth limit inside the slope interval");
        }
    }
    if let Some(max) = expectation.max {
        let (max, end) = (
            max as f64,
            analysis.fitted_end_bytes.unwrap_or(analysis.last as f64),
        );
        if (analysis.last as f64) <= max && end + drift > max {
            return Some("approaching its maximum");
        }
    }
    if let (Classification::Growth, Some(tolerance)) =
        (analysis.classification, expectation.tolerance)
    {
        let limit = analysis.baseline as f64
            + (expectation.warmup_budget.unwrap_or(0) + tolerance.bytes_for(analysis.baseline))
                as f64;
        let end = analysis.fitted_end_bytes.unwrap_or(analysis.last as f64);
        if end <= limit && end + drift > limit {
            return Some("growing toward its tolerance");
        }
    }
    None
}

/// The [`StopRule`] that `scenario.stop` and `max_turns` name: every turn (`max_turns` equal to
/// `turns`), [`ExtendWhileUndecided`] (`stop: turns` without `max_turns`), or
/// [`StopWhenDecided`] (with `stop: decided`, or `stop: turns` with a `max_turns` beyond
/// `turns`: then it first looks at `turns`).
pub fn stop_rule_for(scenario: &Scenario) -> Box<dyn StopRule> {
    if scenario.stop == StopMode::Turns && !scenario.extends() {
        return Box::new(RunAllTurns);
    }
    if scenario.extends_by_default() {
        return Box::new(ExtendWhileUndecided::new(scenario));
    }
    Box::new(StopWhenDecided::new(scenario))
}

/// The [`StopRule`] of `stop: decided` (looks on [`look_schedule`]) and of a run that extends
/// to `max_turns` (looks from `turns` on, [`looks_between`]): analyses at each look's share of
/// the error budgets, stops when every analysed metric is decided.
#[derive(Debug, Clone)]
pub struct StopWhenDecided {
    /// The looks, as turns of the run (warm-up included).
    looks: Vec<u32>,
    /// The same looks, in measured turns.
    measured_looks: Vec<u32>,
    warmup_turns: u32,
    max_measured: u32,
    /// Whether `turns` is a minimum (the run extends): with nothing to analyse it stops there.
    extending: bool,
}

impl StopWhenDecided {
    /// The rule for `scenario` (the maximum is [`Scenario::max_measured_turns`]).
    pub fn new(scenario: &Scenario) -> Self {
        let warmup_turns = scenario.warmup_turns;
        let measured_looks = scenario_looks(scenario);
        Self {
            looks: measured_looks.iter().map(|m| m + warmup_turns).collect(),
            measured_looks,
            warmup_turns,
            max_measured: scenario.max_measured_turns(),
            extending: scenario.extends(),
        }
    }

    /// The turns (warm-up included) at which it looks.
    pub fn looks(&self) -> &[u32] {
        &self.looks
    }

    fn reason(&self, verdict: &Verdict, measured: u32, levels: Levels) -> String {
        let words: Vec<String> = verdict
            .metrics
            .iter()
            .map(|(name, a)| format!("{name} {}", a.classification.as_str()))
            .collect();
        let look = self
            .looks
            .iter()
            .position(|&t| t == measured + self.warmup_turns)
            .map_or(0, |i| i + 1);
        format!(
            "every watched metric decided after {measured} of {} measured turns ({}; look {look} \
             of at most {}, growth tested at alpha {}, intervals at {:.1}%)",
            self.max_measured,
            words.join(", "),
            self.looks.len(),
            probability(levels.trend_alpha),
            levels.confidence * 100.0,
        )
    }
}

impl StopWhenDecided {
    /// Why the run may stop because `metric`, decided, fails one of its expectations; `None`
    /// when all of them hold.
    fn decided_failure(
        &self,
        verdict: &Verdict,
        metric: &str,
        measured: u32,
        levels: Levels,
    ) -> Option<String> {
        let failed = verdict.expectations.iter().find(|e| {
            e.failed()
                && e.name
                    .strip_prefix(metric)
                    .is_some_and(|rest| rest.starts_with('.'))
        })?;
        let class = verdict
            .metrics
            .get(metric)
            .map_or("", |a| a.classification.as_str());
        Some(format!(
            "{} decided to fail after {measured} of {} measured turns ({metric} {class}; a \
             longer run cannot make it pass; growth tested at alpha {}, intervals at {:.1}%)",
            failed.name,
            self.max_measured,
            probability(levels.trend_alpha),
            levels.confidence * 100.0,
        ))
    }
}

impl StopRule for StopWhenDecided {
    fn wants_look(&self, turn: u32) -> bool {
        self.looks.binary_search(&turn).is_ok()
    }

    fn look(&mut self, so_far: &RunRecord) -> Option<String> {
        let measured = so_far.turns_completed.saturating_sub(self.warmup_turns);
        let levels = Levels::spending(share(
            measured,
            &self.measured_looks,
            self.max_measured,
            false,
        ));
        let verdict = analyze_run_with(so_far, levels);
        if verdict.metrics.is_empty() {
            // Nothing a longer run could decide: a run that extends ends at its minimum.
            return self.extending.then(|| {
                format!("no metric to decide after the minimum of {measured} measured turns")
            });
        }
        let turns_left = self.max_measured.saturating_sub(measured);
        let expect = &so_far.scenario.expect.metrics;
        let decided: Vec<(&String, bool)> = verdict
            .metrics
            .iter()
            .map(|(name, a)| {
                let expectation = expect.get(name);
                let tolerance = ClassifyOptions {
                    tolerance: expectation.and_then(|e| e.tolerance),
                    ..ClassifyOptions::default()
                }
                .tolerance_bytes(a.baseline);
                let settled = undecided(a, expectation, tolerance as f64, turns_left).is_none();
                (name, settled)
            })
            .collect();
        // A failure that a longer run cannot undo ends the run at once: the other metrics
        // cannot turn the verdict back into a pass.
        if let Some(reason) = decided
            .iter()
            .filter(|(_, settled)| *settled)
            .find_map(|(name, _)| self.decided_failure(&verdict, name, measured, levels))
        {
            return Some(reason);
        }
        decided
            .iter()
            .all(|(_, settled)| *settled)
            .then(|| self.reason(&verdict, measured, levels))
    }
}

#[cfg(test)]
mod tests;
