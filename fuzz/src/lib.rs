//! Seeded mutation fuzzing of the files a user hands leakloop: scenarios, CSV traces and
//! report.json.
//!
//! Each [`Target`] feeds bytes to one reader and checks three things: it does not panic, it
//! answers within [`TIME_LIMIT`], and when it refuses the input the error says where (a line, a
//! key path) unless it is about the whole file (empty, not a report at all). Inputs come from
//! the files under `fixtures/` and are mutated by a deterministic generator ([`Mutator`]), so a
//! run is repeated exactly by its seed. This runs on stable Rust: cargo-fuzz needs a nightly
//! toolchain and an instrumented rebuild of every dependency, far more than the CI step's budget
//! of tens of seconds.
//!
//! Inputs that broke a rule are written out; kept under `fixtures/fuzz/<target>/`, they are
//! replayed by this crate's tests on every `cargo test`.

mod corpus;
mod driver;
mod mutate;
mod targets;

pub use corpus::{seed_corpus, workspace_root, FUZZ_FIXTURES};
pub use driver::{check_input, fuzz, Finding, FuzzReport, FuzzSettings, TIME_LIMIT};
pub use mutate::Mutator;
pub use targets::{Outcome, Target};

#[cfg(test)]
mod tests;
