//! Attach mode: a process leakloop does not drive (`backend: attach`). It runs its own turn
//! loop and writes a marker line after each closed turn; leakloop samples it from outside at
//! each marker. See docs/attach.md.
//!
//! `board` keeps what the markers said, `source` reads pipes and files (lines bounded by
//! `process::lines`), `process` starts and stops processes, `engine` puts them behind the
//! [`Engine`] and [`TurnMarks`](crate::engine::TurnMarks) traits.
//!
//! [`Engine`]: crate::engine::Engine

mod board;
mod engine;
mod process;
mod replay;
mod source;

pub use engine::AttachEngine;
pub(crate) use replay::feed_marker_bytes;
pub use replay::MarkerReading;
