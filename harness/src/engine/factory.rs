//! Builds the engine a scenario names: in this process, or in an isolated worker process when
//! the scenario asks for `engine.isolate`.
//!
//! The worker's environment is chosen here: an OpenCL engine in a worker gets the OpenCL call
//! interposer injected (`OPENCL_DYLIB_PATH`, `LD_PRELOAD`), so its create/release calls are
//! counted per live object. A LiteRT-LM worker gets it when it is built (`LD_PRELOAD`, and a
//! `libOpenCL.so` shim first on `LD_LIBRARY_PATH`, since the engine opens OpenCL by name), so
//! any OpenCL the engine uses is counted too; without it the worker runs as before.

use std::path::PathBuf;

use crate::engine::opencl::{find_interposer, interposer_env, opencl_name_shim, preload_env};
use crate::engine::{
    Engine, EngineError, EngineErrorKind, LitertLmEngine, OpenClEngine, SimEngine, WorkerEngine,
};
use crate::scenario::{BackendKind, Scenario};

/// Builds the engine for `scenario` (its backend, options, faults and seed): in a worker process
/// (`leakloop worker`) when `engine.isolate` is set, in this process otherwise.
pub fn build_engine(scenario: &Scenario) -> Result<Box<dyn Engine>, EngineError> {
    if scenario.engine.isolate {
        let env = worker_env(scenario)?;
        return Ok(Box::new(WorkerEngine::spawn(scenario, &env)?));
    }
    build_in_process(scenario)
}

/// Builds the engine for `scenario` in this process, whatever `engine.isolate` says (the worker
/// process calls this to build the engine it serves).
pub fn build_in_process(scenario: &Scenario) -> Result<Box<dyn Engine>, EngineError> {
    match scenario.engine.backend {
        BackendKind::Sim => Ok(Box::new(SimEngine::from_scenario(scenario)?)),
        BackendKind::LitertLm => Ok(Box::new(LitertLmEngine::from_scenario(scenario)?)),
        BackendKind::Opencl => Ok(Box::new(OpenClEngine::from_scenario(scenario)?)),
    }
}

/// Extra environment of the worker process for this scenario's backend.
fn worker_env(scenario: &Scenario) -> Result<Vec<(String, String)>, EngineError> {
    match scenario.engine.backend {
        BackendKind::Sim => Ok(Vec::new()),
        backend => env_with_interposer(
            backend,
            find_interposer().and_then(|path| {
                let shim = opencl_name_shim(&path)?;
                Ok((path, shim))
            }),
        ),
    }
}

/// The worker environment for `backend` given where the interposer and its `libOpenCL.so` shim
/// folder are (or why they are not there).
fn env_with_interposer(
    backend: BackendKind,
    interposer: Result<(PathBuf, PathBuf), String>,
) -> Result<Vec<(String, String)>, EngineError> {
    match backend {
        BackendKind::Opencl => {
            let (interposer, _) = interposer.map_err(|why| {
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
        // Optional here: LiteRT-LM's GPU path on Linux is WebGPU on Vulkan and may make no
        // OpenCL call at all, so a missing interposer must not stop the run.
        BackendKind::LitertLm => Ok(interposer
            .map(|(path, shim)| preload_env(&path, &shim))
            .unwrap_or_default()),
        BackendKind::Sim => Ok(Vec::new()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn found() -> Result<(PathBuf, PathBuf), String> {
        Ok((
            PathBuf::from("/t/libcl_interposer.so"),
            PathBuf::from("/tmp/shim"),
        ))
    }

    fn missing() -> Result<(PathBuf, PathBuf), String> {
        Err("libcl_interposer.so not found".into())
    }

    fn keys(env: &[(String, String)]) -> Vec<&str> {
        env.iter().map(|(k, _)| k.as_str()).collect()
    }

    #[test]
    fn litert_lm_workers_get_the_interposer_preloaded_when_it_is_built() {
        let env = env_with_interposer(BackendKind::LitertLm, found()).unwrap();
        assert_eq!(keys(&env), ["LD_PRELOAD", "LD_LIBRARY_PATH"]);
        assert!(env[0].1.starts_with("/t/libcl_interposer.so"));
        assert!(env[1].1.starts_with("/tmp/shim"));
    }

    #[test]
    fn litert_lm_workers_run_without_the_interposer_when_it_is_not_built() {
        assert!(env_with_interposer(BackendKind::LitertLm, missing())
            .unwrap()
            .is_empty());
    }

    #[test]
    fn opencl_workers_need_the_interposer() {
        let env = env_with_interposer(BackendKind::Opencl, found()).unwrap();
        assert!(keys(&env).contains(&"OPENCL_DYLIB_PATH"));
        let err = env_with_interposer(BackendKind::Opencl, missing()).unwrap_err();
        assert_eq!(err.kind, EngineErrorKind::Unavailable);
        assert!(
            err.message.contains("cargo build -p cl-interposer"),
            "{err}"
        );
    }
}
