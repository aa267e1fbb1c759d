//! The analyzer's reasons in words: the one place where a [`Reason`] becomes the sentence that
//! report.json, `leakloop analyze` and the expectations show. Amounts are written in the
//! metric's own unit, from the registry (a time metric's slope reads `+4.00 ms per turn`, a
//! memory metric's `+110.0 MiB per turn`).

use std::collections::BTreeMap;

use leakloop_units::Quantity;

use crate::analyze::units::{confidence_percent, probability, quantity};
use crate::analyze::{
    Doubt, EarlyGrowth, EnvelopeOutcome, Envelopes, Interval, IntervalKind, KeyedExplanation,
    KeyedGrowth, LevelsOutcome, MetricAnalysis, Outlook, Pattern, PatternKind, RatchetDoubt,
    Reason, Rise, Significance, TooSmall, Verdict,
};

/// `reason`, a reason given for `metric`, as a sentence.
pub fn render_reason(metric: &str, reason: &Reason) -> String {
    Words {
        q: quantity(metric),
    }
    .reason(reason)
}

/// `metrics` with every reason put in words ([`Reason::Text`]), ready to be serialized.
pub(crate) fn render_reasons(
    metrics: &BTreeMap<String, MetricAnalysis>,
) -> BTreeMap<String, MetricAnalysis> {
    metrics
        .iter()
        .map(|(name, analysis)| {
            let mut analysis = analysis.clone();
            analysis.reason = Reason::Text(render_reason(name, &analysis.reason));
            (name.clone(), analysis)
        })
        .collect()
}

/// `verdict` with every reason put in words, ready to be serialized.
pub(crate) fn verdict_in_words(verdict: &Verdict) -> Verdict {
    Verdict {
        status: verdict.status,
        metrics: render_reasons(&verdict.metrics),
        expectations: verdict.expectations.clone(),
        attribution: verdict.attribution.clone(),
        driver_attribution: verdict.driver_attribution.clone(),
        cl_objects: verdict.cl_objects.clone(),
    }
}

/// What a keyed run's growth follows (`analyze/cache_or_leak.rs`), in words: a cache filling,
/// growth per request, both, or neither.
pub(crate) fn keyed_growth_in_words(metric: &str, keyed: &KeyedGrowth) -> String {
    let q = quantity(metric);
    let keys = match keyed.distinct_keys {
        1 => "1 distinct key".to_owned(),
        n => format!("{n} distinct keys"),
    };
    let per_request = q.format_signed(keyed.per_request_bytes);
    let per_new_key = q.format(keyed.per_new_key_bytes);
    let grown = format!(
        "{} of {} turns that grew had a new key, p = {}",
        keyed.grown_on_new_keys,
        keyed.grown_turns,
        probability(keyed.per_new_key_p)
    );
    match keyed.explanation {
        KeyedExplanation::CacheFilling => {
            let bound = match keyed.filled_after_keys {
                Some(k) => format!(
                    "new keys stopped adding memory after {k} distinct keys: a bounded cache \
                     that evicts"
                ),
                None => "every new key so far added memory: bounded only as long as the keys \
                         are (a cache without eviction grows with every new session)"
                    .to_owned(),
            };
            format!(
                "grows by about {per_new_key} per new key, not per request ({keys}; {grown}; a \
                 repeated key: {per_request}): a cache filling; {bound}"
            )
        }
        KeyedExplanation::PerRequest => format!(
            "grows by about {per_request} per request even when the key was seen before ({} \
             repeated-key turns, p = {}; {keys}): missing eviction or a leak, not a cache \
             filling",
            keyed.repeat_turns,
            probability(keyed.per_request_p)
        ),
        KeyedExplanation::Both => format!(
            "grows by about {per_request} per request even when the key was seen before \
             (missing eviction or a leak), and by about {per_new_key} more per new key (a cache \
             filling; {keys}; {grown})"
        ),
        KeyedExplanation::Neither => format!(
            "its growth follows neither new keys nor repeated requests clearly ({keys}; a \
             repeated key: {per_request})"
        ),
        KeyedExplanation::Unseparated => format!(
            "cannot tell a cache filling from a leak: {} measured turns had a new key and {} a \
             repeated one ({keys}); let keys repeat (`sessions: {{distinct: N}}` with N well \
             below the turns)",
            keyed.new_key_turns, keyed.repeat_turns
        ),
    }
}

