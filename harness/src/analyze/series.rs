//! A metric's post-close series, split into load epochs: what the classifier reads.
//!
//! Turn 0 is the baseline sample after the first load. When the scenario reloads the engine every
//! K turns, the sample after each reload starts a new epoch; memory may fall back at a reload, so
//! trends are judged within epochs and pooled.

use crate::runner::{Phase, RunRecord};

/// The samples of one load epoch, in turn order.
#[derive(Debug, Clone, PartialEq)]
pub struct Epoch {
    /// The turn after which the engine was (re)loaded (0 for the first load).
    pub start_turn: u32,
    /// `(turn, bytes)` pairs: the (re)load sample at `start_turn` when there is one, then one
    /// post-close sample per turn.
    pub points: Vec<(u32, u64)>,
}

/// One metric's post-close series.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct MetricSeries {
    /// The load epochs in order; a run without reloads has one.
    pub epochs: Vec<Epoch>,
}

impl MetricSeries {
    /// A series without reloads from `(turn, bytes)` pairs in turn order; the first pair is the
    /// baseline (normally turn 0).
    pub fn from_points(points: &[(u32, u64)]) -> Self {
        if points.is_empty() {
            return Self::default();
        }
        Self {
            epochs: vec![Epoch {
                start_turn: points[0].0,
                points: points.to_vec(),
            }],
        }
    }

    /// The series of `metric` in a run: the load sample, every post-close sample and every reload
    /// sample, split by the epoch each sample was taken in.
    pub fn from_record(record: &RunRecord, metric: &str) -> Self {
        let mut epochs: Vec<(u32, Epoch)> = Vec::new();
        for sample in &record.samples {
            let Some(value) = sample.metrics.get(metric) else {
                continue;
            };
            match sample.phase {
                // Several baseline samples (`sample.baseline`) of one (re)load stay in its epoch.
                Phase::Load | Phase::Reload
                    if epochs.last().is_some_and(|(e, _)| *e == sample.epoch) =>
                {
                    if let Some((_, epoch)) = epochs.last_mut() {
                        epoch.points.push((sample.turn, *value));
                    }
                }
                Phase::Load | Phase::Reload => epochs.push((
                    sample.epoch,
                    Epoch {
                        start_turn: sample.turn,
                        points: vec![(sample.turn, *value)],
                    },
                )),
                Phase::Close => {
                    let fits = epochs.last().is_some_and(|(e, _)| *e == sample.epoch);
                    if !fits {
                        // No (re)load sample for this epoch: it began after the previous turn.
                        epochs.push((
                            sample.epoch,
                            Epoch {
                                start_turn: sample.turn.saturating_sub(1),
                                points: Vec::new(),
                            },
                        ));
                    }
                    if let Some((_, epoch)) = epochs.last_mut() {
                        epoch.points.push((sample.turn, *value));
                    }
                }
                Phase::Open | Phase::Generate | Phase::Idle => {}
            }
        }
        Self {
            epochs: epochs.into_iter().map(|(_, e)| e).collect(),
        }
    }

    /// Every point of every epoch, in order.
    pub fn points(&self) -> impl Iterator<Item = (u32, u64)> + '_ {
        self.epochs.iter().flat_map(|e| e.points.iter().copied())
    }

    /// How many points the series has.
    pub fn len(&self) -> usize {
        self.epochs.iter().map(|e| e.points.len()).sum()
    }

    /// Whether the series has no points.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::runner::Sample;

    fn sample(turn: u32, phase: Phase, epoch: u32, value: u64) -> Sample {
        Sample {
            turn,
            phase,
            epoch,
            t_ms: f64::from(turn),
            metrics: BTreeMap::from([("rss".to_owned(), value)]).into(),
        }
    }

    #[test]
    fn reload_samples_start_new_epochs() {
        let samples = vec![
            sample(0, Phase::Load, 1, 100),
            sample(1, Phase::Generate, 1, 999),
            sample(1, Phase::Close, 1, 110),
            sample(2, Phase::Close, 1, 120),
            sample(2, Phase::Reload, 2, 100),
            sample(3, Phase::Close, 2, 111),
            sample(4, Phase::Close, 2, 121),
        ];
        let series = epochs_of(samples);
        assert_eq!(series.epochs.len(), 2);
        assert_eq!(series.epochs[0].points, vec![(0, 100), (1, 110), (2, 120)]);
        assert_eq!(series.epochs[1].start_turn, 2);
        assert_eq!(series.epochs[1].points, vec![(2, 100), (3, 111), (4, 121)]);
        assert_eq!(series.len(), 6);
    }

    #[test]
    fn a_missing_reload_sample_still_splits_the_epoch() {
        let samples = vec![
            sample(1, Phase::Close, 1, 110),
            sample(2, Phase::Close, 2, 100),
        ];
        let series = epochs_of(samples);
        assert_eq!(series.epochs.len(), 2);
        assert_eq!(series.epochs[1].start_turn, 1);
    }

    #[test]
    fn repeated_baseline_samples_stay_in_their_epoch() {
        let samples = vec![
            sample(0, Phase::Load, 1, 100),
            sample(0, Phase::Load, 1, 102),
            sample(0, Phase::Load, 1, 98),
            sample(1, Phase::Close, 1, 110),
            sample(1, Phase::Reload, 2, 100),
            sample(1, Phase::Reload, 2, 101),
            sample(2, Phase::Close, 2, 111),
        ];
        let series = epochs_of(samples);
        assert_eq!(series.epochs.len(), 2);
        assert_eq!(
            series.epochs[0].points,
            vec![(0, 100), (0, 102), (0, 98), (1, 110)]
        );
        assert_eq!(series.epochs[1].points, vec![(1, 100), (1, 101), (2, 111)]);
    }

    fn epochs_of(samples: Vec<Sample>) -> MetricSeries {
        let record = crate::analyze::test_support::record_with_samples(samples);
        MetricSeries::from_record(&record, "rss")
    }
}
