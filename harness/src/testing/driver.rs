//! Your engine as an engine driver (`backend: exec`, docs/protocol.md): [`serve_driver`] turns
//! a program of a few lines into a driver that any leakloop scenario, `leakloop run` and
//! `leakloop driver-check` can start.

use std::collections::BTreeMap;
use std::path::PathBuf;

use crate::engine::worker::{serve_driver_stdio, EngineConfig};
use crate::engine::{Engine, EngineError, ServeError};
use crate::scenario::{Device, OptionValue};

/// What the runner asks a driver to build: the `hello` request's `engine` (docs/protocol.md),
/// from the scenario's `engine:` section.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct DriverConfig {
    /// The model file (a path in the scenario is resolved against the scenario's folder).
    pub model: Option<PathBuf>,
    /// The compute device asked for.
    pub device: Device,
    /// Context size in tokens.
    pub max_tokens: u32,
    /// An engine library to use instead of the driver's own choice.
    pub lib: Option<PathBuf>,
    /// A profile name, for engines that have them.
    pub profile: Option<String>,
    /// The scenario's seed.
    pub seed: u64,
    /// `engine.options`, as written in the scenario.
    pub options: BTreeMap<String, OptionValue>,
}

impl DriverConfig {
    fn of(config: &EngineConfig) -> Self {
        Self {
            model: config.model.clone(),
            device: config.device,
            max_tokens: config.max_tokens,
            lib: config.lib.clone(),
            profile: config.profile.clone(),
            seed: config.seed,
            options: config
                .options
                .iter()
                .map(|(key, value)| (key.clone(), OptionValue::from_json(value.clone())))
                .collect(),
        }
    }

    /// The option `name`, when the scenario set it.
    pub fn option(&self, name: &str) -> Option<&OptionValue> {
        self.options.get(name)
    }
}

/// Serves `engine` as an engine driver on this process's stdin and stdout until the runner
/// closes stdin (the end of the session); the program then exits with status 0. Stdout is kept
/// for the protocol and file descriptor 1 pointed at stderr first, so that whatever the engine
/// prints cannot garble a reply.
///
/// ```no_run
/// # #[derive(Default)] struct MyEngine;
/// # use leakloop::testing::*;
/// # impl Engine for MyEngine {
/// #     fn describe(&self) -> BackendInfo { unimplemented!() }
/// #     fn load(&mut self) -> Result<(), EngineError> { Ok(()) }
/// #     fn open_session(&mut self, _: u32, _: &SessionOptions) -> Result<SessionId, EngineError> { unimplemented!() }
/// #     fn send(&mut self, _: SessionId, _: &Prompt) -> Result<(), EngineError> { Ok(()) }
/// #     fn generate(&mut self, _: SessionId, _: &GenerateRequest) -> Result<GenerateOutcome, EngineError> { unimplemented!() }
/// #     fn close_session(&mut self, _: SessionId) -> Result<(), EngineError> { Ok(()) }
/// #     fn unload(&mut self) -> Result<(), EngineError> { Ok(()) }
/// #     fn snapshot(&mut self) -> Result<EngineSnapshot, EngineError> { Ok(EngineSnapshot::default()) }
/// # }
/// // src/bin/my-driver.rs; a scenario runs it as
/// // `engine: {backend: exec, command: [target/debug/my-driver]}`.
/// fn main() {
///     if let Err(e) = leakloop::testing::serve_driver(MyEngine::default()) {
///         eprintln!("my-driver: {e}");
///         std::process::exit(2);
///     }
/// }
/// ```
pub fn serve_driver(engine: impl Engine + 'static) -> Result<(), ServeError> {
    serve_driver_with(|_| Ok(engine))
}

/// [`serve_driver`] with the engine built from what the scenario asks ([`DriverConfig`]: its
/// model, options, seed). An `Err` is answered to the runner's `hello` as `failed` (use
/// [`EngineErrorKind::Unavailable`](crate::engine::EngineErrorKind::Unavailable) for an unknown
/// option or a missing model) and returned.
pub fn serve_driver_with<E: Engine + 'static>(
    build: impl FnOnce(&DriverConfig) -> Result<E, EngineError>,
) -> Result<(), ServeError> {
    serve_driver_stdio(Box::new(|config: &EngineConfig| {
        build(&DriverConfig::of(config)).map(|engine| Box::new(engine) as Box<dyn Engine>)
    }))
    .map_err(|e| ServeError::new(e.to_string()))
}
