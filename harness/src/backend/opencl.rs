//! `backend: opencl`: the reference OpenCL workload, in a worker process with the OpenCL call
//! interposer preloaded, so that every create/release is counted per live object.

use std::path::PathBuf;

use super::registry::{driven_check, nothing_missing, worker_faults, EngineInput};
use super::{Backend, Placement};
use crate::engine::opencl::{find_interposer, interposer_env};
use crate::engine::{Engine, EngineError, EngineErrorKind};
use crate::scenario::did_you_mean;
use crate::scenario::{
    BackendKind, Concurrency, RawEngine, Scenario, ScenarioError, OPENCL_PROFILES,
};

/// The OpenCL workload's row.
pub(super) const BACKEND: Backend = Backend {
    kind: BackendKind::Opencl,
    name: "opencl",
    concurrency: Concurrency::Exclusive,
    isolate_by_default: true,
    reads_prompt_text: false,
    placement: Placement::InProcessOrWorker,
    loads_library: false,
    builds: None,
    remote_refusal: None,
    check: |raw, input| driven_check(raw, input, check_profile),
    fault_refusal: worker_faults,
    missing: nothing_missing,
    build,
    worker_env: |_| Ok((opencl_worker_env(find_interposer())?, None)),
    starter: None,
};

/// `profile`, when given, is one of the workload's.
fn check_profile(raw: &RawEngine, input: &EngineInput<'_>) -> Result<(), ScenarioError> {
    match &raw.profile {
        Some(profile) if !OPENCL_PROFILES.contains(&profile.as_str()) => Err(input
            .cx
            .invalid(
                "engine.profile",
                format!("unknown opencl profile `{profile}`"),
            )
            .suggest(did_you_mean(profile, OPENCL_PROFILES.iter().copied()))
            .expect_one_of(OPENCL_PROFILES.iter().copied())),
        _ => Ok(()),
    }
}

#[cfg(not(target_os = "android"))]
fn build(scenario: &Scenario, _: &[(String, String)]) -> Result<Box<dyn Engine>, EngineError> {
    Ok(Box::new(crate::engine::OpenClEngine::from_scenario(
        scenario,
    )?))
}

#[cfg(target_os = "android")]
fn build(_: &Scenario, _: &[(String, String)]) -> Result<Box<dyn Engine>, EngineError> {
    Err(EngineError::new(
        EngineErrorKind::Unavailable,
        crate::engine::opencl::NOT_BUILT,
    ))
}

/// An OpenCL worker's environment: the interposer is needed to count OpenCL objects.
fn opencl_worker_env(
    interposer: Result<PathBuf, String>,
) -> Result<Vec<(String, String)>, EngineError> {
    let interposer = interposer.map_err(|why| {
        EngineError::new(
            EngineErrorKind::Unavailable,
            format!(
                "the OpenCL call interposer is needed to count OpenCL objects: {why} \
                 (build it with `cargo build -p cl-interposer`)"
            ),
        )
    })?;
    Ok(interposer_env(&interposer))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn opencl_workers_need_the_interposer() {
        let env = opencl_worker_env(Ok(PathBuf::from("/t/libcl_interposer.so"))).unwrap();
        assert!(env.iter().any(|(k, _)| k == "OPENCL_DYLIB_PATH"));
        let err = opencl_worker_env(Err("libcl_interposer.so not found".into())).unwrap_err();
        assert_eq!(err.kind, EngineErrorKind::Unavailable);
        assert!(
            err.message.contains("cargo build -p cl-interposer"),
            "{err}"
        );
    }
}
