//! Heaptrack as an attribution source (Linux): the measured process starts with heaptrack's
//! preload library, which records every allocation and free with its stack into a named pipe;
//! `heaptrack_interpret` symbolises that stream, and a thread of ours follows it
//! ([`stream`]) into live bytes per site.
//!
//! The process keeps its own pid and its own allocator (the preload only observes), so the
//! probes sample it as without attribution. Sample points are matched to the stream by time:
//! heaptrack stamps its stream with milliseconds since the process started, and leakloop knows
//! when it started the process; the offset (the process's start-up before the preload runs) is a
//! few milliseconds, far below a turn.

mod stream;

use std::ffi::CString;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

use super::{AttributionSource, Recording};
use crate::process::Process;
pub(crate) use stream::Stream;

/// Environment variable that makes a missing heaptrack a test failure (CI).
pub const REQUIRE_HEAPTRACK_ENV: &str = "LEAKLOOP_REQUIRE_HEAPTRACK";
/// Environment variable naming heaptrack's library folder (the one holding
/// `libheaptrack_preload.so` and `libexec/heaptrack_interpret`), where it is not found by itself.
pub const HEAPTRACK_DIR_ENV: &str = "LEAKLOOP_HEAPTRACK_DIR";
/// The longest line of the interpreted stream followed (a symbol name); longer lines end it.
const MAX_LINE_BYTES: u64 = 64 * 1024;
/// How long the stream may take to end once the measured process is gone.
const FINISH_WAIT: Duration = Duration::from_secs(20);
/// How long the stream may take to reach the last sample point while the process still runs.
/// The preload writes its stream in blocks of about 4 KiB and adds a timestamp every 10 ms, so
/// an idle process delivers a block every few seconds; a process stopped by a signal (attach
/// mode) never writes the block it held.
const CATCH_UP_WAIT: Duration = Duration::from_secs(15);
/// How often the wait above looks at the stream.
const CATCH_UP_POLL: Duration = Duration::from_millis(20);
/// Where distributions install heaptrack's library folder.
const LIB_DIRS: &[&str] = &[
    "/usr/lib/heaptrack",
    "/usr/lib/x86_64-linux-gnu/heaptrack",
    "/usr/lib/aarch64-linux-gnu/heaptrack",
    "/usr/local/lib/heaptrack",
];

/// Heaptrack's preload library and interpreter.
#[derive(Debug, Clone)]
struct Install {
    preload: PathBuf,
    interpret: PathBuf,
}

/// Finds heaptrack: the folder [`HEAPTRACK_DIR_ENV`] names, or a distribution's.
fn find_install() -> Result<Install, String> {
    let named = std::env::var_os(HEAPTRACK_DIR_ENV).map(PathBuf::from);
    let dirs: Vec<PathBuf> = match named {
        Some(dir) => vec![dir],
        None => LIB_DIRS.iter().map(PathBuf::from).collect(),
    };
    for dir in &dirs {
        let install = Install {
            preload: dir.join("libheaptrack_preload.so"),
            interpret: dir.join("libexec").join("heaptrack_interpret"),
        };
        if install.preload.is_file() && install.interpret.is_file() {
            return Ok(install);
        }
    }
    Err(format!(
        "heaptrack is not installed (looked in {}; install it with `apt-get install heaptrack`, or \
         name its library folder in {HEAPTRACK_DIR_ENV})",
        dirs.iter()
            .map(|d| d.display().to_string())
            .collect::<Vec<_>>()
            .join(", ")
    ))
}

/// Whether heaptrack can be used here, for a test: without it, prints `SKIPPED: heaptrack is not
/// installed (...)` naming `test` and returns false, or panics under
/// `LEAKLOOP_REQUIRE_HEAPTRACK=1`.
pub fn heaptrack_or_skip(test: &str) -> bool {
    match heaptrack_missing() {
        None => true,
        Some(why) => {
            crate::engine::skip_or_require(REQUIRE_HEAPTRACK_ENV, &format!("{why}: {test}"));
            false
        }
    }
}

/// Why heaptrack cannot be used here (it is not installed, with how to get it), or `None`.
pub fn heaptrack_missing() -> Option<String> {
    find_install().err()
}

/// A heaptrack recording of one process, started before it.
pub struct HeaptrackSource {
    install: Install,
    /// Holds the named pipe; removed when the source is dropped.
    dir: tempfile::TempDir,
    fifo: PathBuf,
    /// The interpreter, reading the pipe.
    interpret: Process,
    stream: Arc<Mutex<Option<Stream>>>,
    done: mpsc::Receiver<Option<String>>,
    /// What the reading thread said when it ended, once received.
    ended: Option<Option<String>>,
    started: Instant,
}

impl std::fmt::Debug for HeaptrackSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HeaptrackSource")
            .field("fifo", &self.fifo)
            .finish_non_exhaustive()
    }
}

impl HeaptrackSource {
    /// Makes the pipe and starts the interpreter on it; the measured process must start next,
    /// with [`AttributionSource::env`].
    pub fn start() -> Result<Self, String> {
        let install = find_install()?;
        let dir = tempfile::Builder::new()
            .prefix("leakloop-heaptrack")
            .tempdir()
            .map_err(|e| format!("cannot make a folder for heaptrack's pipe: {e}"))?;
        let fifo = dir.path().join("stream");
        make_fifo(&fifo)?;
        // The shell opens the pipe (which waits for the measured process to open its end), so
        // that nothing here blocks.
        let mut command = Command::new("sh");
        command
            .arg("-c")
            .arg("exec \"$0\" < \"$1\"")
            .arg(&install.interpret)
            .arg(&fifo)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        let mut interpret = Process::spawn(command, libc::SIGKILL)
            .map_err(|e| format!("cannot start `{}`: {e}", install.interpret.display()))?;
        let stdout = interpret.take_stdout().expect("stdout was piped");
        let stream = Arc::new(Mutex::new(Some(Stream::default())));
        let (tell, done) = mpsc::channel();
        let shared = Arc::clone(&stream);
        let started = Instant::now();
        std::thread::Builder::new()
            .name("heaptrack-stream".into())
            .spawn(move || {
                let why = follow(stdout, &shared, started);
                let _ = tell.send(why);
            })
            .map_err(|e| format!("cannot start the thread that reads heaptrack: {e}"))?;
        Ok(Self {
            install,
            dir,
            fifo,
            interpret,
            stream,
            done,
            ended: None,
            started,
        })
    }
}

