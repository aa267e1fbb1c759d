//! The default extension of a `stop: turns` run without `max_turns`: judged at `turns` exactly
//! as a fixed run (the analyzer's full levels), it goes on only while its verdict is
//! inconclusive, up to [`crate::scenario::DEFAULT_EXTENSION`] times `turns`.
//!
//! # Error rates
//!
//! The look at `turns` spends the whole of both budgets, as a fixed run does, so a run decided
//! there gets the verdict it always had. The looks past `turns` (on [`super::looks_between`]'s
//! schedule from `turns` to the maximum) spend an extra [`EXTENSION_SHARE`] of each budget,
//! divided among them by the same Pocock-type function ([`super::spent`]) of the fraction of the
//! extension run. By the union bound, the chance that any look calls a clean series `growth`
//! (or shows a leaking one within its limit) is at most `(1 + EXTENSION_SHARE)` times a fixed
//! run's: 0.625% instead of 0.5% for the trend test, 6.25% instead of 5% for an interval.
//!
//! # Stopping
//!
//! A look stops the run as soon as every expectation of a watched metric is decided (one fails,
//! or all hold), or an end-judged expectation that only gets worse fails already
//! (`engine_errors`, `max_live`; see `look_outcome`): only an undecided expectation (what makes a verdict inconclusive) extends it. A metric whose class word is `inconclusive` while every
//! expectation is decided does not, unlike [`super::StopWhenDecided`] (the rule of an explicit
//! `max_turns`), which waits for every metric: noisy runs that pass today keep their length.

use crate::analyze::{ExpectationKind, ExpectationResult, Verdict};
use crate::runner::{RunRecord, StopRule};
use crate::scenario::Scenario;

use super::super::run::analyze_run_with;
use super::super::units::probability;
use super::{looks_between, spent, Levels};

/// The share of each error budget that the looks past `turns` spend together, on top of the
/// full budget spent at `turns`.
pub const EXTENSION_SHARE: f64 = 0.25;

/// The levels an analysis after `measured` measured turns runs at, for a run that extends by
/// default from `min` to at most `max` measured turns with looks at `looks` (the first is
/// `min`): the full levels up to `min`; past it, the look's increment of [`EXTENSION_SHARE`];
/// the last analysis of a run (`last`) spends what is left of that share.
pub fn extension_levels(measured: u32, looks: &[u32], min: u32, max: u32, last: bool) -> Levels {
    if measured <= min || max <= min {
        return Levels::default();
    }
    let t = |m: u32| f64::from(m.saturating_sub(min)) / f64::from(max - min);
    let before = looks
        .iter()
        .copied()
        .take_while(|&m| m < measured)
        .last()
        .unwrap_or(min);
    let upto = if last { 1.0 } else { t(measured) };
    Levels::spending(EXTENSION_SHARE * (spent(upto) - spent(t(before))))
}

/// The [`StopRule`] of a `stop: turns` run without `max_turns` (see the module documentation).
#[derive(Debug, Clone)]
pub struct ExtendWhileUndecided {
    /// The looks, in measured turns; the first is `turns`.
    measured_looks: Vec<u32>,
    warmup_turns: u32,
    min: u32,
    max: u32,
}

impl ExtendWhileUndecided {
    /// The rule for `scenario`: looks from `turns` to [`Scenario::max_measured_turns`].
    pub fn new(scenario: &Scenario) -> Self {
        let max = scenario.max_measured_turns();
        Self {
            measured_looks: looks_between(scenario.turns, max),
            warmup_turns: scenario.warmup_turns,
            min: scenario.turns,
            max,
        }
    }

    /// The turns (warm-up included) at which it looks.
    pub fn looks(&self) -> Vec<u32> {
        self.measured_looks
            .iter()
            .map(|m| m + self.warmup_turns)
            .collect()
    }
}

impl StopRule for ExtendWhileUndecided {
    fn wants_look(&self, turn: u32) -> bool {
        turn >= self.warmup_turns
            && self
                .measured_looks
                .binary_search(&(turn - self.warmup_turns))
                .is_ok()
    }

    fn look(&mut self, so_far: &RunRecord) -> Option<String> {
        let measured = so_far.turns_completed.saturating_sub(self.warmup_turns);
        let levels = extension_levels(measured, &self.measured_looks, self.min, self.max, false);
        let verdict = analyze_run_with(so_far, levels);
        let decided = match look_outcome(&verdict) {
            LookOutcome::Undecided => return None,
            LookOutcome::Decided(decided) => decided,
        };
        if measured <= self.min {
            return Some(format!(
                "{decided} at the minimum of {measured} measured turns"
            ));
        }
        let look = self
            .measured_looks
            .iter()
            .position(|&m| m == measured)
            .map_or(0, |i| i + 1);
        Some(format!(
            "{decided} after {measured} measured turns, extended \
             past turns {} while one was undecided (look {look} of at most {}, up to {}; growth tested at \
             alpha {}, intervals at {:.1}%)",
            self.min,
            self.measured_looks.len(),
            self.max,
            probability(levels.trend_alpha),
            levels.confidence * 100.0,
        ))
    }
}

/// What a look of the default extension found.
#[derive(Debug, Clone, PartialEq, Eq)]
enum LookOutcome {
    /// An expectation of a watched metric is still undecided: the run goes on.
    Undecided,
    /// The run may stop; why, in words (the start of the stop reason).
    Decided(String),
}

/// Whether a look's `verdict` decides the run. The watched metrics' expectations must all be
/// decided; the others are judged at the end of the run, and a look says what it knows of them.
/// `engine_errors` and `max_live` only get worse with more turns (an error stays counted, a peak
/// of live objects stays reached), so one failing at a look fails the run whatever comes, and
/// stops it. `balanced` is not judged at a look: the look sees the ledger up to the previous
/// turn, and a conversation still open there is closed later; so a run stopped with every
/// metric expectation holding says that its ledger's balance is still to be judged, rather than
/// "all hold" before a final verdict that may fail on it.
fn look_outcome(verdict: &Verdict) -> LookOutcome {
    let of_metric = |e: &&ExpectationResult| {
        e.name
            .split_once('.')
            .is_some_and(|(metric, _)| verdict.metrics.contains_key(metric))
    };
    let ours: Vec<&ExpectationResult> = verdict.expectations.iter().filter(of_metric).collect();
    if ours.iter().any(|e| e.failed()) {
        return LookOutcome::Decided("every metric expectation decided (one fails)".to_owned());
    }
    let lasting = verdict.expectations.iter().find(|e| {
        !e.passed
            && !e.inconclusive
            && matches!(
                ExpectationKind::parse(&e.name),
                Some((ExpectationKind::EngineErrors | ExpectationKind::MaxLive, _))
            )
    });
    if let Some(failed) = lasting {
        return LookOutcome::Decided(format!(
            "`{}` fails, and more turns cannot undo it",
            failed.name
        ));
    }
    if ours.iter().any(|e| e.inconclusive) {
        return LookOutcome::Undecided;
    }
    let balance_later = verdict.expectations.iter().any(|e| {
        matches!(
            ExpectationKind::parse(&e.name),
            Some((ExpectationKind::Balanced, _))
        )
    });
    LookOutcome::Decided(if balance_later {
        "every metric expectation decided (all hold; the ledger's balance is judged at the end \
         of the run)"
            .to_owned()
    } else {
        "every metric expectation decided (all hold)".to_owned()
    })
}

#[cfg(test)]
mod tests;
