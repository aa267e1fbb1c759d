//! What an unfinished run measured: when a run crashed or was killed before report.json was
//! written, its sample store still holds every sample taken; this renders them as text. A run
//! stopped by SIGINT or SIGTERM gets a real (partial) report instead: [`interrupted_record`].

use std::collections::BTreeMap;

use crate::analyze::units::quantity;
use crate::engine::{BackendInfo, Ledger};
use crate::report::table::{render_table, Cell};
use crate::report::StreamedSamples;
use crate::runner::{Phase, RunOutcome, RunRecord, Samples};
use crate::scenario::Scenario;

/// The record of a run stopped by `signal` (e.g. `SIGTERM`) after `turns_completed` turns: the
/// samples taken so far, and no ledger or engine errors (those stayed in the stopped run loop).
pub fn interrupted_record(
    scenario: Scenario,
    backend: BackendInfo,
    samples: Samples,
    turns_completed: u32,
    signal: &str,
) -> RunRecord {
    let turn = if samples.is_empty() {
        0
    } else {
        turns_completed
            .saturating_add(1)
            .min(scenario.total_turns())
    };
    RunRecord {
        scenario,
        backend,
        samples,
        ledger: Ledger::new(),
        turns_completed,
        engine_errors: Vec::new(),
        outcome: RunOutcome::Interrupted {
            signal: signal.to_owned(),
            turn,
        },
        // A signal is no decision: `early_stop` says only that `stop: decided` ended a run.
        early_stop: None,
        provenance: None,
    }
}

/// Per metric: the first value, the last post-close value and the highest value seen.
#[derive(Debug, Default)]
struct MetricSpan {
    first: Option<(u32, u64)>,
    last_close: Option<(u32, u64)>,
    peak: Option<(u32, u64)>,
}

/// Renders what a sample store (or an older samples.jsonl) holds (plain text, no styles).
pub fn render_partial(streamed: &StreamedSamples) -> String {
    let samples = &streamed.samples;
    let mut out = String::new();
    let Some(last) = samples.last() else {
        out.push_str("no sample was taken before the run stopped\n");
        return out;
    };
    out.push_str(&format!(
        "{} samples, up to turn {} ({} sample, load epoch {})\n",
        samples.len(),
        last.turn,
        format!("{:?}", last.phase).to_lowercase(),
        last.epoch
    ));
    if streamed.torn_last_line {
        out.push_str("the last line was cut off when the run stopped and was skipped\n");
    }
    let mut spans: BTreeMap<&str, MetricSpan> = BTreeMap::new();
    for sample in samples {
        for (name, &value) in &sample.metrics {
            let span = spans.entry(name).or_default();
            span.first.get_or_insert((sample.turn, value));
            if matches!(sample.phase, Phase::Load | Phase::Close) {
                span.last_close = Some((sample.turn, value));
            }
            if span.peak.is_none_or(|(_, peak)| value > peak) {
                span.peak = Some((sample.turn, value));
            }
        }
    }
    let mut rows = vec![["metric", "first", "last after close", "change", "peak"]
        .map(Cell::plain)
        .to_vec()];
    for (name, span) in &spans {
        // In the metric's own unit: a time metric's values are nanoseconds.
        let q = quantity(name);
        let at = |v: Option<(u32, u64)>| {
            v.map_or("-".to_owned(), |(turn, value)| {
                format!("{} (turn {turn})", q.format(value as f64))
            })
        };
        let change = match (span.first, span.last_close) {
            (Some((_, first)), Some((_, last))) => q.format_signed(last as f64 - first as f64),
            _ => "-".to_owned(),
        };
        rows.push(vec![
            Cell::plain(*name),
            Cell::plain(at(span.first)),
            Cell::plain(at(span.last_close)),
            Cell::plain(change),
            Cell::plain(at(span.peak)),
        ]);
    }
    out.push('\n');
    out.push_str(&render_table(&rows, ""));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::examples::crashed_run;

    #[test]
    fn a_crashed_runs_samples_show_how_far_it_got() {
        let (record, _) = crashed_run();
        let streamed = StreamedSamples {
            samples: record.samples,
            torn_last_line: true,
        };
        insta::assert_snapshot!(render_partial(&streamed), @r"
        7 samples, up to turn 3 (close sample, load epoch 1)
        the last line was cut off when the run stopped and was skipped

        metric       first               last after close    change      peak
        gpu          60.0 MiB (turn 0)   1.7 GiB (turn 3)    +1.7 GiB    1.9 GiB (turn 1)
        native_heap  120.0 MiB (turn 0)  450.0 MiB (turn 3)  +330.0 MiB  1.0 GiB (turn 3)
        ");
    }

    /// Regression: a time metric's values were shown as sizes.
    #[test]
    fn a_time_metric_is_shown_as_times() {
        let (record, _) = crashed_run();
        let mut samples = record.samples;
        samples.modify_each(|i, sample| {
            sample
                .metrics
                .insert("turn_time", 1_000_000 * (i as u64 + 1));
        });
        let text = render_partial(&StreamedSamples {
            samples,
            torn_last_line: false,
        });
        let row = text.lines().find(|l| l.starts_with("turn_time")).unwrap();
        assert!(row.contains("1.00 ms (turn 0)"), "{row}");
        assert!(row.contains(" ms"), "{row}");
        assert!(!row.contains("B"), "{row}");
    }

    #[test]
    fn no_samples_says_so() {
        let streamed = StreamedSamples {
            samples: Samples::new(),
            torn_last_line: false,
        };
        assert_eq!(
            render_partial(&streamed),
            "no sample was taken before the run stopped\n"
        );
    }
}
