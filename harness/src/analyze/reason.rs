//! Why the analyzer classified a series as it did, as data: each case with the numbers that
//! decided it, in the metric's own unit (bytes, or nanoseconds for a time metric). The analyzer
//! never writes sentences; the report layer (`report::render_reason`) words a reason once, for
//! every output, formatting its amounts by the metric's unit in the registry.
//!
//! A reason read back from a report.json is the sentence it was written as ([`Reason::Text`]).

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Why a metric got its classification. New cases are added as the analyzer learns them.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Reason {
    /// A sentence: read back from a report.json, or a series that could not be read.
    Text(String),
    /// A value stuck at `u64::MAX`: the counter no longer measures anything.
    Saturated {
        /// The first turn with the saturated value.
        turn: u64,
    },
    /// Too few samples after warm-up to fit anything.
    TooFewSamples {
        /// Samples in the series.
        samples: usize,
        /// Steady samples needed.
        needed: usize,
    },
    /// No load epoch holds two steady samples.
    NoSteadyPair,
    /// The slope has no confidence interval.
    Unbounded,
    /// Keeps rising after warm-up: growth.
    Growth {
        /// The rise.
        rise: Rise,
        /// When the growth does not matter, why.
        too_small: Option<TooSmall>,
        /// When it was decided soon after the warm-up, how soon.
        early: Option<EarlyGrowth>,
    },
    /// Rising, but its steps shrink: a warm-up still settling.
    Decelerating {
        /// The rise.
        rise: Rise,
        /// The level of the test on the steps.
        alpha: f64,
    },
    /// Rising, but something casts doubt on a leak.
    RoseInDoubt {
        /// The rise.
        rise: Rise,
        /// The doubt.
        doubt: Doubt,
    },
    /// The last sample stands above the line through the others.
    LastSampleJump {
        /// The last turn.
        turn: u64,
        /// How far above the line.
        jump: f64,
        /// The tolerance it exceeds.
        tolerance: f64,
    },
    /// Within tolerance of the baseline.
    Clean {
        /// The tolerance.
        tolerance: f64,
        /// The fitted rise of the steady level.
        rise: f64,
        /// The worst level above the baseline by the last turn.
        worst_end: f64,
        /// The slope's interval.
        interval: Interval,
    },
    /// A one-time rise that settled.
    Plateau {
        /// The rise.
        rise: f64,
        /// The turn it settled at.
        settled_at: u64,
        /// The slope's interval afterwards.
        interval: Interval,
    },
    /// A slope whose interval excludes zero but whose trend test is not significant.
    TrendNotSignificant {
        /// The slope per turn.
        slope: f64,
        /// Its interval.
        interval: Interval,
        /// Steady samples.
        samples: usize,
        /// The trend test's p-value.
        p: f64,
        /// The level it needs to be below.
        alpha: f64,
        /// What would decide.
        outlook: Outlook,
    },
    /// Neither a leak nor noise can be told apart.
    NoiseStraddles {
        /// The fitted rise.
        rise: f64,
        /// Its margin.
        margin: f64,
        /// The slope per turn.
        slope: f64,
        /// Its interval.
        interval: Interval,
        /// The noise of one sample.
        noise: f64,
        /// What would decide.
        outlook: Outlook,
    },
    /// One step up after the warm-up, flat before and after it.
    LateStep {
        /// The first turn on the higher level.
        turn: u64,
        /// The step.
        size: f64,
        /// The noise of one sample.
        noise: f64,
    },
    /// The slope's interval lies entirely below zero and the fitted level at the last turn is
    /// within the tolerance: memory given back, not leaked.
    Falling {
        /// The slope per turn.
        slope: f64,
        /// Its interval.
        interval: Interval,
        /// The fitted level at the last turn, above the baseline.
        end: f64,
        /// The tolerance.
        tolerance: f64,
    },
    /// The steady level steps up from load epoch to load epoch: growth.
    Ratchet {
        /// The step each reload leaves.
        step: f64,
        /// Load epochs.
        epochs: usize,
        /// Where the levels settled, when leading epochs were dropped.
        settled: Option<Settled>,
        /// The slope per turn over the epochs.
        slope: f64,
        /// Its interval.
        interval: Interval,
        /// Turns per reload.
        period: f64,
        /// The t-test's p-value on the epoch levels.
        p: f64,
        /// The Mann-Kendall p-value on the epoch levels.
        mann_kendall_p: f64,
        /// The slope within epochs.
        within_slope: f64,
        /// When the growth does not matter, why.
        too_small: Option<TooSmall>,
    },
    /// The level rose over the epochs, but not as a steady ratchet.
    RatchetInDoubt {
        /// Load epochs.
        epochs: usize,
        /// Where the levels settled, when leading epochs were dropped.
        settled: Option<Settled>,
        /// The slope per turn over the epochs.
        slope: f64,
        /// Its interval.
        interval: Interval,
        /// The t-test's p-value on the epoch levels.
        p: f64,
        /// Why it is not growth.
        doubt: RatchetDoubt,
    },
    /// The level rose between too few epochs to judge a ratchet.
    LevelRoseOverFewEpochs {
        /// The rise from the first to the last epoch.
        rise: f64,
        /// Load epochs.
        epochs: usize,
        /// What clean or plateau allows.
        allowance: f64,
        /// Epochs needed.
        needed: usize,
    },
    /// The level rose over the epochs, not significantly.
    LevelRoseNotSignificantly {
        /// The rise from the first to the last epoch.
        rise: f64,
        /// Load epochs.
        epochs: usize,
        /// Where the levels settled, when leading epochs were dropped.
        settled: Option<Settled>,
        /// What clean or plateau allows.
        allowance: f64,
    },
    /// A rise that rests on a few jumps: without them the level does not rise.
    RoseInJumps {
        /// Jumps up.
        ups: usize,
        /// Drops.
        drops: usize,
        /// The largest jump (negative for a drop).
        largest: f64,
        /// The turn it landed on.
        at_turn: u64,
        /// The slope per turn without the jumps.
        slope_without: f64,
        /// Its one-sided p-value.
        p: f64,
    },
    /// Flat levels between a few jumps that come and go: no rise inside the levels
    /// (`classify/levels.rs`).
    FlatLevels {
        /// Jumps up.
        ups: usize,
        /// Drops.
        drops: usize,
        /// The largest jump (negative for a drop).
        largest: f64,
        /// The turn it landed on.
        at_turn: u64,
        /// The interval of the slope inside the levels.
        interval: Interval,
        /// That slope's one-sided p-value of rising.
        p: f64,
        /// The tolerance.
        tolerance: f64,
        /// What the levels show.
        outcome: LevelsOutcome,
    },
    /// Memory that switches back and forth between a few value levels, with no rise inside them
    /// (`classify/levels.rs`, switching levels).
    SwitchingLevels {
        /// How many levels.
        levels: usize,
        /// Jumps up and down between them.
        switches: usize,
        /// The distance from the lowest level to the highest.
        step: f64,
        /// The interval of the slope inside the levels.
        interval: Interval,
        /// That slope's one-sided p-value of rising.
        p: f64,
        /// The tolerance.
        tolerance: f64,
        /// What the levels show.
        outcome: LevelsOutcome,
    },
    /// Memory that steps up and down or rises and falls in teeth, judged on its troughs and
    /// peaks (what a leak must move) rather than on a line through every sample.
    Envelope {
        /// The pattern seen.
        pattern: Pattern,
        /// The lines through the troughs and the peaks.
        envelopes: Envelopes,
        /// What they show.
        outcome: EnvelopeOutcome,
    },
}

