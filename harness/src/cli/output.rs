//! Every line the CLI prints goes through here: writes that can fail without a panic, the first
//! failure on standard output kept for [`super::error::decide`], and messages on standard error
//! with control characters escaped and their length bounded.
//!
//! `println!` panics when stdout is a closed pipe or a full disk (exit 101); these functions
//! never do. After a failed write to stdout nothing more is written to it.

use std::io::Write;
use std::sync::Mutex;

/// The first write to standard output that failed, if any.
static STDOUT_FAILURE: Mutex<Option<std::io::Error>> = Mutex::new(None);

/// The longest line of a message on stderr; longer lines are shortened in the middle.
pub(crate) const MAX_MESSAGE_LINE: usize = 400;

/// Writes plain `text` to standard output, unless an earlier write failed. Control characters
/// other than newlines and tabs (an ANSI escape in a metric name read from a file) are escaped,
/// so that the terminal shows them rather than obeys them.
pub(crate) fn print(text: &str) {
    let shown: String = text
        .split('\n')
        .map(crate::input::printable)
        .collect::<Vec<_>>()
        .join("\n");
    print_styled(&shown);
}

/// Writes `text`, styled by leakloop itself, to standard output (styles kept on a terminal,
/// stripped otherwise, as `NO_COLOR` asks), unless an earlier write failed.
pub(crate) fn print_styled(text: &str) {
    write_stdout(|| {
        let mut stdout = anstream::stdout().lock();
        stdout.write_all(text.as_bytes())?;
        stdout.flush()
    });
}

/// Writes `text` and a newline to standard output; see [`print`].
pub(crate) fn println(text: &str) {
    print(&format!("{text}\n"));
}

/// Runs a write to standard output (for renderers that write themselves) unless an earlier one
/// failed, and keeps its failure.
pub(crate) fn write_stdout(write: impl FnOnce() -> std::io::Result<()>) {
    let mut failure = STDOUT_FAILURE.lock().unwrap_or_else(|e| e.into_inner());
    if failure.is_some() {
        return;
    }
    if let Err(e) = write() {
        *failure = Some(e);
    }
}

/// Takes the first failure of a write to standard output, if any.
pub(crate) fn take_stdout_failure() -> Option<std::io::Error> {
    STDOUT_FAILURE
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .take()
}

/// Writes `error: <message>` to standard error.
pub(crate) fn error(message: &str) {
    to_stderr("error: ", message);
}

/// Writes `warning: <message>` to standard error.
pub(crate) fn warning(message: &str) {
    to_stderr("warning: ", message);
}

/// Writes a note (progress, which side runs) to standard error as it is.
pub(crate) fn note(message: &str) {
    to_stderr("", message);
}

fn to_stderr(prefix: &str, message: &str) {
    // Nothing is left to tell a user whose stderr is gone; the exit code still says it.
    let _ = writeln!(std::io::stderr().lock(), "{prefix}{}", bounded(message));
}

/// `message` with control characters escaped (ANSI escapes from a file never reach the
/// terminal) and every line bounded to [`MAX_MESSAGE_LINE`] characters.
pub(crate) fn bounded(message: &str) -> String {
    message
        .split('\n')
        .map(bound_line)
        .collect::<Vec<_>>()
        .join("\n")
}

fn bound_line(line: &str) -> String {
    let escaped = crate::input::printable(line);
    crate::input::shorten(&escaped, MAX_MESSAGE_LINE).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_escape_control_characters_and_stay_short() {
        assert_eq!(bounded("a\u{1b}[31mred\tb\nc"), "a\\u{1b}[31mred\tb\nc");
        let huge = format!("bad name `{}`", "x".repeat(200_000));
        let shown = bounded(&huge);
        assert!(
            shown.chars().count() < MAX_MESSAGE_LINE + 60,
            "{}",
            shown.len()
        );
        assert!(shown.starts_with("bad name `xxx"));
        assert!(shown.contains("characters left out"));
        assert!(shown.ends_with("xxx`"));
    }
}
