//! Reading the files a user names (scenarios, traces, reports, streamed samples): only regular
//! files, and never more than a stated number of bytes.
//!
//! A FIFO would block a read forever and `/dev/zero` would fill memory, so the file is opened
//! without blocking, checked to be a regular file, and read through a limit. Every reader of
//! user-given input goes through [`read_bounded`]; the limits are documented next to each reader.

use std::fmt;
use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};

/// The largest trace CSV `leakloop analyze` reads: 100,000 turns of a dozen metrics are about
/// 20 MB.
pub const MAX_TRACE_CSV_BYTES: u64 = 64 << 20;

/// The largest report.json (or samples.jsonl) that is read: 100,000 turns sampled at every
/// point come to a few hundred MB.
pub const MAX_REPORT_BYTES: u64 = 512 << 20;

/// Why a user-given file could not be read.
#[derive(Debug, thiserror::Error)]
pub struct InputError {
    /// The file.
    pub path: PathBuf,
    /// What was wrong.
    pub kind: InputErrorKind,
}

/// What was wrong with a user-given file.
#[derive(Debug)]
pub enum InputErrorKind {
    /// Opening failed (a missing file, no permission).
    Open(std::io::Error),
    /// Reading failed (an I/O error).
    Read(std::io::Error),
    /// Not a regular file (a folder, a FIFO, a device).
    NotAFile(&'static str),
    /// Larger than the limit, in bytes.
    TooLarge {
        /// The limit.
        limit: u64,
        /// What the file should be, e.g. "a scenario is a short YAML file".
        hint: &'static str,
    },
}

impl fmt::Display for InputError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.path.display(), self.kind)
    }
}

impl fmt::Display for InputErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            InputErrorKind::Open(e) => write!(f, "cannot open: {e}"),
            InputErrorKind::Read(e) => write!(f, "cannot read: {e}"),
            InputErrorKind::NotAFile(what) => write!(f, "{what}, not a regular file"),
            InputErrorKind::TooLarge { limit, hint } => write!(
                f,
                "the file is larger than {}; {hint}",
                leakloop_units::format_bytes(*limit)
            ),
        }
    }
}

/// Opens `path` for reading if it is a regular file. It is opened without blocking (a FIFO
/// would otherwise wait for a writer) and checked on the open descriptor, so what is checked
/// is what is read.
pub fn open_regular(path: &Path) -> Result<File, InputError> {
    let error = |kind| InputError {
        path: path.to_owned(),
        kind,
    };
    let mut options = std::fs::OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.custom_flags(libc::O_NONBLOCK);
    }
    let file = options
        .open(path)
        .map_err(|e| error(InputErrorKind::Open(e)))?;
    let file_type = file
        .metadata()
        .map_err(|e| error(InputErrorKind::Open(e)))?
        .file_type();
    if !file_type.is_file() {
        return Err(error(InputErrorKind::NotAFile(describe(&file_type))));
    }
    Ok(file)
}

/// Reads the regular file at `path`, refusing one over `limit` bytes (`hint` says what the file
/// should be).
pub fn read_bounded(path: &Path, limit: u64, hint: &'static str) -> Result<Vec<u8>, InputError> {
    let file = open_regular(path)?;
    let mut bytes = Vec::new();
    file.take(limit.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(|e| InputError {
            path: path.to_owned(),
            kind: InputErrorKind::Read(e),
        })?;
    if bytes.len() as u64 > limit {
        return Err(InputError {
            path: path.to_owned(),
            kind: InputErrorKind::TooLarge { limit, hint },
        });
    }
    Ok(bytes)
}

/// Where bytes stop being UTF-8: 1-based line and column (in characters) of the first bad byte.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NotUtf8 {
    /// The line of the bad byte.
    pub line: usize,
    /// Its column, counting the valid characters before it on its line.
    pub column: usize,
    /// The bad byte.
    pub byte: u8,
    /// Whether the bytes look binary (a NUL in the first 8 KiB).
    pub binary: bool,
}

impl fmt::Display for NotUtf8 {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let hint = if self.binary {
            "it looks like a binary file"
        } else {
            "save it as UTF-8"
        };
        write!(
            f,
            "not UTF-8 text: byte 0x{:02X} is not valid UTF-8; {hint}",
            self.byte
        )
    }
}

