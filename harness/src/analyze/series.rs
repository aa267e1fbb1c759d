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
    pub start_turn: u64,
    /// `(turn, bytes)` pairs in strictly increasing turn order: the (re)load sample at
    /// `start_turn` when there is one, then one post-close sample per turn. Turns may have gaps
    /// (a trace that printed every 1000th iteration); slopes are per turn unit.
    pub points: Vec<(u64, u64)>,
}

/// One metric's post-close series.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct MetricSeries {
    /// The load epochs in order; a run without reloads has one.
    pub epochs: Vec<Epoch>,
    /// Every sample of the baseline (turn 0, after load) when there are several (repeated turn-0
    /// rows of a trace, a scenario's `sample: {baseline: K}`); the first epoch's first point is
    /// then their median. Empty when the baseline is the single first point.
    pub baseline_samples: Vec<u64>,
}

impl MetricSeries {
    /// A series without reloads from `(turn, bytes)` pairs in turn order; the first pair is the
    /// baseline (normally turn 0).
    pub fn from_points(points: &[(u64, u64)]) -> Self {
        if points.is_empty() {
            return Self::default();
        }
        Self {
            epochs: vec![Epoch {
                start_turn: points[0].0,
                points: points.to_vec(),
            }],
            baseline_samples: Vec::new(),
        }
    }

    /// A series without reloads whose baseline was sampled several times: `baseline` holds every
    /// baseline sample (taken at `points[0].0`), `points` the baseline turn's median followed by
    /// the later samples. With one baseline sample this is [`MetricSeries::from_points`].
    pub fn with_baseline_samples(baseline: &[u64], later: &[(u64, u64)], turn: u64) -> Self {
        let Some(median) = median_u64(baseline) else {
            return Self::from_points(later);
        };
        let mut points = Vec::with_capacity(later.len() + 1);
        points.push((turn, median));
        points.extend_from_slice(later);
        let mut series = Self::from_points(&points);
        if baseline.len() > 1 {
            series.baseline_samples = baseline.to_vec();
        }
        series
    }

    /// The series of `metric` in a run: the load sample, every post-close sample and every reload
    /// sample, split by the epoch each sample was taken in. Several (re)load samples at the same
    /// turn of one epoch (a scenario's `sample: {baseline: K}`) give that epoch's start point as
    /// their median; those of the first load are kept as [`MetricSeries::baseline_samples`].
    ///
    /// Fails, naming the sample, when turns go back or repeat (other than repeated load
    /// samples): such a record was not written by a run and cannot be judged.
    pub fn from_record(record: &RunRecord, metric: &str) -> Result<Self, String> {
        let mut epochs: Vec<(u32, Epoch, Vec<u64>)> = Vec::new();
        let mut previous: Option<u64> = None;
        // Read from the columns: a million-turn run's samples are not built one by one.
        let samples = &record.samples;
        let Some(values) = samples.metric(metric) else {
            return Ok(Self::default());
        };
        let phases = samples.phases();
        // Each epoch's points are reserved at once: a million points grown by doubling pass
        // through a copy of half of them.
        let mut closes = std::collections::BTreeMap::<u32, usize>::new();
        for (index, phase) in phases.iter().enumerate() {
            if *phase == Phase::Close && values.get(index).is_some() {
                *closes.entry(samples.epoch(index)).or_default() += 1;
            }
        }
        let room = |epoch: u32| closes.get(&epoch).copied().unwrap_or(0) + 1;
        for (index, &phase) in phases.iter().enumerate() {
            let Some(value) = values.get(index) else {
                continue;
            };
            let value = &value;
            let epoch = samples.epoch(index);
            let sample = SampleAt {
                phase,
                epoch,
                turn: samples.turn(index).unwrap_or(0),
            };
            let turn = u64::from(sample.turn);
            let out_of_order = |previous: u64| {
                format!(
                    "samples[{index}] (turn {turn}, {:?}) comes after turn {previous}: samples must \
                     be in turn order",
                    sample.phase
                )
            };
            match sample.phase {
                Phase::Load | Phase::Reload => {
                    let repeat = epochs.last_mut().filter(|(e, epoch, starts)| {
                        *e == sample.epoch
                            && !starts.is_empty()
                            && epoch.points.len() == 1
                            && epoch.start_turn == turn
                    });
                    if let Some((_, _, starts)) = repeat {
                        starts.push(*value);
                        continue;
                    }
                    if let Some(p) = previous.filter(|p| turn < *p) {
                        return Err(out_of_order(p));
                    }
                    let mut points = Vec::with_capacity(room(sample.epoch));
                    points.push((turn, *value));
                    epochs.push((
                        sample.epoch,
                        Epoch {
                            start_turn: turn,
                            points,
                        },
                        vec![*value],
                    ));
                }
                Phase::Close => {
                    if let Some(p) = previous.filter(|p| turn <= *p) {
                        return Err(out_of_order(p));
                    }
                    let fits = epochs.last().is_some_and(|(e, _, _)| *e == sample.epoch);
                    if !fits {
                        // No (re)load sample for this epoch: it began after the previous turn.
                        epochs.push((
                            sample.epoch,
                            Epoch {
                                start_turn: turn.saturating_sub(1),
                                points: Vec::with_capacity(room(sample.epoch)),
                            },
                            Vec::new(),
                        ));
                    }
                    if let Some((_, epoch, _)) = epochs.last_mut() {
                        epoch.points.push((turn, *value));
                    }
                }
                Phase::Open | Phase::Generate | Phase::Idle => continue,
            }
            previous = Some(turn);
        }
        let mut baseline_samples = Vec::new();
        let epochs = epochs
            .into_iter()
            .enumerate()
            .map(|(index, (_, mut epoch, starts))| {
                if starts.len() > 1 {
                    if let (Some(first), Some(median)) =
                        (epoch.points.first_mut(), median_u64(&starts))
                    {
                        first.1 = median;
                    }
                    if index == 0 {
                        baseline_samples = starts;
                    }
                }
                epoch
            })
            .collect();
        Ok(Self {
            epochs,
            baseline_samples,
        })
    }

