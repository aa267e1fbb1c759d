//! Reading a scenario from a file or a string: bytes -> UTF-8 text -> position index and
//! safety checks -> [`super::raw`] via serde -> [`super::validate`].

use std::io::Read;
use std::path::Path;

use crate::scenario::error::{did_you_mean, Location, ScenarioError, ScenarioErrorKind};
use crate::scenario::raw::RawScenario;
use crate::scenario::spans::{index_spans, RootKind, ScanProblem, MAX_DEPTH, MAX_EXPANDED_NODES};
use crate::scenario::validate::{validate, Context};
use crate::scenario::Scenario;

/// The largest scenario file accepted; real ones are a few hundred bytes.
pub const MAX_SCENARIO_BYTES: u64 = 1 << 20;

/// The top-level keys, named when the document has the wrong shape.
const TOP_KEYS: &str = "`name`, `engine`, `turns`, `turn`, ...";

/// Reads and validates the scenario at `path`.
pub fn load_scenario(path: &Path) -> Result<Scenario, ScenarioError> {
    let read_error = |message: String| ScenarioError::new(path, ScenarioErrorKind::Read, message);
    let file = std::fs::File::open(path).map_err(|e| read_error(format!("cannot open: {e}")))?;
    let mut bytes = Vec::new();
    file.take(MAX_SCENARIO_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| read_error(format!("cannot read: {e}")))?;
    if bytes.len() as u64 > MAX_SCENARIO_BYTES {
        return Err(read_error(format!(
            "the file is larger than {} KiB; a scenario is a short YAML file",
            MAX_SCENARIO_BYTES / 1024
        )));
    }
    parse_scenario_bytes(&bytes, path)
}

/// Parses and validates scenario bytes, which must be UTF-8; `origin` names them in errors and
/// relative paths in the scenario resolve against its folder.
pub fn parse_scenario_bytes(bytes: &[u8], origin: &Path) -> Result<Scenario, ScenarioError> {
    match std::str::from_utf8(bytes) {
        Ok(text) => parse_scenario(text, origin),
        Err(e) => {
            let good = &bytes[..e.valid_up_to()];
            let line = good.iter().filter(|&&b| b == b'\n').count() + 1;
            let line_start = good.iter().rposition(|&b| b == b'\n').map_or(0, |p| p + 1);
            // The valid prefix of the line is UTF-8, so its characters can be counted.
            let column = String::from_utf8_lossy(&good[line_start..]).chars().count() + 1;
            let binary = bytes.iter().take(8192).any(|&b| b == 0);
            let hint = if binary {
                "; it looks like a binary file"
            } else {
                "; save it as UTF-8"
            };
            Err(ScenarioError::new(
                origin,
                ScenarioErrorKind::Encoding,
                format!(
                    "not UTF-8 text: byte 0x{:02X} is not valid UTF-8{hint}",
                    bytes[e.valid_up_to()]
                ),
            )
            .at_without_snippet(Location { line, column }))
        }
    }
}

/// Parses and validates scenario text; `origin` names it in errors and relative paths in the
/// scenario resolve against its folder.
pub fn parse_scenario(text: &str, origin: &Path) -> Result<Scenario, ScenarioError> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    check_line_breaks(text, origin)?;
    let spans = index_spans(text).map_err(|p| scan_error(p, text, origin))?;
    match spans.root {
        RootKind::Mapping => {}
        RootKind::Empty => {
            return Err(ScenarioError::new(
                origin,
                ScenarioErrorKind::Empty,
                format!("the file is empty; a scenario is a YAML mapping with {TOP_KEYS}"),
            ));
        }
        RootKind::Sequence | RootKind::Scalar => {
            let found = if spans.root == RootKind::Sequence {
                "a list"
            } else {
                "a single value"
            };
            return Err(ScenarioError::new(
                origin,
                ScenarioErrorKind::Shape,
                format!(
                    "a scenario is a YAML mapping with {TOP_KEYS}, but this document is {found}"
                ),
            )
            .at(Some(spans.root_location), text));
        }
    }
    let deserializer = serde_yaml::Deserializer::from_str(text);
    let raw: RawScenario =
        serde_path_to_error::deserialize(deserializer).map_err(|e| shape_error(e, text, origin))?;
    let cx = Context {
        file: origin,
        text,
        spans: &spans,
    };
    validate(raw, &cx)
}

