//! The last lines of a child's stderr, drained all the time by a thread (so that a chatty child
//! never blocks on a full pipe) and quoted in the errors that say how the child failed.

use std::collections::VecDeque;
use std::io::{BufReader, Read};
use std::sync::mpsc::{self, Receiver};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::process::lines::read_line_capped;

/// How many of a child's last stderr lines are kept (earlier ones are counted): with
/// [`STDERR_LINE_BYTES`], a tail holds at most 64 x 4 KiB whatever the child prints.
pub(crate) const STDERR_TAIL_LINES: usize = 64;
/// Longest stderr line kept whole; longer ones are kept in pieces.
pub(crate) const STDERR_LINE_BYTES: u64 = 4096;

/// The last lines of a child's stderr, shared with the thread that drains it: at most
/// [`STDERR_TAIL_LINES`] lines of at most [`STDERR_LINE_BYTES`] bytes each (plus a note of what
/// was cut), and a count of the lines that no longer fit.
#[derive(Debug, Clone, Default)]
pub(crate) struct StderrTail(Arc<Mutex<TailLines>>);

#[derive(Debug, Default)]
struct TailLines {
    lines: VecDeque<String>,
    /// Lines pushed out of the tail.
    dropped: u64,
}

impl StderrTail {
    /// Keeps `prefix` and `line` (at most [`STDERR_LINE_BYTES`] of it), pushing out the oldest
    /// line when the tail is full.
    pub fn push(&self, prefix: &str, line: &[u8]) {
        let cap = STDERR_LINE_BYTES as usize;
        let line = line.strip_suffix(b"\n").unwrap_or(line);
        let mut kept = format!(
            "{prefix}{}",
            String::from_utf8_lossy(&line[..line.len().min(cap)]).trim_end()
        );
        if line.len() > cap {
            kept.push_str(&format!(" [... {} more bytes]", line.len() - cap));
        }
        let mut tail = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if tail.lines.len() == STDERR_TAIL_LINES {
            tail.lines.pop_front();
            tail.dropped += 1;
        }
        tail.lines.push_back(kept);
    }

    /// The lines kept, oldest first.
    pub fn lines(&self) -> Vec<String> {
        let tail = self.0.lock().unwrap_or_else(|e| e.into_inner());
        tail.lines.iter().cloned().collect()
    }

    /// How many earlier lines were pushed out.
    pub fn dropped(&self) -> u64 {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).dropped
    }

    /// The tail as an indented block headed `last lines of {whose}:` for error messages, or
    /// nothing.
    pub fn render(&self, whose: &str) -> String {
        let lines = self.lines();
        if lines.is_empty() {
            return String::new();
        }
        let mut text = format!("\nlast lines of {whose}:");
        let dropped = self.dropped();
        if dropped > 0 {
            text.push_str(&format!("\n  | [... {dropped} earlier lines not kept]"));
        }
        for line in lines {
            text.push_str("\n  | ");
            text.push_str(&line);
        }
        text
    }

    /// Starts a thread that keeps `stderr`'s last lines in this tail until it closes.
    pub fn drain(&self, stderr: impl Read + Send + 'static) -> Drain {
        let tail = self.clone();
        let (done, finished) = mpsc::channel();
        let started = std::thread::Builder::new()
            .name("leakloop-stderr".into())
            .spawn(move || {
                let mut reader = BufReader::new(stderr);
                let mut buf = Vec::new();
                while let Ok(n) = read_line_capped(&mut reader, STDERR_LINE_BYTES, &mut buf) {
                    if n == 0 {
                        break;
                    }
                    tail.push("", &buf);
                }
                let _ = done.send(());
            });
        if let Err(e) = started {
            self.push(
                "",
                format!("(its stderr could not be read: {e})").as_bytes(),
            );
        }
        Drain { finished }
    }
}

/// The thread draining a stderr into its tail.
#[derive(Debug)]
pub(crate) struct Drain {
    finished: Receiver<()>,
}

impl Drain {
    /// Lets the thread take in a dead child's last lines, waiting at most `grace` (a process the
    /// child started may hold the pipe open); the thread ends by itself when the pipe closes.
    pub fn finish(self, grace: Duration) {
        let _ = self.finished.recv_timeout(grace);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tail_keeps_the_last_lines_each_capped_and_counts_the_rest() {
        let tail = StderrTail::default();
        let mut input = Vec::new();
        for i in 0..100 {
            input.extend(format!("line {i}\n").bytes());
        }
        // A line far past the cap, kept in capped pieces.
        input.extend(std::iter::repeat_n(
            b'x',
            3 * STDERR_LINE_BYTES as usize + 5,
        ));
        input.push(b'\n');
        let (reader, mut writer) = std::io::pipe().unwrap();
        let drain = tail.drain(reader);
        std::io::Write::write_all(&mut writer, &input).unwrap();
        drop(writer);
        drain.finish(Duration::from_secs(30));
        let lines = tail.lines();
        assert_eq!(lines.len(), STDERR_TAIL_LINES);
        assert!(lines.iter().all(|l| l.len() <= STDERR_LINE_BYTES as usize));
        assert_eq!(lines.last().unwrap(), "xxxxx");
        assert_eq!(tail.dropped(), 100 + 4 - STDERR_TAIL_LINES as u64);
        let text = tail.render("the child's stderr");
        assert!(
            text.starts_with(
                "\nlast lines of the child's stderr:\n  | [... 40 earlier lines not kept]"
            ),
            "{text}"
        );
    }

    #[test]
    fn an_empty_tail_renders_as_nothing() {
        assert_eq!(StderrTail::default().render("the worker's stderr"), "");
    }
}
