//! Bisect: one scenario on a series of engine builds (the LiteRT-LM release history, or a sim
//! scenario's own profiles standing for builds), several runs per build, and the first build
//! where a figure changed beyond the run-to-run spread. The library resolves the builds, fetches
//! them through the user's program, visits them and returns what each gave ([`BisectOutcome`]);
//! [`table`] words the table and the progress lines; `cli/bisect.rs` runs each scenario, prints
//! the table and writes the plot.

mod builds;
mod error;
mod run;
mod search;
pub(crate) mod table;

pub(crate) use error::BisectError;
pub(crate) use run::{
    bisect, BisectEvent, BisectOptions, BisectOutcome, RunFailure, ScenarioRunner, BISECT_FILES,
};
pub(crate) use search::{Metric, Order};
