//! Pins docs/protocol.md to the code: every example on the page is a valid message that the
//! code reads back with every field it shows, and every call, reply and error kind is documented.

use serde_json::Value;

use crate::engine::worker::protocol::{
    decode_line, encode_line, Reply, Request, CALL_NAMES, PROTOCOL_VERSION, REPLY_NAMES,
};
use crate::engine::EngineErrorKind;

const SPEC: &str = include_str!("../../../../docs/protocol.md");

/// The lines of every ```json block.
fn example_lines() -> Vec<&'static str> {
    let mut lines = Vec::new();
    let mut inside = false;
    for line in SPEC.lines() {
        match (inside, line.trim()) {
            (false, "```json") => inside = true,
            (true, "```") => inside = false,
            (true, text) if !text.is_empty() => lines.push(text),
            _ => {}
        }
    }
    lines
}

/// Whether every field of `shown` is in `read` with the same value (`read` may hold more: the
/// defaults the code fills in).
fn covers(read: &Value, shown: &Value) -> bool {
    match (read, shown) {
        (Value::Object(read), Value::Object(shown)) => shown.iter().all(|(key, value)| {
            read.get(key)
                .is_some_and(|r| covers(r, value) || value.is_null() && r.is_null())
        }),
        (Value::Number(a), Value::Number(b)) => a.as_f64() == b.as_f64(),
        _ => read == shown,
    }
}

#[test]
fn every_example_is_a_message_the_code_reads_whole() {
    let lines = example_lines();
    assert!(lines.len() >= 30, "{} examples", lines.len());
    for line in lines {
        let shown: Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("{line}: {e}"));
        let read: Value = if shown.get("call").is_some() {
            let request: Request = decode_line(line).unwrap_or_else(|e| panic!("{e}"));
            serde_json::from_str(&encode_line(&request)).unwrap()
        } else {
            let reply: Reply = decode_line(line).unwrap_or_else(|e| panic!("{e}"));
            serde_json::from_str(&encode_line(&reply)).unwrap()
        };
        assert!(
            covers(&read, &shown),
            "the page shows fields the code does not read back:\n  page: {line}\n  code: {read}"
        );
    }
}

/// Each of `names` has a `#### \`name\`` heading in `section` and an example line that starts
/// with `{"<field>":"<name>"`.
fn each_has_a_section_and_an_example(section: &str, names: &[&str], field: &str) {
    let examples = example_lines();
    for name in names {
        assert!(
            section
                .lines()
                .any(|l| l.starts_with("#### ") && l.contains(&format!("`{name}`"))),
            "no section for the {field} `{name}`"
        );
        let tag = format!("{{\"{field}\":\"{name}\"");
        assert!(
            examples.iter().any(|l| l.starts_with(&tag)),
            "no example of the {field} `{name}`"
        );
    }
}

#[test]
fn every_call_and_reply_has_its_section_and_an_example() {
    let calls = &SPEC[SPEC.find("### Calls").unwrap()..SPEC.find("### Replies").unwrap()];
    let replies = &SPEC[SPEC.find("### Replies").unwrap()..SPEC.find("## Errors").unwrap()];
    each_has_a_section_and_an_example(calls, &CALL_NAMES, "call");
    each_has_a_section_and_an_example(replies, &REPLY_NAMES, "reply");
}

#[test]
fn every_error_kind_is_documented() {
    let errors = &SPEC[SPEC.find("## Errors").unwrap()..SPEC.find("## Timing").unwrap()];
    let kinds = [
        EngineErrorKind::Unavailable,
        EngineErrorKind::Load,
        EngineErrorKind::Open,
        EngineErrorKind::Send,
        EngineErrorKind::Generate,
        EngineErrorKind::Close,
        EngineErrorKind::Unload,
        EngineErrorKind::Protocol,
        EngineErrorKind::Crashed { how: String::new() },
        EngineErrorKind::Hung { waited_ms: 0 },
    ];
    for kind in kinds {
        let name = serde_json::to_value(&kind).unwrap()["kind"]
            .as_str()
            .unwrap()
            .to_owned();
        let fatal = if kind.is_fatal() { "yes" } else { "no" };
        let row = format!("| `{name}` |");
        match errors.lines().find(|l| l.starts_with(&row)) {
            Some(line) => assert!(
                line.trim_end().ends_with(&format!("| {fatal} |")),
                "`{name}` is documented with the wrong fatality: {line}"
            ),
            // The runner's own verdicts are described in the text, not the table.
            None => assert!(
                kind.is_fatal() && errors.contains(&format!("`{name}`")),
                "the error kind `{name}` is not documented"
            ),
        }
    }
}

#[test]
fn the_page_documents_this_version() {
    assert!(
        SPEC.starts_with(&format!(
            "# The worker protocol (version {PROTOCOL_VERSION})"
        )),
        "docs/protocol.md does not say version {PROTOCOL_VERSION}"
    );
    assert!(SPEC.contains(&format!("- **{PROTOCOL_VERSION}**:")));
}
