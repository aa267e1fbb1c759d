//! Two attributions side by side (`compare --attribute`): which allocation sites grow per turn in
//! B and not in A, which grow in both, and which only in A. This is the layer-by-layer question
//! ("the C API is flat, the binding grows: where?") answered from the two runs' own sites.
//!
//! Sites are matched by their functions and libraries over the frames that identify a site
//! ([`super::site::SITE_DEPTH`]); a frame without a symbol matches by its library alone, since
//! its address differs from one run (and one build) to the next.

use super::estimate::MAX_LISTED;
use super::render::{growth, path};
use super::site::SITE_DEPTH;
use super::{Attribution, SiteGrowth};

/// How two runs' growing sites relate.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SiteComparison {
    /// Sites that grow in B and not in A, fastest (in B) first.
    pub b_only: Vec<SiteGrowth>,
    /// Sites that grow in both, as (A's, B's), fastest in B first.
    pub both: Vec<(SiteGrowth, SiteGrowth)>,
    /// Sites that grow in A and not in B, fastest (in A) first.
    pub a_only: Vec<SiteGrowth>,
}

/// What identifies a site across runs: function and library of its identifying frames.
fn match_key(site: &SiteGrowth) -> Vec<(Option<&str>, &str)> {
    site.frames
        .iter()
        .take(SITE_DEPTH)
        .map(|f| (f.function.as_deref(), f.module.as_str()))
        .collect()
}

/// Every growing site of `a` (listed or not), fastest first.
fn growing(a: &Attribution) -> impl Iterator<Item = &SiteGrowth> {
    a.sites.iter().chain(&a.unlisted)
}

/// Sets the growing sites of `b` against those of `a`. Sites with one key (two unnamed frames
/// of one library told apart only by address) pair up one to one, in order of slope, so that
/// each of B's is shown next to its own counterpart in A where A has as many.
pub fn compare_sites(a: &Attribution, b: &Attribution) -> SiteComparison {
    let in_a: Vec<&SiteGrowth> = growing(a).collect();
    let keys_a: Vec<_> = in_a.iter().map(|s| match_key(s)).collect();
    let mut paired = vec![false; in_a.len()];
    let mut out = SiteComparison::default();
    for site in growing(b) {
        let key = match_key(site);
        let same: Vec<usize> = (0..in_a.len()).filter(|i| keys_a[*i] == key).collect();
        match same.iter().find(|i| !paired[**i]).or(same.first()) {
            Some(&i) => {
                paired[i] = true;
                out.both.push((in_a[i].clone(), site.clone()));
            }
            None => out.b_only.push(site.clone()),
        }
    }
    let keys_b: Vec<_> = growing(b).map(match_key).collect();
    out.a_only = in_a
        .iter()
        .zip(&keys_a)
        .filter(|(_, key)| !keys_b.contains(key))
        .map(|(site, _)| (*site).clone())
        .collect();
    out
}

/// The comparison as text lines (after compare's metrics table): each side's headline, then the
/// sites of each group, as many per group as a report lists, with how many more there were.
pub fn comparison_lines(a: &Attribution, b: &Attribution) -> Vec<String> {
    lines_up_to(a, b, MAX_LISTED)
}

/// [`comparison_lines`] with at most `limit` sites per group.
fn lines_up_to(a: &Attribution, b: &Attribution, limit: usize) -> Vec<String> {
    let sites = compare_sites(a, b);
    let mut out = vec![
        format!("A: {}", super::headline(a)),
        format!("B: {}", super::headline(b)),
    ];
    let more = |out: &mut Vec<String>, n: usize| {
        if n > limit {
            out.push(format!("  ... and {} more", n - limit));
        }
    };
    let group = |out: &mut Vec<String>, title: &str, list: &[SiteGrowth]| {
        out.push(format!("{title}: {}", count(list.len())));
        for s in list.iter().take(limit) {
            out.push(format!("  {}  {}", growth(s), path(s)));
        }
        more(out, list.len());
    };
    group(&mut out, "growing in B, not in A", &sites.b_only);
    out.push(format!(
        "growing in both (A, then B): {}",
        count(sites.both.len())
    ));
    for (sa, sb) in sites.both.iter().take(limit) {
        out.push(format!(
            "  A {}  B {}  {}",
            growth(sa),
            growth(sb),
            path(sb)
        ));
    }
    more(&mut out, sites.both.len());
    group(&mut out, "growing in A, not in B", &sites.a_only);
    out
}

fn count(n: usize) -> String {
    match n {
        0 => "none".to_owned(),
        1 => "1 site".to_owned(),
        n => format!("{n} sites"),
    }
}

#[cfg(test)]
mod tests;
