//! What one recorded run holds, built from the run's own record and verdict (the types
//! report.json is read into, never its text), so that a run recorded as it ends and one
//! recorded from its folder afterwards (`merge`) give the same row.

use std::path::Path;
use std::time::SystemTime;

use crate::analyze::{Classification, ExpectationResult, MetricAnalysis, Verdict};
use crate::runner::{RunOutcome, RunRecord};

/// Which command recorded the run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunSource {
    /// `leakloop run` with one scenario.
    Run,
    /// One scenario of a suite (`leakloop run` with several).
    Suite,
    /// One scenario of `leakloop merge`'s merged suite.
    Merge,
}

impl RunSource {
    /// The word stored in `runs.source`.
    pub fn as_str(self) -> &'static str {
        match self {
            RunSource::Run => "run",
            RunSource::Suite => "suite",
            RunSource::Merge => "merge",
        }
    }
}

/// One run's row and its metrics' and expectations' rows.
#[derive(Debug, Clone, PartialEq)]
pub struct RunRow {
    /// `runs` (see docs/results-db.md for each column).
    pub recorded_at: String,
    /// Which command recorded it.
    pub source: RunSource,
    /// The scenario's name.
    pub scenario: String,
    /// The scenario file and its SHA-256, when the run came from a file.
    pub scenario_file: Option<String>,
    /// See `scenario_file`.
    pub scenario_sha256: Option<String>,
    /// The build under test.
    pub build_id: Option<String>,
    /// Its date.
    pub build_date: Option<String>,
    /// The commit under test, as the CI system names it.
    pub ci_commit: Option<String>,
    /// The leakloop that ran it.
    pub leakloop_version: String,
    /// The backend.
    pub backend: String,
    /// The engine's version.
    pub engine_version: Option<String>,
    /// The engine library's SHA-256.
    pub engine_library_sha256: Option<String>,
    /// The model file's SHA-256.
    pub model_sha256: Option<String>,
    /// The host name.
    pub host: Option<String>,
    /// The run's folder (none for a run without `--out`).
    pub run_dir: Option<String>,
    /// When it started and ended (RFC 3339, UTC), when the recording command saw it run.
    pub started_at: Option<String>,
    /// See `started_at`.
    pub ended_at: Option<String>,
    /// Turns that ran to completion.
    pub turns_completed: u32,
    /// Whether every turn ran.
    pub completed: bool,
    /// The overall verdict (`pass`, `fail`, ...).
    pub verdict: String,
    /// The exit code the run gives alone.
    pub exit_code: u8,
    /// The whole provenance, as JSON.
    pub provenance: Option<String>,
    /// Per metric.
    pub metrics: Vec<MetricRow>,
    /// Per expectation, in scenario order.
    pub expectations: Vec<ExpectationRow>,
}

/// One metric of a run.
#[derive(Debug, Clone, PartialEq)]
pub struct MetricRow {
    /// Its name.
    pub metric: String,
    /// `clean`, `plateau`, `growth` or `inconclusive`.
    pub class: String,
    /// The slope after warm-up, bytes per turn, and its confidence interval.
    pub growth_per_turn: f64,
    /// See `growth_per_turn`.
    pub growth_low: Option<f64>,
    /// See `growth_per_turn`.
    pub growth_high: Option<f64>,
    /// The plateau's size, bytes, when one settled.
    pub plateau_bytes: Option<i64>,
    /// `fail` (growth that matters), `inconclusive` or `pass`.
    pub verdict: String,
}

/// One expectation of a run.
#[derive(Debug, Clone, PartialEq)]
pub struct ExpectationRow {
    /// Its name.
    pub name: String,
    /// `held`, `failed` or `inconclusive`.
    pub outcome: String,
    /// What was expected.
    pub expected: String,
    /// What was measured.
    pub measured: String,
    /// The turn where it failed.
    pub turn: Option<u64>,
}

/// When a run started or ended, as stored: RFC 3339, UTC, to the second.
pub fn timestamp(at: SystemTime) -> String {
    humantime::format_rfc3339_seconds(at).to_string()
}

impl RunRow {
    /// The row of a run that ended with `record` and `verdict`, written to `run_dir`.
    pub fn of(
        source: RunSource,
        record: &RunRecord,
        verdict: &Verdict,
        run_dir: Option<&Path>,
        exit_code: u8,
        times: Option<(SystemTime, SystemTime)>,
    ) -> RunRow {
        let provenance = record.provenance.as_ref();
        let sha = |d: Option<&crate::runner::FileDigest>| d.and_then(|d| d.sha256.clone());
        RunRow {
            recorded_at: timestamp(SystemTime::now()),
            source,
            scenario: record.scenario.name.clone(),
            scenario_file: provenance.and_then(|p| Some(p.scenario.as_ref()?.path.clone())),
            scenario_sha256: sha(provenance.and_then(|p| p.scenario.as_ref())),
            build_id: provenance.and_then(|p| p.build.id.clone()),
            build_date: provenance.and_then(|p| p.build.date.clone()),
            ci_commit: provenance.and_then(|p| p.ci.as_ref()?.commit.clone()),
            leakloop_version: provenance.map_or_else(
                || env!("CARGO_PKG_VERSION").to_owned(),
                |p| p.leakloop_version.clone(),
            ),
            backend: provenance.map_or_else(
                || record.backend.backend.clone(),
                |p| p.engine.backend.clone(),
            ),
            engine_version: Some(provenance.map_or_else(
                || record.backend.version.clone(),
                |p| p.engine.version.clone(),
            )),
            engine_library_sha256: sha(provenance.and_then(|p| p.engine.library.as_ref())),
            model_sha256: sha(provenance.and_then(|p| p.model.as_ref())),
            host: provenance.and_then(|p| p.host.hostname.clone()),
            run_dir: run_dir.map(|d| d.display().to_string()),
            started_at: times.map(|(start, _)| timestamp(start)),
            ended_at: times.map(|(_, end)| timestamp(end)),
            turns_completed: record.turns_completed,
            completed: matches!(record.outcome, RunOutcome::Completed),
            verdict: verdict.status.as_str().to_owned(),
            exit_code,
            provenance: provenance.and_then(|p| serde_json::to_string(p).ok()),
            metrics: verdict
                .metrics
                .iter()
                .map(|(name, m)| MetricRow::of(name, m))
                .collect(),
            expectations: verdict
                .expectations
                .iter()
                .map(ExpectationRow::of)
                .collect(),
        }
    }
}

impl MetricRow {
    fn of(name: &str, m: &MetricAnalysis) -> MetricRow {
        MetricRow {
            metric: name.to_owned(),
            class: m.classification.as_str().to_owned(),
            growth_per_turn: m.slope_bytes_per_turn,
            growth_low: m.slope_interval.map(|(low, _)| low),
            growth_high: m.slope_interval.map(|(_, high)| high),
            plateau_bytes: m.plateau.map(|p| p.size_bytes),
            verdict: if m.fails() {
                "fail"
            } else if m.classification == Classification::Inconclusive {
                "inconclusive"
            } else {
                "pass"
            }
            .to_owned(),
        }
    }
}

impl ExpectationRow {
    fn of(e: &ExpectationResult) -> ExpectationRow {
        ExpectationRow {
            name: e.name.clone(),
            outcome: if e.passed {
                "held"
            } else if e.inconclusive {
                "inconclusive"
            } else {
                "failed"
            }
            .to_owned(),
            expected: e.expected.clone(),
            measured: e.measured.clone(),
            turn: e.turn,
        }
    }
}
