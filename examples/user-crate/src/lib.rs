//! Stands for an engine project's crate (say, Rust bindings over LiteRT-LM's C API). Its memory
//! tests are in `tests/memory.rs`: leakloop scenarios run from plain `#[test]` functions.
