//! The decoder-like workload: weights per engine, a KV cache per session, scratch (activation)
//! buffers per session's turns, and the attention steps that run on them.
//!
//! One step of attention for a query row `q` reads the first `len` cached keys and values:
//! `scores = q K^T`, `softmax(scores / sqrt(d))`, `out = scores V`. Prefill appends every
//! prompt token's key and value at once; each generated token feeds the previous output back.

use opencl3::memory::Buffer;
use opencl3::types::cl_float;

use crate::engine::opencl::kernels::pseudo_random;
use crate::engine::opencl::runtime::{ClResult, Runtime};

/// Model width (floats per token row).
pub(crate) const D_MODEL: usize = 256;

/// Bytes of the weight buffer (`W_q`, `W_k`, `W_v`, each `[d, d]`).
pub(crate) const WEIGHT_BYTES: u64 = (3 * D_MODEL * D_MODEL * 4) as u64;

/// Bytes of a session's KV cache for `capacity` tokens (keys and values).
pub(crate) fn kv_bytes(capacity: usize) -> u64 {
    (2 * capacity * D_MODEL * 4) as u64
}

/// Sizes in floats of the scratch buffers, in creation order: prompt rows, keys, values,
/// query, scores, output.
pub(crate) fn scratch_lens(capacity: usize) -> [usize; 6] {
    let rows = capacity * D_MODEL;
    [rows, rows, rows, D_MODEL, capacity, D_MODEL]
}

/// Total bytes of one set of scratch buffers.
pub(crate) fn scratch_bytes(capacity: usize) -> u64 {
    scratch_lens(capacity).iter().map(|l| (*l * 4) as u64).sum()
}

/// The weights, created once per load.
#[derive(Debug)]
pub(crate) struct Weights {
    pub(crate) buffer: Buffer<cl_float>,
}

impl Weights {
    /// Deterministic weights for `seed`, scaled so that activations stay bounded.
    pub(crate) fn host_values(seed: u64) -> Vec<f32> {
        pseudo_random(seed, 3 * D_MODEL * D_MODEL, 1.0 / (D_MODEL as f32).sqrt())
    }

    pub(crate) fn create(rt: &Runtime, seed: u64) -> ClResult<Self> {
        let values = Self::host_values(seed);
        let mut buffer = rt.buffer(values.len())?;
        rt.write(&mut buffer, &values)?;
        Ok(Self { buffer })
    }
}

/// Activation buffers a session uses while prefilling and generating.
#[derive(Debug)]
pub(crate) struct Scratch {
    pub(crate) x: Buffer<cl_float>,
    pub(crate) k: Buffer<cl_float>,
    pub(crate) v: Buffer<cl_float>,
    pub(crate) q: Buffer<cl_float>,
    pub(crate) scores: Buffer<cl_float>,
    pub(crate) out: Buffer<cl_float>,
}

impl Scratch {
    /// Number of OpenCL buffers in one scratch set.
    pub(crate) const BUFFERS: u64 = 6;

    /// Creates and zeroes the scratch set (zeroing makes the driver back the memory now).
    pub(crate) fn create(rt: &Runtime, capacity: usize) -> ClResult<Self> {
        let lens = scratch_lens(capacity);
        let make = |i: usize| -> ClResult<Buffer<cl_float>> {
            let mut b = rt.buffer(lens[i])?;
            rt.zero(&mut b, lens[i])?;
            Ok(b)
        };
        Ok(Self {
            x: make(0)?,
            k: make(1)?,
            v: make(2)?,
            q: make(3)?,
            scores: make(4)?,
            out: make(5)?,
        })
    }

    /// Hands the buffers over without releasing them (the injected scratch leak).
    pub(crate) fn into_buffers(self) -> [Buffer<cl_float>; 6] {
        [self.x, self.k, self.v, self.q, self.scores, self.out]
    }
}

