//! Reading a scenario from a file or a string: bytes -> UTF-8 text -> position index and
//! safety checks -> [`super::raw`] via serde -> [`super::validate`].

use std::path::Path;

use crate::input::{read_bounded, utf8_text};

use crate::scenario::error::{did_you_mean, Location, ScenarioError, ScenarioErrorKind};
use crate::scenario::raw::RawScenario;
use crate::scenario::spans::{index_spans, RootKind, ScanProblem, MAX_DEPTH, MAX_EXPANDED_NODES};
use crate::scenario::validate::{validate, Context};
use crate::scenario::{Overrides, Scenario};

/// The largest scenario file accepted; real ones are a few hundred bytes.
pub const MAX_SCENARIO_BYTES: u64 = 1 << 20;

/// The top-level keys, named when the document has the wrong shape.
const TOP_KEYS: &str = "`name`, `engine`, `turns`, `turn`, ...";

/// Reads and validates the scenario at `path`.
pub fn load_scenario(path: &Path) -> Result<Scenario, ScenarioError> {
    load_scenario_with(path, &Overrides::default())
}

/// Reads the scenario at `path`, replaces its values with `overrides` and validates the result
/// once, as `leakloop check` would validate a file that said so.
pub fn load_scenario_with(path: &Path, overrides: &Overrides) -> Result<Scenario, ScenarioError> {
    let bytes = read_scenario_bytes(path)?;
    let text = decode(&bytes, path)?;
    parse_with(text, path, overrides)
}

/// The bytes of the scenario file at `path`: a regular file of at most [`MAX_SCENARIO_BYTES`].
pub(crate) fn read_scenario_bytes(path: &Path) -> Result<Vec<u8>, ScenarioError> {
    read_bounded(path, MAX_SCENARIO_BYTES, "a scenario is a short YAML file")
        .map_err(|e| ScenarioError::new(path, ScenarioErrorKind::Read, e.kind.to_string()))
}

/// Parses and validates scenario bytes, which must be UTF-8; `origin` names them in errors and
/// relative paths in the scenario resolve against its folder.
pub fn parse_scenario_bytes(bytes: &[u8], origin: &Path) -> Result<Scenario, ScenarioError> {
    parse_scenario(decode(bytes, origin)?, origin)
}

fn decode<'a>(bytes: &'a [u8], origin: &Path) -> Result<&'a str, ScenarioError> {
    match utf8_text(bytes) {
        Ok(text) => Ok(text),
        Err(e) => Err(
            ScenarioError::new(origin, ScenarioErrorKind::Encoding, e.to_string())
                .at_without_snippet(Location {
                    line: e.line,
                    column: e.column,
                }),
        ),
    }
}

/// Parses and validates scenario text; `origin` names it in errors and relative paths in the
/// scenario resolve against its folder.
pub fn parse_scenario(text: &str, origin: &Path) -> Result<Scenario, ScenarioError> {
    parse_with(text, origin, &Overrides::default())
}

/// [`parse_scenario`] with `overrides` applied before validation, as [`load_scenario_with`]
/// applies them to a file (`compare --engine FILE`).
#[cfg(feature = "cli")]
pub(crate) fn parse_scenario_with(
    text: &str,
    origin: &Path,
    overrides: &Overrides,
) -> Result<Scenario, ScenarioError> {
    parse_with(text, origin, overrides)
}

fn parse_with(text: &str, origin: &Path, overrides: &Overrides) -> Result<Scenario, ScenarioError> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    check_characters(text, origin)?;
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
    let mut raw: RawScenario =
        serde_path_to_error::deserialize(deserializer).map_err(|e| shape_error(e, text, origin))?;
    overrides.apply(&mut raw);
    let cx = Context {
        file: origin,
        text,
        spans: &spans,
    };
    let mut scenario = validate(raw, &cx).map_err(|e| overrides.explain(e))?;
    overrides.restore_paths(&mut scenario);
    Ok(scenario)
}

/// Refuses characters YAML does not allow (NUL and other control characters) or reads as a line
/// break where a person sees none (U+0085, U+2028, U+2029), at their own line and column: the
/// YAML parsers would report them at the start of the file or past its end.
fn check_characters(text: &str, file: &Path) -> Result<(), ScenarioError> {
    for (line_index, line) in text.split('\n').enumerate() {
        let found = line.chars().enumerate().find(|&(i, c)| {
            let crlf = c == '\r' && i + 1 == line.chars().count();
            (crate::input::is_unprintable(c) && !crlf) || c == '\u{feff}'
        });
        if let Some((column, c)) = found {
            let what = match c {
                '\u{0}' => "the NUL character".to_owned(),
                '\u{85}' | '\u{2028}' | '\u{2029}' => format!(
                    "the character U+{:04X}, which YAML reads as a line break,",
                    u32::from(c)
                ),
                '\u{feff}' => "a byte-order mark (U+FEFF) after the start of the file".to_owned(),
                c => format!("the control character U+{:04X}", u32::from(c)),
            };
            let location = Location {
                line: line_index + 1,
                column: column + 1,
            };
            return Err(ScenarioError::new(
                file,
                ScenarioErrorKind::Encoding,
                format!("{what} is not allowed in a scenario (even in a comment); remove it"),
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
            // serde_yaml's path ends at the bad value for a wrong type, but at the mapping for
            // an unknown key; add what it lacks, once.
            let rest = &path[unknown + 2..];
            path = if yaml_path.ends_with(rest) {
                yaml_path.to_owned()
            } else {
                format!("{yaml_path}{rest}")
            };
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
    ScenarioError::new(file, kind, plain_values(&plain_types(&message)))
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

/// Replaces what serde says about a tagged value or a bad name in a simulator profile with
/// words a scenario author knows (sizes and durations there are read by `leakloop_units`).
fn plain_values(message: &str) -> String {
    message
        .replace(
            "invalid type: enum",
            "invalid type: a tagged value (`!tag value`)",
        )
        .replace(
            "expected a YAML tag starting with '!'",
            "expected one name, such as `gpu`",
        )
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;

    #[rstest]
    #[case::tag(
        "invalid type: enum, expected a size: whole bytes or a number and a unit, e.g. 110MiB",
        "invalid type: a tagged value (`!tag value`), expected a size: whole bytes or a number and a unit, e.g. 110MiB"
    )]
    #[case::place(
        "invalid type: a mapping, expected a YAML tag starting with '!'",
        "invalid type: a mapping, expected one name, such as `gpu`"
    )]
    fn profile_values_in_plain_words(#[case] serde: &str, #[case] plain: &str) {
        assert_eq!(plain_values(serde), plain);
    }

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
