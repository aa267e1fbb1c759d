//! What a run measured: every sample, the call ledger and how the run ended. This is the input
//! of the analyzer and of every report.

use serde::{Deserialize, Serialize};

use crate::engine::{BackendInfo, EngineError, Ledger};
use crate::runner::{EarlyStop, Metrics, Provenance, Samples};
use crate::scenario::Scenario;

/// The report.json layout (`format_version`) this build writes. report.json is mostly this
/// record, and both the report reader and the analyzer's trace reader check it, so it lives
/// here, below both. Bump it on any change that an older reader would misread (a removed or
/// renamed field, a changed meaning); adding a field is not such a change. 2: the ledger's
/// per-turn entries became per-kind runs (`ledger.runs`), and report.json is written compact.
/// 3: `record.provenance` (where the run came from), which `history` and `run --baseline` key
/// builds by; older reports read back without it. 4: `record.samples` may be a reference to the
/// run's sample store (samples.csv.zst: file name, row count, SHA-256) instead of the samples,
/// which a folder's report.json always is. 5: the store is `samples.parquet` (Parquet, about a
/// third of the CSV's size); a format 4 report's `samples.csv.zst` is still read.
pub const REPORT_FORMAT_VERSION: u32 = 5;

/// The oldest report.json layout this build still reads (1: a per-turn `ledger.turns`, folded
/// into runs on reading).
pub const OLDEST_REPORT_FORMAT_VERSION: u32 = 1;

/// What a report's `format_version` value says about whether this build reads it: the one
/// decision both report.json readers (the report's and the analyzer's) make, each in its own
/// words.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FormatVersion {
    /// [`OLDEST_REPORT_FORMAT_VERSION`] to [`REPORT_FORMAT_VERSION`].
    Readable,
    /// Written by a newer leakloop.
    Newer(u64),
    /// A whole number below the oldest version read.
    Older(u64),
    /// A number that is not a whole, non-negative one.
    NotAWholeNumber,
    /// Not a number at all (a string, a list, ...).
    NotANumber,
}

impl FormatVersion {
    /// Classifies a `format_version` value.
    pub fn of(value: &serde_json::Value) -> FormatVersion {
        let oldest = u64::from(OLDEST_REPORT_FORMAT_VERSION);
        let newest = u64::from(REPORT_FORMAT_VERSION);
        match value.as_u64() {
            Some(n) if (oldest..=newest).contains(&n) => FormatVersion::Readable,
            Some(n) if n > newest => FormatVersion::Newer(n),
            Some(n) => FormatVersion::Older(n),
            None if value.is_number() => FormatVersion::NotAWholeNumber,
            None => FormatVersion::NotANumber,
        }
    }
}

/// Where in the turn loop a sample was taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    /// After the first load: the baseline (turn 0).
    Load,
    /// After a reload (unload + load) that followed the given turn.
    Reload,
    /// After a session was opened.
    Open,
    /// After generation, before close: the turn's peak.
    Generate,
    /// After the session was closed: the post-close series.
    Close,
    /// After an idle step.
    Idle,
}

/// One memory sample.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Sample {
    /// The turn (0 = after load, before the first turn).
    pub turn: u32,
    /// Where in the turn it was taken.
    pub phase: Phase,
    /// How many times the engine had been loaded when it was taken (1 for the first load).
    pub epoch: u32,
    /// Milliseconds since the run started (simulated time on the simulator).
    pub t_ms: f64,
    /// Every metric, in bytes.
    pub metrics: Metrics,
    /// The key of the turn: the session id or shape it used (`sessions:`, or the `key` group of
    /// an attach marker); absent for (re)load samples and runs without keys.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
}

impl Sample {
    /// A sample with no metrics, for reserving and touching a run's sample buffer.
    pub(crate) fn placeholder() -> Self {
        Sample {
            turn: 0,
            phase: Phase::Load,
            epoch: 0,
            t_ms: 0.0,
            metrics: Metrics::new(),
            key: None,
        }
    }
}