/// The bytes as text, or where they stop being UTF-8.
pub fn utf8_text(bytes: &[u8]) -> Result<&str, NotUtf8> {
    std::str::from_utf8(bytes).map_err(|e| {
        let good = &bytes[..e.valid_up_to()];
        let line_start = good.iter().rposition(|&b| b == b'\n').map_or(0, |p| p + 1);
        NotUtf8 {
            line: good.iter().filter(|&&b| b == b'\n').count() + 1,
            // The valid prefix of the line is UTF-8, so its characters can be counted.
            column: String::from_utf8_lossy(&good[line_start..]).chars().count() + 1,
            byte: bytes[e.valid_up_to()],
            binary: bytes.iter().take(8192).any(|&b| b == 0),
        }
    })
}

/// Whether `c` must not reach a terminal as it is: control characters (C0 but tab, DEL, C1 such
/// as U+0085) and the Unicode line and paragraph separators.
pub fn is_unprintable(c: char) -> bool {
    (c.is_control() && c != '\t') || c == '\u{2028}' || c == '\u{2029}'
}

/// `text` with every unprintable character (see [`is_unprintable`]) written as `\u{..}`, so that
/// text from a file (an ANSI escape in a metric name) is shown, never obeyed, by a terminal.
pub fn printable(text: &str) -> std::borrow::Cow<'_, str> {
    if !text.chars().any(is_unprintable) {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if is_unprintable(c) {
            out.push_str(&format!("\\u{{{:x}}}", u32::from(c)));
        } else {
            out.push(c);
        }
    }
    std::borrow::Cow::Owned(out)
}

/// `text` cut to at most about `max_chars` characters: the start and the end are kept and the
/// middle is replaced by a note of how much was left out, so an error never echoes a huge field.
pub fn shorten(text: &str, max_chars: usize) -> std::borrow::Cow<'_, str> {
    let count = text.chars().count();
    if count <= max_chars {
        return std::borrow::Cow::Borrowed(text);
    }
    let keep_start = max_chars * 2 / 3;
    let keep_end = max_chars / 6;
    let start: String = text.chars().take(keep_start).collect();
    let end: String = text.chars().skip(count - keep_end).collect();
    std::borrow::Cow::Owned(format!(
        "{start} [... {} characters left out ...] {end}",
        count - keep_start - keep_end
    ))
}

fn describe(file_type: &std::fs::FileType) -> &'static str {
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if file_type.is_fifo() {
            return "a named pipe (FIFO)";
        }
        if file_type.is_char_device() || file_type.is_block_device() {
            return "a device";
        }
        if file_type.is_socket() {
            return "a socket";
        }
    }
    if file_type.is_dir() {
        "a folder"
    } else {
        "something else"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_a_regular_file_within_the_limit() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.txt");
        std::fs::write(&path, b"hello").unwrap();
        assert_eq!(read_bounded(&path, 5, "short").unwrap(), b"hello");
        let err = read_bounded(&path, 4, "a short file").unwrap_err();
        assert_eq!(
            err.to_string(),
            format!(
                "{}: the file is larger than 4 B; a short file",
                path.display()
            )
        );
    }

    #[test]
    fn names_the_line_and_column_of_the_first_byte_that_is_not_utf8() {
        let err = utf8_text(b"turn,rss\n0,1\n1,caf\xe9\n").unwrap_err();
        assert_eq!(
            (err.line, err.column, err.byte, err.binary),
            (3, 6, 0xE9, false)
        );
        assert_eq!(
            err.to_string(),
            "not UTF-8 text: byte 0xE9 is not valid UTF-8; save it as UTF-8"
        );
        assert_eq!(utf8_text("é".as_bytes()), Ok("é"));
    }

    #[test]
    fn escapes_what_a_terminal_would_obey() {
        assert_eq!(printable("rss"), "rss");
        assert_eq!(
            printable("r\u{1b}[2Jss\u{85}\u{0}"),
            "r\\u{1b}[2Jss\\u{85}\\u{0}"
        );
        assert_eq!(printable("tab\there"), "tab\there");
    }

    #[test]
    fn refuses_folders_devices_and_fifos_without_blocking() {
        let dir = tempfile::tempdir().unwrap();
        let err = read_bounded(dir.path(), 10, "x").unwrap_err();
        assert!(
            err.to_string().ends_with("a folder, not a regular file"),
            "{err}"
        );
        let err = read_bounded(Path::new("/dev/zero"), 10, "x").unwrap_err();
        assert!(
            err.to_string().ends_with("a device, not a regular file"),
            "{err}"
        );
        let fifo = dir.path().join("fifo");
        let c_path = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a valid NUL-terminated path; mkfifo only creates the file.
        assert_eq!(unsafe { libc::mkfifo(c_path.as_ptr(), 0o600) }, 0);
        let err = read_bounded(&fifo, 10, "x").unwrap_err();
        assert!(
            err.to_string()
                .ends_with("a named pipe (FIFO), not a regular file"),
            "{err}"
        );
    }
}
