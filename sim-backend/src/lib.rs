//! A deterministic simulated LLM inference engine whose memory behaviour reproduces field
//! measurements: leaky and non-leaky profiles, plus injected faults.
//!
//! The model is built from the components that really hold memory in an on-device engine: model
//! weights, a one-time engine/GPU context built by the first inference, a KV cache per
//! conversation sized by `max_tokens`, per-generation activations, a caching-allocator pool
//! (allocated vs. reserved), prefix caches and a per-generation leak. A [`Profile`] says how big
//! each is and where it lives; [`SimEngine`] runs the lifecycle (load, open, send, generate,
//! close, unload) over them on a virtual clock, counts every create/delete, and reports metrics
//! with seeded noise: the same seed and calls give byte-identical results.
//!
//! ```
//! use sim_backend::{Profile, SimConfig, SimEngine};
//!
//! let profile = Profile::builtin("android-opencl-leak").unwrap();
//! let mut engine = SimEngine::new(profile, SimConfig::default()).unwrap();
//! engine.load().unwrap();
//! let session = engine.open_session(1).unwrap();
//! engine.send(session, 12).unwrap();
//! engine.generate(session, 64, None).unwrap();
//! engine.close_session(session).unwrap();
//! let native = engine.exact_metrics()["native_heap"];
//! assert_eq!(native, (127_200 << 10) + (110 << 20)); // baseline + one turn's leak
//! ```
#![warn(missing_docs)]

mod builtin;
mod clock;
mod components;
mod config;
mod engine;
mod error;
mod faults;
mod noise;
mod profile;
mod real_alloc;

pub use builtin::BUILTIN_PROFILES;
pub use config::SimConfig;
pub use engine::{metric_names, Counts, Generation, SessionId, SimEngine};
pub use error::SimError;
pub use faults::{SimFault, SimFaultKind};
pub use profile::{
    NoiseSpec, Place, Profile, ProfileError, ProfileSpec, TimingSpec, MAX_COMPONENT_BYTES,
};
pub use real_alloc::REAL_ALLOCATION_LIMIT;

/// This crate's version, as reported by the simulator backend.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
