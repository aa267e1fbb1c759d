//! Benchmarks that print figures rather than assert timings: the analyzer's detection power next
//! to the naive detectors people use today, the harness's own per-turn and per-call cost, and how
//! steady a scenario's verdict is from run to run (`stability`).

mod analysis;
mod bare_loop;
mod detection;
mod history;
mod history_scale;
mod overhead;
mod scale;
mod sequential;
mod stability;
mod suite;
mod synthetic;

pub use analysis::{render_analysis_cost, run_analysis_cost, AnalysisCostRow, Layout};
pub use bare_loop::{
    attribution_row_skipped, bare_loop_resources, render_bare_loop, run_bare_loop_comparison,
    BareLoopConfig, BareLoopError, BareLoopRow, ATTRIBUTION_ROW,
};
pub use detection::{render_markdown, run_detection, DetectionConfig, DetectionRow, Detector};
pub use history::{render_history_bench, run_history_bench, HistoryBenchConfig, HistoryBenchRow};
pub(crate) use history_scale::{render_history_scale, run_history_scale, HistoryScaleError};
pub use overhead::{render_overhead, run_overhead, OverheadError, OverheadRow};
pub use scale::{
    render_scale, run_scale, scale_child, scale_in_child, scale_scenario, ScaleError, ScaleRow,
    SCALE_RELOAD_EVERY, SCALE_TURNS,
};
pub use sequential::{render_sequential, run_sequential, SequentialConfig, SequentialRow};
pub use stability::{
    render_stability, run_stability, BusyThreads, ExpectedVerdict, MetricRun, Spread,
    StabilityError, StabilityRow, StabilityRun, StabilityScenario, MAX_LOAD_THREADS,
};
pub use suite::{
    render_suite_bench, run_suite_bench, write_sim_suite, SuiteBenchError, SuiteBenchRow,
};
pub use synthetic::{SeriesKind, SyntheticSeries};
