//! The workload's OpenCL C kernels and their CPU reference implementations.
//!
//! Three kernels make a single-head attention decoder step: `matmul` (projections and attention
//! scores/values), `softmax_rows` and `kv_append` (writing new keys and values into the cache).
//! The CPU versions define what the kernels must compute; tests compare the two.

/// OpenCL C source of all kernels, compiled once per engine load.
pub(crate) const SOURCE: &str = r#"
// C[M,N] = A[M,K] x B[K,N] (or B^T when b_trans, B stored as [N,K]); offsets in floats.
__kernel void matmul(__global const float* a, uint a_off,
                     __global const float* b, uint b_off, uint b_trans,
                     __global float* c, uint c_off,
                     uint m, uint n, uint k) {
    uint row = get_global_id(0);
    uint col = get_global_id(1);
    if (row >= m || col >= n) return;
    float acc = 0.0f;
    for (uint i = 0; i < k; i++) {
        float bv = b_trans ? b[b_off + col * k + i] : b[b_off + i * n + col];
        acc += a[a_off + row * k + i] * bv;
    }
    c[c_off + row * n + col] = acc;
}

// In-place softmax of each row of x[rows, n] after multiplying by `scale`.
__kernel void softmax_rows(__global float* x, uint n, float scale) {
    uint row = get_global_id(0);
    __global float* r = x + row * n;
    float mx = -INFINITY;
    for (uint i = 0; i < n; i++) mx = fmax(mx, r[i] * scale);
    float sum = 0.0f;
    for (uint i = 0; i < n; i++) { float e = exp(r[i] * scale - mx); r[i] = e; sum += e; }
    for (uint i = 0; i < n; i++) r[i] /= sum;
}

// Copies rows k[t, d] and v[t, d] into the cache at row `pos`: keys in rows [0, capacity),
// values in rows [capacity, 2 * capacity).
__kernel void kv_append(__global const float* k, uint k_off,
                        __global const float* v, uint v_off,
                        __global float* cache, uint pos, uint d, uint capacity) {
    uint i = get_global_id(0);
    uint t = i / d;
    uint j = i % d;
    cache[(pos + t) * d + j] = k[k_off + i];
    cache[(capacity + pos + t) * d + j] = v[v_off + i];
}
"#;

/// Kernel names in [`SOURCE`].
pub(crate) const MATMUL: &str = "matmul";
/// Kernel names in [`SOURCE`].
pub(crate) const SOFTMAX: &str = "softmax_rows";
/// Kernel names in [`SOURCE`].
pub(crate) const KV_APPEND: &str = "kv_append";

#[cfg(test)]
/// CPU reference of `matmul`: `a` is `[m, k]`, `b` is `[k, n]` (or `[n, k]` when `b_trans`).
pub(crate) fn matmul(
    a: &[f32],
    b: &[f32],
    b_trans: bool,
    m: usize,
    n: usize,
    k: usize,
) -> Vec<f32> {
    let mut c = vec![0.0; m * n];
    for row in 0..m {
        for col in 0..n {
            c[row * n + col] = (0..k)
                .map(|i| {
                    let bv = if b_trans {
                        b[col * k + i]
                    } else {
                        b[i * n + col]
                    };
                    a[row * k + i] * bv
                })
                .sum();
        }
    }
    c
}

#[cfg(test)]
/// CPU reference of `softmax_rows` on rows of length `n`.
pub(crate) fn softmax_rows(x: &mut [f32], n: usize, scale: f32) {
    for r in x.chunks_mut(n) {
        let mx = r.iter().fold(f32::NEG_INFINITY, |m, v| m.max(v * scale));
        let mut sum = 0.0;
        for v in r.iter_mut() {
            *v = (*v * scale - mx).exp();
            sum += *v;
        }
        r.iter_mut().for_each(|v| *v /= sum);
    }
}

#[cfg(test)]
/// CPU reference of `kv_append`.
pub(crate) fn kv_append(
    k: &[f32],
    v: &[f32],
    cache: &mut [f32],
    pos: usize,
    d: usize,
    capacity: usize,
) {
    for (i, (kv, vv)) in k.iter().zip(v).enumerate() {
        let (t, j) = (i / d, i % d);
        cache[(pos + t) * d + j] = *kv;
        cache[(capacity + pos + t) * d + j] = *vv;
    }
}

/// Deterministic values in [-scale, scale) from a seed (weights and token embeddings).
pub(crate) fn pseudo_random(seed: u64, len: usize, scale: f32) -> Vec<f32> {
    let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|_| {
            // xorshift64*: enough spread for test data, no dependency for it.
            state ^= state >> 12;
            state ^= state << 25;
            state ^= state >> 27;
            let x = state.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 40;
            (x as f32 / (1u64 << 24) as f32 * 2.0 - 1.0) * scale
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reference_matmul_matches_a_hand_computed_case() {
        let a = [1.0, 2.0, 3.0, 4.0]; // [2,2]
        let b = [5.0, 6.0, 7.0, 8.0]; // [2,2]
        assert_eq!(matmul(&a, &b, false, 2, 2, 2), [19.0, 22.0, 43.0, 50.0]);
        assert_eq!(matmul(&a, &b, true, 2, 2, 2), [17.0, 23.0, 39.0, 53.0]);
    }

    #[test]
    fn reference_softmax_rows_sum_to_one_and_keep_order() {
        let mut x = [1.0, 2.0, 3.0, 0.0, 0.0, 0.0];
        softmax_rows(&mut x, 3, 1.0);
        assert!((x[..3].iter().sum::<f32>() - 1.0).abs() < 1e-6);
        assert!(x[0] < x[1] && x[1] < x[2]);
        assert!((x[3] - 1.0 / 3.0).abs() < 1e-6);
    }

    #[test]
    fn reference_kv_append_places_keys_and_values_in_their_halves() {
        let mut cache = vec![0.0; 2 * 3 * 2];
        kv_append(&[1.0, 2.0], &[3.0, 4.0], &mut cache, 1, 2, 3);
        assert_eq!(
            cache,
            [0.0, 0.0, 1.0, 2.0, 0.0, 0.0, 0.0, 0.0, 3.0, 4.0, 0.0, 0.0]
        );
    }

    #[test]
    fn pseudo_random_is_deterministic_and_bounded() {
        let a = pseudo_random(3, 1000, 0.5);
        assert_eq!(a, pseudo_random(3, 1000, 0.5));
        assert_ne!(a, pseudo_random(4, 1000, 0.5));
        assert!(a.iter().all(|v| (-0.5..0.5).contains(v)));
    }
}
