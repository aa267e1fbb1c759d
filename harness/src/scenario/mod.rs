//! The scenario DSL: YAML files that script identical turn loops and their expectations.
//!
//! Parsing runs in passes: `raw` mirrors the YAML with serde, `spans` indexes where every key
//! sits (and rejects duplicate keys and alias bombs), `validate` turns the raw form into a
//! [`Scenario`] with resolved units (`units`), and every failure becomes a [`ScenarioError`]
//! that names the file, line, column and key path and shows the offending line.

mod attach;
mod concurrency;
mod error;
mod exec;
mod load;
mod model;
mod overrides;
mod raw;
#[cfg(test)]
mod schema;
mod sessions;
mod spans;
mod target;
mod units;
mod validate;

#[cfg(test)]
mod tests;

pub use attach::{
    AttachProcess, AttachSpec, MarkerSource, MarkerSpec, DEFAULT_LEDGER_PATTERN,
    DEFAULT_MARKER_PATTERN, DEFAULT_MARKER_TIMEOUT, DEFAULT_READY_PATTERN, DEFAULT_STOP_GRACE,
    MAX_MARKER_LINE,
};
pub use concurrency::Concurrency;
pub use error::{Location, ScenarioError, ScenarioErrorKind};
pub use exec::{ExecSpec, OptionValue};
#[cfg(feature = "cli")]
pub(crate) use load::parse_scenario_with;
pub use load::{
    load_scenario, load_scenario_with, parse_scenario, parse_scenario_bytes, MAX_SCENARIO_BYTES,
};
#[doc(hidden)]
pub use model::text_tokens;
pub use model::{
    BackendKind, Device, EngineSpec, Expectations, Fault, FaultKind, MetricExpectation, PromptSpec,
    SamplePlan, SamplePoint, Scenario, SessionOptions, Step, StopMode, Tolerance,
    DEFAULT_EXTENSION, MAX_BASELINE_SAMPLES, MAX_TURNS, OPENCL_PROFILES, SIM_PROFILES,
};
pub use overrides::Overrides;
pub use sessions::{SessionOrder, Sessions};
pub use target::{AdbProcess, AdbTarget, PushItem, RemoteWorker, SshTarget, Target};
// Not API: the command line's own parsing of tolerances.
#[doc(hidden)]
pub use units::{parse_tolerance, parse_tolerance_arg};
pub use validate::{
    DEFAULT_CALL_TIMEOUT, DEFAULT_MAX_TOKENS, MAX_GENERATED_PROMPT_TOKENS, METRICS,
};
// What the backends' own checks (`crate::backend`) are written with.
pub(crate) use attach::validate_attach;
pub(crate) use error::did_you_mean;
pub(crate) use raw::RawEngine;
pub(crate) use validate::{fault_name, refuse_exec_keys, validate_exec, Context};