/// Reads the interpreted stream into `shared` until it ends; why it stopped early, if it did.
fn follow(stdout: impl Read, shared: &Mutex<Option<Stream>>, started: Instant) -> Option<String> {
    let mut reader = BufReader::new(stdout);
    let mut buf = Vec::new();
    loop {
        buf.clear();
        match (&mut reader)
            .take(MAX_LINE_BYTES)
            .read_until(b'\n', &mut buf)
        {
            Ok(0) => return None,
            Ok(_) if !buf.ends_with(b"\n") && buf.len() as u64 >= MAX_LINE_BYTES => {
                return Some(format!(
                    "a line of heaptrack's stream is over {MAX_LINE_BYTES} bytes"
                ));
            }
            Ok(_) => {
                let line = String::from_utf8_lossy(&buf);
                let line = line.trim_end_matches(['\n', '\r']);
                if let Some(stream) = shared.lock().unwrap_or_else(|e| e.into_inner()).as_mut() {
                    stream.line(line);
                    // The first timestamp, read as it comes, sets how far heaptrack's clock
                    // runs behind ours (the process starts after the source does).
                    if stream.offset_ms.is_none() && line.starts_with("c ") {
                        let ours = started.elapsed().as_millis() as u64;
                        stream.offset_ms = Some(ours.saturating_sub(stream.now_ms));
                    }
                }
            }
            Err(e) => return Some(format!("reading heaptrack's stream failed: {e}")),
        }
    }
}

fn make_fifo(path: &Path) -> Result<(), String> {
    use std::os::unix::ffi::OsStrExt;
    let c = CString::new(path.as_os_str().as_bytes()).map_err(|e| e.to_string())?;
    // SAFETY: `c` is a valid NUL-terminated path for the duration of the call.
    if unsafe { libc::mkfifo(c.as_ptr(), 0o600) } != 0 {
        return Err(format!(
            "cannot make the pipe {}: {}",
            path.display(),
            std::io::Error::last_os_error()
        ));
    }
    Ok(())
}

impl AttributionSource for HeaptrackSource {
    fn name(&self) -> &'static str {
        "heaptrack"
    }

    fn env(&self) -> Vec<(String, String)> {
        let preload = self.install.preload.display().to_string();
        let preload = match std::env::var("LD_PRELOAD") {
            Ok(old) if !old.is_empty() => format!("{preload}:{old}"),
            _ => preload,
        };
        vec![
            ("LD_PRELOAD".into(), preload),
            (
                "DUMP_HEAPTRACK_OUTPUT".into(),
                self.fifo.display().to_string(),
            ),
        ]
    }

    fn mark(&mut self, turn: u32) {
        let ours = self.started.elapsed().as_millis() as u64;
        let mut stream = self.stream.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(stream) = stream.as_mut() {
            let at = ours.saturating_sub(stream.offset_ms.unwrap_or(0));
            stream.mark(turn, at);
        }
    }

    fn catch_up(&mut self) {
        let deadline = Instant::now() + CATCH_UP_WAIT;
        loop {
            let caught_up = self
                .stream
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .as_ref()
                .is_none_or(Stream::caught_up);
            if caught_up || Instant::now() >= deadline {
                return;
            }
            match self.done.recv_timeout(CATCH_UP_POLL) {
                Ok(why) => {
                    self.ended = Some(why);
                    return;
                }
                Err(mpsc::RecvTimeoutError::Timeout) => {}
                Err(mpsc::RecvTimeoutError::Disconnected) => return,
            }
        }
    }

    fn finish(mut self: Box<Self>) -> Result<Recording, String> {
        // A process that never opened the pipe leaves the shell waiting to open it: opening the
        // writing end (without waiting) and closing it ends that wait with an empty stream.
        let _ = std::fs::OpenOptions::new()
            .write(true)
            .custom_flags_nonblock()
            .open(&self.fifo);
        let received = match self.ended.take() {
            Some(why) => Ok(why),
            None => self.done.recv_timeout(FINISH_WAIT),
        };
        let why = match received {
            Ok(why) => why,
            Err(_) => Some(format!(
                "heaptrack's stream did not end within {}s of the process's end",
                FINISH_WAIT.as_secs()
            )),
        };
        self.interpret.kill(Duration::from_millis(100));
        let stream = self
            .stream
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
            .unwrap_or_default();
        let recording = stream.end(why);
        let _ = &self.dir;
        if recording.sites.is_empty() {
            return Err(
                "heaptrack recorded nothing (did the process start with its preload?)".into(),
            );
        }
        Ok(recording)
    }
}

/// `O_NONBLOCK` on an [`std::fs::OpenOptions`].
trait NonBlock {
    fn custom_flags_nonblock(&mut self) -> &mut Self;
}

impl NonBlock for std::fs::OpenOptions {
    fn custom_flags_nonblock(&mut self) -> &mut Self {
        use std::os::unix::fs::OpenOptionsExt;
        self.custom_flags(libc::O_NONBLOCK)
    }
}
