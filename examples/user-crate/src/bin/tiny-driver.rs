//! [`TinyEngine`] as a leakloop engine driver (`engine: {backend: exec, command: [tiny-driver]}`,
//! docs/protocol.md): `leakloop run`, `leakloop driver-check` and any scenario can start it. The
//! option `forget_deletes: true` builds the engine with its bug.

use leakloop::testing::{serve_driver_with, EngineError, EngineErrorKind};
use leakloop_user_crate_example::TinyEngine;

fn main() {
    let served =
        serve_driver_with(
            |config| match config.option("forget_deletes").map(|v| v.as_bool()) {
                None | Some(Some(false)) => Ok(TinyEngine::new()),
                Some(Some(true)) => Ok(TinyEngine::forgetting_deletes()),
                Some(None) => Err(EngineError::new(
                    EngineErrorKind::Unavailable,
                    "option `forget_deletes` must be true or false",
                )),
            },
        );
    if let Err(e) = served {
        eprintln!("tiny-driver: {e}");
        std::process::exit(2);
    }
}
