//! What every renderer says besides the table and the failures: which expectations a default
//! put there (the scenario did not write them), and growth that stayed below its limit. The
//! verdict decides both (`analyze/defaults.rs`, `Verdict::growth_below_limit`); this file words
//! them once, and each renderer escapes the names in its own format.

use crate::analyze::units::quantity;
use crate::analyze::Verdict;

/// How a scenario turns the defaults off, said after the list of defaulted expectations.
pub(crate) const OPT_OUT: &str =
    "opt out per metric with `report_only: true`, or with `balanced: false`";

/// The names of the expectations a default put there, in verdict order.
pub(crate) fn defaulted_names(verdict: &Verdict) -> Vec<&str> {
    verdict
        .expectations
        .iter()
        .filter(|e| e.defaulted)
        .map(|e| e.name.as_str())
        .collect()
}

/// The mark after a defaulted expectation's name in a list of failures.
pub(crate) fn default_mark(defaulted: bool) -> &'static str {
    if defaulted {
        " (default)"
    } else {
        ""
    }
}

/// Per metric of a keyed run that grew, what its growth follows: new keys (a cache filling),
/// every request (missing eviction, a leak), both or neither (`analyze/cache_or_leak.rs`).
pub(crate) fn keyed_growth(verdict: &Verdict) -> Vec<(&str, String)> {
    verdict
        .metrics
        .iter()
        .filter_map(|(metric, analysis)| {
            let keyed = analysis.keyed_growth.as_ref()?;
            Some((
                metric.as_str(),
                crate::report::reasons::keyed_growth_in_words(metric, keyed),
            ))
        })
        .collect()
}

/// Per metric whose growth passed its limit, what to say of it: `growth below the limit:
/// +42.0 KiB/turn (42.0 MiB per 1,000 turns)`.
pub(crate) fn growth_below_limit(verdict: &Verdict) -> Vec<(&str, String)> {
    verdict
        .growth_below_limit()
        .into_iter()
        .map(|(metric, per_turn)| {
            let q = quantity(metric);
            (
                metric,
                format!(
                    "growth below the limit: {} ({} per 1,000 turns)",
                    q.format_per_turn(per_turn),
                    q.format(per_turn * 1000.0)
                ),
            )
        })
        .collect()
}
