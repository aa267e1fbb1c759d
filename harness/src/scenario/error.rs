//! Errors from reading and validating a scenario file, rendered so a person can fix the file
//! without reading the DSL's source: file, line, column, key path, what is wrong, a
//! did-you-mean suggestion and the offending line with a caret under the bad text.

use std::fmt;
use std::path::{Path, PathBuf};

/// What went wrong, broadly; the message says exactly what.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScenarioErrorKind {
    /// The file could not be read (missing, a directory, too large, no permission).
    Read,
    /// The file is not UTF-8 text.
    Encoding,
    /// The file is empty or holds only comments.
    Empty,
    /// The text is not valid YAML.
    Syntax,
    /// A mapping repeats a key.
    DuplicateKey,
    /// The YAML is too deeply nested or its aliases expand too far (an alias bomb).
    TooComplex,
    /// The YAML does not have the scenario's shape: an unknown key, a missing key, a wrong type.
    Shape,
    /// The shape is right but a value is not: out of range, a bad unit, an unknown profile,
    /// steps in an impossible order.
    Invalid,
}

/// The longest message; a longer one is shortened in the middle.
const MAX_MESSAGE_CHARS: usize = 1000;

/// The longest value quoted in a message (between backticks or double quotes).
const MAX_QUOTED_CHARS: usize = 80;

/// `message` with every quoted value (`...` or "...") of more than [`MAX_QUOTED_CHARS`]
/// shortened, so that an echoed 200 KB field does not bury what is wrong, then the whole message
/// bounded.
fn bound_message(message: &str) -> String {
    let mut out = String::with_capacity(message.len().min(2 * MAX_MESSAGE_CHARS));
    let mut rest = message;
    while let Some(open) = rest.find(['`', '"']) {
        let quote = rest[open..].chars().next().unwrap_or('`');
        let after = &rest[open + 1..];
        let Some(close) = after.find(quote) else {
            break;
        };
        out.push_str(&rest[..=open]);
        out.push_str(&crate::input::shorten(&after[..close], MAX_QUOTED_CHARS));
        out.push(quote);
        rest = &after[close + 1..];
    }
    out.push_str(rest);
    crate::input::shorten(&out, MAX_MESSAGE_CHARS).into_owned()
}

/// A 1-based line and column in the scenario file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Location {
    /// Line, from 1.
    pub line: usize,
    /// Column in characters, from 1.
    pub column: usize,
}

/// A scenario that could not be read or is invalid.
///
/// `Display` renders everything a person needs: file, line, column, key path, message, the
/// offending line with a caret, and any suggestion. The accessors serve tools and tests.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScenarioError(Box<Details>);

#[derive(Debug, Clone, PartialEq, Eq)]
struct Details {
    file: PathBuf,
    kind: ScenarioErrorKind,
    location: Option<Location>,
    key_path: Option<String>,
    message: String,
    suggestion: Option<String>,
    expected: Vec<String>,
    snippet: Option<String>,
    note: Option<String>,
}

impl std::error::Error for ScenarioError {}

impl ScenarioError {
    /// An error of `kind` in `file`, without a location yet.
    pub(crate) fn new(
        file: impl Into<PathBuf>,
        kind: ScenarioErrorKind,
        message: impl Into<String>,
    ) -> Self {
        ScenarioError(Box::new(Details {
            file: file.into(),
            kind,
            location: None,
            key_path: None,
            message: bound_message(&message.into()),
            suggestion: None,
            expected: Vec::new(),
            snippet: None,
            note: None,
        }))
    }

    /// Places the error at `location` and renders the snippet from `source`.
    pub(crate) fn at(mut self, location: Option<Location>, source: &str) -> Self {
        self.0.location = location;
        self.0.snippet = location.map(|loc| render_snippet(source, loc));
        self
    }

    /// Places the error at `location` without a snippet (the source cannot be shown).
    pub(crate) fn at_without_snippet(mut self, location: Location) -> Self {
        self.0.location = Some(location);
        self
    }

    /// Names the key path the error belongs to (`.` or empty means the whole document).
    pub(crate) fn key(mut self, path: impl Into<String>) -> Self {
        let path = path.into();
        if !path.is_empty() && path != "." {
            self.0.key_path = Some(crate::input::shorten(&path, MAX_QUOTED_CHARS).into_owned());
        }
        self
    }

    /// Adds a did-you-mean suggestion.
    pub(crate) fn suggest(mut self, suggestion: Option<String>) -> Self {
        self.0.suggestion = suggestion;
        self
    }

    /// Lists what would have been accepted.
    pub(crate) fn expect_one_of<S: ToString>(mut self, names: impl IntoIterator<Item = S>) -> Self {
        self.0.expected = names.into_iter().map(|n| n.to_string()).collect();
        self
    }

