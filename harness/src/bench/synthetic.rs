//! Seeded synthetic post-close series: a baseline with Gaussian noise, optionally a one-time
//! step or bounded warm-up, spikes, or a per-turn leak in units of the noise; what real data does
//! besides (quantized metrics, slow saturating warm-ups, heavy-tailed noise, garbage-collected
//! heaps, an allocator's steps that come and go); and series with a reload every [`RELOAD_EVERY`] turns, clean or leaving memory behind
//! at each reload.

use rand::{Rng, RngExt};
use rand_distr::{Distribution, Normal, StudentT};

use crate::analyze::{Epoch, MetricSeries};

/// The baseline of every synthetic series, in bytes (1 GiB).
pub const BASELINE: f64 = 1024.0 * 1024.0 * 1024.0;
/// The noise standard deviation of one sample, in bytes (1 MiB).
pub const SIGMA: f64 = 1024.0 * 1024.0;
/// The reload period of the reload series, in turns.
pub const RELOAD_EVERY: u32 = 5;
/// How far each reload's level scatters around where it should land, in noise standard deviations.
pub const RELOAD_SCATTER_SIGMAS: f64 = 0.5;
/// The step of the quantized series (an allocator that maps 2 MiB segments), in bytes.
pub const QUANTUM: f64 = 2.0 * SIGMA;
/// Degrees of freedom of the heavy-tailed noise (Student t, scaled to standard deviation sigma).
pub const HEAVY_TAIL_DF: f64 = 3.0;
/// How much garbage a collected heap gathers per turn before a collection, in sigma.
pub const GARBAGE_PER_TURN_SIGMAS: f64 = 2.0;
/// The range of the step size of the step-noise series, in sigma: glibc's moving mmap threshold
/// and its arenas move a server's anon_rss in steps of 4-60 KiB over page-sized noise, a ratio
/// of about 15 between the smallest and the largest.
pub const STEP_NOISE_SIGMAS: (f64, f64) = (2.0, 30.0);
/// The range of the chance per turn that a step-noise series changes level.
pub const STEP_FLIP_CHANCE: (f64, f64) = (0.15, 0.4);

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
    /// A leak of this many sigma per turn (0: none), as [`SeriesKind::Leak`], read through a
    /// metric that moves in whole [`QUANTUM`]s (rounded down, as segment counts are).
    Quantized(f64),
    /// A saturating (exponential) warm-up of 20-200 sigma with a time constant of 1-3 turns,
    /// slower than the plateau rows': still visibly rising for several turns. Not a leak.
    SaturatingWarmup,
    /// A leak of this many sigma per turn (0: none) in heavy-tailed noise: Student t with
    /// [`HEAVY_TAIL_DF`] degrees of freedom, scaled to standard deviation sigma.
    HeavyTailed(f64),
    /// A garbage-collected heap: it gathers [`GARBAGE_PER_TURN_SIGMAS`] per turn and drops back
    /// every 4-6 turns (random phase); plus a leak of this many sigma per turn (0: none) that the
    /// collections do not give back.
    Sawtooth(f64),
    /// An allocator's steps that come and go: the level switches between two values
    /// [`STEP_NOISE_SIGMAS`] apart, with a chance of [`STEP_FLIP_CHANCE`] per turn (each drawn
    /// once per series; the baseline in either); plus a leak of this many sigma per turn (0: none).
    StepNoise(f64),
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
    /// The first turn after the generated warm-up (0 when there is none): what an oracle that
    /// knows the warm-up fits from.
    pub steady_from: u64,
}

impl SeriesKind {
    /// The reload period of this kind of series (0 = never).
    pub fn reload_every(&self) -> u32 {
        match self {
            SeriesKind::ReloadClean | SeriesKind::Ratchet(_) => RELOAD_EVERY,
            _ => 0,
        }
    }

    /// Whether series of this kind contain a leak.
    pub fn leaks(&self) -> bool {
        match *self {
            SeriesKind::Leak(k)
            | SeriesKind::Ratchet(k)
            | SeriesKind::Quantized(k)
            | SeriesKind::HeavyTailed(k)
            | SeriesKind::Sawtooth(k)
            | SeriesKind::StepNoise(k) => k > 0.0,
            SeriesKind::Clean
            | SeriesKind::Plateau
            | SeriesKind::Spiky
            | SeriesKind::ReloadClean
            | SeriesKind::SaturatingWarmup => false,
        }
    }

