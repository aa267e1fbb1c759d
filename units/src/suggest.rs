//! The "did you mean" rule shared by unit and key errors.

/// The best match for `written` among `candidates`, if one is close enough to be a likely typo.
pub fn did_you_mean<'a>(
    written: &str,
    candidates: impl IntoIterator<Item = &'a str>,
) -> Option<String> {
    let written_lower = written.to_ascii_lowercase();
    // Rank by edit distance (a transposition counts once), then by how close the lengths are:
    // `turnz` is more likely `turns` than `turn`.
    let mut best: Option<((usize, usize), &str)> = None;
    for candidate in candidates {
        if candidate == written {
            continue;
        }
        let distance = strsim::damerau_levenshtein(&written_lower, &candidate.to_ascii_lowercase());
        let rank = (distance, written.len().abs_diff(candidate.len()));
        if best.is_none_or(|(b, _)| rank < b) {
            best = Some((rank, candidate));
        }
    }
    // Allow about one typo per three characters, and never so many that little of the word is
    // left (`h` is not a typo of `s`).
    let len = written.chars().count();
    let limit = (len / 3).max(1);
    best.filter(|((distance, _), _)| *distance <= limit && distance * 2 < len)
        .map(|(_, c)| c.to_owned())
}
