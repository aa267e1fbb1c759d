//! The one redactor for snapshots: it replaces what differs between machines and runs (sample
//! times, durations, absolute paths, versions, and every value measured by a real process probe)
//! with placeholders, so that a snapshot changes only when leakloop's behaviour changes.
//!
//! It works at two levels: [`Redactor::redact_run`] rewrites the strings of a record and verdict
//! before rendering, and [`Redactor::redact_text`] / [`Redactor::redact_value`] clean rendered
//! text and JSON afterwards (sizes on lines about a machine-dependent metric, stray paths).

use std::collections::BTreeSet;
use std::sync::LazyLock;

use regex::Regex;
use serde_json::Value;

use crate::analyze::{Reason, Verdict};
use crate::engine::EngineErrorKind;
use crate::report::json::LEAKLOOP_VERSION;
use crate::report::render_reason;
use crate::runner::{Host, Provenance, RunOutcome, RunRecord};

/// The placeholder for a machine-dependent measurement.
pub const PROBE: &str = "[probe]";
const VERSION: &str = "[version]";
const DURATION: &str = "[duration]";
const BUILD: &str = "[build]";
const HOST: &str = "[host]";
const SHA256: &str = "[sha256]";

static ABSOLUTE_PATH: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r#"(^|[\s"'(=`])/(?:[A-Za-z0-9._+\-]+/)+([A-Za-z0-9._+\-]+)"#).expect("valid regex")
});
static DURATION_TEXT: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"\b\d+(?:\.\d+)? ?(?:ns|µs|us|ms)\b").expect("valid regex"));
static SIZE_TEXT: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"[+-]?\d+(?:\.\d+)? (?:B|KiB|MiB|GiB|TiB)(?:/turn)?").expect("valid regex")
});

/// Redacts machine- and run-dependent details of one run.
#[derive(Debug, Clone)]
pub struct Redactor {
    versions: Vec<String>,
    probe_metrics: BTreeSet<String>,
    probe_line: Option<Regex>,
}

impl Redactor {
    /// A redactor for `record`: the metric registry says which metrics depend on the machine (on
    /// the simulator only what the operating system measures; on a real engine every metric, as
    /// is any metric the registry does not know).
    pub fn for_record(record: &RunRecord) -> Self {
        let simulated = record.backend.backend == "sim";
        let probe_metrics: BTreeSet<String> = record
            .metric_names()
            .into_iter()
            .chain(record.scenario.watched_metrics())
            .filter(|m| {
                leakloop_metrics::metric(m)
                    .map_or(!simulated, |m| m.is_machine_dependent(simulated))
            })
            .collect();
        let probe_line = (!probe_metrics.is_empty()).then(|| {
            let names: Vec<String> = probe_metrics.iter().map(|m| regex::escape(m)).collect();
            Regex::new(&format!(
                r"(?:^|[^A-Za-z0-9_])(?:{})(?:[^A-Za-z0-9_]|$)",
                names.join("|")
            ))
            .expect("escaped names form a valid regex")
        });
        let mut versions = vec![record.backend.version.clone(), LEAKLOOP_VERSION.to_owned()];
        versions.retain(|v| !v.is_empty());
        Self {
            versions,
            probe_metrics,
            probe_line,
        }
    }

    /// Whether values of `metric` depend on the machine.
    pub fn is_machine_dependent(&self, metric: &str) -> bool {
        self.probe_metrics.contains(metric)
    }

    /// Redacts free text: versions, absolute paths and sub-second durations everywhere, and every
    /// size on a line that names a machine-dependent metric.
    pub fn redact_text(&self, text: &str) -> String {
        let mut out = String::with_capacity(text.len());
        for line in text.split_inclusive('\n') {
            let mut line = self.redact_string(line);
            if self
                .probe_line
                .as_ref()
                .is_some_and(|re| re.is_match(&line))
            {
                line = SIZE_TEXT.replace_all(&line, PROBE).into_owned();
            }
            out.push_str(&line);
        }
        out
    }

