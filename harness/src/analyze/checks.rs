//! Typed expectation results: the verdict's checked expectations with their numbers (metric,
//! limit, observed value, growth per turn with its interval, classification) instead of the
//! sentences `report.json` and the table carry, so that a program (a user's `#[test]`) can
//! assert on them without parsing text.
//!
//! The numbers come from the verdict's per-metric analysis and the scenario's expectations, the
//! same inputs `expectations.rs` judged; nothing is measured again.

use crate::scenario::Expectations;

use super::run::ENGINE_ERRORS;
use super::verdict::{Classification, ExpectationResult, MetricAnalysis, Verdict};

/// Which rule an expectation checks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ExpectationKind {
    /// `<metric>.tolerance`: the level at the last turn stays within baseline + budget +
    /// tolerance.
    Tolerance,
    /// `<metric>.warmup_budget`: the one-time rise stays within the budget.
    WarmupBudget,
    /// `<metric>.max_growth_per_turn`: the upper confidence bound of the growth per turn stays
    /// within the limit.
    MaxGrowthPerTurn,
    /// `<metric>.max`: no sample exceeds the limit.
    Max,
    /// `balanced` or `balanced.<kind>`: every create has its delete.
    Balanced,
    /// `engine_errors`: no engine call failed that the scenario did not inject.
    EngineErrors,
    /// `max_live.<kind>`: at most so many objects of a ledger kind alive at once.
    MaxLive,
    /// `<metric>.horizon`: the default expectation of a watched metric without limits: no
    /// growth that matters over the horizon (as `leakloop analyze` judges it).
    Horizon,
}

impl ExpectationKind {
    /// The per-metric kinds, by the key that follows the metric in an expectation's name.
    const PER_METRIC: [(ExpectationKind, &'static str); 5] = [
        (ExpectationKind::Tolerance, "tolerance"),
        (ExpectationKind::WarmupBudget, "warmup_budget"),
        (ExpectationKind::MaxGrowthPerTurn, "max_growth_per_turn"),
        (ExpectationKind::Max, "max"),
        (ExpectationKind::Horizon, "horizon"),
    ];

    /// The name of this expectation on `metric` (`rss.max_growth_per_turn`); for the kinds that
    /// are not per metric, `metric` is the ledger kind (`balanced.sim/conversation`) or empty.
    pub fn name_for(self, metric: &str) -> String {
        let key = match self {
            ExpectationKind::Balanced => "balanced",
            ExpectationKind::MaxLive => "max_live",
            ExpectationKind::EngineErrors => ENGINE_ERRORS,
            per_metric => {
                let key = Self::PER_METRIC
                    .iter()
                    .find(|(kind, _)| *kind == per_metric)
                    .map_or("", |(_, key)| key);
                return format!("{metric}.{key}");
            }
        };
        if metric.is_empty() {
            key.to_owned()
        } else {
            format!("{key}.{metric}")
        }
    }

    /// The kind of the expectation named `name`, and the metric (or ledger kind) it names.
    pub fn parse(name: &str) -> Option<(ExpectationKind, Option<&str>)> {
        if name == ENGINE_ERRORS {
            return Some((ExpectationKind::EngineErrors, None));
        }
        if name == "balanced" {
            return Some((ExpectationKind::Balanced, None));
        }
        if let Some(kind) = name.strip_prefix("balanced.") {
            return Some((ExpectationKind::Balanced, Some(kind)));
        }
        if let Some(kind) = name.strip_prefix("max_live.") {
            return Some((ExpectationKind::MaxLive, Some(kind)));
        }
        let (metric, key) = name.rsplit_once('.')?;
        Self::PER_METRIC
            .iter()
            .find(|(_, k)| *k == key)
            .map(|(kind, _)| (*kind, Some(metric)))
    }
}

/// A metric's growth per turn after warm-up, as the analyzer fitted it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GrowthPerTurn {
    /// The robust slope, in bytes per turn.
    pub bytes_per_turn: f64,
    /// Its confidence interval (low, high) in bytes per turn, when it could be bounded.
    pub interval: Option<(f64, f64)>,
    /// The interval's confidence level (0.95 for 95 %).
    pub confidence: f64,
}

impl GrowthPerTurn {
    /// The growth of one metric's analysis.
    pub fn of(analysis: &MetricAnalysis) -> Self {
        Self {
            bytes_per_turn: analysis.slope_bytes_per_turn,
            interval: analysis.slope_interval,
            confidence: analysis.confidence,
        }
    }
}

