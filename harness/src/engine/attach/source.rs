//! Marker sources: threads that read lines from a pipe (the started process's stdout or stderr,
//! or a marker command's stdout) or follow a file, and feed them to the [`Board`].

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use crate::engine::attach::board::{Board, Patterns};
use crate::engine::attach::lines::{for_each_line, Line};
use crate::scenario::MAX_MARKER_LINE;

/// How often a followed file is checked for new lines.
const FILE_POLL: Duration = Duration::from_millis(20);

/// Reads `pipe` line by line in a thread: markers into the board when `patterns` is given,
/// otherwise only remembered for error messages (the other stream). Marks the source ended at
/// the end of a marker pipe.
pub(crate) fn read_pipe(
    pipe: impl Read + Send + 'static,
    board: Board,
    patterns: Option<Patterns>,
    name: String,
) -> std::io::Result<JoinHandle<()>> {
    std::thread::Builder::new()
        .name(format!("leakloop-{name}"))
        .spawn(move || {
            let result = for_each_line(pipe, MAX_MARKER_LINE, |line| {
                match (&patterns, line) {
                    (Some(p), line) => p.feed(&board, &name, line),
                    (None, Line::Text(text)) => board.remember(&name, text),
                    (None, Line::TooLong) => {}
                }
                true
            });
            if patterns.is_some() {
                let why = match result {
                    Ok(()) => format!("{name} closed"),
                    Err(e) => format!("reading {name} failed: {e}"),
                };
                board.update(|s| {
                    s.source_ended.get_or_insert(why);
                });
            }
        })
}

/// A thread following a file that the process appends to.
#[derive(Debug)]
pub(crate) struct FileFollower {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl FileFollower {
    /// Follows `path` from its current end (from its start if it appears later, or is
    /// truncated), feeding new lines to the board.
    pub fn start(path: &Path, board: Board, patterns: Patterns) -> std::io::Result<Self> {
        let stop = Arc::new(AtomicBool::new(false));
        let start_at = std::fs::metadata(path).map(|m| m.len()).unwrap_or(0);
        let follow = Follow {
            path: path.to_owned(),
            board,
            patterns,
            pos: start_at,
            partial: Vec::new(),
        };
        let flag = Arc::clone(&stop);
        let thread = std::thread::Builder::new()
            .name("leakloop-marker-file".into())
            .spawn(move || follow.run(&flag))?;
        Ok(Self {
            stop,
            thread: Some(thread),
        })
    }
}

impl Drop for FileFollower {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

struct Follow {
    path: PathBuf,
    board: Board,
    patterns: Patterns,
    /// Bytes of the file already read.
    pos: u64,
    /// A line whose newline has not been written yet (bounded like any line).
    partial: Vec<u8>,
}

impl Follow {
    fn run(mut self, stop: &AtomicBool) {
        while !stop.load(Ordering::Relaxed) {
            self.poll();
            std::thread::sleep(FILE_POLL);
        }
    }

    /// Reads what was appended since the last poll; complete lines are fed, the rest kept.
    fn poll(&mut self) {
        let Ok(mut file) = File::open(&self.path) else {
            return; // not created yet, or moved away for a moment
        };
        let len = file.metadata().map(|m| m.len()).unwrap_or(0);
        if len < self.pos {
            // Truncated or replaced: start again from its beginning.
            self.pos = 0;
            self.partial.clear();
        }
        if len == self.pos || file.seek(SeekFrom::Start(self.pos)).is_err() {
            return;
        }
        let mut fresh = Vec::new();
        let Ok(n) = file.take(len - self.pos).read_to_end(&mut fresh) else {
            return;
        };
        self.pos += n as u64;
        // Only whole lines are fed; the unfinished tail waits for its newline.
        let complete = match fresh.iter().rposition(|b| *b == b'\n') {
            Some(i) => i + 1,
            None => 0,
        };
        let mut bytes = std::mem::take(&mut self.partial);
        bytes.extend_from_slice(&fresh[..complete]);
        let rest = &fresh[complete..];
        if !bytes.is_empty() {
            let _ = for_each_line(bytes.as_slice(), MAX_MARKER_LINE, |line| {
                self.patterns.feed(&self.board, "the marker file", line);
                true
            });
        }
        // A partial line past the bound is kept only up to it plus one byte, which is enough
        // for it to be reported as too long once it ends.
        let room = (MAX_MARKER_LINE + 2).saturating_sub(self.partial.len());
        self.partial
            .extend_from_slice(&rest[..rest.len().min(room)]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::{DEFAULT_LEDGER_PATTERN, DEFAULT_MARKER_PATTERN};
    use std::io::Write;
    use std::time::Instant;

    fn patterns() -> Patterns {
        Patterns::new(DEFAULT_MARKER_PATTERN, DEFAULT_LEDGER_PATTERN).unwrap()
    }

    fn wait_for_turn(board: &Board, turn: u64) -> bool {
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if board.lock().latest.map(|m| m.turn) == Some(turn) {
                return true;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        false
    }

    #[test]
    fn a_followed_file_yields_only_lines_appended_after_attaching() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("app.log");
        std::fs::write(&path, "TURN 1 CLOSED\n").unwrap();
        let board = Board::default();
        let _follower = FileFollower::start(&path, board.clone(), patterns()).unwrap();
        let mut file = std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap();
        // Written in two pieces: the half line must wait for its end.
        file.write_all(b"TURN 2 CL").unwrap();
        file.flush().unwrap();
        std::thread::sleep(FILE_POLL * 3);
        file.write_all(b"OSED\n").unwrap();
        assert!(wait_for_turn(&board, 2));
        assert_eq!(board.lock().markers, 1, "the old line was read");
    }

    #[test]
    fn a_file_created_after_attaching_is_read_from_its_start() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("later.log");
        let board = Board::default();
        let _follower = FileFollower::start(&path, board.clone(), patterns()).unwrap();
        std::fs::write(&path, "TURN 5 CLOSED\n").unwrap();
        assert!(wait_for_turn(&board, 5));
    }

    #[test]
    fn a_pipe_that_ends_marks_the_source_ended() {
        let board = Board::default();
        let input: &'static [u8] = b"TURN 1 CLOSED\n";
        read_pipe(input, board.clone(), Some(patterns()), "stdout".into())
            .unwrap()
            .join()
            .unwrap();
        let state = board.lock();
        assert_eq!(state.latest.map(|m| m.turn), Some(1));
        assert_eq!(state.source_ended.as_deref(), Some("stdout closed"));
    }
}
