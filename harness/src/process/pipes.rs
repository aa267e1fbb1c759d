//! A child's stdin and stdout driven by threads, so that writing a request and reading a reply
//! both wait with a deadline: [`LineWriter`] writes what it is given, [`LineReader`] reads lines
//! of bounded length, in order, into a bounded queue.

use std::io::{self, BufReader, Read, Write};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender, SyncSender};
use std::time::Instant;

use crate::process::lines::read_line_capped;

/// Lines read ahead and not yet taken; the reader waits (and the child with it, on a full pipe)
/// beyond that.
const QUEUED_LINES: usize = 2;

/// Writes to a child's stdin from a thread. Dropping it closes the stdin once the write in
/// progress (if any) is done.
#[derive(Debug)]
pub(crate) struct LineWriter {
    bytes: Sender<Vec<u8>>,
    written: Receiver<io::Result<()>>,
}

/// Why a write did not complete.
#[derive(Debug)]
pub(crate) enum WriteFailure {
    /// The deadline passed first (a child that does not read, on a full pipe).
    TimedOut,
    /// The pipe failed (the child closed it or is gone).
    Failed(io::Error),
}

impl LineWriter {
    /// Starts the thread that writes to `stdin`.
    pub fn start(mut stdin: impl Write + Send + 'static) -> io::Result<Self> {
        let (bytes, to_write) = mpsc::channel::<Vec<u8>>();
        let (done, written) = mpsc::channel();
        std::thread::Builder::new()
            .name("leakloop-stdin".into())
            .spawn(move || {
                for chunk in to_write {
                    let result = stdin.write_all(&chunk).and_then(|()| stdin.flush());
                    let failed = result.is_err();
                    if done.send(result).is_err() || failed {
                        return;
                    }
                }
            })?;
        Ok(Self { bytes, written })
    }

    /// Writes `bytes` (and flushes), waiting until `deadline` at most.
    pub fn write(&self, bytes: Vec<u8>, deadline: Instant) -> Result<(), WriteFailure> {
        let gone = || WriteFailure::Failed(io::ErrorKind::BrokenPipe.into());
        self.bytes.send(bytes).map_err(|_| gone())?;
        match self
            .written
            .recv_timeout(deadline.saturating_duration_since(Instant::now()))
        {
            Ok(result) => result.map_err(WriteFailure::Failed),
            Err(RecvTimeoutError::Timeout) => Err(WriteFailure::TimedOut),
            Err(RecvTimeoutError::Disconnected) => Err(gone()),
        }
    }
}

/// What the thread reading a child's stdout saw.
#[derive(Debug)]
pub(crate) enum Chunk {
    /// A line with its `\n`; without one, either the stream's last bytes or the first `max`
    /// bytes of a longer line (whose rest follows as further pieces).
    Line(Vec<u8>),
    /// The stream ended (`None`) or failed; nothing follows.
    Closed(Option<io::Error>),
}

/// Reads a child's stdout in lines of at most `max` bytes, from a thread.
#[derive(Debug)]
pub(crate) struct LineReader {
    lines: Receiver<Chunk>,
}

impl LineReader {
    /// Starts the thread that reads `stdout`.
    pub fn start(stdout: impl Read + Send + 'static, max: u64) -> io::Result<Self> {
        let (sender, lines) = mpsc::sync_channel(QUEUED_LINES);
        std::thread::Builder::new()
            .name("leakloop-stdout".into())
            .spawn(move || read_lines(stdout, max, &sender))?;
        Ok(Self { lines })
    }

    /// The next line, waiting until `deadline` at most (`None` past it). Once the stream has
    /// closed, every call says so.
    pub fn next(&self, deadline: Instant) -> Option<Chunk> {
        match self
            .lines
            .recv_timeout(deadline.saturating_duration_since(Instant::now()))
        {
            Ok(read) => Some(read),
            Err(RecvTimeoutError::Timeout) => None,
            Err(RecvTimeoutError::Disconnected) => Some(Chunk::Closed(None)),
        }
    }
}

fn read_lines(stdout: impl Read, max: u64, sender: &SyncSender<Chunk>) {
    let mut reader = BufReader::new(stdout);
    loop {
        let mut buf = Vec::new();
        let read = match read_line_capped(&mut reader, max, &mut buf) {
            Ok(0) => Chunk::Closed(None),
            Ok(_) => Chunk::Line(buf),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => Chunk::Closed(Some(e)),
        };
        let last = matches!(read, Chunk::Closed(_));
        // A receiver that is gone wants no more lines.
        if sender.send(read).is_err() || last {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn soon() -> Instant {
        Instant::now() + Duration::from_secs(30)
    }

    #[test]
    fn lines_come_in_order_capped_then_the_close() {
        let (reader, mut writer) = io::pipe().unwrap();
        let lines = LineReader::start(reader, 8).unwrap();
        writer.write_all(b"one\n0123456789\nlast").unwrap();
        drop(writer);
        let mut got = Vec::new();
        loop {
            match lines.next(soon()).unwrap() {
                Chunk::Line(line) => got.push(String::from_utf8(line).unwrap()),
                Chunk::Closed(error) => {
                    assert!(error.is_none());
                    break;
                }
            }
        }
        assert_eq!(got, ["one\n", "01234567", "89\n", "last"]);
        assert!(matches!(lines.next(soon()), Some(Chunk::Closed(None))));
    }

    #[test]
    fn a_read_past_its_deadline_is_none() {
        let (reader, _writer) = io::pipe().unwrap();
        let lines = LineReader::start(reader, 8).unwrap();
        assert!(lines.next(Instant::now()).is_none());
    }

    #[test]
    fn a_write_to_a_closed_pipe_fails_and_a_blocked_one_times_out() {
        let (reader, writer) = io::pipe().unwrap();
        let stdin = LineWriter::start(writer).unwrap();
        // More than a pipe holds, never read: the write cannot complete.
        let blocked = stdin.write(
            vec![b'x'; 4 << 20],
            Instant::now() + Duration::from_millis(100),
        );
        assert!(
            matches!(blocked, Err(WriteFailure::TimedOut)),
            "{blocked:?}"
        );
        drop(reader);
        let (reader, writer) = io::pipe().unwrap();
        drop(reader);
        let stdin = LineWriter::start(writer).unwrap();
        let failed = stdin.write(b"hello\n".to_vec(), soon());
        assert!(matches!(failed, Err(WriteFailure::Failed(_))), "{failed:?}");
    }
}
