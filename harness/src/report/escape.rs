//! The one escaping function per output format, for every string that did not come from
//! leakloop itself: driver and backend names and versions, ledger kinds, error messages, stderr
//! tails, scenario and metric names, suite index text, provenance fields, build labels.
//!
//! - Markdown (summary.md): [`markdown`] for running text, [`markdown_code`] for a name shown as
//!   code, [`markdown_link`] for a link target. Foreign text never becomes raw HTML, a heading,
//!   a table break, a link or a code span of its own; control characters are shown escaped.
//! - XML (plot.svg, the trend plots, junit.xml): [`xml`], applied to the whole rendered
//!   document. The XML writers (plotters' SVG backend, quick-junit) already escape `<`, `&` and
//!   quotes in text and attributes; what they pass through are the characters XML 1.0 does not
//!   allow at all, not even as `&#..;` references (ESC, NUL and the other C0 controls), which
//!   make the whole file malformed. [`xml`] shows each as `\u{..}`.
//! - HTML (report.html, history.html): [`html`] for text and attribute values; the SVG plots
//!   inlined into a page are the XML documents above.
//! - Terminal: [`crate::input::printable`], which every line the CLI prints goes through as
//!   well (`cli/output.rs`).

#[cfg(any(feature = "reports", test))]
use std::borrow::Cow;

use crate::input::is_unprintable;

/// `c` written as `\u{..}`: what a control character looks like once escaped, in every format.
fn push_visible(out: &mut String, c: char) {
    out.push_str(&format!("\\u{{{:x}}}", u32::from(c)));
}

/// `text` as Markdown running text that reads as the same characters: `<`, `>` and `&` as HTML
/// entities (no raw HTML), the punctuation Markdown acts on (`#`, `|`, backticks, emphasis, link
/// brackets, ...) escaped with a backslash, line breaks and tabs as spaces (no new line, so no
/// heading, list or table row of its own) and every other control character as `\u{..}`.
pub(crate) fn markdown(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 8);
    let chars: Vec<char> = text.chars().collect();
    for (i, &c) in chars.iter().enumerate() {
        // An underscore between two letters or digits (`native_heap`) never starts or ends
        // emphasis, so names keep their look; anywhere else it is escaped.
        let word = |j: Option<usize>| {
            j.and_then(|j| chars.get(j))
                .is_some_and(|c| c.is_alphanumeric())
        };
        if c == '_' && word(i.checked_sub(1)) && word(Some(i + 1)) {
            out.push(c);
            continue;
        }
        match c {
            '\n' | '\r' | '\t' => out.push(' '),
            c if is_unprintable(c) => push_visible(&mut out, c),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '&' => out.push_str("&amp;"),
            '\\' | '`' | '*' | '_' | '[' | ']' | '#' | '|' | '~' | '!' | '$' => {
                out.push('\\');
                out.push(c);
            }
            c => out.push(c),
        }
    }
    out
}

/// `text` shown as code: a Markdown code span (backticks included), or, when `text` holds `<`,
/// `>` or `&`, a `<code>` element around [`markdown`] text, so that summary.md never holds
/// foreign markup even inside a code span (where Markdown would show it as text, but a reader
/// of the raw file or a looser renderer might not).
///
/// Inside a code span Markdown reads no HTML, entity or emphasis, so `text` is kept as it is
/// except for what could end the span or the line: the fence is one backtick longer than the
/// longest run of backticks in `text`, `|` is written `\|` (a code span in a table cell would
/// otherwise be cut there; GitHub shows `|`) and control characters, line breaks included, as
/// `\u{..}`.
pub(crate) fn markdown_code(text: &str) -> String {
    if text.contains(['<', '>', '&']) {
        return format!("<code>{}</code>", markdown(text));
    }
    let mut body = String::with_capacity(text.len() + 4);
    let (mut run, mut longest) = (0usize, 0usize);
    for c in text.chars() {
        run = if c == '`' { run + 1 } else { 0 };
        longest = longest.max(run);
        match c {
            c if is_unprintable(c) || c == '\t' => push_visible(&mut body, c),
            '|' => body.push_str("\\|"),
            c => body.push(c),
        }
    }
    if body.is_empty() {
        // An empty pair of backticks is not a code span.
        return "` `".to_owned();
    }
    // A span that starts or ends with a backtick or a space needs one space of padding on each
    // side, which Markdown strips again.
    let pad = if body.starts_with(['`', ' ']) || body.ends_with(['`', ' ']) {
        " "
    } else {
        ""
    };
    let fence = "`".repeat(longest + 1);
    format!("{fence}{pad}{body}{pad}{fence}")
}