    fn redact_string(&self, text: &str) -> String {
        let mut text = text.to_owned();
        for version in &self.versions {
            text = text.replace(version.as_str(), VERSION);
        }
        let text = ABSOLUTE_PATH.replace_all(&text, "${1}[path]/${2}");
        DURATION_TEXT.replace_all(&text, DURATION).into_owned()
    }

    /// A copy of the run with versions, paths, sample times, durations and the words about
    /// machine-dependent metrics replaced; sizes of those metrics stay (they are numbers) and are
    /// caught by [`Redactor::redact_text`] or [`Redactor::redact_value`] after rendering.
    pub fn redact_run(&self, record: &RunRecord, verdict: &Verdict) -> (RunRecord, Verdict) {
        let mut record = record.clone();
        let mut verdict = verdict.clone();
        record.backend.version = VERSION.to_owned();
        for value in record.backend.details.values_mut() {
            *value = self.redact_string(value);
        }
        let scenario = &mut record.scenario;
        for path in [
            &mut scenario.source,
            &mut scenario.engine.model,
            &mut scenario.engine.lib,
        ]
        .into_iter()
        .flatten()
        {
            *path = self.redact_string(&path.to_string_lossy()).into();
        }
        record.samples.zero_times();
        if let Some(p) = &mut record.provenance {
            self.redact_provenance(p);
        }
        for (_, _, error) in &mut record.engine_errors {
            error.message = self.redact_string(&error.message);
        }
        if let RunOutcome::EngineFailed { error, .. } = &mut record.outcome {
            error.message = self.redact_string(&error.message);
            if let EngineErrorKind::Hung { waited_ms } = &mut error.kind {
                *waited_ms = 0;
            }
        }
        for (name, analysis) in &mut verdict.metrics {
            analysis.reason = Reason::Text(if self.is_machine_dependent(name) {
                PROBE.to_owned()
            } else {
                self.redact_string(&render_reason(name, &analysis.reason))
            });
        }
        for expectation in &mut verdict.expectations {
            let metric = expectation.name.split('.').next().unwrap_or_default();
            if self.is_machine_dependent(metric) {
                expectation.measured = PROBE.to_owned();
            } else {
                expectation.measured = self.redact_string(&expectation.measured);
            }
            expectation.expected = self.redact_string(&expectation.expected);
        }
        (record, verdict)
    }

    /// Replaces everything in a provenance that differs between machines, runs and builds (the
    /// build stamp, CI run, host, digests, file sizes) with placeholders; its shape stays.
    fn redact_provenance(&self, p: &mut Provenance) {
        p.leakloop_version = VERSION.to_owned();
        let b = &mut p.build;
        // Always a placeholder: a CI system's environment gives an id where a laptop gives none.
        b.id = Some(BUILD.to_owned());
        b.date = b.date.as_ref().map(|_| BUILD.to_owned());
        b.id_source = BUILD.to_owned();
        b.date_source = BUILD.to_owned();
        p.ci = None;
        p.host = Host {
            os: HOST.to_owned(),
            kernel: HOST.to_owned(),
            arch: HOST.to_owned(),
            cpu: None,
            model: None,
            hostname: None,
        };
        p.engine.version = VERSION.to_owned();
        let digests = [&mut p.scenario, &mut p.engine.library, &mut p.model];
        for d in digests.into_iter().flatten() {
            d.path = self.redact_string(&d.path);
            d.sha256 = d.sha256.as_ref().map(|_| SHA256.to_owned());
            d.bytes = None;
            d.error = d.error.as_ref().map(|e| self.redact_string(e));
        }
    }

    /// Redacts a JSON value in place: `t_ms` and `*_ms` fields, `version` fields, strings with
    /// paths, and every number inside an entry named after a machine-dependent metric.
    pub fn redact_value(&self, value: &mut Value) {
        match value {
            Value::Object(map) => {
                for (key, child) in map.iter_mut() {
                    if key == "t_ms" || key.ends_with("_ms") {
                        *child = Value::String(DURATION.to_owned());
                    } else if key == "version" || key == "leakloop_version" {
                        *child = Value::String(VERSION.to_owned());
                    } else if self.is_machine_dependent(key) {
                        replace_numbers(child);
                        self.redact_value(child);
                    } else {
                        self.redact_value(child);
                    }
                }
            }
            Value::Array(items) => items.iter_mut().for_each(|v| self.redact_value(v)),
            Value::String(s) => *s = self.redact_string(s),
            _ => {}
        }
    }
}

