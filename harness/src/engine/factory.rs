//! Builds the engine a scenario names: in this process, or in an isolated worker process when
//! the scenario asks for `engine.isolate`.
//!
//! The worker's environment is chosen here: an OpenCL engine in a worker gets the OpenCL call
//! interposer injected (`OPENCL_DYLIB_PATH`, `LD_PRELOAD`), so its create/release calls are
//! counted per live object. A LiteRT-LM worker gets it when it is built (`LD_PRELOAD`, and a
//! `libOpenCL.so` shim first on `LD_LIBRARY_PATH`, since the engine opens OpenCL by name), so
//! any OpenCL the engine uses is counted too; without it the worker runs as before. The shim
//! folder is private to that worker and removed after it. An external driver (`backend: exec`)
//! always runs in its own process, and gets the interposer the same way when its scenario sets
//! `engine.opencl_interposer`.

use std::path::PathBuf;

use crate::engine::opencl::{
    find_interposer, interposer_env, opencl_name_shim, preload_env, OpenClNameShim,
};
use crate::engine::transport::{remote_parts, BuildError, RemoteEngine};
#[cfg(not(target_os = "android"))]
use crate::engine::OpenClEngine;
use crate::engine::{
    AttachEngine, Engine, EngineError, EngineErrorKind, LitertLmEngine, SimEngine, WorkerCommand,
    WorkerEngine,
};
use crate::scenario::{BackendKind, Scenario};

/// Builds the engine for `scenario` (its backend, options, faults and seed): in a worker process
/// (`leakloop worker`) when `engine.isolate` is set, in this process otherwise, and on the
/// scenario's target ([`build_on_target`]; a target failure becomes an `Unavailable` engine).
pub fn build_engine(scenario: &Scenario) -> Result<Box<dyn Engine>, EngineError> {
    build_engine_with(scenario, None)
}

/// [`build_engine`], with a local worker started as `worker` says instead of `leakloop worker`
/// (a test binary serving as its own worker) when the scenario runs isolated. An exec engine is
/// always its own driver program, whatever `worker` says, and a remote target starts its own.
pub fn build_engine_with(
    scenario: &Scenario,
    worker: Option<&WorkerCommand>,
) -> Result<Box<dyn Engine>, EngineError> {
    build_on_target_with(scenario, worker).map_err(EngineError::from)
}

/// Builds the engine for `scenario` where its `target` says: a worker started on an ssh host or
/// an Android device, or on this machine (also the driver of a device's app, which the runner
/// samples through `probe::target_for`); telling a target failure (bad input, or a transport
/// that failed) from an engine's.
pub fn build_on_target(scenario: &Scenario) -> Result<Box<dyn Engine>, BuildError> {
    build_on_target_with(scenario, None)
}

/// [`build_on_target`], with a local worker started as `worker` says (see [`build_engine_with`]).
pub fn build_on_target_with(
    scenario: &Scenario,
    worker: Option<&WorkerCommand>,
) -> Result<Box<dyn Engine>, BuildError> {
    if let Some((transport, worker)) = remote_parts(scenario) {
        return Ok(Box::new(RemoteEngine::launch(transport, worker, scenario)?));
    }
    // An app on a device is measured by its target's probe (`probe::target_for`); its driver
    // runs here.
    Ok(build_here(scenario, worker)?)
}

/// The engine on this machine: in a worker process (`worker`, or `leakloop worker`) or in this
/// one.
fn build_here(
    scenario: &Scenario,
    worker: Option<&WorkerCommand>,
) -> Result<Box<dyn Engine>, EngineError> {
    if scenario.engine.backend == BackendKind::Exec
        || (scenario.engine.isolate && scenario.engine.backend != BackendKind::Attach)
    {
        let (env, shim) = worker_env(scenario)?;
        let worker = match worker {
            _ if scenario.engine.backend == BackendKind::Exec => {
                WorkerEngine::spawn_driver(scenario, &env)?
            }
            Some(command) => {
                let env: Vec<_> = command.env.iter().chain(&env).cloned().collect();
                WorkerEngine::launch(&command.program, &command.args, &env, scenario)?
            }
            None => WorkerEngine::spawn(scenario, &env)?,
        };
        return Ok(Box::new(match shim {
            Some(shim) => worker.keeping_until_exit(shim),
            None => worker,
        }));
    }
    build_in_process(scenario)
}

