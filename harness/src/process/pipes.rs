//! A child's stdin and stdout, written and read from the calling thread with a deadline: both
//! pipes are made non-blocking and `poll` waits for them. [`LineWriter`] writes what it is given,
//! [`LineReader`] reads lines of bounded length, in order. No thread stands between the caller
//! and the pipe: a request and its reply cost the two processes' own wake-ups only (a worker's
//! five exchanges a turn used to take three thread hand-overs each on this side).

use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::{AsRawFd, OwnedFd};
use std::time::Instant;

/// Bytes asked of the pipe per read; what [`LineReader`] holds is at most its line bound plus
/// this.
const READ_CHUNK: usize = 64 * 1024;

/// Writes to a child's stdin. Dropping it closes the stdin.
#[derive(Debug)]
pub(crate) struct LineWriter {
    pipe: File,
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
    /// Takes `stdin` (the write end of a pipe) and makes it non-blocking.
    pub fn start(stdin: impl Into<OwnedFd>) -> io::Result<Self> {
        let pipe = File::from(stdin.into());
        set_nonblocking(&pipe)?;
        Ok(Self { pipe })
    }

    /// Writes `bytes`, waiting until `deadline` at most. A write that times out may have left
    /// part of `bytes` in the pipe: the caller gives the child up.
    pub fn write(&mut self, bytes: &[u8], deadline: Instant) -> Result<(), WriteFailure> {
        let mut written = 0;
        while written < bytes.len() {
            match self.pipe.write(&bytes[written..]) {
                Ok(0) => {
                    return Err(WriteFailure::Failed(io::ErrorKind::WriteZero.into()));
                }
                Ok(n) => written += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    if !wait_for(&self.pipe, libc::POLLOUT, deadline)
                        .map_err(WriteFailure::Failed)?
                    {
                        return Err(WriteFailure::TimedOut);
                    }
                }
                Err(e) => return Err(WriteFailure::Failed(e)),
            }
        }
        Ok(())
    }
}

/// What reading a child's stdout gave.
#[derive(Debug)]
pub(crate) enum Chunk {
    /// A line with its `\n`; without one, either the stream's last bytes or the first `max`
    /// bytes of a longer line (whose rest follows as further pieces).
    Line(Vec<u8>),
    /// The stream ended (`None`) or failed; nothing follows.
    Closed(Option<io::Error>),
}

/// Reads a child's stdout in lines of at most `max` bytes. It holds at most `max` plus 64 KiB
/// read ahead of the caller.
#[derive(Debug)]
pub(crate) struct LineReader {
    pipe: File,
    max: usize,
    /// Bytes read and not yet handed over.
    pending: Vec<u8>,
    /// How many of `pending`'s first bytes are known to hold no newline.
    scanned: usize,
    /// Where each read lands (allocated once: a reply is read with no buffer to clear).
    scratch: Vec<u8>,
    /// How the stream ended, once it has: `Some(None)` at its end, the error once and then
    /// `Some(None)` after a failure.
    ended: Option<Option<io::Error>>,
}

impl LineReader {
    /// Takes `stdout` (the read end of a pipe) and makes it non-blocking.
    pub fn start(stdout: impl Into<OwnedFd>, max: u64) -> io::Result<Self> {
        let pipe = File::from(stdout.into());
        set_nonblocking(&pipe)?;
        Ok(Self {
            pipe,
            max: usize::try_from(max).unwrap_or(usize::MAX).max(1),
            pending: Vec::new(),
            scanned: 0,
            scratch: vec![0; READ_CHUNK],
            ended: None,
        })
    }