impl Default for Reason {
    fn default() -> Self {
        Reason::Text(String::new())
    }
}

/// A rise fitted on the steady part.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Rise {
    /// The slope per turn.
    pub slope: f64,
    /// The first steady turn.
    pub from_turn: u64,
    /// The slope's interval.
    pub interval: Interval,
    /// What makes the rise significant.
    pub significance: Significance,
}

/// A confidence interval of a slope per turn.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Interval {
    /// The confidence level (e.g. 0.95).
    pub confidence: f64,
    /// The lower bound.
    pub lo: f64,
    /// The upper bound.
    pub hi: f64,
    /// How it was computed; `None` where one method is the only one (epoch levels).
    pub kind: Option<IntervalKind>,
}

/// How a slope's interval was computed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IntervalKind {
    /// From the ranks of the pairwise slopes.
    Rank,
    /// From the noise estimate.
    NoiseBased,
}

/// What makes a rise significant.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Significance {
    /// The Mann-Kendall trend test.
    MannKendall {
        /// Its p-value.
        p: f64,
    },
    /// Every steady sample above the one before, and the slope against the noise.
    EffectSize {
        /// The slope's p-value against the noise.
        p: f64,
    },
}

/// Growth decided over no more turns than twice the warm-up before it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EarlyGrowth {
    /// Turns before the steady part.
    pub warmup_turns: u64,
    /// Turns of the steady part.
    pub steady_turns: u64,
}

