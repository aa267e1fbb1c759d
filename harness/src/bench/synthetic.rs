//! Seeded synthetic post-close series: a baseline with Gaussian noise, optionally a one-time
//! step or bounded warm-up, spikes, or a per-turn leak in units of the noise; and series with a
//! reload every [`RELOAD_EVERY`] turns, clean or leaving memory behind at each reload.

use rand::{Rng, RngExt};
use rand_distr::{Distribution, Normal};

use crate::analyze::{Epoch, MetricSeries};

/// The baseline of every synthetic series, in bytes (1 GiB).
pub const BASELINE: f64 = 1024.0 * 1024.0 * 1024.0;
/// The noise standard deviation of one sample, in bytes (1 MiB).
pub const SIGMA: f64 = 1024.0 * 1024.0;
/// The reload period of the reload series, in turns.
pub const RELOAD_EVERY: u32 = 5;
/// How far each reload's level scatters around where it should land, in noise standard deviations.
pub const RELOAD_SCATTER_SIGMAS: f64 = 0.5;

/// What a synthetic series contains besides baseline and noise.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum SeriesKind {
    /// Nothing: baseline plus noise.
    Clean,
    /// A one-time rise that stops: a step at turn 1-3, a linear warm-up over 2-5 turns, or a
    /// saturating (exponential) warm-up with a time constant of 0.5-1.5 turns; 20-2000 sigma.
    Plateau,
    /// Clean plus one or two spikes of 10-100 sigma (up or down) at random turns after the
    /// baseline, the last turn included.
    Spiky,
    /// A leak of this many sigma per turn from turn 1, on top of a one-time step of 20-2000 sigma
    /// at turn 1 in half of the series.
    Leak(f64),
    /// A reload every [`RELOAD_EVERY`] turns (a reload sample, then the epoch's turns); each
    /// epoch's level scatters by [`RELOAD_SCATTER_SIGMAS`]; in half of the series every epoch
    /// steps up 20-2000 sigma at its first turn and the reload gives it back. Flat otherwise.
    ReloadClean,
    /// As [`SeriesKind::ReloadClean`], but every reload settles this many sigma higher than the
    /// one before (flat inside each epoch).
    Ratchet(f64),
}

/// A generated series and what it contains.
#[derive(Debug, Clone, PartialEq)]
pub struct SyntheticSeries {
    /// `(turn, bytes)` for turns `0..=turns`.
    pub points: Vec<(u64, u64)>,
    /// Whether it contains a leak.
    pub leaks: bool,
    /// The same samples split into load epochs (one epoch without reloads).
    pub series: MetricSeries,
}

impl SeriesKind {
    /// The reload period of this kind of series (0 = never).
    pub fn reload_every(&self) -> u32 {
        match self {
            SeriesKind::ReloadClean | SeriesKind::Ratchet(_) => RELOAD_EVERY,
            _ => 0,
        }
    }

    /// Generates one series of `turns` turns after the baseline.
    pub fn generate(&self, turns: u32, rng: &mut impl Rng) -> SyntheticSeries {
        let noise = Normal::new(0.0, SIGMA).expect("positive sigma");
        let shape: Vec<f64> = match *self {
            SeriesKind::Clean => vec![0.0; turns as usize + 1],
            SeriesKind::Plateau => plateau_shape(turns, rng),
            SeriesKind::Spiky => {
                let mut shape = vec![0.0; turns as usize + 1];
                let spikes = rng.random_range(1..=2usize);
                for _ in 0..spikes {
                    let at = rng.random_range(1..=turns) as usize;
                    let size = rng.random_range(10.0..100.0) * SIGMA;
                    shape[at] += if rng.random_bool(0.5) { size } else { -size };
                }
                shape
            }
            SeriesKind::ReloadClean => return reloading(turns, 0.0, rng),
            SeriesKind::Ratchet(per_reload) => return reloading(turns, per_reload, rng),
            SeriesKind::Leak(per_turn) => {
                let step = if rng.random_bool(0.5) {
                    rng.random_range(20.0..2000.0) * SIGMA
                } else {
                    0.0
                };
                (0..=turns)
                    .map(|t| {
                        if t == 0 {
                            0.0
                        } else {
                            step + per_turn * SIGMA * f64::from(t)
                        }
                    })
                    .collect()
            }
        };
        let points: Vec<(u64, u64)> = shape
            .iter()
            .enumerate()
            .map(|(t, s)| (t as u64, sample(BASELINE + s, &noise, rng)))
            .collect();
        SyntheticSeries {
            series: MetricSeries::from_points(&points),
            points,
            leaks: matches!(self, SeriesKind::Leak(_)),
        }
    }
}

fn sample(mean: f64, noise: &Normal<f64>, rng: &mut impl Rng) -> u64 {
    (mean + noise.sample(rng)).max(0.0).round() as u64
}

