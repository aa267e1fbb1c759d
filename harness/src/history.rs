//! History over builds: given the reports of successive builds (read by
//! `report::history::read_build`), per scenario, metric and figure (growth per turn, plateau)
//! the values of every build, the changes beyond the builds' own spread
//! (`analyze::find_changes`) and a trend per series; a rise of either figure is a regression.
//! `report::render_history` words the table and `report::write_history_files` writes it with the
//! plots; `cli/history.rs` prints them.

use std::collections::BTreeSet;

use crate::analyze::{find_changes, Change, ChangeOptions};
use crate::report::history::{BuildReports, RunFigures};
use crate::report::{Trend, TrendPoint};

/// The two figures compared across builds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Figure {
    /// The slope after warm-up, bytes per turn.
    Growth,
    /// The one-time rise that settled, bytes.
    Plateau,
}

impl Figure {
    /// Both figures, in the order they are shown.
    pub(crate) const ALL: [Figure; 2] = [Figure::Growth, Figure::Plateau];

    /// The figure's name in the table and the plots.
    pub(crate) fn describe(self) -> &'static str {
        match self {
            Figure::Growth => "growth per turn",
            Figure::Plateau => "plateau",
        }
    }

    fn of(self, run: &RunFigures, metric: &str) -> Option<f64> {
        let m = run.metrics.get(metric)?;
        Some(match self {
            Figure::Growth => m.growth_per_turn,
            Figure::Plateau => m.plateau,
        })
    }
}

/// A change of one figure of one metric of one scenario.
#[derive(Debug, Clone)]
pub(crate) struct Finding {
    /// The scenario.
    pub scenario: String,
    /// The metric.
    pub metric: String,
    /// The figure that changed.
    pub figure: Figure,
    /// Where and how much.
    pub change: Change,
}

/// One figure of one metric across the builds.
#[derive(Debug, Clone)]
pub(crate) struct FigureSeries {
    /// The figure of each completed run, per build.
    pub values: Vec<Vec<f64>>,
    /// The changes found in them.
    pub changes: Vec<Change>,
}

/// One metric of one scenario across the builds, both figures.
#[derive(Debug, Clone)]
pub(crate) struct MetricHistory {
    /// The metric.
    pub metric: String,
    /// Growth per turn.
    pub growth: FigureSeries,
    /// Plateau.
    pub plateau: FigureSeries,
}

impl MetricHistory {
    /// The series of `figure`.
    pub(crate) fn series(&self, figure: Figure) -> &FigureSeries {
        match figure {
            Figure::Growth => &self.growth,
            Figure::Plateau => &self.plateau,
        }
    }
}

/// One scenario across the builds.
#[derive(Debug, Clone)]
pub(crate) struct ScenarioHistory {
    /// Its name.
    pub scenario: String,
    /// Each metric compared, by name.
    pub metrics: Vec<MetricHistory>,
    /// A trend per metric and figure, for its plot.
    pub trends: Vec<Trend>,
}

/// What the builds show.
#[derive(Debug, Clone)]
pub(crate) struct History {
    /// Each build's label, oldest first.
    pub labels: Vec<String>,
    /// Every scenario any build ran, by name.
    pub scenarios: Vec<ScenarioHistory>,
    /// Every change, scenario by scenario, metric by metric, growth before plateau.
    pub findings: Vec<Finding>,
}

impl History {
    /// How many changes are rises: regressions.
    pub(crate) fn regressions(&self) -> usize {
        self.findings.iter().filter(|f| f.change.is_rise()).count()
    }
}

