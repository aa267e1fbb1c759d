//! `leakloop bench detection --sequential`: the detection benchmark's series, judged as
//! `stop: decided` judges a run: looked at on the sequential schedule, each look at its share of
//! the error budgets, stopped at the first look at which the verdict is decided.
//!
//! Per row: how many turns a verdict took (mean and 95th percentile, counting series never
//! decided at their maximum), the share called `growth` (false positives on clean, plateau,
//! spiky and reload-clean rows; detections on leak and ratchet rows) and the share still
//! `inconclusive` at the maximum; next to it, the `growth` share of the same series judged once
//! at the maximum with the default levels, which is what a fixed-length run reports.

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use crate::analyze::{
    classify, look_levels, look_schedule, undecided, Classification, ClassifyOptions, MetricSeries,
};
use crate::scenario::Tolerance;

use super::detection::{row_kinds, row_label, TOLERANCE_SIGMAS};
use super::synthetic::{SeriesKind, RELOAD_EVERY, SIGMA};

/// The most turns a sequential run of the benchmark may take.
pub const MAX_TURNS: [u32; 3] = [20, 40, 100];

/// Benchmark settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SequentialConfig {
    /// Series per row.
    pub series_per_row: u32,
    /// Seed of every random choice.
    pub seed: u64,
}

/// One line of the sequential table.
#[derive(Debug, Clone, PartialEq)]
pub struct SequentialRow {
    /// The most turns the run may take.
    pub max_turns: u32,
    /// What the series contained.
    pub kind: SeriesKind,
    /// Series generated.
    pub series: u32,
    /// Mean turns until the run stopped (the maximum for series never decided).
    pub mean_turns: f64,
    /// 95th percentile of the same.
    pub p95_turns: u32,
    /// Share called `growth` in sequential mode.
    pub growth: f64,
    /// Share still `inconclusive` at the maximum.
    pub inconclusive: f64,
    /// Share called `growth` by one analysis at the maximum (a fixed-length run).
    pub fixed_growth: f64,
}

/// The series' turns up to `last`, as a run stopped after turn `last` would have recorded them
/// (no reload sample after its last turn).
fn prefix(series: &MetricSeries, last: u32) -> MetricSeries {
    let mut cut = series.clone();
    let first_start = cut.epochs.first().map(|e| e.start_turn);
    cut.epochs
        .retain(|e| Some(e.start_turn) == first_start || e.start_turn < last);
    for epoch in &mut cut.epochs {
        epoch.points.retain(|p| p.0 <= last);
    }
    cut
}

/// Runs one series sequentially: `(turns it ran, its final word)`.
fn judge(
    series: &MetricSeries,
    max_turns: u32,
    options: &ClassifyOptions,
) -> (u32, Classification) {
    let mut word = Classification::Inconclusive;
    for look in look_schedule(max_turns) {
        let levels = look_levels(look, max_turns);
        let options = ClassifyOptions {
            confidence: levels.confidence,
            trend_alpha: levels.trend_alpha,
            ..options.clone()
        };
        let analysis = classify(&prefix(series, look), &options);
        word = analysis.classification;
        let tolerance = options.tolerance_bytes(analysis.baseline) as f64;
        if undecided(&analysis, None, tolerance, max_turns - look).is_none() {
            return (look, word);
        }
    }
    (max_turns, word)
}

/// Every row: for each maximum, the detection benchmark's kinds of series.
pub fn run_sequential(config: &SequentialConfig) -> Vec<SequentialRow> {
    let kinds = row_kinds();
    let mut rows = Vec::new();
    for max_turns in MAX_TURNS {
        for (index, kind) in kinds.iter().enumerate() {
            let row_seed = config.seed ^ (u64::from(max_turns) << 32) ^ (index as u64) << 48;
            let mut rng = ChaCha8Rng::seed_from_u64(row_seed);
            let options = ClassifyOptions {
                tolerance: Some(Tolerance::Bytes((TOLERANCE_SIGMAS * SIGMA) as u64)),
                reload_every: kind.reload_every(),
                ..ClassifyOptions::default()
            };
            let mut turns = Vec::with_capacity(config.series_per_row as usize);
            let mut counts = [0u32; 3];
            for _ in 0..config.series_per_row {
                let series = kind.generate(max_turns, &mut rng).series;
                let (ran, word) = judge(&series, max_turns, &options);
                turns.push(ran);
                counts[0] += u32::from(word == Classification::Growth);
                counts[1] += u32::from(word == Classification::Inconclusive);
                let fixed = classify(&series, &options).classification;
                counts[2] += u32::from(fixed == Classification::Growth);
            }
            let n = f64::from(config.series_per_row.max(1));
            turns.sort_unstable();
            let p95 = turns
                .get(((turns.len() as f64 * 0.95).ceil() as usize).saturating_sub(1))
                .copied()
                .unwrap_or(0);
            rows.push(SequentialRow {
                max_turns,
                kind: *kind,
                series: config.series_per_row,
                mean_turns: turns.iter().map(|&t| f64::from(t)).sum::<f64>() / n,
                p95_turns: p95,
                growth: f64::from(counts[0]) / n,
                inconclusive: f64::from(counts[1]) / n,
                fixed_growth: f64::from(counts[2]) / n,
            });
        }
    }
    rows
}

