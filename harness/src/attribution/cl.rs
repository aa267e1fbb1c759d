//! OpenCL objects by creation site: the OpenCL interposer keeps, for every live object, the stack
//! that created it; an engine snapshot carries the live objects per kind and site
//! ([`ClSites`]), the run keeps one per post-close sample point ([`ClSiteRecorder`]), and the
//! report lists the live objects by kind and site with each site's growth per turn in objects
//! and bytes ([`ClObjects`]), estimated as every other series is: the analyzer's Theil-Sen slope
//! with Sen's interval at its confidence.

use std::collections::BTreeMap;

use leakloop_units::format_bytes;
use serde::{Deserialize, Serialize};

use super::site::Frame;
use crate::analyze::stats::theil_sen::sen_slope;
use crate::analyze::CONFIDENCE;

/// How many sites a report lists (those with growth first, then by live objects).
const MAX_LISTED: usize = 10;
/// How many frames of a site the text reports show.
const SHOWN_FRAMES: usize = 3;

/// Live OpenCL objects per kind and creation site at one sample point, as the interposer
/// reports them (symbolised and trimmed of the OpenCL wrapper crates' frames).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ClSites {
    /// Sites holding live objects.
    pub sites: Vec<ClSiteLive>,
    /// Objects the interposer counted without a site (past its caps), since it was loaded.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub unsited: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// One site's live objects.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClSiteLive {
    /// The kind (`cl_mem`, `cl_kernel`, ...).
    pub kind: String,
    /// The creating call's stack, innermost first (the OpenCL wrappers' frames trimmed).
    pub frames: Vec<Frame>,
    /// Live objects created there.
    pub live: u64,
    /// Their requested bytes (known for buffers, images and SVM; 0 for other kinds).
    pub live_bytes: u64,
}

/// The sites at every post-close sample point of a run (and the load one, turn 0).
#[derive(Debug, Clone, Default)]
pub struct ClSiteRecorder {
    points: Vec<(u32, ClSites)>,
}

/// A site's growth per turn and its interval.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ClGrowth {
    /// Per turn (Theil-Sen).
    pub per_turn: f64,
    /// Its interval at the analyzer's confidence.
    pub interval: (f64, f64),
}

/// One listed site.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ClSiteReport {
    /// The kind.
    pub kind: String,
    /// The creating call's stack, innermost first.
    pub frames: Vec<Frame>,
    /// Live objects created there at the last sample point.
    pub live: u64,
    /// Their requested bytes.
    pub live_bytes: u64,
    /// Growth of its live objects per turn, when the interval's lower bound is above zero.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub objects_per_turn: Option<ClGrowth>,
    /// Growth of its live bytes per turn, likewise (only kinds with sizes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes_per_turn: Option<ClGrowth>,
}

/// The live OpenCL objects of a run by kind and creation site.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ClObjects {
    /// Live objects per kind at the last sample point (every kind with one).
    pub live: BTreeMap<String, u64>,
    /// Listed sites: growing ones first (fastest first), then by live objects; at most ten.
    pub sites: Vec<ClSiteReport>,
    /// Sites that grow per turn, listed or not.
    pub growing_sites: usize,
    /// Sites holding live objects at the last sample point, listed or not.
    pub sites_seen: usize,
    /// Measured turns whose sample points the growth was estimated from.
    pub turns: u32,
    /// Objects the interposer counted without a site (past its caps).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub unsited: u64,
}

impl ClSiteRecorder {
    /// Keeps `sites` as `turn`'s (the last one kept for a turn is the one used).
    pub fn record(&mut self, turn: u32, sites: &ClSites) {
        self.points.push((turn, sites.clone()));
    }