/// A session's KV cache and position.
#[derive(Debug)]
pub(crate) struct Cache {
    pub(crate) kv: Buffer<cl_float>,
    pub(crate) capacity: usize,
    pub(crate) len: usize,
}

impl Cache {
    pub(crate) fn create(rt: &Runtime, capacity: usize) -> ClResult<Self> {
        let floats = 2 * capacity * D_MODEL;
        let mut kv = rt.buffer(floats)?;
        rt.zero(&mut kv, floats)?;
        Ok(Self {
            kv,
            capacity,
            len: 0,
        })
    }

    /// Tokens that still fit.
    pub(crate) fn room(&self) -> usize {
        self.capacity - self.len
    }
}

/// Deterministic embeddings of `tokens` prompt tokens starting at position `pos`.
pub(crate) fn prompt_embeddings(seed: u64, pos: usize, tokens: usize) -> Vec<f32> {
    pseudo_random(seed ^ ((pos as u64) << 20) ^ 0x5EED, tokens * D_MODEL, 1.0)
}

/// Runs attention for the query in `scratch.q` over the first `cache.len` rows into
/// `scratch.out`.
fn attend(rt: &Runtime, cache: &Cache, s: &Scratch) -> ClResult<()> {
    let d = D_MODEL;
    rt.matmul(
        (&s.q, 0),
        (&cache.kv, 0),
        true,
        (&s.scores, 0),
        1,
        cache.len,
        d,
    )?;
    rt.softmax(&s.scores, 1, cache.len, 1.0 / (d as f32).sqrt())?;
    rt.matmul(
        (&s.scores, 0),
        (&cache.kv, cache.capacity * d),
        false,
        (&s.out, 0),
        1,
        d,
        cache.len,
    )
}

/// Prefills `tokens` prompt tokens (already clamped to the cache's room, at least 1).
pub(crate) fn prefill(
    rt: &Runtime,
    w: &Weights,
    cache: &mut Cache,
    s: &mut Scratch,
    embeddings: &[f32],
) -> ClResult<()> {
    let d = D_MODEL;
    let t = embeddings.len() / d;
    rt.write(&mut s.x, embeddings)?;
    rt.matmul((&s.x, 0), (&w.buffer, d * d), false, (&s.k, 0), t, d, d)?;
    rt.matmul((&s.x, 0), (&w.buffer, 2 * d * d), false, (&s.v, 0), t, d, d)?;
    rt.kv_append(
        (&s.k, 0),
        (&s.v, 0),
        &cache.kv,
        cache.len,
        t,
        d,
        cache.capacity,
    )?;
    cache.len += t;
    rt.matmul(
        (&s.x, (t - 1) * d),
        (&w.buffer, 0),
        false,
        (&s.q, 0),
        1,
        d,
        d,
    )?;
    attend(rt, cache, s)
}

/// Generates one token: the last output row becomes the next input (cache must have room).
pub(crate) fn decode_step(
    rt: &Runtime,
    w: &Weights,
    cache: &mut Cache,
    s: &Scratch,
) -> ClResult<()> {
    let d = D_MODEL;
    rt.matmul((&s.out, 0), (&w.buffer, d * d), false, (&s.k, 0), 1, d, d)?;
    rt.matmul(
        (&s.out, 0),
        (&w.buffer, 2 * d * d),
        false,
        (&s.v, 0),
        1,
        d,
        d,
    )?;
    rt.matmul((&s.out, 0), (&w.buffer, 0), false, (&s.q, 0), 1, d, d)?;
    rt.kv_append(
        (&s.k, 0),
        (&s.v, 0),
        &cache.kv,
        cache.len,
        1,
        d,
        cache.capacity,
    )?;
    cache.len += 1;
    attend(rt, cache, s)
}

/// The output row of the last step.
pub(crate) fn read_output(rt: &Runtime, s: &Scratch) -> ClResult<Vec<f32>> {
    let mut out = vec![0.0; D_MODEL];
    rt.read(&s.out, 0, &mut out)?;
    Ok(out)
}
