//! A plain-text table whose cells may be styled: columns are padded on the visible text, and the
//! ANSI style is wrapped around the padded cell so alignment survives colour.

use anstyle::Style;

/// One cell: its text and how to style it.
#[derive(Debug, Clone, Default)]
pub(crate) struct Cell {
    text: String,
    style: Style,
}

impl Cell {
    pub(crate) fn plain(text: impl Into<String>) -> Self {
        Self::styled(text, Style::new())
    }

    /// A cell; control characters in `text` (a metric name from a file) are escaped, so that a
    /// terminal shows them rather than obeys them.
    pub(crate) fn styled(text: impl Into<String>, style: Style) -> Self {
        let text = text.into();
        Self {
            text: crate::input::printable(&text).into_owned(),
            style,
        }
    }
}

/// Renders rows (the first one is the header) with two spaces between columns, one line each,
/// without trailing spaces.
pub(crate) fn render_table(rows: &[Vec<Cell>], indent: &str) -> String {
    let columns = rows.iter().map(Vec::len).max().unwrap_or(0);
    let widths: Vec<usize> = (0..columns)
        .map(|c| {
            rows.iter()
                .filter_map(|r| r.get(c))
                .map(|cell| cell.text.chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    for row in rows {
        let mut line = String::from(indent);
        for (c, cell) in row.iter().enumerate() {
            if c > 0 {
                line.push_str("  ");
            }
            let last = c + 1 == row.len();
            let pad = if last {
                0
            } else {
                widths[c] - cell.text.chars().count()
            };
            line.push_str(&format!(
                "{}{}{}{}",
                cell.style.render(),
                cell.text,
                cell.style.render_reset(),
                " ".repeat(pad)
            ));
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_line_up_on_visible_width_even_when_styled() {
        let bold = Style::new().bold();
        let rows = vec![
            vec![Cell::plain("metric"), Cell::plain("last")],
            vec![Cell::styled("native_heap", bold), Cell::plain("1.1 GiB")],
        ];
        let text = render_table(&rows, "  ");
        let plain = anstream::adapter::strip_str(&text).to_string();
        assert_eq!(plain, "  metric       last\n  native_heap  1.1 GiB\n");
        assert!(
            text.contains("\u{1b}["),
            "the styled cell keeps its escape codes"
        );
    }
}
