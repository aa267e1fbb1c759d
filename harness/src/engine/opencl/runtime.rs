//! The engine-lifetime tier of OpenCL resources: device, context, command queue, the compiled
//! program and its kernels, and typed launches of the three kernels.

use std::ptr;
use std::sync::Mutex;

use opencl3::command_queue::CommandQueue;
use opencl3::context::Context;
use opencl3::device::{Device, CL_DEVICE_TYPE_ALL};
use opencl3::kernel::{ExecuteKernel, Kernel};
use opencl3::memory::{Buffer, CL_MEM_READ_WRITE};
use opencl3::program::Program;
use opencl3::types::{cl_float, cl_uint, CL_BLOCKING};

use crate::engine::opencl::kernels;

/// An OpenCL failure with what was being done.
#[derive(Debug, thiserror::Error)]
#[error("{what}: {cause}")]
pub(crate) struct ClError {
    /// The operation, e.g. `creating the context`.
    pub(crate) what: String,
    /// The OpenCL status or build log.
    pub(crate) cause: String,
}

pub(crate) type ClResult<T> = Result<T, ClError>;

/// Wraps an OpenCL result with what was being done.
pub(crate) trait Doing<T> {
    fn doing(self, what: &str) -> ClResult<T>;
}

impl<T, E: std::fmt::Display> Doing<T> for Result<T, E> {
    fn doing(self, what: &str) -> ClResult<T> {
        self.map_err(|e| ClError {
            what: what.to_owned(),
            cause: e.to_string(),
        })
    }
}

/// Serialises platform discovery and context creation: PoCL 3.1 initialises its devices lazily
/// and crashed (inside `clGetDeviceInfo`) when two threads did that at once.
static SETUP: Mutex<()> = Mutex::new(());

/// Whether an OpenCL platform with a device is usable in this process; `Ok` names it, `Err`
/// says why not (no library, no platform, no device).
pub fn probe_platform() -> Result<String, String> {
    let _guard = SETUP.lock().unwrap_or_else(|p| p.into_inner());
    probe_platform_locked()
}

fn probe_platform_locked() -> Result<String, String> {
    let platforms = opencl3::platform::get_platforms()
        .map_err(|e| format!("no OpenCL runtime or platform ({e})"))?;
    let platform = platforms
        .first()
        .ok_or_else(|| "the OpenCL runtime lists no platform".to_owned())?;
    let name = platform
        .name()
        .unwrap_or_else(|_| "unknown platform".into());
    let devices = opencl3::device::get_all_devices(CL_DEVICE_TYPE_ALL)
        .map_err(|e| format!("platform `{name}` has no device ({e})"))?;
    if devices.is_empty() {
        return Err(format!("platform `{name}` has no device"));
    }
    Ok(name)
}

/// Context, queue, program and kernels: created at load, released at unload.
#[derive(Debug)]
pub(crate) struct Runtime {
    pub(crate) device_name: String,
    pub(crate) platform_name: String,
    matmul: Kernel,
    softmax: Kernel,
    kv_append: Kernel,
    _program: Program,
    queue: CommandQueue,
    context: Context,
}

impl Runtime {
    /// Number of OpenCL objects of each kind this tier creates (context, queue, program, kernels).
    pub(crate) const KERNELS: u64 = 3;

    /// Creates the context and queue on the first device and builds the program.
    pub(crate) fn create() -> ClResult<Self> {
        let _guard = SETUP.lock().unwrap_or_else(|p| p.into_inner());
        let platform_name = probe_platform_locked().map_err(|cause| ClError {
            what: "finding an OpenCL platform".into(),
            cause,
        })?;
        let ids = opencl3::device::get_all_devices(CL_DEVICE_TYPE_ALL).doing("listing devices")?;
        let device = Device::new(ids[0]);
        let device_name = device.name().unwrap_or_else(|_| "unknown device".into());
        let context = Context::from_device(&device).doing("creating the context")?;
        let queue = CommandQueue::create_default(&context, 0).doing("creating the queue")?;
        let program = Program::create_and_build_from_source(&context, kernels::SOURCE, "")
            .map_err(|log| ClError {
                what: "building the kernels".into(),
                cause: log,
            })?;
        Ok(Self {
            device_name,
            platform_name,
            matmul: Kernel::create(&program, kernels::MATMUL).doing("creating kernel matmul")?,
            softmax: Kernel::create(&program, kernels::SOFTMAX).doing("creating kernel softmax")?,
            kv_append: Kernel::create(&program, kernels::KV_APPEND)
                .doing("creating kernel kv_append")?,
            _program: program,
            queue,
            context,
        })
    }

    /// A read-write buffer of `len` floats (allocated lazily by most drivers until first use).
    pub(crate) fn buffer(&self, len: usize) -> ClResult<Buffer<cl_float>> {
        // SAFETY: no host pointer; the driver allocates `len` floats.
        unsafe {
            Buffer::<cl_float>::create(&self.context, CL_MEM_READ_WRITE, len, ptr::null_mut())
        }
        .doing("creating a buffer")
    }

