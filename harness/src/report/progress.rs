//! A progress bar over the turns of a run, on stderr; hidden when stderr is not a terminal or
//! when the user asked for quiet output, so logs and CI output stay clean.

use std::io::IsTerminal;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::runner::{RunObserver, Sample};

/// A [`RunObserver`] that advances a progress bar at the end of every turn.
#[derive(Debug)]
pub struct ProgressObserver {
    bar: ProgressBar,
}

impl ProgressObserver {
    /// A bar for a run of `total_turns` turns (warm-up included), labelled with the scenario name.
    /// It draws nothing when `quiet` is set or stderr is not a terminal.
    pub fn new(scenario: &str, total_turns: u32, quiet: bool) -> Self {
        let visible = !quiet && std::io::stderr().is_terminal();
        let target = if visible {
            ProgressDrawTarget::stderr()
        } else {
            ProgressDrawTarget::hidden()
        };
        let bar = ProgressBar::with_draw_target(Some(u64::from(total_turns)), target);
        let style = ProgressStyle::with_template(
            "{prefix:.bold} [{bar:30}] turn {pos}/{len} {msg} ({elapsed})",
        )
        .expect("the template is valid")
        .progress_chars("=> ");
        bar.set_style(style);
        bar.set_prefix(scenario.to_owned());
        Self { bar }
    }

    /// Whether the bar is drawn at all.
    pub fn is_visible(&self) -> bool {
        !self.bar.is_hidden()
    }

    /// Removes the bar from the terminal (call before printing the report).
    pub fn finish(&self) {
        self.bar.finish_and_clear();
    }
}

impl RunObserver for ProgressObserver {
    fn on_sample(&mut self, sample: &Sample) {
        if self.is_visible() {
            self.bar
                .set_message(format!("{:?}", sample.phase).to_lowercase());
        }
    }

    fn on_turn_end(&mut self, turn: u32, total: u32) {
        if self.bar.length() != Some(u64::from(total)) {
            self.bar.set_length(u64::from(total));
        }
        self.bar.set_position(u64::from(turn));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quiet_hides_the_bar_but_still_counts_turns() {
        let mut progress = ProgressObserver::new("leak", 4, true);
        assert!(!progress.is_visible());
        progress.on_turn_end(1, 4);
        progress.on_turn_end(2, 5);
        assert_eq!(progress.bar.position(), 2);
        assert_eq!(progress.bar.length(), Some(5));
        progress.finish();
    }
}
