//! A run's samples, kept column by column: [`Samples`].
//!
//! A sample read as a [`Sample`] carries its metrics inline (about 180 bytes); a million-turn
//! run holds a million of them. Kept as columns (turns, phases, times, one column of values per
//! metric, bit-packed by blocks, and the epochs and keys as runs and ids) a sample costs 13
//! bytes plus a few per metric: about 24 for the simulator's six (three flat, three leaking 110
//! MiB a turn). The analysis and the plots read one metric's column without building samples.

use std::collections::HashMap;
use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::runner::{MetricName, Metrics, Phase, Sample};

mod packed;

use packed::{Packed, BLOCK};

/// Column buffers reserved ahead for metrics not seen yet, when a run reserves its samples'
/// memory before the engine loads (see [`Samples::touched`]).
const SPARE_COLUMNS: usize = 8;

/// Every sample of a run, in the order taken, kept as columns. Reads give [`Sample`] values
/// (built from the columns); [`Samples::metric`] and the column slices read one field of every
/// sample without building any.
#[derive(Clone, Default)]
pub struct Samples {
    /// Each sample's turn, packed.
    turns: Packed,
    phases: Vec<Phase>,
    /// Each sample's time (the bits of its `f64`, packed: close times share their high bits).
    times_ms: Packed,
    /// `(first row, epoch)` at every row where the epoch changes.
    epochs: Vec<(usize, u32)>,
    /// One column per metric name seen, ordered by name.
    metrics: Vec<MetricColumn>,
    /// Each row's key id (0: none, `k`: `key_text[k - 1]`); empty while no row has a key.
    key_ids: Vec<u32>,
    key_text: Vec<String>,
    key_index: HashMap<String, u32>,
    /// Reserved (and touched) buffers for the columns of metrics first seen later.
    spare: Vec<Vec<u64>>,
    /// Rows a new column reserves room for.
    reserve: usize,
}

/// One metric's values, row by row.
#[derive(Clone, Debug)]
struct MetricColumn {
    name: MetricName,
    /// The value of each row (0 where the row has none), packed.
    values: Packed,
    /// Bit `i` set: row `i` has no value. Shorter than the rows (or empty) where the rows after
    /// its end all have one.
    absent: Vec<u64>,
}

impl MetricColumn {
    fn has(&self, row: usize) -> bool {
        self.absent
            .get(row / 64)
            .is_none_or(|word| word >> (row % 64) & 1 == 0)
    }

    fn get(&self, row: usize) -> Option<u64> {
        let value = self.values.get(row)?;
        self.has(row).then_some(value)
    }

    fn push_absent(&mut self) {
        let row = self.values.len();
        self.values.push(0);
        let word = row / 64;
        if self.absent.len() <= word {
            self.absent.resize(word + 1, 0);
        }
        self.absent[word] |= 1 << (row % 64);
    }
}

/// One metric's values in every sample: [`Samples::metric`].
#[derive(Clone, Copy, Debug)]
pub struct MetricValues<'a>(&'a MetricColumn);

impl MetricValues<'_> {
    /// The value of row `row`, if that sample has the metric.
    pub fn get(&self, row: usize) -> Option<u64> {
        self.0.get(row)
    }

    /// Every row's value, `None` where the sample has none.
    pub fn iter(&self) -> impl Iterator<Item = Option<u64>> + '_ {
        (0..self.0.values.len()).map(|row| self.0.get(row))
    }
}

impl Samples {
    /// No samples.
    pub fn new() -> Self {
        Self::default()
    }

    /// No samples, with room for `rows` reserved.
    pub fn with_capacity(rows: usize) -> Self {
        let blocks = rows / BLOCK + 1;
        Self {
            turns: Packed::in_buffer(Vec::new(), blocks),
            phases: Vec::with_capacity(rows),
            times_ms: Packed::in_buffer(Vec::new(), blocks),
            reserve: rows,
            ..Self::default()
        }
    }

    /// No samples, with room for `rows` reserved and its memory touched, columns for metrics
    /// seen later included: a run whose engine lives in this process reserves its samples'
    /// memory before the engine loads, so that the harness's own records do not read as the
    /// engine's growth.
    pub fn touched(rows: usize) -> Self {
        fn touch<T: Clone>(rows: usize, value: T) -> Vec<T> {
            // Written element by element: `vec![0; n]` takes zeroed pages from the OS, which
            // are only made resident when first written, as the run goes.
            let mut buffer = Vec::with_capacity(rows);
            buffer.resize(rows, value);
            buffer.clear();
            buffer
        }
        let blocks = rows / BLOCK + 1;
        Self {
            turns: Packed::in_buffer(touch(rows, 0), blocks),
            phases: touch(rows, Phase::Load),
            times_ms: Packed::in_buffer(touch(rows, 0), blocks),
            spare: (0..SPARE_COLUMNS).map(|_| touch(rows, 0)).collect(),
            reserve: rows,
            ..Self::default()
        }
    }

