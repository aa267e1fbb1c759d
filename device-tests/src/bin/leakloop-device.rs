//! The `leakloop` command line, built again inside this package.
//!
//! Cargo hands a package's integration tests only the paths of that package's own binaries
//! (`CARGO_BIN_EXE_<name>`), so tests that drive the real engine through the command line or a
//! worker process run this copy: it is always built from the current sources, never a stale
//! `target/debug/leakloop`. It answers to `leakloop worker` as well; tests point the runner at it
//! with `LEAKLOOP_BIN` (or pass it to `WorkerEngine::spawn_program`).

fn main() -> std::process::ExitCode {
    leakloop::cli::main()
}
