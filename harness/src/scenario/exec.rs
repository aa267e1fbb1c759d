//! `engine: {backend: exec, ...}`: an external program that speaks the worker protocol
//! (docs/protocol.md) is the engine.

use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// How to start an engine driver, and what to pass it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ExecSpec {
    /// The program and its arguments (never empty). A program path with a `/` in it is resolved
    /// against the scenario's folder when the scenario is read; a bare name is looked up on
    /// `PATH`.
    pub command: Vec<String>,
    /// Variables added to the driver's environment (on top of the runner's).
    pub env: BTreeMap<String, String>,
    /// The driver's working directory. A scenario read from a file defaults to the file's folder
    /// (so relative arguments are relative to the scenario, as every path in it); `None`: the
    /// runner's.
    pub cwd: Option<PathBuf>,
    /// Backend options passed through to the driver in the handshake, as written.
    pub options: BTreeMap<String, OptionValue>,
    /// Preload the OpenCL call interposer into the driver (it then reads the counts itself
    /// through `leakloop_cl_snapshot`, see docs/protocol.md).
    pub opencl_interposer: bool,
}

impl ExecSpec {
    /// A driver started as `command`, with nothing else set.
    pub fn new(command: impl IntoIterator<Item = impl Into<String>>) -> Self {
        Self {
            command: command.into_iter().map(Into::into).collect(),
            ..Self::default()
        }
    }
}

/// One value under `engine.options`, kept with the type it was written with (YAML's
/// `threads: 2` is the integer 2, `threads: "2"` the string; lists and maps are kept whole), and
/// sent to the driver as that JSON value (docs/protocol.md, "hello").
///
/// ```
/// use leakloop::scenario::OptionValue;
///
/// let threads = OptionValue::from(2_u64);
/// assert_eq!(threads.as_u64(), Some(2));
/// assert_eq!(threads.as_str(), None);
/// assert_eq!(OptionValue::from("tiny").to_string(), r#""tiny""#);
/// ```
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct OptionValue(serde_json::Value);

impl OptionValue {
    /// The text of a string value.
    pub fn as_str(&self) -> Option<&str> {
        self.0.as_str()
    }

    /// A whole number from 0 to 2^64-1.
    pub fn as_u64(&self) -> Option<u64> {
        self.0.as_u64()
    }

    /// A whole number from -2^63 to 2^63-1.
    pub fn as_i64(&self) -> Option<i64> {
        self.0.as_i64()
    }

    /// Any number, as a float.
    pub fn as_f64(&self) -> Option<f64> {
        self.0.as_f64()
    }

    /// A `true` or `false`.
    pub fn as_bool(&self) -> Option<bool> {
        self.0.as_bool()
    }

    /// The items of a list.
    pub fn as_list(&self) -> Option<Vec<OptionValue>> {
        self.0
            .as_array()
            .map(|items| items.iter().cloned().map(OptionValue).collect())
    }

    /// Whether the value is `null` (written as `~`, `null` or nothing).
    pub fn is_null(&self) -> bool {
        self.0.is_null()
    }

    /// What kind of value this is, for a message that names the type a driver wanted.
    pub fn type_name(&self) -> &'static str {
        match &self.0 {
            serde_json::Value::Null => "null",
            serde_json::Value::Bool(_) => "a boolean",
            serde_json::Value::Number(n) if n.is_f64() => "a number",
            serde_json::Value::Number(_) => "an integer",
            serde_json::Value::String(_) => "a string",
            serde_json::Value::Array(_) => "a list",
            serde_json::Value::Object(_) => "a map",
        }
    }

    /// The value as read from YAML or JSON.
    pub(crate) fn from_json(value: serde_json::Value) -> Self {
        Self(value)
    }

    /// The value as the protocol sends it.
    pub(crate) fn to_json(&self) -> serde_json::Value {
        self.0.clone()
    }
}

/// The value as JSON text (`2`, `"tiny"`, `[1,2]`).
impl fmt::Display for OptionValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

impl From<&str> for OptionValue {
    fn from(text: &str) -> Self {
        Self(serde_json::Value::from(text))
    }
}

impl From<String> for OptionValue {
    fn from(text: String) -> Self {
        Self(serde_json::Value::from(text))
    }
}

impl From<bool> for OptionValue {
    fn from(value: bool) -> Self {
        Self(serde_json::Value::from(value))
    }
}

impl From<u64> for OptionValue {
    fn from(value: u64) -> Self {
        Self(serde_json::Value::from(value))
    }
}

impl From<i64> for OptionValue {
    fn from(value: i64) -> Self {
        Self(serde_json::Value::from(value))
    }
}

/// A float; one that is not finite (NaN, infinity) has no JSON form and becomes `null`.
impl From<f64> for OptionValue {
    fn from(value: f64) -> Self {
        Self(serde_json::Value::from(value))
    }
}