    /// Writes `data` at the start of `buffer` (blocking).
    pub(crate) fn write(&self, buffer: &mut Buffer<cl_float>, data: &[f32]) -> ClResult<()> {
        // SAFETY: blocking write of `data.len()` floats into a buffer at least that large.
        unsafe {
            self.queue
                .enqueue_write_buffer(buffer, CL_BLOCKING, 0, data, &[])
        }
        .doing("writing a buffer")?;
        Ok(())
    }

    /// Fills the first `len` floats of `buffer` with zeros, which makes the driver back it.
    pub(crate) fn zero(&self, buffer: &mut Buffer<cl_float>, len: usize) -> ClResult<()> {
        // SAFETY: the range lies inside the buffer.
        unsafe {
            self.queue
                .enqueue_fill_buffer(buffer, &[0.0f32], 0, len * 4, &[])
        }
        .doing("zeroing a buffer")?;
        Ok(())
    }

    /// Reads `out.len()` floats starting at float `offset` (blocking).
    pub(crate) fn read(
        &self,
        buffer: &Buffer<cl_float>,
        offset: usize,
        out: &mut [f32],
    ) -> ClResult<()> {
        // SAFETY: blocking read of a range inside the buffer.
        unsafe {
            self.queue
                .enqueue_read_buffer(buffer, CL_BLOCKING, offset * 4, out, &[])
        }
        .doing("reading a buffer")?;
        Ok(())
    }

    /// Waits for every launched kernel.
    pub(crate) fn finish(&self) -> ClResult<()> {
        self.queue.finish().doing("waiting for the queue")
    }

    /// `c[m,n] = a[m,k] x b[k,n]` (or `b` stored `[n,k]` when `b_trans`); offsets in floats.
    #[expect(clippy::too_many_arguments, reason = "mirrors the kernel's parameters")]
    pub(crate) fn matmul(
        &self,
        a: (&Buffer<cl_float>, usize),
        b: (&Buffer<cl_float>, usize),
        b_trans: bool,
        c: (&Buffer<cl_float>, usize),
        m: usize,
        n: usize,
        k: usize,
    ) -> ClResult<()> {
        let u = |x: usize| x as cl_uint;
        // SAFETY: argument types and order match the kernel; the ranges lie inside the buffers.
        unsafe {
            ExecuteKernel::new(&self.matmul)
                .set_arg(a.0)
                .set_arg(&u(a.1))
                .set_arg(b.0)
                .set_arg(&u(b.1))
                .set_arg(&u(usize::from(b_trans)))
                .set_arg(c.0)
                .set_arg(&u(c.1))
                .set_arg(&u(m))
                .set_arg(&u(n))
                .set_arg(&u(k))
                .set_global_work_sizes(&[m, n])
                .enqueue_nd_range(&self.queue)
        }
        .doing("launching matmul")?;
        Ok(())
    }

    /// Softmax over `rows` rows of `n` floats at the start of `x`, after scaling by `scale`.
    pub(crate) fn softmax(
        &self,
        x: &Buffer<cl_float>,
        rows: usize,
        n: usize,
        scale: f32,
    ) -> ClResult<()> {
        // SAFETY: as for matmul.
        unsafe {
            ExecuteKernel::new(&self.softmax)
                .set_arg(x)
                .set_arg(&(n as cl_uint))
                .set_arg(&scale)
                .set_global_work_size(rows)
                .enqueue_nd_range(&self.queue)
        }
        .doing("launching softmax_rows")?;
        Ok(())
    }

    /// Appends `t` rows of keys and values (each `[t, d]` at the given offsets) at row `pos`.
    #[expect(clippy::too_many_arguments, reason = "mirrors the kernel's parameters")]
    pub(crate) fn kv_append(
        &self,
        k: (&Buffer<cl_float>, usize),
        v: (&Buffer<cl_float>, usize),
        cache: &Buffer<cl_float>,
        pos: usize,
        t: usize,
        d: usize,
        capacity: usize,
    ) -> ClResult<()> {
        let u = |x: usize| x as cl_uint;
        // SAFETY: as for matmul; pos + t <= capacity is checked by the caller.
        unsafe {
            ExecuteKernel::new(&self.kv_append)
                .set_arg(k.0)
                .set_arg(&u(k.1))
                .set_arg(v.0)
                .set_arg(&u(v.1))
                .set_arg(cache)
                .set_arg(&u(pos))
                .set_arg(&u(d))
                .set_arg(&u(capacity))
                .set_global_work_size(t * d)
                .enqueue_nd_range(&self.queue)
        }
        .doing("launching kv_append")?;
        Ok(())
    }
}
