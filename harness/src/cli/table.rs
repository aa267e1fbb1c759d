//! Plain-text tables for the terminal: columns padded to their widest cell, two spaces apart.

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
}