    /// How many samples.
    pub fn len(&self) -> usize {
        self.phases.len()
    }

    /// Whether there is none.
    pub fn is_empty(&self) -> bool {
        self.phases.is_empty()
    }

    /// The cells the metric columns hold: samples times metric columns. A column takes room in
    /// every row from the one where its metric first appears, present or not, so this bounds the
    /// columns' memory from above (about 0.3 bytes a cell where most are empty).
    pub fn metric_cells(&self) -> u64 {
        (self.phases.len() as u64).saturating_mul(self.metrics.len() as u64)
    }

    /// Appends a sample (given or lent).
    pub fn push(&mut self, sample: impl std::borrow::Borrow<Sample>) {
        let sample = sample.borrow();
        let row = self.len();
        self.turns.push(u64::from(sample.turn));
        self.phases.push(sample.phase);
        self.times_ms.push(sample.t_ms.to_bits());
        if self.epochs.last().map(|e| e.1) != Some(sample.epoch) {
            self.epochs.push((row, sample.epoch));
        }
        self.push_metrics(row, &sample.metrics);
        self.push_key(row, sample.key.as_deref());
    }

    fn push_metrics(&mut self, row: usize, metrics: &Metrics) {
        // Both ordered by name: one pass, and O(1) per metric when a sample has the same names
        // as the one before.
        let mut next = 0;
        for (id, value) in metrics.entries() {
            let at = if self.metrics.get(next).is_some_and(|c| c.name == id) {
                next
            } else {
                let name = id.as_str();
                let at = next + self.metrics[next..].partition_point(|c| c.name.as_str() < name);
                if self.metrics.get(at).is_none_or(|c| c.name != id) {
                    let column = self.new_column(id, row);
                    self.metrics.insert(at, column);
                }
                at
            };
            for column in &mut self.metrics[next..at] {
                column.push_absent();
            }
            self.metrics[at].values.push(*value);
            next = at + 1;
        }
        for column in &mut self.metrics[next..] {
            column.push_absent();
        }
    }

    /// A column for a metric first seen at `row`: absent in every row before.
    fn new_column(&mut self, name: MetricName, row: usize) -> MetricColumn {
        let buffer = self.spare.pop().unwrap_or_default();
        let mut values = Packed::in_buffer(buffer, self.reserve.max(row + 1) / BLOCK + 1);
        for _ in 0..row {
            values.push(0);
        }
        let mut absent = vec![0u64; row.div_ceil(64)];
        for r in 0..row {
            absent[r / 64] |= 1 << (r % 64);
        }
        MetricColumn {
            name,
            values,
            absent,
        }
    }

    fn push_key(&mut self, row: usize, key: Option<&str>) {
        let Some(key) = key else {
            if !self.key_ids.is_empty() {
                self.key_ids.push(0);
            }
            return;
        };
        let id = match self.key_index.get(key) {
            Some(id) => *id,
            None => {
                self.key_text.push(key.to_owned());
                let id = u32::try_from(self.key_text.len()).unwrap_or(u32::MAX);
                self.key_index.insert(key.to_owned(), id);
                id
            }
        };
        if self.key_ids.is_empty() {
            self.key_ids.resize(row, 0);
        }
        self.key_ids.push(id);
    }

    /// Removes every sample, keeping the memory reserved.
    pub fn clear(&mut self) {
        self.turns = Packed::in_buffer(std::mem::take(&mut self.turns).into_buffer(), 0);
        self.phases.clear();
        self.times_ms = Packed::in_buffer(std::mem::take(&mut self.times_ms).into_buffer(), 0);
        self.epochs.clear();
        for column in self.metrics.drain(..) {
            self.spare.push(column.values.into_buffer());
        }
        self.key_ids.clear();
        self.key_text.clear();
        self.key_index.clear();
    }

    /// Sample `row`, built from the columns.
    pub fn get(&self, row: usize) -> Option<Sample> {
        let turn = self.turn(row)?;
        let mut metrics = Metrics::new();
        for column in &self.metrics {
            if let Some(value) = column.get(row) {
                metrics.push_in_order(column.name, value);
            }
        }
        Some(Sample {
            turn,
            phase: self.phases[row],
            epoch: self.epoch(row),
            t_ms: self.time_ms(row).unwrap_or(0.0),
            metrics,
            key: self.key(row).map(str::to_owned),
        })
    }