/// `target` (a folder name from a suite index) as a Markdown link destination that stays one:
/// every byte but ASCII letters, digits and `-._~/` is percent-encoded, so that no `)`, space,
/// `<` or scheme-like text can end the link or turn it into another.
pub(crate) fn markdown_link(target: &str) -> String {
    let mut out = String::with_capacity(target.len());
    for byte in target.bytes() {
        match byte {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' | b'/' => {
                out.push(char::from(byte));
            }
            // `:` is encoded too: `javascript:` can then never be read as a scheme.
            _ => out.push_str(&format!("%{byte:02X}")),
        }
    }
    out
}

/// `text` as HTML text or a quoted attribute value that reads as the same characters: `&`, `<`,
/// `>` and both quotes as entities (no markup, no way out of an attribute) and every control
/// character as `\u{..}`.
#[cfg(any(feature = "reports", test))]
pub(crate) fn html(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            '\n' | '\t' => out.push(' '),
            c if is_unprintable(c) || !allowed_in_xml(c) => push_visible(&mut out, c),
            c => out.push(c),
        }
    }
    out
}

/// Whether XML 1.0 allows `c` in a document (as itself or as a `&#..;` reference): tab, line
/// feed, carriage return and everything from U+0020 but the surrogates, U+FFFE and U+FFFF.
#[cfg(any(feature = "reports", test))]
fn allowed_in_xml(c: char) -> bool {
    matches!(c, '\t' | '\n' | '\r') || !(c < ' ' || c == '\u{fffe}' || c == '\u{ffff}')
}

/// A rendered XML document (or any text bound for one) with every character XML 1.0 forbids
/// (ESC, NUL and the other C0 controls, U+FFFE, U+FFFF) shown as `\u{..}`, so that foreign text
/// can never make the file malformed. The writer's own `<`, `&` and quote escaping is left as
/// it is; a well-formed document is returned unchanged.
#[cfg(any(feature = "reports", test))]
pub(crate) fn xml(document: &str) -> Cow<'_, str> {
    if document.chars().all(allowed_in_xml) {
        return Cow::Borrowed(document);
    }
    let mut out = String::with_capacity(document.len() + 16);
    for c in document.chars() {
        if allowed_in_xml(c) {
            out.push(c);
        } else {
            push_visible(&mut out, c);
        }
    }
    Cow::Owned(out)
}

/// Test helpers that judge rendered Markdown the way a renderer would read it.
#[cfg(test)]
pub(crate) mod check {
    /// `line` with its code spans cut out, read as CommonMark reads them: a run of n backticks
    /// opens a span that the next run of exactly n backticks closes; `\`` outside a span is a
    /// literal backtick.
    pub(crate) fn outside_code_spans(line: &str) -> String {
        let chars: Vec<char> = line.chars().collect();
        let mut out = String::new();
        let mut i = 0;
        while i < chars.len() {
            if chars[i] == '\\' && i + 1 < chars.len() {
                out.push(chars[i]);
                out.push(chars[i + 1]);
                i += 2;
                continue;
            }
            if chars[i] != '`' {
                out.push(chars[i]);
                i += 1;
                continue;
            }
            let n = chars[i..].iter().take_while(|&&c| c == '`').count();
            let mut j = i + n;
            let mut closed = None;
            while j < chars.len() {
                if chars[j] == '`' {
                    let m = chars[j..].iter().take_while(|&&c| c == '`').count();
                    if m == n {
                        closed = Some(j + m);
                        break;
                    }
                    j += m;
                } else {
                    j += 1;
                }
            }
            match closed {
                Some(end) => {
                    out.push_str("CODE");
                    i = end;
                }
                None => {
                    out.extend(&chars[i..i + n]);
                    i += n;
                }
            }
        }
        out
    }