/// Builds the engine for `scenario` in this process, whatever `engine.isolate` says (the worker
/// process calls this to build the engine it serves).
pub fn build_in_process(scenario: &Scenario) -> Result<Box<dyn Engine>, EngineError> {
    match scenario.engine.backend {
        BackendKind::Sim => Ok(Box::new(SimEngine::from_scenario(scenario)?)),
        BackendKind::LitertLm => Ok(Box::new(LitertLmEngine::from_scenario(scenario)?)),
        #[cfg(not(target_os = "android"))]
        BackendKind::Opencl => Ok(Box::new(OpenClEngine::from_scenario(scenario)?)),
        #[cfg(target_os = "android")]
        BackendKind::Opencl => Err(EngineError::new(
            EngineErrorKind::Unavailable,
            crate::engine::opencl::NOT_BUILT,
        )),
        BackendKind::Attach => Ok(Box::new(AttachEngine::from_scenario(scenario)?)),
        BackendKind::Exec => Err(EngineError::new(
            EngineErrorKind::Unavailable,
            "an exec engine is an external program: it runs in its own process, never inside \
             leakloop",
        )),
    }
}

/// The worker's extra environment, and the `libOpenCL.so` shim folder it names (which must live
/// as long as the worker).
type WorkerEnv = (Vec<(String, String)>, Option<OpenClNameShim>);

/// Extra environment of the worker process for this scenario's backend.
fn worker_env(scenario: &Scenario) -> Result<WorkerEnv, EngineError> {
    match scenario.engine.backend {
        BackendKind::Sim | BackendKind::Attach => Ok((Vec::new(), None)),
        BackendKind::Opencl => Ok((opencl_worker_env(find_interposer())?, None)),
        BackendKind::LitertLm => Ok(litert_lm_worker_env(find_interposer().and_then(|path| {
            let shim = opencl_name_shim(&path)?;
            Ok((path, shim))
        }))),
        BackendKind::Exec => match &scenario.engine.exec {
            Some(exec) if exec.opencl_interposer => {
                exec_driver_env(find_interposer().and_then(|path| {
                    let shim = opencl_name_shim(&path)?;
                    Ok((path, shim))
                }))
            }
            _ => Ok((Vec::new(), None)),
        },
    }
}

/// An exec driver's environment when its scenario asks for the interposer
/// (`opencl_interposer: true`): needed then, so a missing one stops the run.
fn exec_driver_env(
    interposer: Result<(PathBuf, OpenClNameShim), String>,
) -> Result<WorkerEnv, EngineError> {
    match interposer {
        Ok((path, shim)) => Ok((preload_env(&path, shim.path()), Some(shim))),
        Err(why) => Err(EngineError::new(
            EngineErrorKind::Unavailable,
            format!(
                "`engine.opencl_interposer` asks for the OpenCL call interposer: {why} \
                 (build it with `cargo build -p cl-interposer`)"
            ),
        )),
    }
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

/// A LiteRT-LM worker's environment given where the interposer and its shim folder are (or why
/// they are not there). Optional here: LiteRT-LM's GPU path on Linux is WebGPU on Vulkan and may
/// make no OpenCL call at all, so a missing interposer must not stop the run.
fn litert_lm_worker_env(interposer: Result<(PathBuf, OpenClNameShim), String>) -> WorkerEnv {
    match interposer {
        Ok((path, shim)) => (preload_env(&path, shim.path()), Some(shim)),
        Err(_) => (Vec::new(), None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(env: &[(String, String)]) -> Vec<&str> {
        env.iter().map(|(k, _)| k.as_str()).collect()
    }

    #[test]
    fn litert_lm_workers_get_the_interposer_preloaded_when_it_is_built() {
        let dir = tempfile::tempdir().unwrap();
        let lib = dir.path().join("libcl_interposer.so");
        std::fs::write(&lib, b"not really a library").unwrap();
        let shim = opencl_name_shim(&lib).unwrap();
        let shim_dir = shim.path().to_owned();
        let (env, kept) = litert_lm_worker_env(Ok((lib.clone(), shim)));
        assert_eq!(keys(&env), ["LD_PRELOAD", "LD_LIBRARY_PATH"]);
        assert!(env[0].1.starts_with(&lib.display().to_string()));
        assert!(env[1].1.starts_with(&shim_dir.display().to_string()));
        // The folder the environment names is handed back to be kept alive with the worker.
        assert_eq!(kept.unwrap().path(), shim_dir);
    }

    #[test]
    fn litert_lm_workers_run_without_the_interposer_when_it_is_not_built() {
        let (env, shim) = litert_lm_worker_env(Err("libcl_interposer.so not found".into()));
        assert!(env.is_empty());
        assert!(shim.is_none());
    }

    #[test]
    fn opencl_workers_need_the_interposer() {
        let env = opencl_worker_env(Ok(PathBuf::from("/t/libcl_interposer.so"))).unwrap();
        assert!(keys(&env).contains(&"OPENCL_DYLIB_PATH"));
        let err = opencl_worker_env(Err("libcl_interposer.so not found".into())).unwrap_err();
        assert_eq!(err.kind, EngineErrorKind::Unavailable);
        assert!(
            err.message.contains("cargo build -p cl-interposer"),
            "{err}"
        );
    }
}
