//! Growth below the limit: a metric classified `growth` whose every expectation held still grows.
//! The verdict names it so that no report passes such growth in silence (a 42 KiB/turn leak under
//! a 64 KiB/turn limit is a leak a team wants to hear of, even where the gate lets it through).

use super::checks::ExpectationKind;
use super::verdict::{Classification, Verdict};

impl Verdict {
    /// The metrics classified `growth` that had at least one expectation and passed every one,
    /// with their growth per turn (in the metric's unit), by metric name.
    pub fn growth_below_limit(&self) -> Vec<(&str, f64)> {
        self.metrics
            .iter()
            .filter(|(_, m)| m.classification == Classification::Growth)
            .filter_map(|(name, m)| {
                let mut judged = self
                    .expectations
                    .iter()
                    .filter(|e| {
                        ExpectationKind::parse(&e.name).is_some_and(|(kind, metric)| {
                            metric == Some(name.as_str())
                                && !matches!(
                                    kind,
                                    ExpectationKind::Balanced | ExpectationKind::MaxLive
                                )
                        })
                    })
                    .peekable();
                judged.peek()?;
                judged
                    .all(|e| e.passed)
                    .then_some((name.as_str(), m.slope_bytes_per_turn))
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use crate::analyze::test_support::native_heap_record;
    use crate::analyze::{analyze_run, Classification};
    use crate::scenario::MetricExpectation;

    /// The binding leak of issue 22: 42 KiB a turn under a 64 KiB/turn limit passed with nothing
    /// said.
    #[test]
    fn growth_that_passes_its_limit_is_named() {
        let wiggle = [300i64, -500, 100, 400, -200];
        let values: Vec<u64> = (0..=30u64)
            .map(|t| ((100 << 20) + t * 42 * 1024) as i64 + wiggle[t as usize % 5])
            .map(|v| v as u64)
            .collect();
        let limit = |kib: u64| MetricExpectation {
            max_growth_per_turn: Some(kib << 10),
            ..MetricExpectation::default()
        };
        let verdict = analyze_run(&native_heap_record(&values, limit(64)));
        assert!(verdict.passed(), "{verdict:#?}");
        assert_eq!(
            verdict.metrics["native_heap"].classification,
            Classification::Growth
        );
        let below = verdict.growth_below_limit();
        assert_eq!(below.len(), 1, "{below:?}");
        assert_eq!(below[0].0, "native_heap");
        assert!((below[0].1 - 42.0 * 1024.0).abs() < 100.0, "{below:?}");

        // The same growth over a limit it breaks is a failure, not a note.
        let verdict = analyze_run(&native_heap_record(&values, limit(16)));
        assert!(!verdict.passed());
        assert!(verdict.growth_below_limit().is_empty());
    }
}
