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
use crate::input::{InputError, InputErrorKind};
use crate::process::lines::{for_each_line, Line, LineSplitter};
use crate::scenario::MAX_MARKER_LINE;

/// How often a followed file is checked for new lines.
const FILE_POLL: Duration = Duration::from_millis(20);

/// The most bytes of a followed file one poll reads; when more is waiting the next poll comes at
/// once, so a burst is read at full speed but a file that grows for ever cannot keep the
/// follower from stopping.
const POLL_READ_BYTES: u64 = 8 << 20;

/// The bytes of a followed file read at a time: with the line cap ([`MAX_MARKER_LINE`]), all
/// the memory a follower holds, whatever is appended between two polls (a 512 MiB burst costs
/// 64 KiB, not 512 MiB).
const READ_CHUNK: usize = 64 << 10;

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
    /// Follows `path` from its current end (from its start if it appears later, is truncated,
    /// or is replaced by another file), feeding new lines to the board. A path that is not a
    /// regular file (a FIFO, a device, a folder), now or later, stops the follower and is
    /// recorded on the board as the markers' failure.
    pub fn start(path: &Path, board: Board, patterns: Patterns) -> std::io::Result<Self> {
        let stop = Arc::new(AtomicBool::new(false));
        let mut follow = Follow {
            path: path.to_owned(),
            board,
            patterns,
            current: None,
            pos: 0,
            splitter: LineSplitter::new(MAX_MARKER_LINE),
            buffer: vec![0; READ_CHUNK].into_boxed_slice(),
        };
        // What is there already was written before the run: reading starts at its end. What is
        // not a regular file is refused by the first poll.
        if let Some((mut file, id)) = open_at(path).ok().flatten() {
            if let Ok(end) = file.seek(SeekFrom::End(0)) {
                follow.pos = end;
                follow.current = Some((file, id));
            }
        }
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

/// Which file a path named when it was opened: its device and inode.
type Identity = (u64, u64);

/// The regular file at `path` with its identity; `None` when there is none (not created yet,
/// moved away for a moment); an error naming what is there when it is not a regular file.
///
/// It is opened without blocking and checked on the open descriptor, on every call: a FIFO
/// swapped in mid-run is refused, never waited on.
fn open_at(path: &Path) -> Result<Option<(File, Identity)>, String> {
    use std::os::unix::fs::MetadataExt;
    match crate::input::open_regular(path) {
        Ok(file) => Ok(file
            .metadata()
            .ok()
            .map(|meta| (meta.dev(), meta.ino()))
            .map(|id| (file, id))),
        Err(InputError {
            kind: InputErrorKind::NotAFile(what),
            ..
        }) => Err(format!(
            "the marker file {} is {what}, not a regular file; `markers.file` must name a \
             regular file that the process appends to",
            crate::input::printable(&path.display().to_string())
        )),
        Err(_) => Ok(None),
    }
}

struct Follow {
    path: PathBuf,
    board: Board,
    patterns: Patterns,
    /// The file being read, kept open: when another file takes its path (a log rotated or
    /// replaced by a rename), the rest of this one is read first, then the new one from its
    /// start, not from this one's offset.
    current: Option<(File, Identity)>,
    /// Bytes of the current file already read.
    pos: u64,
    /// The line whose newline has not been written yet (bounded like any line).
    splitter: LineSplitter,
    /// What one read fills: the most bytes of the file in memory at once.
    buffer: Box<[u8]>,
}

impl Follow {
    fn run(mut self, stop: &AtomicBool) {
        while !stop.load(Ordering::Relaxed) {
            match self.poll() {
                // More is waiting: read on at once.
                Ok(true) => {}
                Ok(false) => std::thread::sleep(FILE_POLL),
                Err(why) => {
                    self.board.update(|s| {
                        s.violation.get_or_insert(why);
                    });
                    return;
                }
            }
        }
    }

    /// Reads what was appended since the last poll (at most [`POLL_READ_BYTES`]) and feeds its
    /// complete lines. Whether more may be waiting; an error when the path is not a regular
    /// file.
    fn poll(&mut self) -> Result<bool, String> {
        let at_path = open_at(&self.path)?;
        if let Some((mut file, id)) = self.current.take() {
            let more = self.read_on(&mut file);
            self.current = Some((file, id));
            if more {
                return Ok(true);
            }
        }
        let Some((mut file, id)) = at_path else {
            return Ok(false);
        };
        if self
            .current
            .as_ref()
            .is_some_and(|(_, current)| *current == id)
        {
            return Ok(false);
        }
        if self.current.is_some() {
            // Replaced: the old file's unfinished last line ends with it.
            let (board, patterns) = (&self.board, &self.patterns);
            self.splitter.finish(&mut |line| {
                patterns.feed(board, "the marker file", line);
                true
            });
            self.splitter.reset();
        }
        self.pos = 0;
        let more = self.read_on(&mut file);
        self.current = Some((file, id));
        Ok(more)
    }

    /// Reads `file` on from the offset (from its start if it was truncated below it), at most
    /// [`POLL_READ_BYTES`]; whether it stopped before the end.
    fn read_on(&mut self, file: &mut File) -> bool {
        let len = file.metadata().map_or(0, |m| m.len());
        if len < self.pos {
            // Truncated in place: start again from its beginning.
            self.pos = 0;
            self.splitter.reset();
        }
        if file.seek(SeekFrom::Start(self.pos)).is_err() {
            return false;
        }
        let mut read = 0u64;
        while read < POLL_READ_BYTES {
            let n = match file.read(&mut self.buffer) {
                Ok(0) => return false,
                Ok(n) => n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(_) => return false,
            };
            read += n as u64;
            self.pos += n as u64;
            let (board, patterns) = (&self.board, &self.patterns);
            self.splitter.push(&self.buffer[..n], &mut |line| {
                patterns.feed(board, "the marker file", line);
                true
            });
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::{DEFAULT_LEDGER_PATTERN, DEFAULT_MARKER_PATTERN, DEFAULT_READY_PATTERN};
    use std::io::Write;
    use std::time::Instant;

    fn patterns() -> Patterns {
        Patterns::new(
            DEFAULT_MARKER_PATTERN,
            DEFAULT_LEDGER_PATTERN,
            DEFAULT_READY_PATTERN,
        )
        .unwrap()
    }

    fn wait_for_turn(board: &Board, turn: u64) -> bool {
        // A hang guard, not a timing: a loaded machine reads a 16 MiB burst in a debug build slowly.
        let deadline = Instant::now() + Duration::from_secs(120);
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

    fn mkfifo(path: &Path) {
        let c_path = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a valid NUL-terminated path; mkfifo only creates the file.
        assert_eq!(unsafe { libc::mkfifo(c_path.as_ptr(), 0o600) }, 0);
    }

    fn wait_for_violation(board: &Board) -> String {
        let state = board.wait_for(Duration::from_secs(120), |s| s.violation.is_some());
        state.violation.clone().expect("no violation within 10s")
    }

    /// Issue 20: a FIFO at the path, from the start or renamed over the file mid-run, is
    /// refused without blocking (no writer ever opens it).
    #[test]
    fn a_fifo_planted_or_swapped_in_is_refused_not_waited_on() {
        let dir = tempfile::tempdir().unwrap();
        let planted = dir.path().join("planted.log");
        mkfifo(&planted);
        let board = Board::default();
        let _follower = FileFollower::start(&planted, board.clone(), patterns()).unwrap();
        let why = wait_for_violation(&board);
        assert!(
            why.contains(&format!(
                "the marker file {} is a named pipe (FIFO), not a regular file",
                planted.display()
            )),
            "{why}"
        );

        let path = dir.path().join("app.log");
        std::fs::write(&path, "").unwrap();
        let board = Board::default();
        let follower = FileFollower::start(&path, board.clone(), patterns()).unwrap();
        std::fs::write(&path, "TURN 1 CLOSED\n").unwrap();
        assert!(wait_for_turn(&board, 1));
        let fifo = dir.path().join("fifo");
        mkfifo(&fifo);
        std::fs::rename(&fifo, &path).unwrap();
        assert!(wait_for_violation(&board).contains("is a named pipe (FIFO)"));
        drop(follower); // the thread ended: dropping joins it at once
    }

    #[test]
    fn a_folder_at_the_path_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let board = Board::default();
        let _follower = FileFollower::start(dir.path(), board.clone(), patterns()).unwrap();
        assert!(wait_for_violation(&board).contains("is a folder, not a regular file"));
    }

    /// Issue 20 (class 8): a file renamed over the followed one is read from its start, even
    /// when it is larger than the old file's offset.
    #[test]
    fn a_replaced_file_is_read_from_its_start() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("app.log");
        std::fs::write(&path, "TURN 1 CLOSED\n").unwrap();
        let board = Board::default();
        let _follower = FileFollower::start(&path, board.clone(), patterns()).unwrap();
        std::thread::sleep(FILE_POLL * 3);
        let new = dir.path().join("new.log");
        let mut text = "TURN 7 CLOSED\n".to_owned();
        text.push_str(&"filler line\n".repeat(100));
        std::fs::write(&new, text).unwrap();
        std::fs::rename(&new, &path).unwrap();
        assert!(
            wait_for_turn(&board, 7),
            "the new file was read from the old offset"
        );
    }

    #[test]
    fn a_file_truncated_in_place_is_read_from_its_start() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("app.log");
        std::fs::write(&path, "an old line that is long enough\nTURN 1 CLOSED\n").unwrap();
        let board = Board::default();
        let _follower = FileFollower::start(&path, board.clone(), patterns()).unwrap();
        std::thread::sleep(FILE_POLL * 3);
        std::fs::write(&path, "TURN 9 CLOSED\n").unwrap();
        assert!(wait_for_turn(&board, 9));
    }

    /// A burst far larger than one poll's read is read whole, in bounded pieces.
    #[test]
    fn a_burst_larger_than_a_poll_is_read_to_its_end() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("app.log");
        std::fs::write(&path, "").unwrap();
        let board = Board::default();
        let _follower = FileFollower::start(&path, board.clone(), patterns()).unwrap();
        // Long lines, so that the test is not slowed by millions of board updates.
        let line = format!("{}\n", "x".repeat(1023));
        let mut burst = line.repeat(2 * POLL_READ_BYTES as usize / line.len() + 1);
        burst.push_str("TURN 3 CLOSED\n");
        std::fs::write(&path, burst).unwrap();
        assert!(wait_for_turn(&board, 3));
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
