//! The reference OpenCL engine's ledger kinds and metric names, apart from the engine so that
//! the interposer (which reports the same metric) is built where the engine is not (Android).

/// Ledger kinds the engine counts itself.
pub mod kinds {
    /// Sessions opened and closed.
    pub const SESSION: &str = "session";
    /// KV-cache buffers (one per session).
    pub const KV_CACHE: &str = "kv_cache";
    /// Extra references the engine took on KV-cache buffers.
    pub const KV_CACHE_RETAIN: &str = "kv_cache_retain";
    /// Scratch (activation) buffers, a set per session.
    pub const SCRATCH_BUFFER: &str = "scratch_buffer";
    /// Weight buffers (one per load).
    pub const WEIGHT_BUFFER: &str = "weight_buffer";
    /// Contexts (one per load).
    pub const CONTEXT: &str = "context";
    /// Command queues (one per load).
    pub const COMMAND_QUEUE: &str = "command_queue";
    /// Programs (one per load).
    pub const PROGRAM: &str = "program";
    /// Kernels (three per load).
    pub const KERNEL: &str = "kernel";
}

/// Metric: bytes of OpenCL buffers the engine created and has not released (its own count).
pub const ENGINE_BUFFER_BYTES: &str = leakloop_metrics::names::OPENCL_BUFFER_BYTES;
/// Metric: live `cl_mem` bytes as the interposer counts them.
pub const CL_MEM_BYTES: &str = leakloop_metrics::names::CL_MEM_BYTES;
