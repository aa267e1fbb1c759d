//! `backend: exec`: an external program that speaks the worker protocol (docs/protocol.md) is
//! the engine. It is started and supervised by the same [`WorkerEngine`] as the built-in worker;
//! only how it is started differs.

use std::ffi::OsString;
use std::path::Path;

use crate::engine::worker::WorkerEngine;
use crate::engine::{EngineError, EngineErrorKind};
use crate::scenario::Scenario;

impl WorkerEngine {
    /// Starts the driver `scenario.engine.exec` names, with its `env` and `extra_env` (the
    /// interposer's preload) added to this process's environment, in its `cwd`, and performs the
    /// handshake.
    pub fn spawn_driver(
        scenario: &Scenario,
        extra_env: &[(String, String)],
    ) -> Result<Self, EngineError> {
        let Some(exec) = &scenario.engine.exec else {
            return Err(EngineError::new(
                EngineErrorKind::Unavailable,
                "an exec engine needs `engine.command`",
            ));
        };
        let Some((program, args)) = exec.command.split_first() else {
            return Err(EngineError::new(
                EngineErrorKind::Unavailable,
                "`engine.command` is empty",
            ));
        };
        // The scenario's variables first, then the preload, which keeps what they set after its
        // own entry (the preload env prepends to the process's values, not to the scenario's).
        let mut env: Vec<(String, String)> = exec
            .env
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        for (key, value) in extra_env {
            match env.iter_mut().find(|(k, _)| k == key) {
                Some((_, existing)) => *existing = format!("{value}:{existing}"),
                None => env.push((key.clone(), value.clone())),
            }
        }
        let args: Vec<OsString> = args.iter().map(OsString::from).collect();
        let mut worker = Self::launch_in(
            Path::new(program),
            &args,
            &env,
            exec.cwd.as_deref(),
            scenario,
        )?;
        worker.note_driver(&exec.command);
        Ok(worker)
    }
}
