//! From live bytes per site at every turn to the sites that grow per turn: each site's series
//! goes through the analyzer's own slope estimator (Theil-Sen with Sen's rank interval, at the
//! analyzer's confidence), a site grows when its interval's lower bound is above zero, and the
//! growing sites are ranked by slope, with the share of the metric's growth they explain.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::site::Frame;
use super::Recording;
use crate::analyze::stats::theil_sen::sen_slope;
use crate::analyze::{Verdict, CONFIDENCE};
use crate::runner::RunRecord;

/// The metrics a heap source explains, in order of preference.
pub const ATTRIBUTED_METRICS: &[&str] = &["native_heap", "heap", "rss", "pss"];
/// How many growing sites a report lists.
pub(crate) const MAX_LISTED: usize = 10;
/// Below this growth per turn a site is not listed, whatever its interval says (a few bytes a
/// turn of bookkeeping is not what a developer is after).
const MIN_SITE_SLOPE: f64 = 256.0;

/// Which allocation sites a run's growth comes from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Attribution {
    /// The source that recorded the sites (`heaptrack`).
    pub source: String,
    /// The metric whose growth the sites are set against.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metric: Option<String>,
    /// That metric's growth per turn, in bytes, as the analyzer estimated it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metric_slope_bytes_per_turn: Option<f64>,
    /// The share (0 to 1, or above when the sites grow faster than the metric) of the metric's
    /// growth the listed sites explain; absent when the metric does not grow.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub explained: Option<f64>,
    /// The growing sites, fastest first (at most ten).
    pub sites: Vec<SiteGrowth>,
    /// How many growing sites there were in all (beyond those listed).
    pub growing_sites: usize,
    /// How many distinct sites held memory at some sample point.
    pub sites_seen: usize,
    /// The turns whose snapshots were used.
    pub turns: u32,
    /// What limited the recording, in words.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
    /// The growing sites past the listed ones, fastest first: kept in memory only (not
    /// reported), so that `compare` does not take a site that grows on one side, but ranks past
    /// its tenth, for one that does not grow there.
    #[serde(skip)]
    pub(crate) unlisted: Vec<SiteGrowth>,
}

/// One site whose live bytes grow per turn.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SiteGrowth {
    /// Its frames after trimming, innermost first.
    pub frames: Vec<Frame>,
    /// Growth per turn, in bytes (Theil-Sen).
    pub slope_bytes_per_turn: f64,
    /// Its interval at the analyzer's confidence.
    pub slope_interval: (f64, f64),
    /// Live bytes at the last sample point.
    pub live_bytes: u64,
}

/// The sites of `recording` that grow per turn over `record`'s measured turns, set against the
/// first of [`ATTRIBUTED_METRICS`] the verdict has.
pub fn estimate(
    source: &str,
    recording: &Recording,
    record: &RunRecord,
    verdict: &Verdict,
) -> Attribution {
    estimate_against(source, ATTRIBUTED_METRICS, recording, record, verdict)
}

/// [`estimate`], set against the first of `metrics` the verdict has (a source's own preference:
/// [`super::AttributionSource::metrics`]).
pub fn estimate_against(
    source: &str,
    metrics: &[&str],
    recording: &Recording,
    record: &RunRecord,
    verdict: &Verdict,
) -> Attribution {
    // The last snapshot of each turn (the post-close one), as the analyzer's series takes it.
    let mut by_turn: BTreeMap<u32, &BTreeMap<usize, u64>> = BTreeMap::new();
    for snapshot in &recording.snapshots {
        by_turn.insert(snapshot.turn, &snapshot.live);
    }
    let warmup = record.scenario.warmup_turns;
    let measured: Vec<(u32, &BTreeMap<usize, u64>)> = by_turn
        .iter()
        .filter(|(turn, _)| **turn > warmup)
        .map(|(turn, live)| (*turn, *live))
        .collect();
    let mut growing = Vec::new();
    for site in 0..recording.sites.len() {
        let points: Vec<(f64, f64)> = measured
            .iter()
            .map(|(turn, live)| {
                (
                    f64::from(*turn),
                    live.get(&site).copied().unwrap_or(0) as f64,
                )
            })
            .collect();
        if points.iter().all(|p| p.1 == 0.0) {
            continue;
        }
        let Some(fit) = sen_slope(&[points.as_slice()], CONFIDENCE) else {
            continue;
        };
        let Some(interval) = fit.interval else {
            continue;
        };
        if interval.0 > 0.0 && fit.slope >= MIN_SITE_SLOPE {
            growing.push(SiteGrowth {
                frames: recording.sites[site].clone(),
                slope_bytes_per_turn: fit.slope,
                slope_interval: interval,
                live_bytes: points.last().map_or(0, |p| p.1 as u64),
            });
        }
    }
    growing.sort_by(|a, b| b.slope_bytes_per_turn.total_cmp(&a.slope_bytes_per_turn));
    let growing_sites = growing.len();
    let unlisted = growing.split_off(growing.len().min(MAX_LISTED));
    let metric = metrics.iter().find(|m| verdict.metrics.contains_key(**m));
    let metric_slope = metric.map(|m| verdict.metrics[*m].slope_bytes_per_turn);
    let listed: f64 = growing.iter().map(|s| s.slope_bytes_per_turn).sum();
    let explained = metric_slope
        .filter(|s| *s > 0.0 && !growing.is_empty())
        .map(|s| listed / s);
    Attribution {
        source: source.to_owned(),
        metric: metric.map(|m| (*m).to_owned()),
        metric_slope_bytes_per_turn: metric_slope,
        explained,
        sites: growing,
        growing_sites,
        sites_seen: recording.sites.len(),
        turns: measured.len() as u32,
        notes: recording.notes.clone(),
        unlisted,
    }
}