/// Writes amounts of one quantity.
struct Words {
    q: Quantity,
}

impl Words {
    fn size(&self, value: f64) -> String {
        self.q.format(value)
    }

    fn signed(&self, value: f64) -> String {
        self.q.format_signed(value)
    }

    /// `95% CI +1.0 KiB..+2.0 KiB per turn, rank interval`.
    fn interval(&self, i: &Interval) -> String {
        let kind = match i.kind {
            Some(IntervalKind::Rank) => ", rank interval",
            Some(IntervalKind::NoiseBased) => ", noise-based interval",
            None => "",
        };
        format!(
            "{} CI {}..{} per turn{kind}",
            confidence_percent(i.confidence),
            self.signed(i.lo),
            self.signed(i.hi)
        )
    }

    fn significance(s: &Significance) -> String {
        match s {
            Significance::EffectSize { p } => format!(
                "every steady sample above the one before; slope against the noise p = {p:.2e}"
            ),
            Significance::MannKendall { p } => format!("Mann-Kendall p = {p:.2e}"),
        }
    }

    /// `+1.0 MiB per turn from turn 3 (95% CI ...; Mann-Kendall p = ...)`.
    fn rise(&self, rise: &Rise) -> String {
        format!(
            "{} per turn from turn {} ({}; {})",
            self.signed(rise.slope),
            rise.from_turn,
            self.interval(&rise.interval),
            Self::significance(&rise.significance)
        )
    }

    fn doubt(&self, doubt: &Doubt) -> String {
        match doubt {
            Doubt::LaterHalfSlower { slope, p } => format!(
                "the later half of those turns rises only {} per turn (p = {p:.2})",
                self.signed(*slope)
            ),
            Doubt::LeastSquares { p } => format!(
                "against the scatter around the line the slope is not significant (least squares \
                 p = {p:.3})"
            ),
            Doubt::Sawtooth => {
                "memory stood higher before the steady part and fell (a sawtooth?)".to_owned()
            }
            Doubt::TooFewToTell {
                samples,
                rose,
                tolerance,
            } => format!(
                "{samples} steady samples cannot tell a leak from a warm-up still settling, and \
                 they rose {} in all, within the {} tolerance",
                self.signed(*rose),
                self.size(*tolerance)
            ),
        }
    }

    /// `; too small to fail: ...`, or nothing.
    fn too_small(&self, too_small: &Option<TooSmall>) -> String {
        let why = match too_small {
            None => return String::new(),
            Some(TooSmall::WithinCap { hi, cap }) => format!(
                "its upper bound {} per turn is within the {} per turn allowed",
                self.signed(*hi),
                self.size(*cap)
            ),
            Some(TooSmall::WithinTolerance {
                lo,
                horizon,
                tolerance,
            }) => format!(
                "at its lower bound ({} per turn) it adds {} over {horizon} turns, within the {} \
                 tolerance",
                self.signed(*lo),
                self.signed(lo * horizon),
                self.size(*tolerance)
            ),
        };
        format!("; too small to fail: {why}")
    }

    /// `; decided N turns after a warm-up of W: ...`, or nothing.
    fn early(early: &Option<EarlyGrowth>) -> String {
        match early {
            None => String::new(),
            Some(EarlyGrowth {
                warmup_turns,
                steady_turns,
            }) => format!(
                "; decided {steady_turns} turns after a warm-up of {warmup_turns}: a cache that \
                 fills more slowly than the warm-up rises the same way until it is full (if the \
                 engine caches by design, widen the warm-up past its fill or run longer)"
            ),
        }
    }