    /// Blames a command-line flag instead of the file: the value is the flag's, so the file's
    /// line would mislead.
    pub(crate) fn blame_flag(mut self, flag: impl Into<String>) -> Self {
        self.0.location = None;
        self.0.snippet = None;
        self.0.key_path = Some(flag.into());
        self
    }

    /// Adds a note below the message.
    pub(crate) fn note(mut self, note: impl Into<String>) -> Self {
        self.0.note = Some(note.into());
        self
    }

    /// The file (or origin label) the scenario came from.
    pub fn file(&self) -> &Path {
        &self.0.file
    }

    /// The broad class of the problem.
    pub fn kind(&self) -> ScenarioErrorKind {
        self.0.kind
    }

    /// Where in the file, when known (not for unreadable or empty files).
    pub fn location(&self) -> Option<Location> {
        self.0.location
    }

    /// The key path of the bad value, such as `expect.native_heap.max_growth_per_turn` or
    /// `turn[2].send.tokens`, when the problem belongs to one key.
    pub fn key_path(&self) -> Option<&str> {
        self.0.key_path.as_deref()
    }

    /// What is wrong, in one line.
    pub fn message(&self) -> &str {
        &self.0.message
    }

    /// A close, valid alternative to what was written (`turns` for `turnz`).
    pub fn suggestion(&self) -> Option<&str> {
        self.0.suggestion.as_deref()
    }

    /// The values that would have been accepted, when there is a short list.
    pub fn expected(&self) -> &[String] {
        &self.0.expected
    }
}

impl fmt::Display for ScenarioError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let d = &self.0;
        write!(f, "{}", d.file.display())?;
        if let Some(loc) = d.location {
            write!(f, ": line {}, column {}", loc.line, loc.column)?;
        }
        if let Some(path) = &d.key_path {
            write!(f, ": `{path}`")?;
        }
        write!(f, ": {}", d.message)?;
        if let Some(snippet) = &d.snippet {
            write!(f, "\n{snippet}")?;
        }
        let pad = d.location.map_or(1, |loc| loc.line.to_string().len() + 1);
        if let Some(suggestion) = &d.suggestion {
            write!(f, "\n{:pad$}= help: did you mean `{suggestion}`?", "")?;
        }
        if !d.expected.is_empty() {
            let list: Vec<String> = d.expected.iter().map(|e| format!("`{e}`")).collect();
            write!(
                f,
                "\n{:pad$}= note: expected one of {}",
                "",
                list.join(", ")
            )?;
        }
        if let Some(note) = &d.note {
            write!(f, "\n{:pad$}= note: {note}", "")?;
        }
        Ok(())
    }
}

/// The best match for `written` among `candidates` (the rule unit errors use too).
pub(crate) use leakloop_units::did_you_mean;

/// Lines longer than this are shown as a window around the error.
const MAX_SNIPPET_WIDTH: usize = 100;

/// Renders the line at `loc` with a gutter and a caret under the token that starts there, plus
/// the line before it for context.
fn render_snippet(source: &str, loc: Location) -> String {
    let lines: Vec<&str> = source.lines().collect();
    let width = loc.line.to_string().len();
    let mut out = format!("{:width$} |", "");
    let index = loc.line.saturating_sub(1);
    if index > 0 {
        if let Some(prev) = lines.get(index - 1) {
            if !prev.trim().is_empty() && prev.chars().count() <= MAX_SNIPPET_WIDTH {
                out.push_str(&format!("\n{:width$} | {}", loc.line - 1, printable(prev)));
            }
        }
    }
    let line = lines.get(index).copied().unwrap_or("");
    let mut chars: Vec<char> = printable(line).chars().collect();
    let mut start = loc.column.saturating_sub(1).min(chars.len());
    // Show a window of a very long line (minified or generated YAML) around the column.
    if chars.len() > MAX_SNIPPET_WIDTH {
        let from = start.saturating_sub(MAX_SNIPPET_WIDTH / 2);
        let to = (from + MAX_SNIPPET_WIDTH).min(chars.len());
        let mut window: Vec<char> = Vec::new();
        if from > 0 {
            window.extend("...".chars());
        }
        window.extend(&chars[from..to]);
        if to < chars.len() {
            window.extend("...".chars());
        }
        start = start - from + if from > 0 { 3 } else { 0 };
        chars = window;
    }
    let shown: String = chars.iter().collect();
    out.push_str(&format!("\n{:width$} | {}", loc.line, shown));
    let len = token_width(&chars[start..]).max(1);
    out.push_str(&format!(
        "\n{:width$} | {}{}",
        "",
        " ".repeat(start),
        "^".repeat(len)
    ));
    out
}

