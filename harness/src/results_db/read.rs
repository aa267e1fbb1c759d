//! History from a database: the recorded runs grouped into builds by build id, in the shape
//! history reads from folders ([`BuildReports`]), so that both give the same table.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;

use crate::analyze::VerdictStatus;
use crate::report::history::{BuildReports, MetricFigures, RunFigures};
use crate::runner::Provenance;

use super::error::DbError;
use super::store::Store;

/// What a run without a build id is filed under.
const NO_BUILD_ID: &str = "(no build id)";

/// Every build in the database (of `scenario` only, when given), oldest first: by the earliest
/// build date of its runs, then by the order recorded. A run's `path` is its recorded folder.
pub fn read_builds(
    store: &mut dyn Store,
    scenario: Option<&str>,
) -> Result<Vec<BuildReports>, DbError> {
    let (runs, metrics) = store.history_rows(scenario)?;
    let mut figures: HashMap<i64, BTreeMap<String, MetricFigures>> = HashMap::new();
    for m in metrics {
        figures.entry(m.run_id).or_default().insert(
            m.metric,
            MetricFigures {
                growth_per_turn: m.growth_per_turn,
                plateau: m.plateau_bytes.unwrap_or(0) as f64,
            },
        );
    }
    // Per build: (earliest date, first run id) to order it, and its runs.
    let mut builds: HashMap<String, (Option<String>, i64, BuildReports)> = HashMap::new();
    for run in runs {
        let key = run
            .build_id
            .clone()
            .unwrap_or_else(|| NO_BUILD_ID.to_owned());
        let entry = builds.entry(key.clone()).or_insert_with(|| {
            let reports = BuildReports {
                dir: PathBuf::from(&key),
                runs: BTreeMap::new(),
                skipped: Vec::new(),
            };
            (run.build_date.clone(), run.id, reports)
        });
        if let Some(date) = &run.build_date {
            if entry.0.as_ref().is_none_or(|d| date < d) {
                entry.0 = Some(date.clone());
            }
        }
        let status =
            serde_json::from_value::<VerdictStatus>(serde_json::Value::String(run.verdict.clone()))
                .unwrap_or(VerdictStatus::EngineFailed);
        let provenance: Option<Provenance> = run
            .provenance
            .as_deref()
            .and_then(|p| serde_json::from_str(p).ok());
        entry
            .2
            .runs
            .entry(run.scenario)
            .or_default()
            .push(RunFigures {
                path: PathBuf::from(run.run_dir.unwrap_or_default()),
                status,
                completed: run.completed,
                metrics: figures.remove(&run.id).unwrap_or_default(),
                provenance,
            });
    }
    let mut ordered: Vec<(Option<String>, i64, BuildReports)> = builds.into_values().collect();
    // A build without a date sorts after the dated ones.
    ordered.sort_by(|a, b| (a.0.is_none(), &a.0, a.1).cmp(&(b.0.is_none(), &b.0, b.1)));
    Ok(ordered.into_iter().map(|(_, _, b)| b).collect())
}
