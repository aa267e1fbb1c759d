//! `leakloop bench analysis`: how long the analyzer takes on long series, by number of samples,
//! with and without reload epochs and with sparse turn numbers up to 2^53. The figures show the
//! cost growing linearly with the samples; tests assert only the results, never the time.

use std::time::Instant;

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, Normal};

use crate::analyze::{classify, ClassifyOptions, Epoch, MetricAnalysis, MetricSeries};

use super::synthetic::{BASELINE, SIGMA};

/// Series lengths the benchmark covers, in samples.
pub const SIZES: [u64; 4] = [1_000, 10_000, 100_000, 1_000_000];
/// The reload period of the reloading series (as in issue-15's measurement).
pub const RELOAD_PERIOD: u64 = 1999;

/// The shapes of series timed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layout {
    /// One sample per turn, no reloads.
    Contiguous,
    /// One sample per turn, a reload every [`RELOAD_PERIOD`] turns.
    Reloading,
    /// Samples spread evenly up to turn 2^53.
    Sparse,
}

/// One timed analysis.
#[derive(Debug, Clone, PartialEq)]
pub struct AnalysisCostRow {
    /// How the samples are laid out.
    pub layout: Layout,
    /// Samples in the series.
    pub samples: u64,
    /// Wall time of `classify`, in seconds.
    pub seconds: f64,
    /// What it said (a leak of 0.01 sigma per sample is in every series).
    pub classification: String,
}

/// Times `classify` on every layout and size up to `max_samples`.
pub fn run_analysis_cost(max_samples: u64) -> Vec<AnalysisCostRow> {
    let mut rows = Vec::new();
    for layout in [Layout::Contiguous, Layout::Reloading, Layout::Sparse] {
        for samples in SIZES.into_iter().filter(|n| *n <= max_samples) {
            let (series, options) = series(layout, samples);
            let start = Instant::now();
            let analysis: MetricAnalysis = classify(&series, &options);
            rows.push(AnalysisCostRow {
                layout,
                samples,
                seconds: start.elapsed().as_secs_f64(),
                classification: analysis.classification.as_str().to_owned(),
            });
        }
    }
    rows
}

/// A series of `samples` samples rising 0.01 sigma per sample in Gaussian noise.
fn series(layout: Layout, samples: u64) -> (MetricSeries, ClassifyOptions) {
    let mut rng = ChaCha8Rng::seed_from_u64(samples);
    let noise = Normal::new(0.0, SIGMA).expect("positive sigma");
    let spacing = match layout {
        Layout::Sparse => (1u64 << 53) / samples,
        _ => 1,
    };
    let mut value = |k: u64| (BASELINE + 0.01 * SIGMA * k as f64 + noise.sample(&mut rng)) as u64;
    match layout {
        Layout::Reloading => {
            let epochs = (0..samples)
                .step_by(RELOAD_PERIOD as usize)
                .map(|start| {
                    let end = (start + RELOAD_PERIOD).min(samples);
                    Epoch {
                        start_turn: start,
                        points: (start..=end).map(|t| (t, value(t - start))).collect(),
                    }
                })
                .collect();
            let series = MetricSeries {
                epochs,
                baseline_samples: Vec::new(),
            };
            let options = ClassifyOptions {
                reload_every: RELOAD_PERIOD as u32,
                ..ClassifyOptions::default()
            };
            (series, options)
        }
        _ => {
            let points: Vec<(u64, u64)> = (0..=samples).map(|k| (k * spacing, value(k))).collect();
            (
                MetricSeries::from_points(&points),
                ClassifyOptions::default(),
            )
        }
    }
}

/// The result as a Markdown table.
pub fn render_analysis_cost(rows: &[AnalysisCostRow]) -> String {
    let mut out = String::from(
        "Analysis time by number of samples (a leak of 0.01 sigma per sample in Gaussian noise; \
         reloads every 1999 turns; sparse turns spread up to 2^53).\n\n\
         | layout | samples | seconds | per 1000 samples (ms) | classification |\n\
         |---|---:|---:|---:|---|\n",
    );
    for row in rows {
        let layout = match row.layout {
            Layout::Contiguous => "every turn",
            Layout::Reloading => "reload every 1999",
            Layout::Sparse => "sparse to 2^53",
        };
        out.push_str(&format!(
            "| {layout} | {} | {:.3} | {:.2} | {} |\n",
            row.samples,
            row.seconds,
            row.seconds * 1e6 / row.samples as f64,
            row.classification
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_layout_is_timed_and_the_leak_found() {
        let rows = run_analysis_cost(10_000);
        assert_eq!(rows.len(), 3 * 2);
        for row in &rows {
            assert_eq!(row.classification, "growth", "{row:?}");
        }
        let table = render_analysis_cost(&rows);
        assert!(table.contains("| reload every 1999 | 10000 |"), "{table}");
    }
}
