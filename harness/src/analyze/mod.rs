//! The analyzer: classifies each metric's post-close series as clean, plateau, growth or
//! inconclusive, and checks the scenario's expectations against the measurements.

mod stats;
mod verdict;

pub use verdict::{
    Classification, ExpectationResult, MetricAnalysis, PlateauInfo, Verdict, VerdictStatus,
};
