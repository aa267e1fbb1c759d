//! The virtual clock: simulated time advanced by engine work (load, prefill, decode, ...) and by
//! idle waits, so that a thousand-turn scenario with `idle: 8s` runs in milliseconds.

use std::time::Duration;

/// Simulated time since the engine was built.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct VirtualClock {
    now: Duration,
}

impl VirtualClock {
    /// Moves time forward, saturating instead of overflowing.
    pub(crate) fn advance(&mut self, by: Duration) {
        self.now = self.now.saturating_add(by);
    }

    /// Time since the engine was built.
    pub(crate) fn now(&self) -> Duration {
        self.now
    }
}

/// `per_token` times `tokens`, saturating.
pub(crate) fn per_token(per_token: Duration, tokens: u32) -> Duration {
    per_token.saturating_mul(tokens)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn advances_and_saturates() {
        let mut clock = VirtualClock::default();
        clock.advance(Duration::from_millis(1500));
        clock.advance(per_token(Duration::from_millis(40), 10));
        assert_eq!(clock.now(), Duration::from_millis(1900));
        clock.advance(Duration::MAX);
        assert_eq!(clock.now(), Duration::MAX);
    }
}
