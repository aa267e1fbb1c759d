//! Memory probes: read a process's memory from the OS, one file per source.

pub mod dumpsys;
mod native_heap;
mod process;

pub use native_heap::native_heap_bytes;
pub use process::{peak_rss_bytes, probe_process, ProbeError, ProcessProbe, PROCESS_METRICS};
