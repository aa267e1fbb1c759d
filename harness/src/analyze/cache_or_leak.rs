//! Caches versus leaks (context/003): does a metric grow with the distinct keys a run used (a
//! session id, a prompt shape: a cache filling) or with the request count itself, repeated keys
//! included (missing eviction, a leak)?
//!
//! Every turn of a keyed run carries the key it used (`sessions:` in the scenario, a `key` group
//! in an attach marker). Each turn's increment over the turn before it is put in one of two
//! groups: turns whose key is new in its load epoch (a reload empties the engine's caches) and
//! turns whose key was seen before. The increment model is `a + b * new`: `a`, growth per
//! request, is tested on the repeated turns alone with a sign test (a cache hit must cost
//! nothing); `b`, the extra growth a new key brings, by whether the turns that grew beyond the
//! repeated turns' level and noise (three robust sigmas, at least [`MIN_STEP`]) are new-key
//! turns more often than chance allows (Fisher's exact test, one-sided). A counting test and
//! not a rank test, because a bounded cache grows on its first few new keys only: once full, a
//! new key evicts as much as it stores, and those later new keys would dilute a comparison of
//! levels. The first increment of each epoch (it carries the engine's one-time rise: first
//! inference, context) and the warm-up turns' are left out; their keys still count as seen.
//! Figures are medians, so one wild sample moves none of them much.
//!
//! The classifier's verdict is not touched: this only explains growth it found.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};
use statrs::distribution::{Binomial, DiscreteCDF, Hypergeometric};

use crate::analyze::series::MetricSeries;
use crate::analyze::stats::robust::median;

/// Significance level of each of the two tests (growth per request, growth per new key).
pub const KEYED_ALPHA: f64 = 0.01;

/// Fewest increments with a repeated key that can decide anything (the sign test on four reaches
/// p = 1/16 at best, more turns are needed for the level; fewer never tell).
const MIN_REPEAT: usize = 4;

/// Fewest increments with a new key: three grown turns, all new among three new and nine
/// repeated, reach p = 1/220.
const MIN_NEW: usize = 3;

/// The smallest increment counted as a turn that grew, above the repeated turns' median: below
/// it, page-granular counters (4 KiB steps) would count every blip.
pub const MIN_STEP: f64 = 64.0 * 1024.0;

/// Robust sigmas above the repeated turns' median for an increment to count as grown.
const GROWN_SIGMAS: f64 = 3.0;

/// Consistency factor that turns a median absolute deviation into a Gaussian sigma.
const MAD_TO_SIGMA: f64 = 1.4826;

/// What a keyed run's growth follows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum KeyedExplanation {
    /// Growth on new keys only; a repeated key costs nothing: a cache filling.
    CacheFilling,
    /// Growth on every request, repeated keys included: missing eviction or a leak.
    PerRequest,
    /// Both: every request grows, and a new key grows more.
    Both,
    /// Neither test found growth that follows keys or requests.
    Neither,
    /// Too few turns with a new or with a repeated key to tell the two apart (every turn used a
    /// new key, or every turn a repeated one).
    Unseparated,
}

/// How a keyed run's growth divides between new keys and requests.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KeyedGrowth {
    /// What the growth follows.
    pub explanation: KeyedExplanation,
    /// Distinct keys the run used (over all epochs).
    pub distinct_keys: u32,
    /// Increments of turns with a key new in its epoch, as used by the tests.
    pub new_key_turns: u32,
    /// Increments of turns whose key was seen before in its epoch.
    pub repeat_turns: u32,
    /// Median increment of a repeated-key turn: growth per request, in bytes.
    pub per_request_bytes: f64,
    /// Median increment of a new-key turn that grew, beyond `per_request_bytes`: growth per new
    /// key, in bytes.
    pub per_new_key_bytes: f64,
    /// One-sided sign-test p-value of repeated-key increments above zero.
    pub per_request_p: f64,
    /// One-sided Fisher exact p-value of the grown turns falling on new keys.
    pub per_new_key_p: f64,
    /// Turns that grew beyond the repeated turns' level and noise, and how many of them had a
    /// new key.
    pub grown_turns: u32,
    /// Of `grown_turns`, those with a new key.
    pub grown_on_new_keys: u32,
    /// For a cache filling: the distinct keys after which new keys stopped adding memory (a
    /// cache that reached its bound and evicts); `None` when the last new keys still grew.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub filled_after_keys: Option<u32>,
}

