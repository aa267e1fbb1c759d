//! A position index of the scenario's YAML, built from the parser's event stream.
//!
//! serde_yaml reports positions for errors it raises itself, but the validator runs after
//! deserialization and needs to point at the value it rejects. This pass walks the YAML events
//! once (aliases are not expanded) and records, for every key path, where its key and value
//! start. The same walk rejects what would be dangerous or ambiguous before serde sees it:
//! duplicate keys in any mapping, nesting past [`MAX_DEPTH`], and aliases that would expand
//! past [`MAX_EXPANDED_NODES`] nodes (a "billion laughs" alias bomb).

use std::collections::HashMap;

use yaml_rust2::parser::{Event, Parser};
use yaml_rust2::scanner::{Marker, TScalarStyle};

use crate::scenario::error::Location;

/// The deepest nesting of mappings and sequences a scenario may use.
pub(crate) const MAX_DEPTH: usize = 64;

/// The most YAML nodes a scenario may expand to once aliases are resolved. Real scenarios have
/// a few hundred; an alias bomb has billions.
pub(crate) const MAX_EXPANDED_NODES: u64 = 100_000;

/// Where one key path's key and value start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct NodeSpan {
    /// The key, for mapping entries.
    pub key: Option<Location>,
    /// The value.
    pub value: Location,
}

/// What the document's root node is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RootKind {
    /// No document, or an empty/null one.
    Empty,
    /// A mapping: the only shape a scenario can have.
    Mapping,
    /// A sequence.
    Sequence,
    /// A scalar other than null.
    Scalar,
}

/// Key path -> positions, for one document.
#[derive(Debug, Clone)]
pub(crate) struct SpanIndex {
    nodes: HashMap<String, NodeSpan>,
    /// The root node's shape.
    pub root: RootKind,
    /// Where the root node starts.
    pub root_location: Location,
}

impl SpanIndex {
    /// The positions recorded for `path`, if the path exists in the file.
    pub fn get(&self, path: &str) -> Option<NodeSpan> {
        self.nodes.get(path).copied()
    }

    /// The value position of `path`, or of its nearest ancestor that exists in the file.
    pub fn value_or_ancestor(&self, path: &str) -> Option<Location> {
        let mut path = path;
        loop {
            if let Some(span) = self.get(path) {
                return Some(span.value);
            }
            path = parent_path(path)?;
        }
    }

    /// The key position of `path` (its value for sequence items), or of its nearest ancestor.
    pub fn key_or_ancestor(&self, path: &str) -> Option<Location> {
        let mut path = path;
        loop {
            if let Some(span) = self.get(path) {
                return Some(span.key.unwrap_or(span.value));
            }
            path = parent_path(path)?;
        }
    }
}

/// `a.b[2].c` -> `a.b[2]` -> `a.b` -> `a` -> none.
fn parent_path(path: &str) -> Option<&str> {
    if path.is_empty() {
        return None;
    }
    let cut = path.rfind(['.', '['])?;
    Some(&path[..cut])
}

/// Why the YAML was rejected before deserialization.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ScanProblem {
    /// Not valid YAML.
    Syntax { at: Location, message: String },
    /// A mapping repeats a key.
    DuplicateKey {
        at: Location,
        path: String,
        key: String,
        first: Location,
    },
    /// Nesting deeper than [`MAX_DEPTH`].
    TooDeep { at: Location, path: String },
    /// Aliases expand past [`MAX_EXPANDED_NODES`].
    AliasBomb { at: Location, path: String },
    /// More than one YAML document in the file.
    ManyDocuments { at: Location },
}

/// One open mapping or sequence during the walk.
#[derive(Debug)]
struct Frame {
    path: String,
    anchor: usize,
    /// Nodes in this collection (itself included), with aliases expanded.
    size: u64,
    kind: FrameKind,
}

#[derive(Debug)]
enum FrameKind {
    Mapping {
        keys: HashMap<String, Location>,
        /// The key just read, waiting for its value.
        pending: Option<(String, Location)>,
        /// True while a complex (collection) key is being read.
        in_complex_key: bool,
    },
    Sequence {
        next: usize,
    },
    /// A collection used as a mapping key; its contents are not indexed.
    KeyCollection,
}

fn location(mark: &Marker) -> Location {
    Location {
        line: mark.line(),
        column: mark.col() + 1,
    }
}

fn join(parent: &str, key: &str) -> String {
    if parent.is_empty() {
        key.to_owned()
    } else {
        format!("{parent}.{key}")
    }
}

