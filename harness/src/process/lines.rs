//! Reads lines of bounded length from a child's pipes: a process that writes a gigabyte without
//! a newline costs leakloop a few kilobytes. [`LineSplitter`] counts such a line as too long and
//! skips it (marker lines); [`read_line_capped`] hands it over in capped pieces (a stderr tail,
//! the worker protocol, which judges a reply that long itself).

use std::io::{BufRead, ErrorKind, Read};

/// Reads one line (up to and including its `\n`) into `buf`, replacing what it held, but at
/// most `max` bytes of it: a longer line is returned in pieces, the first `max` bytes now and the
/// rest at the next calls. The bytes read; 0 at the end of the stream.
pub(crate) fn read_line_capped(
    reader: &mut impl BufRead,
    max: u64,
    buf: &mut Vec<u8>,
) -> std::io::Result<usize> {
    buf.clear();
    reader.take(max).read_until(b'\n', buf)
}

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
    let mut splitter = LineSplitter::new(max_line);
    let mut chunk = [0u8; 8192];
    loop {
        let n = match reader.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if !splitter.push(&chunk[..n], &mut on_line) {
            return Ok(());
        }
    }
    splitter.finish(&mut on_line);
    Ok(())
}

/// Splits bytes that arrive in pieces (a pipe's reads, a followed file's polls) into lines of
/// at most `max_line` bytes. It holds at most `max_line + 1` bytes of an unfinished line,
/// whatever is pushed, so its memory is bounded by the line cap.
#[derive(Debug)]
pub(crate) struct LineSplitter {
    max_line: usize,
    /// The unfinished line (its bytes, while within the bound).
    line: Vec<u8>,
    /// Whether the unfinished line passed the bound; its remaining bytes are dropped.
    overlong: bool,
}

impl LineSplitter {
    /// A splitter with no unfinished line.
    pub fn new(max_line: usize) -> Self {
        Self {
            max_line,
            line: Vec::with_capacity(256.min(max_line)),
            overlong: false,
        }
    }

    /// Feeds `bytes`; each line they complete goes to `on_line`. False when `on_line` said stop.
    pub fn push(&mut self, bytes: &[u8], on_line: &mut impl FnMut(Line<'_>) -> bool) -> bool {
        for piece in bytes.split_inclusive(|b| *b == b'\n') {
            let ends = piece.last() == Some(&b'\n');
            let body = if ends {
                &piece[..piece.len() - 1]
            } else {
                piece
            };
            if !self.overlong {
                if self.line.len() + body.len() > self.max_line + 1 {
                    // One byte of slack for the `\r` of a `\r\n` ending.
                    self.overlong = true;
                    self.line = Vec::new();
                } else {
                    self.line.extend_from_slice(body);
                }
            }
            if ends && !self.emit(on_line) {
                return false;
            }
        }
        true
    }

    /// Hands over the unfinished line, if any, as the last line of the stream.
    pub fn finish(&mut self, on_line: &mut impl FnMut(Line<'_>) -> bool) {
        if self.overlong || !self.line.is_empty() {
            self.emit(on_line);
        }
    }

    /// Forgets the unfinished line (the stream starts again, e.g. a replaced file).
    pub fn reset(&mut self) {
        self.line.clear();
        self.overlong = false;
    }

    fn emit(&mut self, on_line: &mut impl FnMut(Line<'_>) -> bool) -> bool {
        if self.line.last() == Some(&b'\r') {
            self.line.pop();
        }
        let go_on = if self.overlong || self.line.len() > self.max_line {
            on_line(Line::TooLong)
        } else {
            on_line(Line::Text(&String::from_utf8_lossy(&self.line)))
        };
        self.line.clear();
        self.overlong = false;
        go_on
    }
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
    fn lines_split_across_pushes_are_joined_and_stay_bounded() {
        let mut splitter = LineSplitter::new(16);
        let mut out = Vec::new();
        let mut collect = |line: Line<'_>| {
            out.push(match line {
                Line::Text(t) => t.to_owned(),
                Line::TooLong => "<too long>".to_owned(),
            });
            true
        };
        assert!(splitter.push(b"TURN 1", &mut collect));
        assert!(splitter.push(b" CL\nab", &mut collect));
        for _ in 0..1000 {
            splitter.push(&[b'x'; 1000], &mut collect);
            assert!(
                splitter.line.capacity() <= 256,
                "an overlong line is not stored"
            );
        }
        splitter.push(b"\nok", &mut collect);
        splitter.finish(&mut collect);
        assert_eq!(out, ["TURN 1 CL", "<too long>", "ok"]);
    }

    #[test]
    fn invalid_utf8_is_replaced() {
        assert_eq!(lines(b"TURN \xff\n", 64), ["TURN \u{fffd}"]);
    }
}