    /// The live objects by site, with growth over the turns after `warmup_turns`; `None` when
    /// no sample point carried sites, or none held a live object (an engine that loaded the
    /// interposer but made no OpenCL object, such as LiteRT-LM on its CPU backend, has nothing to
    /// report).
    pub fn estimate(&self, warmup_turns: u32) -> Option<ClObjects> {
        let (_, last) = self.points.last()?;
        if self
            .points
            .iter()
            .all(|(_, s)| s.sites.is_empty() && s.unsited == 0)
        {
            return None;
        }
        let mut by_turn: BTreeMap<u32, &ClSites> = BTreeMap::new();
        for (turn, sites) in &self.points {
            by_turn.insert(*turn, sites);
        }
        let measured: Vec<(u32, BySite<'_>)> = by_turn
            .iter()
            .filter(|(turn, _)| **turn > warmup_turns)
            .map(|(turn, sites)| (*turn, merged(sites)))
            .collect();
        let growth = |key: &(&str, &[Frame]), bytes: bool| {
            let points: Vec<(f64, f64)> = measured
                .iter()
                .map(|(turn, sites)| {
                    let (n, b) = sites.get(key).copied().unwrap_or_default();
                    (f64::from(*turn), if bytes { b } else { n } as f64)
                })
                .collect();
            let fit = sen_slope(&[points.as_slice()], CONFIDENCE)?;
            let interval = fit.interval?;
            (interval.0 > 0.0).then_some(ClGrowth {
                per_turn: fit.slope,
                interval,
            })
        };
        let mut live: BTreeMap<String, u64> = BTreeMap::new();
        let mut sites: Vec<ClSiteReport> = merged(last)
            .into_iter()
            .map(|(key, (n, b))| {
                *live.entry(key.0.to_owned()).or_default() += n;
                ClSiteReport {
                    kind: key.0.to_owned(),
                    frames: key.1.to_vec(),
                    live: n,
                    live_bytes: b,
                    objects_per_turn: growth(&key, false),
                    bytes_per_turn: growth(&key, true),
                }
            })
            .collect();
        sites.sort_by(|a, b| {
            let rate = |s: &ClSiteReport| s.objects_per_turn.map_or(0.0, |g| g.per_turn);
            rate(b)
                .total_cmp(&rate(a))
                .then(b.live.cmp(&a.live))
                .then(b.live_bytes.cmp(&a.live_bytes))
        });
        let growing_sites = sites.iter().filter(|s| s.grows()).count();
        let sites_seen = sites.len();
        sites.truncate(MAX_LISTED);
        Some(ClObjects {
            live,
            sites,
            growing_sites,
            sites_seen,
            turns: measured.len() as u32,
            unsited: last.unsited,
        })
    }
}

/// Live objects and bytes per (kind, frames).
type BySite<'a> = BTreeMap<(&'a str, &'a [Frame]), (u64, u64)>;

/// Live objects and bytes per (kind, frames): two interposer sites that differ only in frames
/// trimmed away are one.
fn merged(sites: &ClSites) -> BySite<'_> {
    let mut out: BTreeMap<(&str, &[Frame]), (u64, u64)> = BTreeMap::new();
    for s in &sites.sites {
        let e = out
            .entry((s.kind.as_str(), s.frames.as_slice()))
            .or_default();
        e.0 += s.live;
        e.1 += s.live_bytes;
    }
    out
}

impl ClSiteReport {
    /// Whether its live objects or bytes grow per turn.
    pub fn grows(&self) -> bool {
        self.objects_per_turn.is_some() || self.bytes_per_turn.is_some()
    }

    /// `f [lib] <- caller [lib] <- ...`, the first frames.
    pub fn place(&self) -> String {
        if self.frames.is_empty() {
            return "an unknown site".to_owned();
        }
        let frames: Vec<String> = self
            .frames
            .iter()
            .take(SHOWN_FRAMES)
            .map(Frame::describe)
            .collect();
        frames.join(" <- ")
    }

    /// `+1.0/turn [+1.0, +1.0], +4.0 MiB/turn`, or nothing when it does not grow.
    fn growth_text(&self) -> String {
        let mut parts = Vec::new();
        if let Some(g) = self.objects_per_turn {
            parts.push(format!(
                "{:+.1}/turn [{:+.1}, {:+.1}]",
                g.per_turn, g.interval.0, g.interval.1
            ));
        }
        if let Some(g) = self.bytes_per_turn {
            parts.push(format!(
                "+{}/turn",
                format_bytes(g.per_turn.max(0.0).round() as u64)
            ));
        }
        parts.join(", ")
    }
}

/// `OpenCL objects: 2 sites grow per turn (12 turns)`, or that none does.
pub fn cl_headline(c: &ClObjects) -> String {
    let total: u64 = c.live.values().sum();
    let grows = match c.growing_sites {
        0 => "no creation site grows per turn".to_owned(),
        1 => "1 creation site grows per turn".to_owned(),
        n => format!("{n} creation sites grow per turn"),
    };
    let mut out = format!("{total} live, {grows} ({} turns)", c.turns);
    if c.unsited > 0 {
        out.push_str(&format!(
            "; {} objects counted without a site (the interposer's caps)",
            c.unsited
        ));
    }
    out
}

/// One line per listed site: `cl_mem 12 live: 12 created at f [lib] <- g [lib]  +1.0/turn [..]`.
pub fn cl_site_lines(c: &ClObjects) -> Vec<String> {
    c.sites
        .iter()
        .map(|s| {
            let bytes = if s.live_bytes > 0 {
                format!(" ({})", format_bytes(s.live_bytes))
            } else {
                String::new()
            };
            let growth = s.growth_text();
            let growth = if growth.is_empty() {
                String::new()
            } else {
                format!("  {growth}")
            };
            format!(
                "{} {} live: {}{bytes} created at {}{growth}",
                s.kind,
                c.live.get(&s.kind).copied().unwrap_or(s.live),
                s.live,
                s.place()
            )
        })
        .collect()
}

/// The lines of the growing sites only, of `kind` when given (a ledger failure's message).
pub fn cl_growing_lines(c: &ClObjects, kind: Option<&str>) -> Vec<String> {
    let lines = cl_site_lines(c);
    c.sites
        .iter()
        .zip(lines)
        .filter(|(s, _)| s.grows() && kind.is_none_or(|k| s.kind == k))
        .map(|(_, l)| l)
        .collect()
}

#[cfg(test)]
mod tests;
