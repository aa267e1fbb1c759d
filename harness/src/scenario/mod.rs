//! The scenario DSL: YAML files that script identical turn loops and their expectations.
//!
//! Parsing runs in passes: `raw` mirrors the YAML with serde, `spans` indexes where every key
//! sits (and rejects duplicate keys and alias bombs), `validate` turns the raw form into a
//! [`Scenario`] with resolved units (`units`), and every failure becomes a [`ScenarioError`]
//! that names the file, line, column and key path and shows the offending line.

mod error;
mod load;
mod model;
mod raw;
mod spans;
mod units;
mod validate;

#[cfg(test)]
mod fixture_tests;

pub use error::{Location, ScenarioError, ScenarioErrorKind};
pub use load::{load_scenario, parse_scenario, parse_scenario_bytes, MAX_SCENARIO_BYTES};
pub use model::{
    BackendKind, Device, EngineSpec, Expectations, Fault, FaultKind, MetricExpectation, PromptSpec,
    SamplePlan, SamplePoint, Scenario, SessionOptions, Step, Tolerance, MAX_TURNS, OPENCL_PROFILES,
    SIM_PROFILES,
};
pub(crate) use units::parse_size;
pub use validate::{DEFAULT_CALL_TIMEOUT, DEFAULT_MAX_TOKENS, METRICS};
