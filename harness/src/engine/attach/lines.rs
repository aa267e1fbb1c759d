//! Splits a byte stream into lines of bounded length: a process that writes a gigabyte without
//! a newline costs leakloop a few kilobytes, and the line is counted as too long, not kept.

use std::io::{ErrorKind, Read};

/// One line read from a stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Line<'a> {
    /// A line within the bound, without its line ending (`\n` or `\r\n`); invalid UTF-8 is
    /// replaced.
    Text(&'a str),
    /// A line longer than the bound; its bytes were skipped.
    TooLong,
}

/// Reads `reader` to its end, handing each line to `on_line`, which returns false to stop.
/// A last line without a newline counts too.
pub(crate) fn for_each_line(
    mut reader: impl Read,
    max_line: usize,
    mut on_line: impl FnMut(Line<'_>) -> bool,
) -> std::io::Result<()> {
    let mut line: Vec<u8> = Vec::with_capacity(256.min(max_line));
    let mut chunk = [0u8; 8192];
    // Whether the current line passed the bound; its remaining bytes are dropped.
    let mut overlong = false;
    loop {
        let n = match reader.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        for piece in chunk[..n].split_inclusive(|b| *b == b'\n') {
            let ends = piece.last() == Some(&b'\n');
            let body = if ends {
                &piece[..piece.len() - 1]
            } else {
                piece
            };
            if !overlong {
                if line.len() + body.len() > max_line + 1 {
                    // One byte of slack for the `\r` of a `\r\n` ending.
                    overlong = true;
                    line.clear();
                } else {
                    line.extend_from_slice(body);
                }
            }
            if ends {
                if !emit(&mut line, overlong, max_line, &mut on_line) {
                    return Ok(());
                }
                overlong = false;
            }
        }
    }
    if overlong || !line.is_empty() {
        emit(&mut line, overlong, max_line, &mut on_line);
    }
    Ok(())
}

fn emit(
    line: &mut Vec<u8>,
    overlong: bool,
    max_line: usize,
    on_line: &mut impl FnMut(Line<'_>) -> bool,
) -> bool {
    if line.last() == Some(&b'\r') {
        line.pop();
    }
    let go_on = if overlong || line.len() > max_line {
        on_line(Line::TooLong)
    } else {
        on_line(Line::Text(&String::from_utf8_lossy(line)))
    };
    line.clear();
    go_on
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(input: &[u8], max: usize) -> Vec<String> {
        let mut out = Vec::new();
        for_each_line(input, max, |line| {
            out.push(match line {
                Line::Text(t) => t.to_owned(),
                Line::TooLong => "<too long>".to_owned(),
            });
            true
        })
        .unwrap();
        out
    }

    #[test]
    fn splits_lines_and_keeps_a_last_line_without_newline() {
        assert_eq!(lines(b"a\r\nbb\n\nccc", 10), ["a", "bb", "", "ccc"]);
    }

    #[test]
    fn a_line_past_the_bound_is_reported_not_kept() {
        let mut input = b"TURN 1 CLOSED\n".to_vec();
        input.extend(std::iter::repeat_n(b'x', 100_000));
        input.extend(b"\nTURN 2 CLOSED\n");
        assert_eq!(
            lines(&input, 64),
            ["TURN 1 CLOSED", "<too long>", "TURN 2 CLOSED"]
        );
        assert_eq!(lines(&[b'y'; 65], 64), ["<too long>"]);
        assert_eq!(lines(&[b'y'; 64], 64), ["y".repeat(64)]);
    }

    #[test]
    fn invalid_utf8_is_replaced() {
        assert_eq!(lines(b"TURN \xff\n", 64), ["TURN \u{fffd}"]);
    }
}