/// Refuses U+0085, U+2028 and U+2029, which serde_yaml reads as line breaks and the span index
/// does not, so that an error after one could name no line (found by fuzzing).
fn check_line_breaks(text: &str, file: &Path) -> Result<(), ScenarioError> {
    for (line_index, line) in text.split('\n').enumerate() {
        if let Some((column, c)) = line
            .chars()
            .enumerate()
            .find(|(_, c)| matches!(c, '\u{85}' | '\u{2028}' | '\u{2029}'))
        {
            let location = Location {
                line: line_index + 1,
                column: column + 1,
            };
            return Err(ScenarioError::new(
                file,
                ScenarioErrorKind::Encoding,
                format!(
                    "the character U+{:04X}, which YAML reads as a line break, is not allowed in \
                     a scenario (even in a comment); remove it",
                    u32::from(c)
                ),
            )
            .at(Some(location), text));
        }
    }
    Ok(())
}

/// Turns a problem found while indexing into an error.
fn scan_error(problem: ScanProblem, text: &str, file: &Path) -> ScenarioError {
    match problem {
        ScanProblem::Syntax { at, message } => ScenarioError::new(
            file,
            ScenarioErrorKind::Syntax,
            format!("invalid YAML: {message}"),
        )
        .at(Some(at), text),
        ScanProblem::DuplicateKey {
            at,
            path,
            key,
            first,
        } => ScenarioError::new(
            file,
            ScenarioErrorKind::DuplicateKey,
            format!("duplicate key `{key}` (first given at line {})", first.line),
        )
        .key(path)
        .at(Some(at), text),
        ScanProblem::TooDeep { at, path } => ScenarioError::new(
            file,
            ScenarioErrorKind::TooComplex,
            format!("the YAML is nested deeper than {MAX_DEPTH} levels"),
        )
        .key(path)
        .at(Some(at), text),
        ScanProblem::AliasBomb { at, path } => ScenarioError::new(
            file,
            ScenarioErrorKind::TooComplex,
            format!(
                "YAML aliases here expand to more than {MAX_EXPANDED_NODES} nodes \
                 (an alias bomb?); write the values out or use fewer nested aliases"
            ),
        )
        .key(path)
        .at(Some(at), text),
        ScanProblem::ManyDocuments { at } => ScenarioError::new(
            file,
            ScenarioErrorKind::Syntax,
            "the file holds more than one YAML document (`---`); put one scenario in each file",
        )
        .at(Some(at), text),
    }
}

/// Turns a serde error (unknown key, missing key, wrong type) into an error with its path,
/// position and, for unknown names, a suggestion.
fn shape_error(
    err: serde_path_to_error::Error<serde_yaml::Error>,
    text: &str,
    file: &Path,
) -> ScenarioError {
    let mut path = err.path().to_string();
    let inner = err.into_inner();
    // Inside a step, serde_path_to_error cannot see the step's name (the step is read by a
    // hand-written visitor) and records `?`; serde_yaml's own message starts with the full path
    // (`turn[0].open: ...`), which names it.
    if let (Some(unknown), Some((yaml_path, _))) =
        (path.find(".?"), inner.to_string().split_once(": "))
    {
        if !yaml_path.contains(' ') && yaml_path.starts_with(&path[..unknown]) {
            path = format!("{yaml_path}{}", &path[unknown + 2..]);
        }
    }
    // A key that failed to deserialize (an unknown step name) is recorded as `?`.
    while let Some(parent) = path.strip_suffix(".?") {
        path = parent.to_owned();
    }
    let location = inner.location().map(|l| Location {
        line: l.line(),
        column: l.column(),
    });
    let mut message = inner.to_string();
    if let Some(l) = inner.location() {
        let suffix = format!(" at line {} column {}", l.line(), l.column());
        if let Some(stripped) = message.strip_suffix(&suffix) {
            message = stripped.to_owned();
        }
    }
    // serde_yaml prefixes its own rendering of the path; the error carries ours.
    if let Some((prefix, rest)) = message.split_once(": ") {
        if !prefix.contains(' ') && path.starts_with(prefix) {
            message = rest.to_owned();
        }
    }
    let mut kind = ScenarioErrorKind::Shape;
    if message == "repetition limit exceeded" || message == "recursion limit exceeded" {
        kind = ScenarioErrorKind::TooComplex;
        message = "the YAML expands too far (deeply nested or heavily aliased)".into();
    }
    if let Some(rest) = message.strip_prefix("missing field `") {
        let key = rest.split('`').next().unwrap_or_default().to_owned();
        message = format!("missing key `{key}`: this mapping needs it");
        path = if path == "." {
            key.to_owned()
        } else {
            format!("{path}.{key}")
        };
    }
    // A size or duration in a simulator profile, read by the same parser as the DSL's own: the
    // same error as the same mistake anywhere else in the file.
    let (message, suggestion, expected) = match leakloop_units::serde::explain_message(&message) {
        Some(unit_error) => {
            kind = ScenarioErrorKind::Invalid;
            unit_error
        }
        None => explain_unknown(&message, &path),
    };
    ScenarioError::new(file, kind, plain_types(&message))
        .key(path)
        .at(location, text)
        .suggest(suggestion)
        .expect_one_of(expected)
}