/// Walks the events of `text` and builds the index.
pub(crate) fn index_spans(text: &str) -> Result<SpanIndex, ScanProblem> {
    let mut parser = Parser::new_from_str(text);
    let mut index = SpanIndex {
        nodes: HashMap::new(),
        root: RootKind::Empty,
        root_location: Location { line: 1, column: 1 },
    };
    let mut stack: Vec<Frame> = Vec::new();
    let mut anchors: HashMap<usize, u64> = HashMap::new();
    let mut expanded: u64 = 0;
    let mut documents = 0;
    loop {
        let (event, mark) = parser.next_token().map_err(|e| ScanProblem::Syntax {
            at: location(e.marker()),
            message: e.info().to_owned(),
        })?;
        let at = location(&mark);
        match event {
            Event::StreamEnd => break,
            Event::DocumentStart => {
                documents += 1;
                if documents > 1 {
                    return Err(ScanProblem::ManyDocuments { at });
                }
            }
            Event::Nothing | Event::StreamStart | Event::DocumentEnd => {}
            Event::Scalar(value, style, anchor, _) => {
                expanded += 1;
                if stack.is_empty() {
                    let null = style == TScalarStyle::Plain
                        && matches!(value.as_str(), "" | "~" | "null" | "Null" | "NULL");
                    index.root = if null {
                        RootKind::Empty
                    } else {
                        RootKind::Scalar
                    };
                    index.root_location = at;
                }
                if anchor != 0 {
                    anchors.insert(anchor, 1);
                }
                place_node(&mut stack, &mut index, at, Some(value), 1)?;
            }
            Event::Alias(anchor) => {
                let size = anchors.get(&anchor).copied().unwrap_or(1);
                expanded = expanded.saturating_add(size);
                let path = stack.last().map(|f| f.path.clone()).unwrap_or_default();
                if expanded > MAX_EXPANDED_NODES {
                    return Err(ScanProblem::AliasBomb { at, path });
                }
                place_node(&mut stack, &mut index, at, None, size)?;
            }
            Event::MappingStart(anchor, _) | Event::SequenceStart(anchor, _) => {
                expanded += 1;
                let is_mapping = matches!(event, Event::MappingStart(..));
                if stack.is_empty() {
                    index.root = if is_mapping {
                        RootKind::Mapping
                    } else {
                        RootKind::Sequence
                    };
                    index.root_location = at;
                }
                let (path, as_key) = open_node(&mut stack, &mut index, at)?;
                if stack.len() >= MAX_DEPTH {
                    // The full path is as deep as the problem; name where it starts.
                    let top = path.split(['.', '[']).next().unwrap_or_default().to_owned();
                    return Err(ScanProblem::TooDeep { at, path: top });
                }
                let kind = if as_key {
                    FrameKind::KeyCollection
                } else if is_mapping {
                    FrameKind::Mapping {
                        keys: HashMap::new(),
                        pending: None,
                        in_complex_key: false,
                    }
                } else {
                    FrameKind::Sequence { next: 0 }
                };
                stack.push(Frame {
                    path,
                    anchor,
                    size: 1,
                    kind,
                });
            }
            Event::MappingEnd | Event::SequenceEnd => {
                let Some(frame) = stack.pop() else { continue };
                if frame.anchor != 0 {
                    anchors.insert(frame.anchor, frame.size);
                }
                if let Some(parent) = stack.last_mut() {
                    parent.size = parent.size.saturating_add(frame.size);
                    if let FrameKind::Mapping {
                        pending,
                        in_complex_key,
                        ..
                    } = &mut parent.kind
                    {
                        if *in_complex_key {
                            *in_complex_key = false;
                            *pending = Some(("?".into(), at));
                        }
                    }
                }
            }
        }
    }
    Ok(index)
}

/// Decides the path of a collection that starts now and whether it is a mapping key.
fn open_node(
    stack: &mut [Frame],
    index: &mut SpanIndex,
    at: Location,
) -> Result<(String, bool), ScanProblem> {
    let Some(parent) = stack.last_mut() else {
        return Ok((String::new(), false));
    };
    let parent_path = parent.path.clone();
    match &mut parent.kind {
        FrameKind::KeyCollection => Ok((parent_path, true)),
        FrameKind::Sequence { next } => {
            let path = format!("{parent_path}[{next}]");
            *next += 1;
            index.nodes.insert(
                path.clone(),
                NodeSpan {
                    key: None,
                    value: at,
                },
            );
            Ok((path, false))
        }
        FrameKind::Mapping {
            pending,
            in_complex_key,
            ..
        } => match pending.take() {
            Some((key, key_at)) => {
                let path = join(&parent_path, &key);
                index.nodes.insert(
                    path.clone(),
                    NodeSpan {
                        key: Some(key_at),
                        value: at,
                    },
                );
                Ok((path, false))
            }
            None => {
                *in_complex_key = true;
                Ok((parent_path, true))
            }
        },
    }
}

