//! The scenario DSL: YAML files that script identical turn loops and their expectations.
//!
//! Parsing runs in passes: [`raw`] mirrors the YAML with serde, [`validate`] turns it into a
//! [`Scenario`] with resolved units, and every failure becomes a [`ScenarioError`] that names the
//! file, line, column and key path.

mod error;
mod load;
mod model;

pub use error::ScenarioError;
pub use load::{load_scenario, parse_scenario};
pub use model::{
    BackendKind, Device, EngineSpec, Expectations, Fault, FaultKind, MetricExpectation, PromptSpec,
    SamplePlan, SamplePoint, Scenario, SessionOptions, Step, Tolerance, MAX_TURNS, OPENCL_PROFILES,
    SIM_PROFILES,
};