fn replace_numbers(value: &mut Value) {
    match value {
        Value::Number(_) => *value = Value::String(PROBE.to_owned()),
        Value::Array(items) => items.iter_mut().for_each(replace_numbers),
        Value::Object(map) => map.values_mut().for_each(replace_numbers),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::examples::{clean_run, leak_run};

    #[test]
    fn process_probes_are_machine_dependent_but_simulated_metrics_are_not() {
        let (record, _) = clean_run();
        let redactor = Redactor::for_record(&record);
        assert!(redactor.is_machine_dependent("rss"));
        assert!(!redactor.is_machine_dependent("native_heap"));
    }

    #[test]
    fn on_a_real_engine_every_metric_is_machine_dependent() {
        let (mut record, _) = leak_run();
        record.backend.backend = "litert-lm".to_owned();
        let redactor = Redactor::for_record(&record);
        assert!(redactor.is_machine_dependent("native_heap"));
        assert!(redactor.is_machine_dependent("gpu"));
    }

    #[test]
    fn text_loses_paths_versions_durations_and_probe_sizes_only() {
        let (record, _) = clean_run();
        let redactor = Redactor::for_record(&record);
        let text = format!(
            "loaded /home/ci/models/tiny.litertlm with leakloop {LEAKLOOP_VERSION} in 12.5 ms\n\
             rss          912.0 MiB  +12.0 KiB/turn\n\
             native_heap  300.0 MiB  +9.1 KiB/turn\n\
             growth 3 MiB/turn is not a path\n"
        );
        insta::assert_snapshot!(redactor.redact_text(&text), @r"
        loaded [path]/tiny.litertlm with leakloop [version] in [duration]
        rss          [probe]  [probe]
        native_heap  300.0 MiB  +9.1 KiB/turn
        growth 3 MiB/turn is not a path
        ");
    }

    #[test]
    fn a_metric_whose_name_contains_a_probe_name_is_not_redacted() {
        let (record, _) = clean_run();
        let redactor = Redactor::for_record(&record);
        let line = "anon_rss_total  3.0 MiB\n";
        assert_eq!(redactor.redact_text(line), line);
    }

    #[test]
    fn json_numbers_of_probe_metrics_and_times_become_placeholders() {
        let (record, _) = clean_run();
        let redactor = Redactor::for_record(&record);
        let mut value = serde_json::json!({
            "t_ms": 1500.0,
            "metrics": {"rss": 956301312u64, "native_heap": 314572800u64},
            "error": {"kind": "hung", "waited_ms": 60000},
            "source": "/home/ci/leakloop/fixtures/scenarios/a.yaml",
        });
        redactor.redact_value(&mut value);
        assert_eq!(
            value,
            serde_json::json!({
                "t_ms": "[duration]",
                "metrics": {"rss": "[probe]", "native_heap": 314572800u64},
                "error": {"kind": "hung", "waited_ms": "[duration]"},
                "source": "[path]/a.yaml",
            })
        );
    }

    #[test]
    fn a_redacted_run_keeps_simulated_facts_and_drops_machine_ones() {
        let (record, verdict) = clean_run();
        let redactor = Redactor::for_record(&record);
        let (r, v) = redactor.redact_run(&record, &verdict);
        assert_eq!(r.backend.version, "[version]");
        assert_eq!(
            r.scenario.source.as_deref(),
            Some(std::path::Path::new("[path]/cpu-flat-chat.yaml"))
        );
        assert!(r.samples.iter().all(|s| s.t_ms == 0.0));
        assert_eq!(v.metrics["rss"].reason, Reason::Text(PROBE.to_owned()));
        assert_eq!(
            v.metrics["native_heap"].reason,
            verdict.metrics["native_heap"].reason
        );
        assert_eq!(
            r.samples.get(1).unwrap().metrics,
            record.samples.get(1).unwrap().metrics,
            "numbers stay numbers"
        );
    }
}