    /// The first sample.
    pub fn first(&self) -> Option<Sample> {
        self.get(0)
    }

    /// The last sample.
    pub fn last(&self) -> Option<Sample> {
        self.len().checked_sub(1).and_then(|row| self.get(row))
    }

    /// Every sample in order, each built from the columns.
    pub fn iter(&self) -> Iter<'_> {
        Iter {
            samples: self,
            rows: 0..self.len(),
        }
    }

    /// Every sample, as a vector.
    pub fn to_vec(&self) -> Vec<Sample> {
        self.iter().collect()
    }

    /// The samples for which `keep` is true.
    pub fn filtered(&self, mut keep: impl FnMut(&Sample) -> bool) -> Samples {
        self.iter().filter(|s| keep(s)).collect()
    }

    /// Changes every sample with `change` (given its row), rebuilding the columns.
    pub fn modify_each(&mut self, mut change: impl FnMut(usize, &mut Sample)) {
        let mut changed = Samples::with_capacity(self.len());
        for (row, mut sample) in self.iter().enumerate() {
            change(row, &mut sample);
            changed.push(&sample);
        }
        *self = changed;
    }

    /// Keeps only the samples for which `keep` is true.
    pub fn retain(&mut self, keep: impl FnMut(&Sample) -> bool) {
        *self = self.filtered(keep);
    }

    /// The turn of sample `row`.
    pub fn turn(&self, row: usize) -> Option<u32> {
        self.turns.get(row).map(|t| t as u32)
    }

    /// Every sample's phase.
    pub fn phases(&self) -> &[Phase] {
        &self.phases
    }

    /// The time of sample `row`, in milliseconds since the run started.
    pub fn time_ms(&self, row: usize) -> Option<f64> {
        self.times_ms.get(row).map(f64::from_bits)
    }

    /// Sets every sample's time to zero (a snapshot's redaction).
    pub fn zero_times(&mut self) {
        let mut zero = Packed::in_buffer(Vec::new(), self.len() / BLOCK + 1);
        for _ in 0..self.len() {
            zero.push(0f64.to_bits());
        }
        self.times_ms = zero;
    }

    /// The epoch of sample `row` (0 past the end).
    pub fn epoch(&self, row: usize) -> u32 {
        let at = self.epochs.partition_point(|e| e.0 <= row);
        at.checked_sub(1).map_or(0, |at| self.epochs[at].1)
    }

    /// The key of sample `row`, if it has one.
    pub fn key(&self, row: usize) -> Option<&str> {
        let id = *self.key_ids.get(row)?;
        let index = usize::try_from(id).ok()?.checked_sub(1)?;
        self.key_text.get(index).map(String::as_str)
    }

    /// The values of `metric` in every sample, `None` when no sample has it.
    pub fn metric(&self, metric: &str) -> Option<MetricValues<'_>> {
        self.metrics
            .iter()
            .find(|c| c.name.as_str() == metric)
            .map(MetricValues)
    }

    /// Every metric name some sample has, ordered (a column is made by the first sample that
    /// has its metric).
    pub fn metric_names(&self) -> impl Iterator<Item = &'static str> + '_ {
        self.metrics.iter().map(|c| c.name.as_str())
    }
}

/// The samples of a [`Samples`], in order: [`Samples::iter`].
#[derive(Debug)]
pub struct Iter<'a> {
    samples: &'a Samples,
    rows: std::ops::Range<usize>,
}

impl Iterator for Iter<'_> {
    type Item = Sample;

    fn next(&mut self) -> Option<Sample> {
        self.rows.next().and_then(|row| self.samples.get(row))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.rows.size_hint()
    }

    fn nth(&mut self, n: usize) -> Option<Sample> {
        self.rows.nth(n).and_then(|row| self.samples.get(row))
    }
}

impl DoubleEndedIterator for Iter<'_> {
    fn next_back(&mut self) -> Option<Sample> {
        self.rows.next_back().and_then(|row| self.samples.get(row))
    }
}

impl ExactSizeIterator for Iter<'_> {}

impl<'a> IntoIterator for &'a Samples {
    type Item = Sample;
    type IntoIter = Iter<'a>;

    fn into_iter(self) -> Iter<'a> {
        self.iter()
    }
}

impl Extend<Sample> for Samples {
    fn extend<I: IntoIterator<Item = Sample>>(&mut self, samples: I) {
        for sample in samples {
            self.push(&sample);
        }
    }
}

impl FromIterator<Sample> for Samples {
    fn from_iter<I: IntoIterator<Item = Sample>>(samples: I) -> Self {
        let mut all = Samples::new();
        all.extend(samples);
        all
    }
}