/// One checked expectation with its numbers.
#[derive(Debug, Clone, PartialEq)]
pub struct Check {
    /// Its name, as in the table and report.json (`native_heap.max_growth_per_turn`).
    pub name: String,
    /// The rule it checks; `None` for a name this version does not know.
    pub kind: Option<ExpectationKind>,
    /// The metric it is about (`None` for the ledger and engine-error checks).
    pub metric: Option<String>,
    /// For `balanced.<kind>`: the ledger kind that is off balance.
    pub ledger_kind: Option<String>,
    /// Whether it held.
    pub passed: bool,
    /// The limit in the metric's unit (bytes, or nanoseconds for a time metric): the highest
    /// allowed level for `tolerance` and `max`, the budget for `warmup_budget`, per turn for
    /// `max_growth_per_turn`.
    pub limit: Option<f64>,
    /// What was compared with the limit, in the same unit: the fitted level at the last turn,
    /// the one-time rise, the growth per turn (whose upper bound is what is judged).
    pub observed: Option<f64>,
    /// The metric's growth per turn with its interval.
    pub growth: Option<GrowthPerTurn>,
    /// The metric's classification.
    pub classification: Option<Classification>,
    /// The turn where it failed, when one can be named.
    pub turn: Option<u64>,
    /// What was expected, in words (as in the table).
    pub expected: String,
    /// What was measured, in words (as in the table).
    pub measured: String,
}

impl Verdict {
    /// Whether every expectation held.
    pub fn passed(&self) -> bool {
        self.status == super::verdict::VerdictStatus::Pass
    }

    /// The checked expectations with their numbers; `expect` is the scenario's (the limits come
    /// from there).
    ///
    /// ```
    /// use leakloop::analyze::{analyze_run, ExpectationKind};
    /// use leakloop::engine::build_engine;
    /// use leakloop::runner::{run_scenario, NoObserver};
    /// use leakloop::scenario::parse_scenario;
    ///
    /// let yaml = r#"
    /// name: kept-kv-cache
    /// engine: {backend: sim, profile: forgets-delete}
    /// turns: 12
    /// turn: [open: {}, send: {prompt: "hi"}, generate: {max_output_tokens: 8}, close: {}]
    /// expect: {native_heap: {max_growth_per_turn: 1MiB}}
    /// "#;
    /// let scenario = parse_scenario(yaml, "kept.yaml".as_ref()).unwrap();
    /// let mut engine = build_engine(&scenario).unwrap();
    /// let record = run_scenario(&scenario, engine.as_mut(), &mut NoObserver);
    /// let verdict = analyze_run(&record);
    ///
    /// // The ledger's balance, on by default, fails too: find the growth limit by its kind.
    /// let checks = verdict.checks(&scenario.expect);
    /// let check = checks
    ///     .iter()
    ///     .find(|c| c.kind == Some(ExpectationKind::MaxGrowthPerTurn))
    ///     .unwrap();
    /// assert_eq!(check.metric.as_deref(), Some("native_heap"));
    /// assert_eq!(check.limit, Some(1048576.0));
    /// let growth = check.growth.unwrap();
    /// assert!(!check.passed && growth.interval.unwrap().1 > check.limit.unwrap());
    /// ```
    pub fn checks(&self, expect: &Expectations) -> Vec<Check> {
        self.expectations
            .iter()
            .map(|result| self.check_of(result, expect))
            .collect()
    }

    /// The growth per turn of `metric`, when it was analysed.
    pub fn growth(&self, metric: &str) -> Option<GrowthPerTurn> {
        self.metrics.get(metric).map(GrowthPerTurn::of)
    }