/// The result as a Markdown table.
pub fn render_sequential(rows: &[SequentialRow], config: &SequentialConfig) -> String {
    let mut out = format!(
        "Sequential detection (`stop: decided`): {} series per row, seed {}, noise sigma = 1 MiB, \
         tolerance {} sigma.\nEach series is looked at after {} turns, then every 25% more \
         (at least 2), and at its maximum; each look spends its share of the error budgets \
         (Pocock-type); the run stops at the first look with a decided verdict.\n\
         `growth` is the false-positive rate on clean, plateau, spiky and reload-clean rows and \
         the detection rate on leak and ratchet rows; `fixed` is the same series judged once at \
         the maximum. Reload rows reload every {RELOAD_EVERY} turns.\n\n",
        config.series_per_row,
        config.seed,
        TOLERANCE_SIGMAS,
        crate::analyze::FIRST_LOOK,
    );
    out.push_str(
        "| max turns | series | leak (sigma/turn) | mean turns | p95 turns | growth | inconclusive at max | growth, fixed at max |\n\
         |---:|---|---:|---:|---:|---:|---:|---:|\n",
    );
    for row in rows {
        let (name, leak) = row_label(row.kind);
        out.push_str(&format!(
            "| {} | {name} | {leak} | {:.1} | {} | {:.1}% | {:.1}% | {:.1}% |\n",
            row.max_turns,
            row.mean_turns,
            row.p95_turns,
            row.growth * 100.0,
            row.inconclusive * 100.0,
            row.fixed_growth * 100.0,
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(rows: &[SequentialRow], max: u32, kind: SeriesKind) -> &SequentialRow {
        rows.iter()
            .find(|r| r.max_turns == max && r.kind == kind)
            .expect("row present")
    }

    #[test]
    fn big_leaks_stop_early_and_clean_series_are_not_flagged() {
        let rows = run_sequential(&SequentialConfig {
            series_per_row: 25,
            seed: 5,
        });
        assert_eq!(rows.len(), MAX_TURNS.len() * row_kinds().len());
        let big = row(&rows, 100, SeriesKind::Leak(4.0));
        assert!(big.growth >= 0.95, "{big:?}");
        assert!(big.mean_turns < 20.0, "{big:?}");
        let clean = row(&rows, 100, SeriesKind::Clean);
        assert!(clean.growth <= 0.05, "{clean:?}");
        assert!(clean.mean_turns < 100.0, "{clean:?}");
        assert!(rows.iter().all(|r| r.p95_turns <= r.max_turns));
    }

    #[test]
    fn a_prefix_is_what_a_stopped_run_recorded() {
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        // Epochs of 5 turns: the load sample and turns 1-5, then the reload after turn 5.
        let series = SeriesKind::ReloadClean.generate(10, &mut rng).series;
        assert_eq!(series.epochs.len(), 2);
        let cut = prefix(&series, 5);
        assert_eq!(cut.epochs.len(), 1, "no reload sample after the last turn");
        assert_eq!(cut.len(), 6);
        let cut = prefix(&series, 7);
        assert_eq!(cut.epochs.len(), 2);
        assert_eq!(cut.len(), 6 + 3);
    }

    #[test]
    fn the_table_has_a_line_per_row() {
        let config = SequentialConfig {
            series_per_row: 2,
            seed: 1,
        };
        let rows = run_sequential(&config);
        let table = render_sequential(&rows, &config);
        assert_eq!(
            table.lines().filter(|l| l.starts_with("| ")).count(),
            rows.len() + 1
        );
        assert!(table.contains("| 100 | ratchet | 8/reload |"));
    }
}
