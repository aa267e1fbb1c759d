//! Attribution of per-turn growth to allocation sites (`run --attribute`, `engine.attribute`).
//!
//! A [`AttributionSource`] watches the engine's process while the scenario runs and gives the
//! live bytes per allocation site at every sample point; [`estimate`] turns those snapshots into
//! the sites whose live bytes grow per turn, with the analyzer's own slope and interval, ranked,
//! and the share of the metric's growth they explain. Heaptrack (Linux) records native memory
//! (`heaptrack/`); an exec driver that offers the protocol's `sites` capability feeds its own
//! language's heap (`driver.rs`, Python's tracemalloc); docs/attribution.md says how other sources
//! plug in. Live OpenCL objects by creation site come from the OpenCL interposer instead, with
//! every sample (`cl`).

mod cl;
mod compare;
mod driver;
mod estimate;
mod heaptrack;
mod render;
mod site;
#[cfg(test)]
mod tests;

pub use cl::{
    cl_growing_lines, cl_headline, cl_site_lines, ClGrowth, ClObjects, ClSiteLive, ClSiteRecorder,
    ClSiteReport, ClSites,
};
pub use compare::{compare_sites, comparison_lines, SiteComparison};
pub(crate) use driver::offered_source;
pub use driver::{
    DriverSites, SharedFeed, SiteFeed, DRIVER_METRICS, MAX_DISTINCT_SITES, MAX_FRAMES_PER_SITE,
    MAX_SITES_PER_SNAPSHOT, MAX_SOURCE_NAME_BYTES, MAX_TEXT_BYTES, REQUESTED_FRAMES,
};
pub use estimate::{estimate, estimate_against, Attribution, SiteGrowth, ATTRIBUTED_METRICS};
pub use heaptrack::{
    heaptrack_missing, heaptrack_or_skip, HeaptrackSource, HEAPTRACK_DIR_ENV, REQUIRE_HEAPTRACK_ENV,
};
pub use render::{headline, site_lines};
pub use site::Frame;

use std::collections::BTreeMap;

/// Live bytes per site at one sample point (the last one of its turn counts for that turn).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SiteSnapshot {
    /// The turn the sample point belongs to (0: after load).
    pub turn: u32,
    /// Live bytes by site key (an index into [`Recording::sites`]).
    pub live: BTreeMap<usize, u64>,
}

/// What a source recorded over a run.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Recording {
    /// The sites, each as its trimmed frames, innermost first.
    pub sites: Vec<Vec<Frame>>,
    /// One snapshot per sample point, in order.
    pub snapshots: Vec<SiteSnapshot>,
    /// What limited the recording (a cap reached, the stream ended early), in words.
    pub notes: Vec<String>,
}

/// A way to learn the live bytes per allocation site of the measured process.
///
/// A source is started before the engine's process ([`AttributionSource::env`] goes into that
/// process's environment), told of every sample point while the scenario runs
/// ([`AttributionSource::mark`], which must not block), and finished once the process is gone.
pub trait AttributionSource: Send {
    /// The source's name, as reports show it (`heaptrack`, `tracemalloc`).
    fn name(&self) -> &str;
    /// Environment the measured process must start with.
    fn env(&self) -> Vec<(String, String)>;
    /// A sample point of `turn` was just taken.
    fn mark(&mut self, turn: u32);
    /// The last sample point is taken and the process is about to be unloaded or stopped: a
    /// source whose recording lags behind the process waits here (bounded) until it has reached
    /// that point, so the last turns are not read from the state after the process was stopped.
    fn catch_up(&mut self) {}
    /// The process has ended: what was recorded, within a bounded wait.
    fn finish(self: Box<Self>) -> Result<Recording, String>;
    /// The metrics its sites are set against, in order of preference (the first one the verdict
    /// has is used).
    fn metrics(&self) -> &'static [&'static str] {
        ATTRIBUTED_METRICS
    }
}
