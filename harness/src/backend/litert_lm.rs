//! `backend: litert-lm`: LiteRT-LM through its C API, in a worker process. The worker gets the
//! OpenCL call interposer when it is built, so any OpenCL the engine uses is counted too; the
//! library's capabilities are checked before a run (`engine::litert_lm::check_library`).

use std::path::PathBuf;

use super::registry::{driven_check, worker_faults, EngineInput, WorkerEnv};
use super::starter::{yaml_quoted, StarterOptions};
use super::{Backend, BuildAxis, CommandUse, Placement, Starter};
use crate::engine::litert_lm::discover_library;
use crate::engine::opencl::{find_interposer, opencl_name_shim, preload_env, OpenClNameShim};
use crate::engine::{Engine, EngineError, LitertLmEngine};
use crate::scenario::{BackendKind, Concurrency, RawEngine, Scenario, ScenarioError};
use leakloop_metrics::ProbeKind;

/// LiteRT-LM's row.
pub(super) const BACKEND: Backend = Backend {
    kind: BackendKind::LitertLm,
    name: "litert-lm",
    concurrency: Concurrency::Exclusive,
    isolate_by_default: true,
    // It tokenizes the words it is sent.
    reads_prompt_text: true,
    placement: Placement::InProcessOrWorker,
    loads_library: true,
    builds: Some(BuildAxis::Libraries),
    remote_refusal: None,
    check: |raw, input| driven_check(raw, input, check_model),
    fault_refusal: worker_faults,
    missing,
    build,
    worker_env: |_| {
        Ok(litert_lm_worker_env(find_interposer().and_then(|path| {
            let shim = opencl_name_shim(&path)?;
            Ok((path, shim))
        })))
    },
    starter: Some(Starter {
        engine: starter_engine,
        command: CommandUse::None,
        takes_model: true,
        reports: Some(ProbeKind::EngineHeap),
        driven: true,
        watch: &["rss", "native_heap", "turn_time"],
    }),
};

fn check_model(raw: &RawEngine, input: &EngineInput<'_>) -> Result<(), ScenarioError> {
    if raw.model.is_none() {
        return Err(input.cx.invalid_key(
            "engine.model",
            "the litert-lm backend needs `model`: the path of a .litertlm file",
        ));
    }
    Ok(())
}

/// The library (`engine.lib`, else discovery) and the model file.
fn missing(scenario: &Scenario) -> Option<String> {
    if let Err(e) = discover_library(scenario.engine.lib.as_deref()) {
        return Some(e.to_string());
    }
    match &scenario.engine.model {
        Some(model) if !model.is_file() => {
            Some(format!("the model {} is missing", model.display()))
        }
        None => Some("the scenario names no model".to_owned()),
        Some(_) => None,
    }
}

fn build(scenario: &Scenario, _: &[(String, String)]) -> Result<Box<dyn Engine>, EngineError> {
    Ok(Box::new(LitertLmEngine::from_scenario(scenario)?))
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

/// The starter's `engine:` section: the model given, or a placeholder file name.
fn starter_engine(options: &StarterOptions<'_>) -> String {
    let model = options.model.map_or_else(
        || yaml_quoted("model.litertlm"),
        |m| yaml_quoted(&m.display().to_string()),
    );
    format!(
        "  backend: litert-lm\n\
         \x20 model: {model}   # relative paths are read from this file's folder\n\
         \x20 device: cpu\n\
         \x20 max_tokens: 1024\n\
         \x20 call_timeout: 60s\n"
    )
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
}