    fn check_of(&self, result: &ExpectationResult, expect: &Expectations) -> Check {
        let parsed = ExpectationKind::parse(&result.name);
        let mut check = Check {
            name: result.name.clone(),
            kind: parsed.map(|(kind, _)| kind),
            metric: None,
            ledger_kind: None,
            passed: result.passed,
            limit: None,
            observed: None,
            growth: None,
            classification: None,
            turn: result.turn,
            expected: result.expected.clone(),
            measured: result.measured.clone(),
        };
        let Some((kind, Some(subject))) = parsed else {
            return check;
        };
        if matches!(kind, ExpectationKind::Balanced | ExpectationKind::MaxLive) {
            check.ledger_kind = Some(subject.to_owned());
            return check;
        }
        check.metric = Some(subject.to_owned());
        let analysis = self.metrics.get(subject);
        check.growth = analysis.map(GrowthPerTurn::of);
        check.classification = analysis.map(|a| a.classification);
        let (Some(analysis), Some(rule)) = (analysis, expect.metrics.get(subject)) else {
            return check;
        };
        let budget = rule.warmup_budget.unwrap_or(0) as f64;
        (check.limit, check.observed) = match kind {
            ExpectationKind::Tolerance => (
                rule.tolerance.map(|t| {
                    analysis.baseline as f64 + budget + t.bytes_for(analysis.baseline) as f64
                }),
                Some(analysis.fitted_end_bytes.unwrap_or(analysis.last as f64)),
            ),
            ExpectationKind::WarmupBudget => {
                (rule.warmup_budget.map(|b| b as f64), analysis.rise_bytes)
            }
            ExpectationKind::MaxGrowthPerTurn => (
                rule.max_growth_per_turn.map(|l| l as f64),
                Some(analysis.slope_bytes_per_turn),
            ),
            // The highest sample is not kept in the analysis; the measured text names it.
            ExpectationKind::Max => (rule.max.map(|m| m as f64), None),
            // A default has no written rule: the early return above took it.
            ExpectationKind::Balanced
            | ExpectationKind::MaxLive
            | ExpectationKind::EngineErrors
            | ExpectationKind::Horizon => (None, None),
        };
        check
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analyze::analyze_run;
    use crate::analyze::test_support::*;
    use crate::scenario::{MetricExpectation, Tolerance};

    #[test]
    fn names_round_trip_through_their_kind() {
        for (kind, subject, name) in [
            (ExpectationKind::Tolerance, "rss", "rss.tolerance"),
            (ExpectationKind::WarmupBudget, "pss", "pss.warmup_budget"),
            (
                ExpectationKind::MaxGrowthPerTurn,
                "native_heap",
                "native_heap.max_growth_per_turn",
            ),
            (
                ExpectationKind::Balanced,
                "sim/conversation",
                "balanced.sim/conversation",
            ),
            (ExpectationKind::Balanced, "", "balanced"),
            (ExpectationKind::EngineErrors, "", ENGINE_ERRORS),
        ] {
            assert_eq!(kind.name_for(subject), name);
            let want = (!subject.is_empty()).then_some(subject);
            assert_eq!(ExpectationKind::parse(name), Some((kind, want)), "{name}");
        }
        assert_eq!(ExpectationKind::parse("rss.something_else"), None);
    }

    #[test]
    fn a_growing_metric_gives_its_limits_and_numbers() {
        // 1 MiB per turn on top of 100 MiB.
        let values: Vec<u64> = (0..40).map(|t| (100 << 20) + t * (1 << 20)).collect();
        let record = native_heap_record(
            &values,
            MetricExpectation {
                tolerance: Some(Tolerance::Bytes(8 << 20)),
                warmup_budget: Some(4 << 20),
                max_growth_per_turn: Some(64 << 10),
                max: None,
                report_only: false,
            },
        );
        let verdict = analyze_run(&record);
        assert!(!verdict.passed());
        let checks = verdict.checks(&record.scenario.expect);
        let named = |name: &str| {
            checks
                .iter()
                .find(|c| c.name == name)
                .unwrap_or_else(|| panic!("no {name} in {checks:?}"))
        };
        let growth = named("native_heap.max_growth_per_turn");
        assert_eq!(growth.kind, Some(ExpectationKind::MaxGrowthPerTurn));
        assert_eq!(growth.metric.as_deref(), Some("native_heap"));
        assert!(!growth.passed);
        assert_eq!(growth.limit, Some(65536.0));
        assert_eq!(growth.classification, Some(Classification::Growth));
        let slope = growth.growth.expect("a fitted growth");
        assert!((slope.bytes_per_turn - 1048576.0).abs() < 1.0, "{slope:?}");
        let (lo, hi) = slope.interval.expect("an interval");
        assert!(
            lo <= slope.bytes_per_turn && slope.bytes_per_turn <= hi,
            "{slope:?}"
        );
        assert_eq!(growth.observed, Some(slope.bytes_per_turn));
        assert_eq!(verdict.growth("native_heap"), Some(slope));

        let tolerance = named("native_heap.tolerance");
        assert_eq!(tolerance.kind, Some(ExpectationKind::Tolerance));
        assert!(!tolerance.passed);
        assert_eq!(tolerance.limit, Some(((100 + 8 + 4) << 20) as f64));
        assert!(tolerance.observed.unwrap() > tolerance.limit.unwrap());
        assert_eq!(
            named("native_heap.warmup_budget").limit,
            Some((4 << 20) as f64)
        );
    }
}