    fn outlook(&self, outlook: &Outlook) -> String {
        match outlook {
            Outlook::Turns(n) => format!("about {n} turns would decide"),
            Outlook::NoRunLength {
                baseline_samples,
                samples_needed,
                tolerance,
            } => {
                let baseline = match baseline_samples {
                    1 => "one sample".to_owned(),
                    k => format!("the median of {k} samples"),
                };
                let samples = match samples_needed {
                    Some(k) => format!(
                        "{k} baseline samples (`sample: {{baseline: {k}}}` in a scenario, or {k} \
                         turn-0 rows in a trace) or "
                    ),
                    None => String::new(),
                };
                format!(
                    "no run length decides: the baseline is {baseline} and its noise alone \
                     straddles the tolerance; {samples}a tolerance of at least {} would decide",
                    self.size(*tolerance)
                )
            }
        }
    }

    /// `steps up and down (5 drops of about 48.0 KiB, an allocator's thresholds or arenas)`.
    fn pattern(&self, pattern: &Pattern) -> String {
        let (moves, cause) = match pattern.kind {
            PatternKind::Steps => ("steps up and down", "an allocator's thresholds or arenas"),
            PatternKind::Sawtooth => (
                "gathers and drops in teeth",
                "a garbage collector or a pool that empties",
            ),
        };
        format!(
            "{moves} ({} drops of about {}: {cause}); judged on the troughs the drops land on \
             and the peaks they fall from, since a leak lifts both",
            pattern.drops,
            self.size(pattern.typical_drop),
        )
    }

    fn envelope(&self, pattern: &Pattern, e: &Envelopes, outcome: &EnvelopeOutcome) -> String {
        let troughs = format!(
            "the troughs move {} and the peaks {} per turn ({} for both)",
            self.signed(e.troughs_slope),
            self.signed(e.peaks_slope),
            self.interval(&e.troughs)
        );
        let shown = match outcome {
            EnvelopeOutcome::Rising {
                trough_p,
                peak_p,
                too_small,
            } => format!(
                "{troughs}: both rise (t-test p = {trough_p:.2e} and {peak_p:.2e}){}",
                self.too_small(too_small)
            ),
            EnvelopeOutcome::Clean => format!(
                "{troughs}; the peaks stand {} above the baseline, at most {} by the last turn, \
                 within the {} tolerance",
                self.signed(e.peak_rise),
                self.signed(e.worst_end),
                self.size(e.tolerance)
            ),
            EnvelopeOutcome::Bounded => format!(
                "{troughs}; the peaks stand {} above the baseline (beyond the {} tolerance) and \
                 do not climb: a bounded level, not a leak",
                self.signed(e.peak_rise),
                self.size(e.tolerance)
            ),
            EnvelopeOutcome::Undecided { turns_needed } => format!(
                "{troughs}, which neither shows a leak nor bounds the level (peaks {} above the \
                 baseline, tolerance {}); {}",
                self.signed(e.peak_rise),
                self.size(e.tolerance),
                match turns_needed {
                    Some(n) => format!("about {n} turns would decide"),
                    None => "a longer run would tell".to_owned(),
                }
            ),
        };
        format!("{}: {shown}", self.pattern(pattern))
    }