/// Why a rise is not taken for growth.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Doubt {
    /// The later half rises much more slowly.
    LaterHalfSlower {
        /// Its slope per turn.
        slope: f64,
        /// Its p-value.
        p: f64,
    },
    /// The least-squares slope is not significant against the scatter.
    LeastSquares {
        /// Its p-value.
        p: f64,
    },
    /// Memory stood higher before the steady part.
    Sawtooth,
    /// Too few steady samples for a rank test, and they rose less than the tolerance: a
    /// warm-up still settling looks the same for so few turns.
    TooFewToTell {
        /// The steady samples.
        samples: usize,
        /// What the steady samples rose (slope times their span), in the metric's unit.
        rose: f64,
        /// The tolerance that rise stayed within.
        tolerance: f64,
    },
}

/// Steps or teeth seen in a steady part: drops beyond the noise that come back.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Pattern {
    /// What the drops look like.
    pub kind: PatternKind,
    /// Drops in the steady part.
    pub drops: usize,
    /// The median size of a drop.
    pub typical_drop: f64,
}

/// The kind of a [`Pattern`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PatternKind {
    /// The level jumps up and down (an allocator's thresholds and arenas).
    Steps,
    /// The level gathers turn by turn and drops at once (a garbage collector, a pool).
    Sawtooth,
}

/// Lines through the troughs and the peaks of a [`Pattern`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Envelopes {
    /// The interval of the mean of the troughs' and the peaks' slopes per turn (what a leak
    /// moves both by).
    pub troughs: Interval,
    /// The troughs' slope per turn.
    pub troughs_slope: f64,
    /// The peaks' slope per turn.
    pub peaks_slope: f64,
    /// How far the peaks stand above the baseline.
    pub peak_rise: f64,
    /// The most the level can stand above the baseline by the last turn: the peaks, their margin
    /// and what the troughs' upper bound adds.
    pub worst_end: f64,
    /// The tolerance.
    pub tolerance: f64,
}

/// What the envelopes of a [`Pattern`] show.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum EnvelopeOutcome {
    /// Troughs and peaks both rise: growth.
    Rising {
        /// The troughs' one-sided p-value.
        trough_p: f64,
        /// The peaks' one-sided p-value.
        peak_p: f64,
        /// When the growth does not matter, why.
        too_small: Option<TooSmall>,
    },
    /// Within the tolerance by the last turn: clean.
    Clean,
    /// Bounded above the tolerance: plateau.
    Bounded,
    /// Neither shown: inconclusive.
    Undecided {
        /// About this many turns would decide, when a projection could tell.
        turns_needed: Option<u64>,
    },
}

/// What flat levels between jumps show ([`Reason::FlatLevels`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum LevelsOutcome {
    /// Every level, with what the slope could add by the last turn, within the tolerance.
    Clean {
        /// The highest level's worst case at the last turn, above the baseline.
        worst_end: f64,
    },
    /// The last level beyond the tolerance and not climbing.
    Bounded {
        /// The last level above the baseline.
        rise: f64,
    },
}

/// Why a rise over load epochs is not taken for growth.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum RatchetDoubt {
    /// The rise is not spread over the epochs.
    NotSpread {
        /// The Mann-Kendall p-value.
        p: f64,
    },
    /// The later half of the epochs rises more slowly.
    LaterHalfSlower {
        /// Its slope per turn.
        slope: f64,
    },
}

/// Where the epoch levels settled when leading epochs were still settling.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Settled {
    /// The load the levels are counted from.
    pub after_turn: f64,
    /// Epochs left out.
    pub dropped: usize,
}

/// Why a growth does not matter.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum TooSmall {
    /// Its upper bound is within the `max_growth_per_turn` cap.
    WithinCap {
        /// The upper bound per turn.
        hi: f64,
        /// The cap per turn.
        cap: f64,
    },
    /// At its lower bound it stays within the tolerance over the horizon.
    WithinTolerance {
        /// The lower bound per turn.
        lo: f64,
        /// The horizon in turns.
        horizon: f64,
        /// The tolerance.
        tolerance: f64,
    },
}

/// What would decide an inconclusive series.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Outlook {
    /// About this many turns.
    Turns(u64),
    /// No run length: the baseline's noise straddles the tolerance.
    NoRunLength {
        /// Baseline samples taken.
        baseline_samples: usize,
        /// Baseline samples that would decide, when more would.
        samples_needed: Option<usize>,
        /// The tolerance that would decide.
        tolerance: f64,
    },
}

/// A reason is written as its sentence: the report layer renders structured reasons before a
/// verdict is serialized, since only it knows the metric's unit. Serializing one unrendered is
/// a bug, reported as an error rather than written in a guessed unit.
impl Serialize for Reason {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Reason::Text(text) => serializer.serialize_str(text),
            _ => Err(serde::ser::Error::custom(
                "a reason must be put in words (report::render_reasons) before it is written",
            )),
        }
    }
}

impl<'de> Deserialize<'de> for Reason {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        String::deserialize(deserializer).map(Reason::Text)
    }
}
