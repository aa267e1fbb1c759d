//! The one table of backends, and what a row holds.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::engine::opencl::OpenClNameShim;
use crate::engine::{Engine, EngineError};
use crate::scenario::{
    fault_name, AttachSpec, BackendKind, Concurrency, Context, EngineSpec, ExecSpec, FaultKind,
    RawEngine, Scenario, ScenarioError,
};

/// Every backend, in the order `leakloop run --backend` lists them.
pub(crate) const REGISTRY: &[Backend] = &[
    super::sim::BACKEND,
    super::litert_lm::BACKEND,
    super::opencl::BACKEND,
    super::attach::BACKEND,
    super::exec::BACKEND,
];

/// The row of `kind`.
pub(crate) fn of(kind: BackendKind) -> &'static Backend {
    REGISTRY
        .iter()
        .find(|b| b.kind == kind)
        // A test holds every kind in the table; a missing row is a programming error.
        .unwrap_or_else(|| panic!("backend {kind:?} has no row in backend::REGISTRY"))
}

/// Where a backend's engine runs relative to leakloop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Placement {
    /// In this process, or in leakloop's own worker process when `engine.isolate` is set.
    InProcessOrWorker,
    /// Always in its own program, which speaks the worker protocol (an external driver).
    Driver,
    /// In a process leakloop does not drive; there is no engine to put in a worker.
    Attached,
}

/// The builds `leakloop bisect` searches between for a backend.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BuildAxis {
    /// The scenario's own profiles (`profiles:`), one per build.
    Profiles,
    /// Engine library builds (published versions, fetched ones, or paths).
    Libraries,
}

/// The worker's extra environment, and the `libOpenCL.so` shim folder it names (which must live
/// as long as the worker).
pub(crate) type WorkerEnv = (Vec<(String, String)>, Option<OpenClNameShim>);

/// Builds a backend's engine in this process, with `(KEY, VALUE)` pairs added to the environment
/// of a program the engine starts itself.
pub(crate) type BuildEngine =
    fn(&Scenario, &[(String, String)]) -> Result<Box<dyn Engine>, EngineError>;

/// What a backend's own check of `engine:` hands back to the generic one.
#[derive(Debug, Default)]
pub(crate) struct EngineParts {
    /// The process and its markers (`backend: attach`).
    pub attach: Option<AttachSpec>,
    /// The driver to start (`backend: exec`).
    pub exec: Option<ExecSpec>,
    /// The folder relative `model` and `lib` resolve against, when it is not the scenario's.
    pub folder: Option<PathBuf>,
}

/// What a backend's check of `engine:` reads besides the raw engine.
#[derive(Debug)]
pub(crate) struct EngineInput<'a> {
    /// Simulator profiles defined in the scenario (`profiles:`).
    pub inline_profiles: &'a BTreeMap<String, sim_backend::ProfileSpec>,
    /// The scenario's folder.
    pub folder: &'a Path,
    /// Where errors point.
    pub cx: &'a Context<'a>,
}