    fn reason(&self, reason: &Reason) -> String {
        match reason {
            Reason::Text(text) => text.clone(),
            Reason::Saturated { turn } => format!(
                "the value saturated at 2^64 - 1 at turn {turn}: the counter no longer measures \
                 the memory"
            ),
            Reason::TooFewSamples { samples, needed } => format!(
                "too few samples after warm-up ({samples} in all); at least {needed} steady turns \
                 are needed"
            ),
            Reason::NoSteadyPair => "no two steady samples in the same load epoch".to_owned(),
            Reason::Unbounded => "the slope cannot be bounded from these samples".to_owned(),
            Reason::Growth {
                rise,
                too_small,
                early,
            } => format!(
                "keeps rising {}{}{}",
                self.rise(rise),
                self.too_small(too_small),
                Self::early(early)
            ),
            Reason::LateStep { turn, size, noise } => format!(
                "one step of {} at turn {turn}, flat before and after it (noise {}): the runtime \
                 grew once after the warm-up (a request larger than any before, its arena or a \
                 pool growing), not a leak shown; widen the warm-up to {turn} turns \
                 (`--warmup-turns {turn}`, or `warmup_turns` in the scenario) or move the largest \
                 request shape into it",
                self.signed(*size),
                self.size(*noise),
            ),
            Reason::Falling {
                slope,
                interval,
                end,
                tolerance,
            } => format!(
                "falls {} per turn ({}, entirely below zero) and ends {} from the baseline, \
                 within the {} tolerance: memory given back, not leaked",
                self.signed(*slope),
                self.interval(interval),
                self.signed(*end),
                self.size(*tolerance)
            ),
            Reason::Decelerating { rise, alpha } => format!(
                "rose {} but its steps shrink (Mann-Kendall on the steps p < {alpha}, and to half \
                 their size or to the noise after the largest early one) and without its first \
                 third the rise is not significant: a warm-up still settling or a leak; a run \
                 twice as long would tell",
                self.rise(rise)
            ),
            Reason::RoseInDoubt { rise, doubt } => format!(
                "rose {} but {}: a warm-up still settling, a sawtooth or a leak too small to show \
                 yet; a run twice as long would tell",
                self.rise(rise),
                self.doubt(doubt)
            ),
            Reason::LastSampleJump {
                turn,
                jump,
                tolerance,
            } => format!(
                "the last sample (turn {turn}) is {} above the line through the others, beyond \
                 the {} tolerance: a step that has just begun or a spike, which one more turn \
                 would tell apart",
                self.signed(*jump),
                self.size(*tolerance)
            ),
            Reason::Clean {
                tolerance,
                rise,
                worst_end,
                interval,
            } => format!(
                "stays within {} of the baseline (rise {}, at most {} by the last turn; {})",
                self.size(*tolerance),
                self.signed(*rise),
                self.signed(*worst_end),
                self.interval(interval)
            ),
            Reason::Plateau {
                rise,
                settled_at,
                interval,
            } => format!(
                "one-time rise of {} that settled at turn {settled_at}; afterwards {}",
                self.signed(*rise),
                self.interval(interval)
            ),
            Reason::TrendNotSignificant {
                slope,
                interval,
                samples,
                p,
                alpha,
                outlook,
            } => format!(
                "rises about {} per turn ({}) but the trend test is not significant with \
                 {samples} steady samples (Mann-Kendall p = {p:.3}, needs < {}); {}",
                self.signed(*slope),
                self.interval(interval),
                probability(*alpha),
                self.outlook(outlook)
            ),
            Reason::NoiseStraddles {
                rise,
                margin,
                slope,
                interval,
                noise,
                outlook,
            } => format!(
                "cannot tell a leak from noise: rise {} (+-{}), slope {} ({}), noise {}; {}",
                self.signed(*rise),
                self.size(*margin),
                self.signed(*slope),
                self.interval(interval),
                self.size(*noise),
                self.outlook(outlook)
            ),
            Reason::Ratchet {
                step,
                epochs,
                settled,
                slope,
                interval,
                period,
                p,
                mann_kendall_p,
                within_slope,
                too_small,
            } => format!(
                "each reload leaves {} behind: the steady level steps up over {epochs} load \
                 epochs{}, {} per turn ({}, every {period} turns; t-test on the epoch levels p = \
                 {p:.2e}, Mann-Kendall p = {mann_kendall_p:.2e}); within epochs {} per turn{}",
                self.signed(*step),
                Self::settled(settled),
                self.signed(*slope),
                self.interval(interval),
                self.signed(*within_slope),
                self.too_small(too_small)
            ),
            Reason::RatchetInDoubt {
                epochs,
                settled,
                slope,
                interval,
                p,
                doubt,
            } => {
                let why = match doubt {
                    RatchetDoubt::NotSpread { p } => {
                        format!("the rise is not spread over the epochs (Mann-Kendall p = {p:.2})")
                    }
                    RatchetDoubt::LaterHalfSlower { slope } => format!(
                        "the later half of the epochs rises {} per turn",
                        self.signed(*slope)
                    ),
                };
                format!(
                    "the steady level rose over {epochs} load epochs{}, {} per turn ({}; p = \
                     {p:.2e}) but {why}: a one-time step between loads or memory a reload leaves \
                     behind; a run twice as long would tell",
                    Self::settled(settled),
                    self.signed(*slope),
                    self.interval(interval),
                )
            }
            Reason::LevelRoseOverFewEpochs {
                rise,
                epochs,
                allowance,
                needed,
            } => format!(
                "the steady level rose {} from the first to the last of {epochs} load epochs \
                 (beyond {}); at least {needed} epochs are needed to tell memory each reload \
                 leaves behind from noise",
                self.signed(*rise),
                self.size(*allowance),
            ),
            Reason::LevelRoseNotSignificantly {
                rise,
                epochs,
                settled,
                allowance,
            } => format!(
                "the steady level rose {} over {epochs} load epochs{} (beyond {}) but not \
                 significantly: memory each reload leaves behind, or levels that scatter from \
                 load to load; a run twice as long would tell",
                self.signed(*rise),
                Self::settled(settled),
                self.size(*allowance),
            ),
            Reason::Envelope {
                pattern,
                envelopes,
                outcome,
            } => self.envelope(pattern, envelopes, outcome),
            Reason::FlatLevels {
                ups,
                drops,
                largest,
                at_turn,
                interval,
                p,
                tolerance,
                outcome,
            } => {
                let levels = format!(
                    "flat levels between jumps ({ups} up, {drops} down; the largest {} at turn \
                     {at_turn}): inside them it moves {} per turn ({}, least squares p = {p:.2}), \
                     no rise",
                    self.signed(*largest),
                    self.signed((interval.lo + interval.hi) / 2.0),
                    self.interval(interval),
                );
                match outcome {
                    LevelsOutcome::Clean { worst_end } => format!(
                        "{levels}; every level ends at most {} from the baseline, within the {} \
                         tolerance: an allocator's level that moved, not a leak",
                        self.signed(*worst_end),
                        self.size(*tolerance)
                    ),
                    LevelsOutcome::Bounded { rise } => format!(
                        "{levels}; the last level stands {} above the baseline (beyond the {} \
                         tolerance) and does not climb: a bounded level, not a leak",
                        self.signed(*rise),
                        self.size(*tolerance)
                    ),
                }
            }
            Reason::SwitchingLevels {
                levels,
                switches,
                step,
                interval,
                p,
                tolerance,
                outcome,
            } => {
                let seen = format!(
                    "switches back and forth between {levels} levels ({switches} jumps, {} from \
                     the lowest to the highest): inside them it moves {} per turn ({}, least \
                     squares p = {p:.2}), no rise",
                    self.size(*step),
                    self.signed((interval.lo + interval.hi) / 2.0),
                    self.interval(interval),
                );
                match outcome {
                    LevelsOutcome::Clean { worst_end } => format!(
                        "{seen}; every level ends at most {} from the baseline, within the {} \
                         tolerance: an allocator switching levels, not a leak",
                        self.signed(*worst_end),
                        self.size(*tolerance)
                    ),
                    LevelsOutcome::Bounded { rise } => format!(
                        "{seen}; the highest level stands {} above the baseline (beyond the {} \
                         tolerance) and does not climb: levels an allocator switches between, \
                         bounded, not a leak",
                        self.signed(*rise),
                        self.size(*tolerance)
                    ),
                }
            }
            Reason::RoseInJumps {
                ups,
                drops,
                largest,
                at_turn,
                slope_without,
                p,
            } => format!(
                "rose only in jumps ({ups} up, {drops} down; the largest {} at turn {at_turn}): \
                 without them the level moves {} per turn (least squares p = {p:.2}), no rise; a \
                 one-time step or an allocator's level that has not come back yet, not a leak \
                 shown; a run twice as long would tell",
                self.signed(*largest),
                self.signed(*slope_without),
            ),
        }
    }