    /// What is wrong with `md` as leakloop's Markdown fed hostile text: a raw HTML tag other
    /// than leakloop's own (`details`, `summary`, `br`, `code`), a heading other than the first line, a
    /// control character, or a table row with another number of cells than its header.
    pub(crate) fn markdown_problems(md: &str) -> Vec<String> {
        let mut problems = Vec::new();
        let mut columns = None;
        for (n, line) in md.lines().enumerate() {
            if let Some(c) = line.chars().find(|&c| crate::input::is_unprintable(c)) {
                problems.push(format!("line {}: raw U+{:04X}", n + 1, u32::from(c)));
            }
            let outside = outside_code_spans(line);
            let mut rest = outside.as_str();
            while let Some(at) = rest.find('<') {
                rest = &rest[at + 1..];
                let tag: String = rest
                    .trim_start_matches('/')
                    .chars()
                    .take_while(char::is_ascii_alphanumeric)
                    .collect();
                if !tag.is_empty() && !matches!(tag.as_str(), "details" | "summary" | "br" | "code")
                {
                    problems.push(format!("line {}: raw HTML tag <{tag}", n + 1));
                }
            }
            if n > 0 && line.trim_start().starts_with('#') {
                problems.push(format!("line {}: a heading: {line}", n + 1));
            }
            if line.starts_with('|') {
                let cells = outside.replace("\\|", "").matches('|').count();
                match columns {
                    None => columns = Some(cells),
                    Some(c) if c != cells => problems.push(format!(
                        "line {}: {cells} cell separators, the header has {c}: {line}",
                        n + 1
                    )),
                    Some(_) => {}
                }
            } else {
                columns = None;
            }
        }
        problems
    }

    /// What is wrong with `doc` as an XML 1.0 document: a character XML does not allow, a
    /// syntax error, a tag that does not close, a bad attribute or entity, or not exactly one
    /// root element. Empty when it is well-formed.
    pub(crate) fn xml_problems(doc: &str) -> Vec<String> {
        use quick_xml::events::Event;
        let mut problems = Vec::new();
        if let Some(c) = doc.chars().find(|&c| !super::allowed_in_xml(c)) {
            problems.push(format!("U+{:04X} is not allowed in XML", u32::from(c)));
        }
        let mut reader = quick_xml::Reader::from_str(doc);
        let (mut depth, mut roots) = (0usize, 0usize);
        loop {
            let event = match reader.read_event() {
                Ok(event) => event,
                Err(e) => {
                    problems.push(format!("byte {}: {e}", reader.error_position()));
                    break;
                }
            };
            match event {
                Event::Eof => break,
                Event::Start(ref e) | Event::Empty(ref e) => {
                    if depth == 0 {
                        roots += 1;
                    }
                    if matches!(event, Event::Start(_)) {
                        depth += 1;
                    }
                    for attribute in e.attributes() {
                        if let Err(err) = attribute {
                            problems.push(format!("bad attribute: {err}"));
                        }
                    }
                }
                Event::End(_) => depth = depth.saturating_sub(1),
                Event::GeneralRef(r) => {
                    let name = String::from_utf8_lossy(&r).into_owned();
                    let known = matches!(name.as_str(), "lt" | "gt" | "amp" | "quot" | "apos");
                    let char_ref = r.is_char_ref()
                        && matches!(r.resolve_char_ref(), Ok(Some(c)) if super::allowed_in_xml(c));
                    if !known && !char_ref {
                        problems.push(format!("bad entity reference &{name};"));
                    }
                }
                _ => {}
            }
        }
        if depth != 0 {
            problems.push(format!("{depth} elements are not closed"));
        }
        if roots != 1 {
            problems.push(format!("{roots} root elements"));
        }
        problems
    }
}

#[cfg(test)]
mod tests {
    use super::check::{markdown_problems, outside_code_spans, xml_problems};
    use super::*;

    const HOSTILE: &str = "<script>alert(1)</script><img src=x onerror=alert(1)>\n# heading\
                           \u{1b}[31m|x|\u{0}`tick`` & [link](javascript:x) *b* _i_ \\";

