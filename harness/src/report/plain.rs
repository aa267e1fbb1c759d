//! Plain-text pieces shared by the side-by-side, history and bisect tables: columns padded to
//! their widest cell, two spaces apart, and how a verdict's status reads in them.

use crate::analyze::VerdictStatus;

/// Renders `rows` (the first is the header) with the columns in `left` aligned left and the
/// others right; trailing spaces are trimmed from every line.
pub(crate) fn aligned<const N: usize>(rows: &[[String; N]], left: &[usize]) -> String {
    let widths: Vec<usize> = (0..N)
        .map(|c| rows.iter().map(|r| r[c].chars().count()).max().unwrap_or(0))
        .collect();
    let mut out = String::new();
    for row in rows {
        let cells: Vec<String> = row
            .iter()
            .zip(&widths)
            .enumerate()
            .map(|(c, (cell, w))| {
                if left.contains(&c) {
                    format!("{cell:<w$}")
                } else {
                    format!("{cell:>w$}")
                }
            })
            .collect();
        out.push_str(cells.join("  ").trim_end());
        out.push('\n');
    }
    out
}

/// How a verdict's status reads in a table and on stderr.
pub(crate) fn status_word(status: VerdictStatus) -> &'static str {
    match status {
        VerdictStatus::Pass => "PASS",
        VerdictStatus::Fail => "FAIL",
        VerdictStatus::Inconclusive => "INCONCLUSIVE",
        VerdictStatus::EngineFailed => "ENGINE FAILED",
        VerdictStatus::Interrupted => "INTERRUPTED",
    }
}

/// `2 PASS, 1 FAIL`: how many runs ended with each status, in that order; `-` for none.
pub(crate) fn status_counts(statuses: impl IntoIterator<Item = VerdictStatus>) -> String {
    let statuses: Vec<VerdictStatus> = statuses.into_iter().collect();
    let words: Vec<String> = [
        VerdictStatus::Pass,
        VerdictStatus::Fail,
        VerdictStatus::Inconclusive,
        VerdictStatus::EngineFailed,
        VerdictStatus::Interrupted,
    ]
    .into_iter()
    .filter_map(|status| {
        let n = statuses.iter().filter(|s| **s == status).count();
        (n > 0).then(|| format!("{n} {}", status_word(status)))
    })
    .collect();
    if words.is_empty() {
        "-".to_owned()
    } else {
        words.join(", ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pads_each_column_to_its_widest_cell() {
        let rows = [
            ["name".to_owned(), "n".to_owned()],
            ["a".to_owned(), "100".to_owned()],
        ];
        assert_eq!(aligned(&rows, &[0]), "name    n\na     100\n");
    }

    #[test]
    fn counts_statuses_in_a_fixed_order() {
        use VerdictStatus::*;
        assert_eq!(status_counts([Fail, Pass, Fail]), "1 PASS, 2 FAIL");
        assert_eq!(status_counts([EngineFailed]), "1 ENGINE FAILED");
        assert_eq!(status_counts([]), "-");
    }
}
