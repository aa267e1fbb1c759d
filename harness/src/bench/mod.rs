//! Benchmarks that print figures rather than assert timings: the analyzer's detection power next
//! to the naive detectors people use today.

mod detection;
mod synthetic;

pub use detection::{render_markdown, run_detection, DetectionConfig, DetectionRow, Detector};
pub use synthetic::{SeriesKind, SyntheticSeries};