    fn settled(settled: &Option<crate::analyze::Settled>) -> String {
        match settled {
            Some(s) => format!(
                " (settled from the load after turn {}; {} earlier still settling)",
                s.after_turn, s.dropped
            ),
            None => String::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: f64 = 1_048_576.0;

    fn growth(slope: f64, lo: f64, hi: f64, too_small: Option<TooSmall>) -> Reason {
        Reason::Growth {
            rise: Rise {
                slope,
                from_turn: 3,
                interval: Interval {
                    confidence: 0.95,
                    lo,
                    hi,
                    kind: Some(IntervalKind::Rank),
                },
                significance: Significance::MannKendall { p: 1.5e-4 },
            },
            too_small,
            early: None,
        }
    }

    #[test]
    fn a_memory_reason_is_worded_in_bytes() {
        let reason = growth(110.0 * MIB, 108.0 * MIB, 112.0 * MIB, None);
        assert_eq!(
            render_reason("native_heap", &reason),
            "keeps rising +110.0 MiB per turn from turn 3 (95% CI +108.0 MiB..+112.0 MiB per \
             turn, rank interval; Mann-Kendall p = 1.50e-4)"
        );
    }

    #[test]
    fn a_time_reason_is_worded_in_its_own_unit() {
        let reason = growth(
            4e6,
            3.9e6,
            4.1e6,
            Some(TooSmall::WithinCap {
                hi: 4.1e6,
                cap: 5e6,
            }),
        );
        let text = render_reason("turn_time", &reason);
        assert_eq!(
            text,
            "keeps rising +4.00 ms per turn from turn 3 (95% CI +3.90 ms..+4.10 ms per turn, \
             rank interval; Mann-Kendall p = 1.50e-4); too small to fail: its upper bound \
             +4.10 ms per turn is within the 5.00 ms per turn allowed"
        );
        assert!(!text.contains("B"), "{text}");
    }

    #[test]
    fn a_plateau_names_its_rise_and_settling_turn() {
        let reason = Reason::Plateau {
            rise: 1770.0 * MIB,
            settled_at: 1,
            interval: Interval {
                confidence: 0.95,
                lo: -2048.0,
                hi: 0.0,
                kind: None,
            },
        };
        assert_eq!(
            render_reason("gpu", &reason),
            "one-time rise of +1.7 GiB that settled at turn 1; afterwards 95% CI -2.0 KiB..0 B \
             per turn"
        );
    }

    #[test]
    fn an_undecidable_series_says_what_would_decide() {
        let reason = Reason::NoiseStraddles {
            rise: 3.0 * MIB,
            margin: MIB,
            slope: 0.0,
            interval: Interval {
                confidence: 0.95,
                lo: -1024.0,
                hi: 1024.0,
                kind: Some(IntervalKind::NoiseBased),
            },
            noise: 512.0,
            outlook: Outlook::NoRunLength {
                baseline_samples: 1,
                samples_needed: Some(4),
                tolerance: 5.0 * MIB,
            },
        };
        let text = render_reason("rss", &reason);
        assert!(
            text.starts_with("cannot tell a leak from noise: rise +3.0 MiB (+-1.0 MiB), slope 0 B"),
            "{text}"
        );
        assert!(
            text.ends_with(
                "the baseline is one sample and its noise alone straddles the tolerance; 4 \
                 baseline samples (`sample: {baseline: 4}` in a scenario, or 4 turn-0 rows in a \
                 trace) or a tolerance of at least 5.0 MiB would decide"
            ),
            "{text}"
        );
    }

    #[test]
    fn a_read_back_reason_keeps_its_words() {
        let reason = Reason::Text("as written".to_owned());
        assert_eq!(render_reason("turn_time", &reason), "as written");
    }

    #[test]
    fn a_reason_is_serialized_only_in_words() {
        let mut metrics = BTreeMap::new();
        metrics.insert(
            "turn_time".to_owned(),
            MetricAnalysis {
                reason: Reason::Unbounded,
                ..MetricAnalysis::default()
            },
        );
        assert!(serde_json::to_string(&metrics).is_err());
        let text = serde_json::to_string(&render_reasons(&metrics)).unwrap();
        assert!(
            text.contains(r#""reason":"the slope cannot be bounded from these samples""#),
            "{text}"
        );
        let back: BTreeMap<String, MetricAnalysis> = serde_json::from_str(&text).unwrap();
        assert_eq!(
            back["turn_time"].reason,
            Reason::Text("the slope cannot be bounded from these samples".to_owned())
        );
    }
}
