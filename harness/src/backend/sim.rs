//! `backend: sim`: the deterministic simulator (`sim-backend`), in process unless the scenario
//! asks for a worker (where `crash` faults become real process deaths).

use super::registry::{driven_check, no_worker_env, nothing_missing, EngineInput};
use super::{Backend, BuildAxis, CommandUse, Placement, Starter};
use crate::engine::{Engine, EngineError, SimEngine};
use crate::scenario::did_you_mean;
use crate::scenario::{
    BackendKind, Concurrency, EngineSpec, FaultKind, RawEngine, Scenario, ScenarioError,
    SIM_PROFILES,
};
use leakloop_metrics::ProbeKind;

/// The simulator's row.
pub(super) const BACKEND: Backend = Backend {
    kind: BackendKind::Sim,
    name: "sim",
    concurrency: Concurrency::Shared,
    isolate_by_default: false,
    reads_prompt_text: false,
    placement: Placement::InProcessOrWorker,
    loads_library: false,
    builds: Some(BuildAxis::Profiles),
    remote_refusal: None,
    check: |raw, input| driven_check(raw, input, check_profile),
    fault_refusal: every_fault,
    missing: nothing_missing,
    build,
    worker_env: no_worker_env,
    starter: Some(Starter {
        engine: |_| {
            "  backend: sim\n\
             \x20 profile: cpu-flat          # a clean device; `forgets-delete` leaks (docs/simulator.md)\n"
                .to_owned()
        },
        command: CommandUse::None,
        takes_model: false,
        reports: Some(ProbeKind::Simulator),
        driven: true,
        watch: &["native_heap", "gpu", "turn_time"],
    }),
};

/// `profile` is required and names a built-in profile or one under `profiles`.
fn check_profile(raw: &RawEngine, input: &EngineInput<'_>) -> Result<(), ScenarioError> {
    let known = || {
        SIM_PROFILES
            .iter()
            .copied()
            .chain(input.inline_profiles.keys().map(String::as_str))
    };
    let Some(profile) = &raw.profile else {
        return Err(input
            .cx
            .invalid_key(
                "engine.profile",
                "the sim backend needs `profile`: a built-in profile or one defined under `profiles`",
            )
            .expect_one_of(known()));
    };
    if !known().any(|p| p == profile) {
        return Err(input
            .cx
            .invalid(
                "engine.profile",
                format!("unknown simulator profile `{profile}`"),
            )
            .suggest(did_you_mean(profile, known()))
            .expect_one_of(known()));
    }
    Ok(())
}

/// The simulator fakes every fault itself, in process too.
fn every_fault(_: FaultKind, _: &EngineSpec) -> Option<String> {
    None
}

fn build(scenario: &Scenario, _: &[(String, String)]) -> Result<Box<dyn Engine>, EngineError> {
    Ok(Box::new(SimEngine::from_scenario(scenario)?))
}