/// One backend: its name and everything that differs from one backend to another.
#[derive(Debug)]
pub(crate) struct Backend {
    /// The kind scenarios name.
    pub kind: BackendKind,
    /// The name in scenarios, on the command line and in reports.
    pub name: &'static str,
    /// How a scenario on it shares the machine in a suite when it does not say
    /// (`concurrency:`): the simulator measures nothing of the machine; a real program is
    /// measured alone.
    pub concurrency: Concurrency,
    /// `engine.isolate` when the scenario does not say.
    pub isolate_by_default: bool,
    /// Whether its engine reads a prompt's words (they are generated for it) or only its length.
    pub reads_prompt_text: bool,
    /// Where its engine runs.
    pub placement: Placement,
    /// Whether it loads an engine library chosen by `engine.lib` (what `compare` swaps and the
    /// capability check inspects).
    pub loads_library: bool,
    /// What `leakloop bisect` walks for it, if anything.
    // Read by the command line only.
    #[cfg_attr(not(feature = "cli"), allow(dead_code))]
    pub builds: Option<BuildAxis>,
    /// Why a remote target that starts leakloop's worker cannot hold it, if it cannot.
    pub remote_refusal: Option<&'static str>,
    /// Checks its keys of `engine:` (and refuses other backends' keys), in the order errors are
    /// reported.
    pub check: fn(&mut RawEngine, &EngineInput<'_>) -> Result<EngineParts, ScenarioError>,
    /// Why `kind` cannot be injected into this engine, if it cannot.
    pub fault_refusal: fn(FaultKind, &EngineSpec) -> Option<String>,
    /// What is missing on this machine to run `scenario` (a test skips then), if anything.
    // Read by `leakloop::testing` only.
    #[cfg_attr(not(feature = "test-support"), allow(dead_code))]
    pub missing: fn(&Scenario) -> Option<String>,
    /// Builds its engine in this process; the environment is added to that of a program the
    /// engine starts itself (an attached `command:`: how an attribution source reaches it), and
    /// engines that start none ignore it.
    pub build: BuildEngine,
    /// The extra environment of its worker (or driver) process.
    pub worker_env: fn(&Scenario) -> Result<WorkerEnv, EngineError>,
    /// Its part of the starter scenario `leakloop init` writes, if it has one.
    // Read by the command line only.
    #[cfg_attr(not(feature = "cli"), allow(dead_code))]
    pub starter: Option<super::Starter>,
}

/// `fault_refusal` of an engine leakloop drives in a worker when isolated: `skip_close` is
/// harness-side and works everywhere, `crash` and `hang` are struck by the worker process,
/// `generate_error` is a simulator fault.
pub(crate) fn worker_faults(kind: FaultKind, engine: &EngineSpec) -> Option<String> {
    let backend = engine.backend.as_str();
    match kind {
        FaultKind::SkipClose => None,
        FaultKind::Crash | FaultKind::Hang if engine.isolate => None,
        FaultKind::Crash | FaultKind::Hang => Some(format!(
            "`{}` is struck by the worker process, and this `{backend}` engine runs in-process: \
             set `engine.isolate: true` (the default for real engines)",
            fault_name(kind)
        )),
        FaultKind::GenerateError => Some(format!(
            "only the sim backend can inject `generate_error`; `{backend}` supports `skip_close`, \
             and `crash` and `hang` when isolated"
        )),
    }
}

/// `missing` of a backend that needs nothing beyond leakloop itself.
pub(crate) fn nothing_missing(_: &Scenario) -> Option<String> {
    None
}

/// `worker_env` of a backend whose worker needs no extra environment.
pub(crate) fn no_worker_env(_: &Scenario) -> Result<WorkerEnv, EngineError> {
    Ok((Vec::new(), None))
}

/// Refuses the keys of `backend: attach` and `backend: exec` on a backend that takes neither,
/// in the order the DSL reports them (attach keys first), with the backend's own check of
/// `between` run after the attach keys.
pub(crate) fn driven_check(
    raw: &mut RawEngine,
    input: &EngineInput<'_>,
    between: impl FnOnce(&RawEngine, &EngineInput<'_>) -> Result<(), ScenarioError>,
) -> Result<EngineParts, ScenarioError> {
    crate::scenario::validate_attach(raw, false, input.folder, input.cx)?;
    between(raw, input)?;
    crate::scenario::refuse_exec_keys(raw, input.cx)?;
    Ok(EngineParts::default())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::parse_scenario;

    /// Every kind, through a match that stops compiling when a kind is added without a row.
    fn every_kind() -> Vec<BackendKind> {
        let all = [
            BackendKind::Sim,
            BackendKind::LitertLm,
            BackendKind::Opencl,
            BackendKind::Attach,
            BackendKind::Exec,
        ];
        for kind in all {
            match kind {
                BackendKind::Sim
                | BackendKind::LitertLm
                | BackendKind::Opencl
                | BackendKind::Attach
                | BackendKind::Exec => {}
            }
        }
        all.to_vec()
    }

    #[test]
    fn the_registry_lists_every_backend_once_by_its_dsl_name() {
        let kinds = every_kind();
        assert_eq!(REGISTRY.len(), kinds.len());
        for kind in kinds {
            let row = of(kind);
            assert_eq!(row.kind, kind);
            assert_eq!(REGISTRY.iter().filter(|b| b.kind == kind).count(), 1);
            // The name in the table is the one serde reads from YAML and writes to reports.
            let yaml = serde_yaml::to_string(&kind).unwrap();
            assert_eq!(yaml.trim(), row.name, "{kind:?}");
            assert_eq!(kind.as_str(), row.name);
        }
    }

    #[test]
    fn the_table_holds_what_the_dsl_documents() {
        let names: Vec<_> = REGISTRY.iter().map(|b| b.name).collect();
        assert_eq!(names, ["sim", "litert-lm", "opencl", "attach", "exec"]);
        // Only the simulator shares the machine and runs in process by default.
        for b in REGISTRY {
            let sim = b.kind == BackendKind::Sim;
            assert_eq!(b.concurrency == Concurrency::Shared, sim, "{}", b.name);
        }
        assert!(!of(BackendKind::Sim).isolate_by_default);
        assert!(!of(BackendKind::Attach).isolate_by_default);
        assert!(of(BackendKind::Opencl).isolate_by_default);
        assert!(of(BackendKind::LitertLm).loads_library);
        assert_eq!(of(BackendKind::Exec).placement, Placement::Driver);
        assert_eq!(of(BackendKind::Attach).placement, Placement::Attached);
    }

    #[test]
    fn an_unknown_backend_gets_a_did_you_mean_and_every_name() {
        let text = "name: u\nengine: {backend: simm, profile: cpu-flat}\nturns: 1\nturn: [open: {}, close: {}]\n";
        let err = parse_scenario(text, std::path::Path::new("u.yaml")).unwrap_err();
        let shown = err.to_string();
        assert!(shown.contains("engine.backend"), "{shown}");
        assert!(shown.contains("`sim`"), "{shown}");
        for b in REGISTRY {
            assert!(shown.contains(b.name), "{} missing from: {shown}", b.name);
        }
    }
}