/// Records a scalar or alias node at its place in the current collection.
fn place_node(
    stack: &mut [Frame],
    index: &mut SpanIndex,
    at: Location,
    scalar: Option<String>,
    size: u64,
) -> Result<(), ScanProblem> {
    let Some(parent) = stack.last_mut() else {
        return Ok(());
    };
    parent.size = parent.size.saturating_add(size);
    let parent_path = parent.path.clone();
    match &mut parent.kind {
        FrameKind::KeyCollection => {}
        FrameKind::Sequence { next } => {
            index.nodes.insert(
                format!("{parent_path}[{next}]"),
                NodeSpan {
                    key: None,
                    value: at,
                },
            );
            *next += 1;
        }
        FrameKind::Mapping { keys, pending, .. } => match pending.take() {
            Some((key, key_at)) => {
                index.nodes.insert(
                    join(&parent_path, &key),
                    NodeSpan {
                        key: Some(key_at),
                        value: at,
                    },
                );
            }
            None => {
                // A block mapping's start is reported at its first `:`; its first key is
                // where a reader sees it begin.
                if keys.is_empty() {
                    if let Some(span) = index.nodes.get_mut(&parent_path) {
                        span.value = span.value.min(at);
                    }
                }
                // This node is a key. Aliased keys are rare; name them by position.
                let key = scalar.unwrap_or_else(|| format!("*alias@{}:{}", at.line, at.column));
                if let Some(first) = keys.get(&key) {
                    return Err(ScanProblem::DuplicateKey {
                        at,
                        path: join(&parent_path, &key),
                        key,
                        first: *first,
                    });
                }
                keys.insert(key.clone(), at);
                *pending = Some((key, at));
            }
        },
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn loc(line: usize, column: usize) -> Location {
        Location { line, column }
    }

    #[test]
    fn indexes_block_and_flow_paths() {
        let text =
            "name: a\nengine: {backend: sim, profile: x}\nturn:\n  - open: {}\n  - idle: 8s\n";
        let index = index_spans(text).unwrap();
        assert_eq!(index.root, RootKind::Mapping);
        assert_eq!(
            index.get("name"),
            Some(NodeSpan {
                key: Some(loc(1, 1)),
                value: loc(1, 7)
            })
        );
        assert_eq!(index.get("engine.profile").unwrap().value, loc(2, 33));
        assert_eq!(index.get("turn[1]").unwrap().value, loc(5, 5));
        assert_eq!(index.get("turn[1].idle").unwrap().value, loc(5, 11));
        assert_eq!(index.get("turn[0].open").unwrap().key, Some(loc(4, 5)));
        assert_eq!(
            index.value_or_ancestor("turn[0].open.seed"),
            Some(loc(4, 11))
        );
        assert_eq!(index.key_or_ancestor("engine.model"), Some(loc(2, 1)));
    }

    #[test]
    fn duplicate_keys_anywhere() {
        let err = index_spans("a: 1\nb: {x: 1, x: 2}\n").unwrap_err();
        assert_eq!(
            err,
            ScanProblem::DuplicateKey {
                at: loc(2, 11),
                path: "b.x".into(),
                key: "x".into(),
                first: loc(2, 5)
            }
        );
    }

    #[test]
    fn alias_bomb_is_stopped_while_scanning() {
        let mut text = String::from("a: &a [x, x, x, x, x, x, x, x, x, x]\n");
        for (prev, name) in ["a", "b", "c", "d", "e", "f", "g"]
            .iter()
            .zip(["b", "c", "d", "e", "f", "g", "h"])
        {
            let refs = vec![format!("*{prev}"); 10].join(", ");
            text.push_str(&format!("{name}: &{name} [{refs}]\n"));
        }
        let err = index_spans(&text).unwrap_err();
        assert!(matches!(err, ScanProblem::AliasBomb { .. }), "{err:?}");
    }

    #[test]
    fn modest_aliases_are_fine() {
        let text = "base: &o {temperature: 0.2}\nturn:\n  - open: *o\n  - open: *o\n";
        assert!(index_spans(text).is_ok());
    }

    #[test]
    fn deep_nesting_is_rejected() {
        let text = format!("a: {}{}\n", "[".repeat(100), "]".repeat(100));
        assert!(matches!(
            index_spans(&text).unwrap_err(),
            ScanProblem::TooDeep { .. }
        ));
    }

    #[test]
    fn empty_and_null_documents() {
        assert_eq!(index_spans("").unwrap().root, RootKind::Empty);
        assert_eq!(index_spans("# only\n").unwrap().root, RootKind::Empty);
        assert_eq!(index_spans("---\n~\n").unwrap().root, RootKind::Empty);
        assert_eq!(index_spans("- a\n").unwrap().root, RootKind::Sequence);
        assert_eq!(index_spans("hello\n").unwrap().root, RootKind::Scalar);
    }

    #[test]
    fn several_documents_are_rejected() {
        assert!(matches!(
            index_spans("a: 1\n---\nb: 2\n").unwrap_err(),
            ScanProblem::ManyDocuments { .. }
        ));
    }
}
