//! The words every report uses for an attribution (the terminal table, summary.md, junit's
//! failure message): one headline and one line per site. Escaping is each format's own.

use leakloop_units::format_bytes;

use super::{Attribution, SiteGrowth};

/// `native_heap +528 KiB/turn: 97 % in 3 sites (heaptrack)`, or why nothing is listed.
pub fn headline(a: &Attribution) -> String {
    let metric = match (&a.metric, a.metric_slope_bytes_per_turn) {
        (Some(m), Some(s)) => format!("{m} {}/turn", signed(s)),
        (Some(m), None) => m.clone(),
        _ => "growth".to_owned(),
    };
    let sites = match a.growing_sites {
        1 => "1 site".to_owned(),
        n => format!("{n} sites"),
    };
    let head = match (a.sites.is_empty(), a.explained) {
        (true, _) => format!("{metric}: no allocation site grows per turn"),
        (false, Some(share)) => format!("{metric}: {:.0} % in {sites}", share * 100.0),
        (false, None) => format!("{metric}: {sites} grow"),
    };
    format!("{head} ({}, {} turns)", a.source, a.turns)
}

/// One line per listed site: `+512 KiB/turn [+498 KiB, +530 KiB]  f (file:line) [lib] <- caller <- ...`.
pub fn site_lines(a: &Attribution) -> Vec<String> {
    a.sites
        .iter()
        .map(|s| format!("{}  {}", growth(s), path(s)))
        .collect()
}

/// A site's growth: `+512 KiB/turn [+498 KiB, +530 KiB]`.
pub(crate) fn growth(s: &SiteGrowth) -> String {
    format!(
        "{}/turn [{}, {}]",
        signed(s.slope_bytes_per_turn),
        signed(s.slope_interval.0),
        signed(s.slope_interval.1)
    )
}

/// A site's three innermost frames: `f (file:line) [lib] <- caller <- ...`.
pub(crate) fn path(s: &SiteGrowth) -> String {
    let frames: Vec<String> = s.frames.iter().take(3).map(|f| f.describe()).collect();
    frames.join(" <- ")
}

fn signed(bytes: f64) -> String {
    let size = format_bytes(bytes.abs().round() as u64);
    if bytes < 0.0 {
        format!("-{size}")
    } else {
        format!("+{size}")
    }
}