/// How a run ended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum RunOutcome {
    /// Every turn ran.
    Completed,
    /// The engine failed; the run stopped.
    EngineFailed {
        /// The turn in which it failed (0 = while loading).
        turn: u32,
        /// The step that failed (`load`, `open`, `send`, `generate`, `close`, `unload`, `reload`).
        step: String,
        /// The engine's error.
        error: EngineError,
    },
    /// The run was stopped from outside (SIGINT, SIGTERM: a CI job's timeout) before it ended.
    /// Such a record holds the samples streamed so far; its ledger and engine errors stayed in
    /// the stopped runner and are empty.
    Interrupted {
        /// The signal, e.g. `SIGTERM`.
        signal: String,
        /// The turn that was running (0 = while loading, before the baseline sample).
        turn: u32,
    },
}

/// Everything a run measured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunRecord {
    /// The scenario that ran (after command-line overrides).
    pub scenario: Scenario,
    /// The backend that ran it.
    pub backend: BackendInfo,
    /// Every sample, in order. In report.json (format 4 and later) a reference to the sample store
    /// instead, which the report reader resolves (it reads an object here as no samples).
    #[serde(deserialize_with = "embedded_samples")]
    pub samples: Samples,
    /// Create/delete counts per kind, per turn and in total.
    pub ledger: Ledger,
    /// Turns that ran to completion.
    pub turns_completed: u32,
    /// Non-fatal errors the engine returned (e.g. a generate error that the runner survived by
    /// closing the session), as `(turn, step, error)`.
    pub engine_errors: Vec<(u32, String, EngineError)>,
    /// How the run ended.
    pub outcome: RunOutcome,
    /// Set when `stop: decided` ended the run before its last turn: at which turn and why.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub early_stop: Option<EarlyStop>,
    /// Where the run came from (leakloop, engine library, model, host, scenario file, build);
    /// absent in reports before format 3 and in records built in code.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provenance: Option<Provenance>,
}

/// `record.samples`: the samples embedded in report.json, or none for the object that references
/// a sample store (resolved by the report reader, which knows the report's folder).
fn embedded_samples<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Samples, D::Error> {
    struct Embedded;
    impl<'de> serde::de::Visitor<'de> for Embedded {
        type Value = Samples;
        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("a list of samples or a sample store reference")
        }
        fn visit_seq<A: serde::de::SeqAccess<'de>>(self, seq: A) -> Result<Self::Value, A::Error> {
            Samples::deserialize(serde::de::value::SeqAccessDeserializer::new(seq))
        }
        fn visit_map<A: serde::de::MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
            serde::de::IgnoredAny::deserialize(serde::de::value::MapAccessDeserializer::new(map))?;
            Ok(Samples::new())
        }
    }
    d.deserialize_any(Embedded)
}

impl RunRecord {
    /// The post-close series of one metric: the load baseline at turn 0 followed by one value per
    /// completed turn (the sample after close, or a reload sample that follows it).
    pub fn post_close_series(&self, metric: &str) -> Vec<(u32, u64)> {
        let Some(values) = self.samples.metric(metric) else {
            return Vec::new();
        };
        let samples = &self.samples;
        (0..samples.len())
            .filter(|row| matches!(samples.phases()[*row], Phase::Load | Phase::Close))
            .filter_map(|row| Some((samples.turn(row)?, values.get(row)?)))
            .collect()
    }

    /// Every metric name seen in any sample, sorted.
    pub fn metric_names(&self) -> Vec<String> {
        self.samples.metric_names().map(str::to_owned).collect()
    }
}

#[cfg(test)]
mod tests {
    use crate::runner::{FormatVersion, REPORT_FORMAT_VERSION};

    #[rstest::rstest]
    #[case::oldest(1.into(), FormatVersion::Readable)]
    #[case::current(REPORT_FORMAT_VERSION.into(), FormatVersion::Readable)]
    #[case::newer((REPORT_FORMAT_VERSION + 1).into(), FormatVersion::Newer(u64::from(REPORT_FORMAT_VERSION) + 1))]
    #[case::older(0.into(), FormatVersion::Older(0))]
    #[case::negative((-1).into(), FormatVersion::NotAWholeNumber)]
    #[case::fractional(1.5.into(), FormatVersion::NotAWholeNumber)]
    #[case::string("1".into(), FormatVersion::NotANumber)]
    fn a_format_version_is_classified_once_for_both_readers(
        #[case] value: serde_json::Value,
        #[case] expected: FormatVersion,
    ) {
        assert_eq!(FormatVersion::of(&value), expected);
    }
}