/// Shows a source line safely: control characters (from binary junk) become `?`, tabs a space,
/// so the caret stays aligned and the terminal is not disturbed.
fn printable(line: &str) -> String {
    line.chars()
        .map(|c| match c {
            '\t' => ' ',
            c if c.is_control() => '?',
            c => c,
        })
        .collect()
}

/// How many characters the YAML token at the start of `rest` spans: a quoted string up to its
/// closing quote, a plain scalar or key up to `:`/`,`/brackets/comment, a flow collection one.
fn token_width(rest: &[char]) -> usize {
    match rest.first() {
        None => 0,
        Some(&q @ ('"' | '\'')) => rest[1..]
            .iter()
            .position(|&c| c == q)
            .map_or(rest.len(), |end| end + 2),
        Some('{' | '[' | '*' | '&' | '!') => 1,
        Some('-') if rest.get(1).is_none_or(|c| *c == ' ') => 1,
        Some(_) => {
            let mut end = 0;
            while end < rest.len() {
                let c = rest[end];
                let next = rest.get(end + 1).copied();
                if matches!(c, ',' | '{' | '}' | '[' | ']')
                    || (c == ':' && next.is_none_or(|n| n == ' '))
                    || (c == ' ' && next == Some('#'))
                {
                    break;
                }
                end += 1;
            }
            let token: String = rest[..end].iter().collect();
            token.trim_end().chars().count()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;

    #[test]
    fn quoted_values_are_shortened_and_the_rest_kept() {
        let huge = "x".repeat(10_000);
        let message = bound_message(&format!("`{huge}` is not valid: use \"{huge}\" or `a`"));
        assert!(message.chars().count() < 300, "{message}");
        assert!(message.starts_with("`xxx"), "{message}");
        assert!(message.contains("characters left out"), "{message}");
        assert!(message.ends_with("xxx\" or `a`"), "{message}");
        assert_eq!(bound_message("`a` and \"b\""), "`a` and \"b\"");
    }

    #[rstest]
    #[case::typo("turnz", &["turns", "turn", "name"], Some("turns"))]
    #[case::case_only("mib", &["MiB", "KiB"], Some("MiB"))]
    #[case::far("banana", &["turns", "name"], None)]
    #[case::profile("android-opencl-leek", &["android-opencl-leak", "cpu-flat"], Some("android-opencl-leak"))]
    #[case::metric("native_heep", &["rss", "native_heap", "gpu"], Some("native_heap"))]
    #[case::one_letter("h", &["ms", "s", "m"], None)]
    #[case::short_far("gpu_mem", &["rss", "gpu", "native_heap"], None)]
    fn suggestions(#[case] written: &str, #[case] known: &[&str], #[case] want: Option<&str>) {
        assert_eq!(
            did_you_mean(written, known.iter().copied()).as_deref(),
            want
        );
    }

    #[rstest]
    #[case::plain_key("turnz: 12", 5)]
    #[case::flow_value("12, b: 2}", 2)]
    #[case::quoted("\"a b\" rest", 5)]
    #[case::comment("8x # note", 2)]
    #[case::flow_start("{a: 1}", 1)]
    #[case::url_like("http://x: 1", 8)]
    #[case::negative("-2%}", 3)]
    #[case::dash_item("- open: {}", 1)]
    fn token_widths(#[case] rest: &str, #[case] width: usize) {
        let chars: Vec<char> = rest.chars().collect();
        assert_eq!(token_width(&chars), width);
    }

    #[test]
    fn snippet_points_at_column() {
        let source = "name: a\nturnz: 12\n";
        let snippet = render_snippet(source, Location { line: 2, column: 1 });
        assert_eq!(snippet, "  |\n1 | name: a\n2 | turnz: 12\n  | ^^^^^");
    }

    #[test]
    fn long_lines_are_windowed() {
        let line = format!("a: {}x{}", "y".repeat(200), "z".repeat(200));
        let snippet = render_snippet(
            &line,
            Location {
                line: 1,
                column: 204,
            },
        );
        let shown = snippet.lines().nth(1).unwrap();
        let caret = snippet.lines().nth(2).unwrap();
        assert!(shown.len() < 120, "{snippet}");
        assert_eq!(
            shown.chars().nth(caret.find('^').unwrap()),
            Some('x'),
            "{snippet}"
        );
    }

    #[test]
    fn snippet_hides_control_characters() {
        let snippet = render_snippet("a: \u{1b}[31m\n", Location { line: 1, column: 4 });
        assert!(!snippet.contains('\u{1b}'), "{snippet}");
    }
}