/// Compares `builds` (oldest first): every metric, or those in `only` when it is not empty, of
/// every completed run.
pub(crate) fn judge(builds: &[BuildReports], options: &ChangeOptions, only: &[String]) -> History {
    let labels: Vec<String> = builds.iter().map(BuildReports::label).collect();
    let names: BTreeSet<&String> = builds.iter().flat_map(|b| b.runs.keys()).collect();
    let mut findings = Vec::new();
    let mut scenarios = Vec::new();
    for scenario in names {
        let runs: Vec<Vec<&RunFigures>> = builds
            .iter()
            .map(|b| {
                b.runs
                    .get(scenario)
                    .map(|r| r.iter().filter(|r| r.completed).collect())
                    .unwrap_or_default()
            })
            .collect();
        let metrics: BTreeSet<&String> = runs
            .iter()
            .flatten()
            .flat_map(|r| r.metrics.keys())
            .filter(|m| only.is_empty() || only.contains(m))
            .collect();
        let mut trends = Vec::new();
        let mut histories = Vec::new();
        for metric in metrics {
            let [growth, plateau] = Figure::ALL.map(|figure| {
                let values: Vec<Vec<f64>> = runs
                    .iter()
                    .map(|rs| rs.iter().filter_map(|r| figure.of(r, metric)).collect())
                    .collect();
                let changes = find_changes(&values, options);
                trends.push(Trend {
                    title: format!("{scenario}: {metric} {}", figure.describe()),
                    metric: format!("{metric} {}", figure.describe()),
                    bytes: true,
                    points: labels
                        .iter()
                        .zip(&values)
                        .map(|(label, v)| TrendPoint {
                            label: label.clone(),
                            values: v.clone(),
                        })
                        .collect(),
                    first_change: changes.iter().find(|c| c.is_rise()).map(|c| c.build),
                });
                findings.extend(changes.iter().map(|change| Finding {
                    scenario: scenario.clone(),
                    metric: metric.clone(),
                    figure,
                    change: change.clone(),
                }));
                FigureSeries { values, changes }
            });
            histories.push(MetricHistory {
                metric: metric.clone(),
                growth,
                plateau,
            });
        }
        scenarios.push(ScenarioHistory {
            scenario: scenario.clone(),
            metrics: histories,
            trends,
        });
    }
    History {
        labels,
        scenarios,
        findings,
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::path::PathBuf;

    use super::*;
    use crate::analyze::VerdictStatus;
    use crate::report::history::MetricFigures;

    /// A build whose one scenario grows `growth` bytes per turn in each of three runs (a little
    /// noise apart), plus an unfinished run whose figure is far off.
    fn build(i: usize, growth: f64) -> BuildReports {
        let run = |k: usize, completed: bool, growth: f64| RunFigures {
            path: PathBuf::from(format!("b{i}/run-{k}/report.json")),
            status: VerdictStatus::Pass,
            completed,
            metrics: BTreeMap::from([(
                "rss".to_owned(),
                MetricFigures {
                    growth_per_turn: growth,
                    plateau: 1000.0,
                },
            )]),
            provenance: None,
        };
        BuildReports {
            dir: PathBuf::from(format!("b{i:02}")),
            runs: BTreeMap::from([(
                "chat".to_owned(),
                vec![
                    run(1, true, growth),
                    run(2, true, growth + 3.0),
                    run(3, true, growth + 7.0),
                    run(4, false, 1e9),
                ],
            )]),
            skipped: Vec::new(),
        }
    }

    #[test]
    fn a_step_in_growth_is_one_regression_at_its_first_build_and_plateaus_stay_put() {
        let builds: Vec<BuildReports> = (0..16)
            .map(|i| build(i, if i < 10 { 100.0 } else { 5000.0 }))
            .collect();
        let history = judge(&builds, &ChangeOptions::default(), &[]);
        assert_eq!(history.labels.len(), 16);
        assert_eq!(history.scenarios.len(), 1);
        let chat = &history.scenarios[0];
        assert_eq!(chat.metrics.len(), 1);
        // The unfinished run is left out of every build's figures.
        assert!(chat.metrics[0].growth.values.iter().all(|v| v.len() == 3));
        assert_eq!(chat.trends.len(), 2);
        assert_eq!(history.findings.len(), 1, "{:?}", history.findings);
        let finding = &history.findings[0];
        assert_eq!(finding.figure, Figure::Growth);
        assert_eq!(finding.change.build, 10);
        assert_eq!(history.regressions(), 1);
        assert_eq!(chat.trends[0].first_change, Some(10));
        assert_eq!(chat.trends[1].first_change, None);
    }

    #[test]
    fn only_the_metrics_asked_for_are_compared() {
        let builds: Vec<BuildReports> = (0..4).map(|i| build(i, 100.0)).collect();
        let history = judge(&builds, &ChangeOptions::default(), &["pss".to_owned()]);
        assert!(history.scenarios[0].metrics.is_empty());
        assert!(history.findings.is_empty());
    }
}