    /// Generates one series of `turns` turns after the baseline.
    pub fn generate(&self, turns: u32, rng: &mut impl Rng) -> SyntheticSeries {
        let noise = Normal::new(0.0, SIGMA).expect("positive sigma");
        let mut steady_from = 0;
        let shape: Vec<f64> = match *self {
            SeriesKind::Clean => vec![0.0; turns as usize + 1],
            SeriesKind::Plateau => {
                let (shape, settled) = plateau_shape(turns, rng);
                steady_from = settled;
                shape
            }
            SeriesKind::SaturatingWarmup => {
                let size = rng.random_range(20.0..200.0) * SIGMA;
                let tau = rng.random_range(1.0..3.0);
                steady_from = settle_of_exponential(size, tau, turns);
                (0..=turns)
                    .map(|t| size * (1.0 - (-f64::from(t) / tau).exp()))
                    .collect()
            }
            SeriesKind::Quantized(per_turn) | SeriesKind::HeavyTailed(per_turn) => (0..=turns)
                .map(|t| per_turn * SIGMA * f64::from(t))
                .collect(),
            SeriesKind::Sawtooth(per_turn) => {
                let period = rng.random_range(4..=6u32);
                let phase = rng.random_range(0..period);
                (0..=turns)
                    .map(|t| {
                        let garbage = GARBAGE_PER_TURN_SIGMAS * f64::from((t + phase) % period);
                        (garbage + per_turn * f64::from(t)) * SIGMA
                    })
                    .collect()
            }
            SeriesKind::StepNoise(per_turn) => step_noise_shape(turns, per_turn, rng),
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
                    steady_from = 1;
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
        let heavy = StudentT::new(HEAVY_TAIL_DF).expect("positive degrees of freedom");
        // A t with nu degrees of freedom has variance nu / (nu - 2).
        let heavy_scale = SIGMA / (HEAVY_TAIL_DF / (HEAVY_TAIL_DF - 2.0)).sqrt();
        let points: Vec<(u64, u64)> = shape
            .iter()
            .enumerate()
            .map(|(t, s)| {
                let value = match self {
                    SeriesKind::HeavyTailed(_) => (BASELINE + s + heavy_scale * heavy.sample(rng))
                        .max(0.0)
                        .round() as u64,
                    SeriesKind::Quantized(_) => {
                        let exact = BASELINE + s + noise.sample(rng);
                        ((exact / QUANTUM).floor() * QUANTUM).max(0.0) as u64
                    }
                    _ => sample(BASELINE + s, &noise, rng),
                };
                (t as u64, value)
            })
            .collect();
        SyntheticSeries {
            series: MetricSeries::from_points(&points),
            points,
            leaks: self.leaks(),
            steady_from,
        }
    }
}

/// A level that switches between two values (see [`SeriesKind::StepNoise`]), plus a leak.
fn step_noise_shape(turns: u32, per_turn: f64, rng: &mut impl Rng) -> Vec<f64> {
    let step = rng.random_range(STEP_NOISE_SIGMAS.0..STEP_NOISE_SIGMAS.1) * SIGMA;
    let flip = rng.random_range(STEP_FLIP_CHANCE.0..STEP_FLIP_CHANCE.1);
    let mut high = rng.random_bool(0.5);
    (0..=turns)
        .map(|t| {
            if t > 0 && rng.random_bool(flip) {
                high = !high;
            }
            let level = if high { step } else { 0.0 };
            level + per_turn * SIGMA * f64::from(t)
        })
        .collect()
}

/// The first turn at which an exponential warm-up of `size` has less than a tenth of the noise
/// left to rise (at most two turns before the end).
fn settle_of_exponential(size: f64, tau: f64, turns: u32) -> u64 {
    let t = (tau * (size / (0.1 * SIGMA)).ln()).ceil().max(0.0) as u64;
    t.min(u64::from(turns.saturating_sub(2)))
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
        steady_from: 0,
    }
}

