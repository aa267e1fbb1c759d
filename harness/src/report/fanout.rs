//! Several observers watching one run (the runner takes one).

use crate::runner::{RunObserver, Sample};

/// Forwards every event to each observer in order.
#[derive(Default)]
pub struct Fanout<'a> {
    observers: Vec<&'a mut dyn RunObserver>,
}

impl std::fmt::Debug for Fanout<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Fanout")
            .field("observers", &self.observers.len())
            .finish()
    }
}

impl<'a> Fanout<'a> {
    /// Forwards to `observers`, in this order.
    pub fn new(observers: Vec<&'a mut dyn RunObserver>) -> Self {
        Self { observers }
    }
}

impl RunObserver for Fanout<'_> {
    fn on_sample(&mut self, sample: &Sample) {
        for observer in &mut self.observers {
            observer.on_sample(sample);
        }
    }

    fn on_turn_end(&mut self, turn: u32, total: u32) {
        for observer in &mut self.observers {
            observer.on_turn_end(turn, total);
        }
    }

    fn on_cl_sites(
        &mut self,
        turn: u32,
        phase: crate::runner::Phase,
        sites: &crate::attribution::ClSites,
    ) {
        for observer in &mut self.observers {
            observer.on_cl_sites(turn, phase, sites);
        }
    }

    fn on_turns_done(&mut self) {
        for observer in &mut self.observers {
            observer.on_turns_done();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::examples::leak_run;

    #[derive(Default)]
    struct Count {
        samples: usize,
        turns: Vec<u32>,
    }

    impl RunObserver for Count {
        fn on_sample(&mut self, _: &Sample) {
            self.samples += 1;
        }
        fn on_turn_end(&mut self, turn: u32, _: u32) {
            self.turns.push(turn);
        }
    }

    #[test]
    fn every_observer_sees_every_event() {
        let (record, _) = leak_run();
        let (mut a, mut b) = (Count::default(), Count::default());
        {
            let mut fanout = Fanout::new(vec![&mut a, &mut b]);
            for s in &record.samples.to_vec()[..3] {
                fanout.on_sample(s);
            }
            fanout.on_turn_end(1, 9);
        }
        for c in [a, b] {
            assert_eq!((c.samples, c.turns), (3, vec![1]));
        }
    }
}
