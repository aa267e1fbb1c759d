//! `backend: attach`: a process leakloop does not drive. It runs its own turns and marks each
//! one's end; leakloop starts it (`command`), finds it (`pid`) or samples a device's app, and
//! never puts it in a worker (`scenario::attach` checks its keys).

use super::registry::{no_worker_env, nothing_missing, worker_faults, EngineParts};
use super::starter::{yaml_command, StarterOptions};
use super::{Backend, CommandUse, Placement, Starter};
use crate::engine::{AttachEngine, Engine, EngineError};
use crate::scenario::{BackendKind, Concurrency, Scenario};

/// The attach row.
pub(super) const BACKEND: Backend = Backend {
    kind: BackendKind::Attach,
    name: "attach",
    // A real program measured from outside: measured alone unless the scenario says otherwise.
    concurrency: Concurrency::Exclusive,
    isolate_by_default: false,
    reads_prompt_text: false,
    placement: Placement::Attached,
    loads_library: false,
    builds: None,
    remote_refusal: Some(
        "an attached process is not leakloop's worker: a remote target that starts a worker \
         cannot hold it (sample a device's app with `target: {adb: {package: ...}}`)",
    ),
    check: |raw, input| {
        let attach = crate::scenario::validate_attach(raw, true, input.folder, input.cx)?;
        crate::scenario::refuse_exec_keys(raw, input.cx)?;
        Ok(EngineParts {
            attach,
            ..EngineParts::default()
        })
    },
    // An attached process takes no faults at all (refused with its loop); this answers for a
    // scenario built in code.
    fault_refusal: worker_faults,
    missing: nothing_missing,
    build,
    worker_env: no_worker_env,
    starter: Some(Starter {
        engine: starter_engine,
        command: CommandUse::Optional,
        takes_model: false,
        reports: None,
        driven: false,
        watch: &["rss", "anon_rss", "turn_time"],
    }),
};

/// The attach engine; `env` goes to the program it starts (with `command:`), not to a marker
/// command.
fn build(scenario: &Scenario, env: &[(String, String)]) -> Result<Box<dyn Engine>, EngineError> {
    Ok(Box::new(
        AttachEngine::from_scenario(scenario)?.with_program_env(env),
    ))
}

/// The starter's `engine:` section: the program to attach to, or a placeholder for it.
fn starter_engine(options: &StarterOptions<'_>) -> String {
    let command = if options.command.is_empty() {
        "['./my-app']          # your program; it prints `TURN n CLOSED` after each turn".to_owned()
    } else {
        yaml_command(options.command)
    };
    format!(
        "  backend: attach\n\
         \x20 # Runs its own turn loop and prints `TURN n CLOSED` after each closed turn\n\
         \x20 # (docs/attach.md); leakloop samples it at each marker.\n\
         \x20 command: {command}\n\
         \x20 markers:\n\
         \x20   stream: stdout\n\
         \x20   timeout: 60s\n\
         \x20   # Print `READY` once the model and whatever else it keeps for its whole life are\n\
         \x20   # loaded, before the first turn: the baseline is sampled there, so loading is not\n\
         \x20   # counted as growth. Without it the first `TURN n CLOSED` is the baseline and\n\
         \x20   # counts as no turn.\n\
         \x20   ready: '^READY\\b'\n"
    )
}