/// Backticked words in serde's message, in order.
fn backticked(message: &str) -> Vec<&str> {
    message.split('`').skip(1).step_by(2).collect()
}

/// Rewrites serde's `unknown field`/`unknown variant` messages with DSL words and a suggestion.
fn explain_unknown(message: &str, path: &str) -> (String, Option<String>, Vec<String>) {
    let last_key = path
        .rsplit('.')
        .next()
        .and_then(|segment| segment.split('[').next())
        .unwrap_or_default();
    let noun = if message.starts_with("unknown field `") {
        "key"
    } else if message.starts_with("unknown variant `") {
        match last_key {
            "turn" => "step",
            "backend" => "backend",
            "device" => "device",
            "kind" => "fault kind",
            "after" => "sample point",
            _ => "value",
        }
    } else {
        return (message.to_owned(), None, Vec::new());
    };
    let words = backticked(message);
    let Some((written, known)) = words.split_first() else {
        return (message.to_owned(), None, Vec::new());
    };
    let suggestion = did_you_mean(written, known.iter().copied());
    let expected = known.iter().map(|k| k.to_string()).collect();
    (format!("unknown {noun} `{written}`"), suggestion, expected)
}

/// Replaces Rust type names in serde messages with words a scenario author knows.
fn plain_types(message: &str) -> String {
    let mut out = message
        .replace("unit value", "an empty value")
        .replace("expected u64", "expected a whole number, 0 or more")
        .replace("expected u32", "expected a whole number, 0 or more")
        .replace("expected i64", "expected a whole number")
        .replace("expected f64", "expected a number")
        .replace("expected a borrowed string", "expected a string")
        .replace("invalid type: map", "invalid type: a mapping")
        .replace("invalid type: sequence", "invalid type: a list");
    // `expected struct RawEngine` and friends: every struct in the DSL is a YAML mapping.
    while let Some(start) = out.find("expected struct ") {
        let name_start = start + "expected struct ".len();
        let name_end = out[name_start..]
            .find(|c: char| !c.is_alphanumeric())
            .map_or(out.len(), |e| name_start + e);
        out.replace_range(start..name_end, "expected a mapping");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;

    #[rstest]
    #[case::struct_name(
        "invalid type: string \"x\", expected struct RawEngine",
        "invalid type: string \"x\", expected a mapping"
    )]
    #[case::integer(
        "invalid type: string \"x\", expected i64",
        "invalid type: string \"x\", expected a whole number"
    )]
    #[case::unit(
        "invalid type: unit value, expected f64",
        "invalid type: an empty value, expected a number"
    )]
    fn plain_type_names(#[case] serde: &str, #[case] plain: &str) {
        assert_eq!(plain_types(serde), plain);
    }

    #[test]
    fn unknown_field_gets_suggestion() {
        let (message, suggestion, expected) = explain_unknown(
            "unknown field `turnz`, expected one of `name`, `turns`, `turn`",
            "turnz",
        );
        assert_eq!(message, "unknown key `turnz`");
        assert_eq!(suggestion.as_deref(), Some("turns"));
        assert_eq!(expected, ["name", "turns", "turn"]);
    }

    /// The position index stops alias bombs first; serde_yaml's own repetition limit is the
    /// second line of defence and must also stop one that reaches it.
    #[test]
    fn serde_yaml_also_stops_alias_bombs() {
        let mut text = String::from("a: &a [x, x, x, x, x, x, x, x, x, x]\n");
        for (prev, name) in ["a", "b", "c", "d", "e", "f", "g", "h"]
            .iter()
            .zip(["b", "c", "d", "e", "f", "g", "h", "i"])
        {
            let refs = vec![format!("*{prev}"); 10].join(", ");
            text.push_str(&format!("{name}: &{name} [{refs}]\n"));
        }
        let err = serde_yaml::from_str::<serde_yaml::Value>(&text).unwrap_err();
        assert_eq!(err.to_string(), "repetition limit exceeded");
    }

    #[test]
    fn unknown_step_is_named_a_step() {
        let (message, suggestion, _) = explain_unknown(
            "unknown variant `opne`, expected one of `open`, `send`",
            "turn[0]",
        );
        assert_eq!(message, "unknown step `opne`");
        assert_eq!(suggestion.as_deref(), Some("open"));
    }
}