/// Explains `series` by the turns' `keys` (turn → key); `None` when no turn has a key.
pub fn explain_keyed_growth(
    series: &MetricSeries,
    keys: &BTreeMap<u64, String>,
    warmup_turns: u64,
) -> Option<KeyedGrowth> {
    if keys.is_empty() {
        return None;
    }
    let distinct: BTreeSet<&str> = keys.values().map(String::as_str).collect();
    let mut new = Vec::new();
    let mut repeat = Vec::new();
    // Per new-key increment, in order: how many distinct keys the epoch had seen with it.
    let mut new_in_order: Vec<(u32, f64)> = Vec::new();
    for epoch in &series.epochs {
        let mut seen: BTreeSet<&str> = BTreeSet::new();
        let mut first = true;
        for pair in epoch.points.windows(2) {
            let ((t0, v0), (t, v)) = (pair[0], pair[1]);
            let Some(key) = keys.get(&t) else {
                continue;
            };
            let fresh = seen.insert(key.as_str());
            // The epoch's first turn carries its one-time rise; a gap hides the keys between.
            let skip = std::mem::replace(&mut first, false) || t <= warmup_turns || t != t0 + 1;
            if skip {
                continue;
            }
            let increment = v as f64 - v0 as f64;
            if fresh {
                new.push(increment);
                new_in_order.push((seen.len() as u32, increment));
            } else {
                repeat.push(increment);
            }
        }
    }
    let mut out = KeyedGrowth {
        explanation: KeyedExplanation::Unseparated,
        distinct_keys: distinct.len() as u32,
        new_key_turns: new.len() as u32,
        repeat_turns: repeat.len() as u32,
        per_request_bytes: median(&repeat).unwrap_or(0.0),
        per_new_key_bytes: 0.0,
        per_request_p: 1.0,
        per_new_key_p: 1.0,
        grown_turns: 0,
        grown_on_new_keys: 0,
        filled_after_keys: None,
    };
    if new.len() < MIN_NEW || repeat.len() < MIN_REPEAT {
        return Some(out);
    }
    out.per_request_p = sign_test_above_zero(&repeat);
    let level = out.per_request_bytes;
    let deviations: Vec<f64> = repeat.iter().map(|r| (r - level).abs()).collect();
    let sigma = MAD_TO_SIGMA * median(&deviations).unwrap_or(0.0);
    let threshold = level + (GROWN_SIGMAS * sigma).max(MIN_STEP);
    let grown_new: Vec<f64> = new.iter().copied().filter(|x| *x > threshold).collect();
    let grown_repeat = repeat.iter().filter(|x| **x > threshold).count();
    out.grown_on_new_keys = grown_new.len() as u32;
    out.grown_turns = (grown_new.len() + grown_repeat) as u32;
    out.per_new_key_bytes = median(&grown_new).map_or(0.0, |m| m - level);
    out.per_new_key_p = fisher_one_sided(
        (new.len() + repeat.len()) as u64,
        new.len() as u64,
        u64::from(out.grown_turns),
        grown_new.len() as u64,
    );
    let per_request = out.per_request_p < KEYED_ALPHA && out.per_request_bytes > 0.0;
    let per_new_key = out.per_new_key_p < KEYED_ALPHA && out.per_new_key_bytes > 0.0;
    out.explanation = match (per_new_key, per_request) {
        (true, false) => KeyedExplanation::CacheFilling,
        (false, true) => KeyedExplanation::PerRequest,
        (true, true) => KeyedExplanation::Both,
        (false, false) => KeyedExplanation::Neither,
    };
    if out.explanation == KeyedExplanation::CacheFilling {
        out.filled_after_keys = filled_after(&new_in_order, threshold);
    }
    Some(out)
}

/// The distinct-key count after which new keys stopped costing: no later new-key increment grew
/// past `threshold`, and there are at least two of them. `None` when the last new keys still
/// grew.
fn filled_after(new_in_order: &[(u32, f64)], threshold: f64) -> Option<u32> {
    let tail = new_in_order
        .iter()
        .rev()
        .take_while(|(_, x)| *x <= threshold)
        .count();
    if tail < 2 || tail == new_in_order.len() {
        return None;
    }
    let last_growing = new_in_order[new_in_order.len() - tail - 1].0;
    Some(last_growing)
}

/// One-sided Fisher exact test: the p-value of at least `hits` of `draws` grown turns falling on
/// new keys, were growth as likely on any of the `population` turns, `successes` of which had a
/// new key.
fn fisher_one_sided(population: u64, successes: u64, draws: u64, hits: u64) -> f64 {
    if hits == 0 {
        return 1.0;
    }
    match Hypergeometric::new(population, successes, draws) {
        // P(X >= hits) = 1 - P(X <= hits - 1).
        Ok(h) => h.sf(hits - 1),
        Err(_) => 1.0,
    }
}

/// One-sided sign test: the p-value of at least as many positive increments among the non-zero
/// ones, were positive and negative equally likely.
fn sign_test_above_zero(values: &[f64]) -> f64 {
    let positive = values.iter().filter(|v| **v > 0.0).count() as u64;
    let nonzero = values.iter().filter(|v| **v != 0.0).count() as u64;
    if positive == 0 {
        return 1.0;
    }
    match Binomial::new(0.5, nonzero) {
        // P(X >= positive) = 1 - P(X <= positive - 1).
        Ok(binomial) => binomial.sf(positive - 1),
        Err(_) => 1.0,
    }
}

#[cfg(test)]
mod tests;