impl From<Vec<Sample>> for Samples {
    fn from(samples: Vec<Sample>) -> Self {
        Self::from(samples.as_slice())
    }
}

impl From<&[Sample]> for Samples {
    fn from(samples: &[Sample]) -> Self {
        let mut all = Samples::with_capacity(samples.len());
        for sample in samples {
            all.push(sample);
        }
        all
    }
}

impl From<&Samples> for Samples {
    fn from(samples: &Samples) -> Self {
        samples.clone()
    }
}

impl PartialEq for Samples {
    fn eq(&self, other: &Self) -> bool {
        self.len() == other.len() && self.iter().eq(other.iter())
    }
}

impl PartialEq<[Sample]> for Samples {
    fn eq(&self, other: &[Sample]) -> bool {
        self.len() == other.len() && self.iter().eq(other.iter().cloned())
    }
}

impl PartialEq<Vec<Sample>> for Samples {
    fn eq(&self, other: &Vec<Sample>) -> bool {
        *self == **other
    }
}

impl fmt::Debug for Samples {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

impl Serialize for Samples {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(self.iter())
    }
}

impl<'de> Deserialize<'de> for Samples {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Rows;
        impl<'de> serde::de::Visitor<'de> for Rows {
            type Value = Samples;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a list of samples")
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut seq: A,
            ) -> Result<Samples, A::Error> {
                let mut samples = Samples::new();
                while let Some(sample) = seq.next_element::<Sample>()? {
                    samples.push(&sample);
                }
                Ok(samples)
            }
        }
        deserializer.deserialize_seq(Rows)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(turn: u32, phase: Phase, epoch: u32, metrics: &[(&str, u64)]) -> Sample {
        Sample {
            turn,
            phase,
            epoch,
            t_ms: f64::from(turn) * 1.5,
            metrics: metrics.iter().map(|(n, v)| (*n, *v)).collect(),
            key: None,
        }
    }

    #[test]
    fn reads_back_every_sample_as_pushed_whatever_metrics_come_and_go() {
        let mut rows = vec![
            sample(0, Phase::Load, 1, &[("rss", 10)]),
            sample(1, Phase::Open, 1, &[("rss", 11), ("native_heap", 5)]),
            sample(1, Phase::Close, 1, &[("native_heap", 6)]),
            sample(1, Phase::Reload, 2, &[]),
            sample(
                2,
                Phase::Close,
                2,
                &[("zz_late", 1), ("rss", 12), ("aa_late", 2)],
            ),
        ];
        rows[1].key = Some("s1".into());
        rows[4].key = Some("s1".into());
        rows[2].key = Some("s2".into());
        // Enough rows that the absent bits span several words.
        for turn in 3..200 {
            let metrics: &[(&str, u64)] = if turn % 3 == 0 {
                &[("rss", 7)]
            } else {
                &[("aa_late", u64::from(turn)), ("native_heap", u64::MAX)]
            };
            rows.push(sample(turn, Phase::Close, 2 + turn / 50, metrics));
        }
        let samples = Samples::from(rows.clone());
        assert_eq!(samples.len(), rows.len());
        assert_eq!(samples.to_vec(), rows);
        assert_eq!(samples.get(rows.len()), None);
        assert_eq!(samples.last(), rows.last().cloned());
        let names: Vec<_> = samples.metric_names().collect();
        assert_eq!(names, ["aa_late", "native_heap", "rss", "zz_late"]);
        let rss = samples.metric("rss").unwrap();
        let expected: Vec<Option<u64>> =
            rows.iter().map(|s| s.metrics.get("rss").copied()).collect();
        assert_eq!(rss.iter().collect::<Vec<_>>(), expected);
        assert!(samples.metric("never").is_none());
        let epochs: Vec<u32> = (0..rows.len()).map(|r| samples.epoch(r)).collect();
        assert_eq!(epochs, rows.iter().map(|s| s.epoch).collect::<Vec<_>>());
    }

    #[test]
    fn serializes_as_the_list_of_samples_and_clears_for_reuse() {
        let rows = vec![
            sample(0, Phase::Load, 1, &[("rss", 10)]),
            sample(1, Phase::Close, 1, &[("rss", 11)]),
        ];
        let mut samples = Samples::touched(4);
        samples.extend(rows.clone());
        let text = serde_json::to_string(&samples).unwrap();
        assert_eq!(text, serde_json::to_string(&rows).unwrap());
        let back: Samples = serde_json::from_str(&text).unwrap();
        assert_eq!(back, samples);
        samples.clear();
        assert!(samples.is_empty());
        samples.push(&rows[1]);
        assert_eq!(samples.to_vec(), rows[1..]);
    }
}