/// Epochs of [`RELOAD_EVERY`] turns; epoch `e` settles `e * per_reload` sigma above the baseline
/// (plus its scatter); the reload sample at the start of an epoch is taken at that level.
fn reloading(turns: u32, per_reload: f64, rng: &mut impl Rng) -> SyntheticSeries {
    let noise = Normal::new(0.0, SIGMA).expect("positive sigma");
    let scatter = Normal::new(0.0, RELOAD_SCATTER_SIGMAS * SIGMA).expect("positive scatter");
    let step = if rng.random_bool(0.5) {
        rng.random_range(20.0..2000.0) * SIGMA
    } else {
        0.0
    };
    let mut epochs = Vec::new();
    let mut start = 0;
    while start < turns || epochs.is_empty() {
        let index = epochs.len() as f64;
        let level = if epochs.is_empty() {
            BASELINE
        } else {
            BASELINE + index * per_reload * SIGMA + scatter.sample(rng)
        };
        let end = (start + RELOAD_EVERY).min(turns);
        let points = (start..=end)
            .map(|t| {
                let value = if t > start { level + step } else { level };
                (u64::from(t), sample(value, &noise, rng))
            })
            .collect();
        epochs.push(Epoch {
            start_turn: u64::from(start),
            points,
        });
        start = end;
    }
    let series = MetricSeries {
        epochs,
        baseline_samples: Vec::new(),
    };
    SyntheticSeries {
        points: series.points().collect(),
        leaks: per_reload > 0.0,
        series,
    }
}

fn plateau_shape(turns: u32, rng: &mut impl Rng) -> Vec<f64> {
    let size = rng.random_range(20.0..2000.0) * SIGMA;
    let kind = rng.random_range(0..3u8);
    let at = rng.random_range(1..=3u32);
    let width = f64::from(rng.random_range(2..=5u32));
    let tau = rng.random_range(0.5..1.5);
    (0..=turns)
        .map(|t| {
            let t = f64::from(t);
            match kind {
                0 if t >= f64::from(at) => size,
                0 => 0.0,
                1 => size * (t / width).min(1.0),
                _ => size * (1.0 - (-t / tau).exp()),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use rand::SeedableRng;
    use rand_chacha::ChaCha8Rng;

    use super::*;

    #[test]
    fn generation_is_reproducible_from_the_seed() {
        let a = SeriesKind::Leak(1.0).generate(20, &mut ChaCha8Rng::seed_from_u64(3));
        let b = SeriesKind::Leak(1.0).generate(20, &mut ChaCha8Rng::seed_from_u64(3));
        assert_eq!(a, b);
        assert_eq!(a.points.len(), 21);
        assert!(a.leaks);
    }

    #[test]
    fn a_leak_of_four_sigma_rises_about_eighty_sigma_in_twenty_turns() {
        let mut rng = ChaCha8Rng::seed_from_u64(5);
        let mut rises = Vec::new();
        for _ in 0..50 {
            let s = SeriesKind::Leak(4.0).generate(20, &mut rng);
            // Compare turn 1 and turn 20, both after any step.
            rises.push((s.points[20].1 as f64 - s.points[1].1 as f64) / SIGMA);
        }
        let mean = rises.iter().sum::<f64>() / rises.len() as f64;
        assert!((mean - 76.0).abs() < 2.0, "{mean}");
    }

    #[test]
    fn reload_series_have_an_epoch_per_reload_and_ratchet_up() {
        let mut rng = ChaCha8Rng::seed_from_u64(9);
        let mut rises = Vec::new();
        for _ in 0..50 {
            let s = SeriesKind::Ratchet(4.0).generate(20, &mut rng);
            assert_eq!(s.series.epochs.len(), 4);
            assert_eq!(s.series.epochs[3].start_turn, 15);
            assert_eq!(s.series.epochs[3].points.len(), 6);
            assert_eq!(s.points.len(), 24);
            // The reload samples of the last and first epoch: three reloads apart.
            let first = s.series.epochs[0].points[0].1 as f64;
            let last = s.series.epochs[3].points[0].1 as f64;
            rises.push((last - first) / SIGMA);
        }
        let mean = rises.iter().sum::<f64>() / rises.len() as f64;
        assert!((mean - 12.0).abs() < 1.0, "{mean}");
        assert!(!SeriesKind::ReloadClean.generate(10, &mut rng).leaks);
    }

    #[test]
    fn plateaus_stop_rising() {
        let mut rng = ChaCha8Rng::seed_from_u64(7);
        for _ in 0..50 {
            let s = SeriesKind::Plateau.generate(20, &mut rng);
            let late = (s.points[20].1 as f64 - s.points[10].1 as f64) / SIGMA;
            assert!(late.abs() < 8.0, "{late}");
            assert!(!s.leaks);
        }
    }
}