/// A plateau's shape and the turn from which it stays put.
fn plateau_shape(turns: u32, rng: &mut impl Rng) -> (Vec<f64>, u64) {
    let size = rng.random_range(20.0..2000.0) * SIGMA;
    let kind = rng.random_range(0..3u8);
    let at = rng.random_range(1..=3u32);
    let width = f64::from(rng.random_range(2..=5u32));
    let tau = rng.random_range(0.5..1.5);
    let settled = match kind {
        0 => u64::from(at),
        1 => width as u64,
        _ => settle_of_exponential(size, tau, turns),
    };
    let shape = (0..=turns)
        .map(|t| {
            let t = f64::from(t);
            match kind {
                0 if t >= f64::from(at) => size,
                0 => 0.0,
                1 => size * (t / width).min(1.0),
                _ => size * (1.0 - (-t / tau).exp()),
            }
        })
        .collect();
    (shape, settled)
}

#[cfg(test)]
mod tests {
    use rand::SeedableRng;
    use rand_chacha::ChaCha8Rng;

    use super::*;
    use crate::analyze::{classify, Classification, ClassifyOptions};
    use crate::scenario::Tolerance;

    /// The detection benchmark's options: a tolerance of five noise deviations.
    fn options() -> ClassifyOptions {
        ClassifyOptions {
            tolerance: Some(Tolerance::Bytes((5.0 * SIGMA) as u64)),
            ..ClassifyOptions::default()
        }
    }

    /// How many of `count` series of `kind` over `turns` turns get each class (clean, plateau,
    /// growth, inconclusive).
    fn classes(kind: SeriesKind, turns: u32, count: u32, seed: u64) -> [u32; 4] {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let mut out = [0; 4];
        for _ in 0..count {
            let series = kind.generate(turns, &mut rng);
            let class = classify(&series.series, &options()).classification;
            out[match class {
                Classification::Clean => 0,
                Classification::Plateau => 1,
                Classification::Growth => 2,
                Classification::Inconclusive => 3,
            }] += 1;
        }
        out
    }

    #[test]
    fn clean_step_noise_is_not_growth_and_decided_within_forty_turns() {
        let [clean, plateau, growth, inconclusive] =
            classes(SeriesKind::StepNoise(0.0), 40, 200, 1);
        // Before the envelopes: 2.7% growth and 44% inconclusive (detection table, 40 turns).
        assert!(growth <= 3, "growth {growth}");
        assert!(inconclusive <= 40, "inconclusive {inconclusive}");
        assert!(clean + plateau >= 158, "clean {clean} plateau {plateau}");
    }

    #[test]
    fn a_clean_sawtooth_is_not_growth_and_decided_within_forty_turns() {
        let [clean, plateau, growth, inconclusive] = classes(SeriesKind::Sawtooth(0.0), 40, 200, 2);
        assert!(growth <= 2, "growth {growth}");
        assert!(inconclusive <= 40, "inconclusive {inconclusive}");
        assert!(clean + plateau >= 158, "clean {clean} plateau {plateau}");
    }

    /// A `max_growth_per_turn` of a quarter sigma per turn on step noise: judged on what a leak
    /// must move, clean series pass it and a leak of one sigma per turn fails it.
    #[test]
    fn a_cap_per_turn_on_step_noise_is_judged_on_troughs_and_peaks() {
        let options = ClassifyOptions {
            max_growth_per_turn: Some((0.25 * SIGMA) as u64),
            ..options()
        };
        let mut rng = ChaCha8Rng::seed_from_u64(4);
        let (mut held, mut caught) = (0, 0);
        for _ in 0..200 {
            let clean = classify(
                &SeriesKind::StepNoise(0.0).generate(40, &mut rng).series,
                &options,
            );
            held += u32::from(
                matches!(
                    clean.classification,
                    Classification::Clean | Classification::Plateau
                ) && clean
                    .slope_interval
                    .is_some_and(|(_, hi)| hi <= 0.25 * SIGMA),
            );
            let leak = classify(
                &SeriesKind::StepNoise(1.0).generate(40, &mut rng).series,
                &options,
            );
            caught += u32::from(leak.fails());
        }
        assert!(held >= 150, "held {held}");
        assert!(caught >= 186, "caught {caught}");
    }

    #[test]
    fn a_leak_under_step_noise_or_a_sawtooth_is_growth() {
        for kind in [SeriesKind::StepNoise(1.0), SeriesKind::Sawtooth(1.0)] {
            let [_, _, growth, _] = classes(kind, 40, 200, 3);
            assert!(growth >= 186, "{kind:?}: growth {growth}");
        }
    }

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