    /// Every point of every epoch, in order.
    pub fn points(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
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

    /// How many samples the baseline is the median of (at least 1 when there are points).
    pub fn baseline_count(&self) -> usize {
        self.baseline_samples
            .len()
            .max(usize::from(!self.is_empty()))
    }
}

/// What the series reads of a sample besides its value.
#[derive(Clone, Copy)]
struct SampleAt {
    phase: Phase,
    epoch: u32,
    turn: u32,
}

/// The median of byte counts, rounded down between the middle two; `None` when empty.
fn median_u64(values: &[u64]) -> Option<u64> {
    let mut sorted = values.to_vec();
    sorted.sort_unstable();
    let n = sorted.len();
    match n {
        0 => None,
        _ if n % 2 == 1 => Some(sorted[n / 2]),
        _ => Some(((u128::from(sorted[n / 2 - 1]) + u128::from(sorted[n / 2])) / 2) as u64),
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
            key: None,
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
    fn repeated_load_samples_are_baseline_samples() {
        // `sample: {baseline: 3}`: three load samples at turn 0, settling between them.
        let samples = vec![
            sample(0, Phase::Load, 1, 100),
            sample(0, Phase::Load, 1, 130),
            sample(0, Phase::Load, 1, 90),
            sample(1, Phase::Close, 1, 110),
            sample(2, Phase::Close, 1, 120),
        ];
        let series = epochs_of(samples);
        assert_eq!(series.baseline_samples, vec![100, 130, 90]);
        assert_eq!(series.epochs[0].points, vec![(0, 100), (1, 110), (2, 120)]);
    }

    #[test]
    fn samples_out_of_order_are_refused_naming_the_sample() {
        let samples = vec![
            sample(0, Phase::Load, 1, 100),
            sample(2, Phase::Close, 1, 110),
            sample(1, Phase::Close, 1, 120),
        ];
        let record = crate::analyze::test_support::record_with_samples(samples);
        let error = MetricSeries::from_record(&record, "rss").unwrap_err();
        assert_eq!(
            error,
            "samples[2] (turn 1, Close) comes after turn 2: samples must be in turn order"
        );
    }

    #[test]
    fn repeated_baseline_samples_of_a_reload_give_their_median() {
        let samples = vec![
            sample(0, Phase::Load, 1, 100),
            sample(0, Phase::Load, 1, 102),
            sample(0, Phase::Load, 1, 98),
            sample(1, Phase::Close, 1, 110),
            sample(1, Phase::Reload, 2, 100),
            sample(1, Phase::Reload, 2, 104),
            sample(2, Phase::Close, 2, 111),
        ];
        let series = epochs_of(samples);
        assert_eq!(series.epochs.len(), 2);
        assert_eq!(series.epochs[0].points, vec![(0, 100), (1, 110)]);
        assert_eq!(series.baseline_samples, vec![100, 102, 98]);
        assert_eq!(series.epochs[1].points, vec![(1, 102), (2, 111)]);
    }

    fn epochs_of(samples: Vec<Sample>) -> MetricSeries {
        let record = crate::analyze::test_support::record_with_samples(samples);
        MetricSeries::from_record(&record, "rss").unwrap()
    }
}