    #[test]
    fn markdown_text_is_inert() {
        let md = markdown(HOSTILE);
        assert!(!md.contains('<') && !md.contains('\n'), "{md}");
        assert!(!md.contains('\u{1b}') && !md.contains('\u{0}'), "{md}");
        assert!(md.contains("\\u{1b}") && md.contains("\\u{0}"), "{md}");
        assert!(
            md.contains("&lt;script&gt;") && md.contains("&amp;"),
            "{md}"
        );
        assert!(
            md.contains(" \\# heading") && md.contains("\\|x\\|"),
            "{md}"
        );
        assert!(md.contains("\\`tick\\`\\`"), "{md}");
        assert!(md.contains("\\[link\\](javascript:x)"), "{md}");
        assert!(markdown_problems(&format!("| a |\n| {md} |")).is_empty());
        assert_eq!(markdown("a|b\nc"), "a\\|b c");
        assert_eq!(markdown("native_heap _x_"), "native_heap \\_x\\_");
        assert_eq!(
            markdown("sim-backend 0.1.0 (profile)"),
            "sim-backend 0.1.0 (profile)"
        );
    }

    #[test]
    fn a_code_span_holds_any_text_and_stays_one_span() {
        assert_eq!(markdown_code("sim/conversation"), "`sim/conversation`");
        assert_eq!(markdown_code("a`b"), "``a`b``");
        assert_eq!(markdown_code("``x"), "``` ``x ```");
        assert_eq!(markdown_code("x\n# h|y"), "`x\\u{a}# h\\|y`");
        assert_eq!(markdown_code(""), "` `");
        assert_eq!(markdown_code("k<b>`x`"), "<code>k&lt;b&gt;\\`x\\`</code>");
        for text in [HOSTILE, "`", "``", " a ", "a ` b", "\u{1b}`|\n# x"] {
            let span = markdown_code(text);
            if !text.contains('<') {
                assert_eq!(outside_code_spans(&span), "CODE", "{text:?} -> {span}");
            }
            assert!(markdown_problems(&format!("| a |\n| {span} |")).is_empty());
        }
    }

    #[test]
    fn a_link_target_cannot_end_the_link() {
        assert_eq!(markdown_link("scenarios/leak-1"), "scenarios/leak-1");
        assert_eq!(
            markdown_link("a b)<x>:\u{1b}é"),
            "a%20b%29%3Cx%3E%3A%1B%C3%A9"
        );
    }

    #[test]
    fn xml_keeps_what_xml_allows_and_shows_the_rest() {
        let doc = "<a t=\"x\u{1b}[1m\u{0}\">é\t\n\u{7f}\u{85}\u{fffe}</a>";
        assert_eq!(
            xml(doc),
            "<a t=\"x\\u{1b}[1m\\u{0}\">é\t\n\u{7f}\u{85}\\u{fffe}</a>"
        );
        assert!(matches!(xml("<a>fine</a>"), Cow::Borrowed(_)));
    }

    #[test]
    fn the_markdown_checker_finds_what_it_looks_for() {
        assert!(!markdown_problems("# t\n<img src=x>").is_empty());
        assert!(!markdown_problems("# t\n# again").is_empty());
        assert!(!markdown_problems("| a | b |\n| --- | --- |\n| x | y | z |").is_empty());
        assert!(!markdown_problems("a\u{1b}b").is_empty());
        assert!(markdown_problems("# t\n`<img>` <details><summary>x</summary>").is_empty());
    }

    #[test]
    fn the_xml_checker_finds_what_it_looks_for() {
        assert!(xml_problems("<a t=\"1\"><b/>x &amp; &#233;</a>").is_empty());
        assert!(!xml_problems("<a>\u{1b}</a>").is_empty());
        assert!(!xml_problems("<a>&#27;</a>").is_empty());
        assert!(!xml_problems("<a><b></a>").is_empty());
        assert!(!xml_problems("<a>").is_empty());
        assert!(!xml_problems("<a/><b/>").is_empty());
        assert!(xml_problems(&xml("<a>\u{1b}\u{0}</a>")).is_empty());
    }
}
