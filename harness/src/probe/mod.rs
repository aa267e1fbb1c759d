//! Memory probes: read a process's memory from outside it, one module per source, chosen by
//! where the process lives ([`Target`], [`ProbeSet`]) from the metric registry.

mod adb_app;
pub mod dumpsys;
mod native_heap;
mod process;
mod target;
#[cfg(target_os = "macos")]
pub mod task_info;
mod worker;

pub use adb_app::AdbAppTarget;
pub use native_heap::native_heap_bytes;
pub use process::{peak_rss_bytes, probe_process, ProbeError, ProcessProbe};
pub use target::{target_for, LocalTarget, Probe, ProbeSet, Target};
pub use worker::{RemoteWorkerTarget, SelfReporting};
