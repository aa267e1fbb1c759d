//! Seeded measurement noise: the same seed and the same sequence of calls give the same jitter,
//! byte for byte; a different seed gives different jitter.

use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::profile::NoiseSpec;

/// Signed jitter for one sample, in bytes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Jitter {
    pub(crate) native: i64,
    pub(crate) gpu: i64,
    pub(crate) process: i64,
}

/// A seeded source of jitter.
#[derive(Debug, Clone)]
pub(crate) struct Noise {
    rng: ChaCha8Rng,
    spec: NoiseSpec,
}

impl Noise {
    pub(crate) fn new(seed: u64, spec: NoiseSpec) -> Self {
        Self {
            rng: ChaCha8Rng::seed_from_u64(seed),
            spec,
        }
    }

    /// Draws the jitter of one sample. Always draws the same number of values, whatever the
    /// spec, so that the stream stays aligned across samples.
    pub(crate) fn draw(&mut self) -> Jitter {
        let mut uniform = |amplitude: u64| {
            let a = amplitude.min(i64::MAX as u64) as i64;
            self.rng.random_range(-a..=a)
        };
        let native = uniform(self.spec.native.as_u64());
        let gpu = uniform(self.spec.gpu.as_u64());
        let process = uniform(self.spec.process.as_u64());
        let roll: f64 = self.rng.random();
        let spike = if roll < self.spec.spike_probability {
            self.spec.spike.as_u64().min(i64::MAX as u64) as i64
        } else {
            0
        };
        Jitter {
            native: native.saturating_add(spike),
            gpu,
            process,
        }
    }
}

/// Adds signed jitter to a size without going below zero.
pub(crate) fn apply(bytes: u64, jitter: i64) -> u64 {
    bytes.saturating_add_signed(jitter)
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytesize::ByteSize;

    fn spec() -> NoiseSpec {
        NoiseSpec {
            native: ByteSize::mib(1),
            gpu: ByteSize::kib(64),
            process: ByteSize::mib(2),
            ..NoiseSpec::default()
        }
    }

    #[test]
    fn same_seed_same_stream_different_seed_different_stream() {
        let draws = |seed| {
            let mut noise = Noise::new(seed, spec());
            (0..16).map(|_| noise.draw()).collect::<Vec<_>>()
        };
        assert_eq!(draws(7), draws(7));
        assert_ne!(draws(7), draws(8));
    }

    #[test]
    fn jitter_stays_within_its_amplitude() {
        let mut noise = Noise::new(1, spec());
        for _ in 0..200 {
            let j = noise.draw();
            assert!(j.native.unsigned_abs() <= 1 << 20);
            assert!(j.gpu.unsigned_abs() <= 64 << 10);
            assert!(j.process.unsigned_abs() <= 2 << 20);
        }
    }

    #[test]
    fn zero_spec_is_silent_and_certain_spikes_always_land() {
        let mut quiet = Noise::new(3, NoiseSpec::default());
        assert_eq!(quiet.draw(), Jitter::default());
        let mut spiky = Noise::new(
            3,
            NoiseSpec {
                spike_probability: 1.0,
                spike: ByteSize::mib(50),
                ..NoiseSpec::default()
            },
        );
        assert_eq!(spiky.draw().native, 50 << 20);
    }

    #[test]
    fn apply_never_goes_below_zero() {
        assert_eq!(apply(10, -20), 0);
        assert_eq!(apply(10, 5), 15);
    }
}