    /// The next line, waiting until `deadline` at most (`None` past it). Once the stream has
    /// closed, every call says so.
    pub fn next(&mut self, deadline: Instant) -> Option<Chunk> {
        loop {
            // Only bytes not looked at before are searched: a line of megabytes arrives in
            // many reads, and searching it whole after each would take quadratic time.
            let within = self.pending.len().min(self.max);
            let newline = self.pending[self.scanned.min(within)..within]
                .iter()
                .position(|&b| b == b'\n');
            if let Some(at) = newline {
                let end = self.scanned.min(within) + at;
                self.scanned = 0;
                return Some(Chunk::Line(self.pending.drain(..=end).collect()));
            }
            self.scanned = within;
            if self.pending.len() >= self.max {
                self.scanned = 0;
                return Some(Chunk::Line(self.pending.drain(..self.max).collect()));
            }
            if let Some(ended) = &mut self.ended {
                if !self.pending.is_empty() {
                    self.scanned = 0;
                    return Some(Chunk::Line(std::mem::take(&mut self.pending)));
                }
                return Some(Chunk::Closed(ended.take()));
            }
            match self.pipe.read(&mut self.scratch) {
                Ok(0) => self.ended = Some(None),
                Ok(n) => self.pending.extend_from_slice(&self.scratch[..n]),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    match wait_for(&self.pipe, libc::POLLIN, deadline) {
                        Ok(true) => {}
                        Ok(false) => return None,
                        Err(e) => self.ended = Some(Some(e)),
                    }
                }
                Err(e) => self.ended = Some(Some(e)),
            }
        }
    }
}

fn set_nonblocking(pipe: &File) -> io::Result<()> {
    let fd = pipe.as_raw_fd();
    // SAFETY: fcntl on a descriptor this value owns, reading and setting its status flags.
    let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
    if flags < 0 || unsafe { libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Waits until `pipe` is ready for `events` (or has hung up or failed, which the next read or
/// write reports), or `deadline` passes: true when ready.
fn wait_for(pipe: &File, events: libc::c_short, deadline: Instant) -> io::Result<bool> {
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        // Rounded up, so that a wait never ends just short of its deadline.
        let millis = left.as_nanos().div_ceil(1_000_000);
        let timeout = libc::c_int::try_from(millis).unwrap_or(libc::c_int::MAX);
        let mut pollfd = libc::pollfd {
            fd: pipe.as_raw_fd(),
            events,
            revents: 0,
        };
        // SAFETY: one valid pollfd, for the length of the call.
        match unsafe { libc::poll(&mut pollfd, 1, timeout) } {
            0 if Instant::now() >= deadline => return Ok(false),
            0 => {}
            n if n > 0 => return Ok(true),
            _ => {
                let e = io::Error::last_os_error();
                if e.kind() != io::ErrorKind::Interrupted {
                    return Err(e);
                }
            }
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

    /// A line longer than one read (and than the pipe holds) arrives whole, its newline found
    /// after many reads.
    #[test]
    fn a_line_of_many_reads_comes_whole() {
        let (reader, mut writer) = io::pipe().unwrap();
        let mut lines = LineReader::start(reader, 1 << 20).unwrap();
        let long = [vec![b'x'; 200_000], b"\nnext\n".to_vec()].concat();
        let writing = std::thread::spawn(move || writer.write_all(&long));
        let Some(Chunk::Line(first)) = lines.next(soon()) else {
            panic!("a line");
        };
        assert_eq!(first.len(), 200_001);
        assert!(first.ends_with(b"x\n"));
        assert!(matches!(lines.next(soon()), Some(Chunk::Line(l)) if l == b"next\n"));
        writing.join().unwrap().unwrap();
    }

    #[test]
    fn lines_come_in_order_capped_then_the_close() {
        let (reader, mut writer) = io::pipe().unwrap();
        let mut lines = LineReader::start(reader, 8).unwrap();
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
        let mut lines = LineReader::start(reader, 8).unwrap();
        assert!(lines.next(Instant::now()).is_none());
    }

    #[test]
    fn a_write_to_a_closed_pipe_fails_and_a_blocked_one_times_out() {
        let (reader, writer) = io::pipe().unwrap();
        let mut stdin = LineWriter::start(writer).unwrap();
        // More than a pipe holds, never read: the write cannot complete.
        let blocked = stdin.write(
            &vec![b'x'; 4 << 20],
            Instant::now() + Duration::from_millis(100),
        );
        assert!(
            matches!(blocked, Err(WriteFailure::TimedOut)),
            "{blocked:?}"
        );
        drop(reader);
        let (reader, writer) = io::pipe().unwrap();
        drop(reader);
        let mut stdin = LineWriter::start(writer).unwrap();
        let failed = stdin.write(b"hello\n", soon());
        assert!(matches!(failed, Err(WriteFailure::Failed(_))), "{failed:?}");
    }
}
