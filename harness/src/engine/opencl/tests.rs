//! Tests that run the workload on a real OpenCL platform (PoCL in CI): kernel results against
//! the CPU references, a whole session against a CPU mirror, and each profile's imbalance in the
//! engine's own bookkeeping. Each skips with a visible message when no platform is there.

use rstest::rstest;

use super::kernels::{self, pseudo_random};
use super::workload::{prompt_embeddings, Weights, D_MODEL};
use super::*;
use crate::engine::opencl::runtime::Runtime;
use crate::engine::{Engine, GenerateRequest, KindCounts, Prompt};
use crate::scenario::SessionOptions;

fn close_enough(got: &[f32], want: &[f32]) {
    assert_eq!(got.len(), want.len());
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(
            (g - w).abs() <= 1e-4 + 1e-3 * w.abs(),
            "element {i}: device {g} vs CPU {w}"
        );
    }
}

#[rstest]
#[case::square(4, 4, 4, false)]
#[case::single_row_projection(1, 256, 256, false)]
#[case::scores_against_transposed_keys(1, 37, 256, true)]
#[case::prefill_rows(9, 256, 256, false)]
fn matmul_kernel_matches_the_cpu_reference(
    #[case] m: usize,
    #[case] n: usize,
    #[case] k: usize,
    #[case] b_trans: bool,
) {
    if !opencl_available_or_skip("matmul_kernel_matches_the_cpu_reference") {
        return;
    }
    let rt = Runtime::create().unwrap();
    let a = pseudo_random(1, m * k + 3, 1.0);
    let b = pseudo_random(2, k * n + 5, 1.0);
    let (mut ab, mut bb, cb) = (
        rt.buffer(a.len()).unwrap(),
        rt.buffer(b.len()).unwrap(),
        rt.buffer(m * n + 2).unwrap(),
    );
    rt.write(&mut ab, &a).unwrap();
    rt.write(&mut bb, &b).unwrap();
    // Offsets exercise the offset arguments the workload relies on.
    rt.matmul((&ab, 3), (&bb, 5), b_trans, (&cb, 2), m, n, k)
        .unwrap();
    let mut got = vec![0.0; m * n];
    rt.read(&cb, 2, &mut got).unwrap();
    close_enough(&got, &kernels::matmul(&a[3..], &b[5..], b_trans, m, n, k));
}

#[test]
fn softmax_kernel_matches_the_cpu_reference() {
    if !opencl_available_or_skip("softmax_kernel_matches_the_cpu_reference") {
        return;
    }
    let rt = Runtime::create().unwrap();
    let (rows, n) = (3, 50);
    let x = pseudo_random(3, rows * n, 8.0);
    let mut xb = rt.buffer(x.len()).unwrap();
    rt.write(&mut xb, &x).unwrap();
    rt.softmax(&xb, rows, n, 0.5).unwrap();
    let mut got = vec![0.0; x.len()];
    rt.read(&xb, 0, &mut got).unwrap();
    let mut want = x.clone();
    kernels::softmax_rows(&mut want, n, 0.5);
    close_enough(&got, &want);
}

#[test]
fn kv_append_kernel_matches_the_cpu_reference() {
    if !opencl_available_or_skip("kv_append_kernel_matches_the_cpu_reference") {
        return;
    }
    let rt = Runtime::create().unwrap();
    let (d, cap, pos, t) = (8, 10, 3, 4);
    let k = pseudo_random(4, t * d + 1, 1.0);
    let v = pseudo_random(5, t * d, 1.0);
    let (mut kb, mut vb, mut cache) = (
        rt.buffer(k.len()).unwrap(),
        rt.buffer(v.len()).unwrap(),
        rt.buffer(2 * cap * d).unwrap(),
    );
    rt.write(&mut kb, &k).unwrap();
    rt.write(&mut vb, &v).unwrap();
    rt.zero(&mut cache, 2 * cap * d).unwrap();
    rt.kv_append((&kb, 1), (&vb, 0), &cache, pos, t, d, cap)
        .unwrap();
    let mut got = vec![0.0; 2 * cap * d];
    rt.read(&cache, 0, &mut got).unwrap();
    let mut want = vec![0.0; 2 * cap * d];
    kernels::kv_append(&k[1..], &v, &mut want, pos, d, cap);
    close_enough(&got, &want);
}

/// The same session (prefill, then decode steps) computed on the CPU.
fn cpu_session(seed: u64, cap: usize, prompt: usize, steps: usize) -> Vec<f32> {
    let d = D_MODEL;
    let w = Weights::host_values(seed);
    let (wq, wk, wv) = (&w[..d * d], &w[d * d..2 * d * d], &w[2 * d * d..]);
    let mut cache = vec![0.0; 2 * cap * d];
    let attend = |q: &[f32], cache: &[f32], len: usize| {
        let mut scores = kernels::matmul(q, &cache[..len * d], true, 1, len, d);
        kernels::softmax_rows(&mut scores, len, 1.0 / (d as f32).sqrt());
        kernels::matmul(
            &scores,
            &cache[cap * d..cap * d + len * d],
            false,
            1,
            d,
            len,
        )
    };
    let x = prompt_embeddings(seed, 0, prompt);
    let k = kernels::matmul(&x, wk, false, prompt, d, d);
    let v = kernels::matmul(&x, wv, false, prompt, d, d);
    kernels::kv_append(&k, &v, &mut cache, 0, d, cap);
    let mut len = prompt;
    let q = kernels::matmul(&x[(prompt - 1) * d..], wq, false, 1, d, d);
    let mut out = attend(&q, &cache, len);
    for _ in 0..steps {
        let k = kernels::matmul(&out, wk, false, 1, d, d);
        let v = kernels::matmul(&out, wv, false, 1, d, d);
        let q = kernels::matmul(&out, wq, false, 1, d, d);
        kernels::kv_append(&k, &v, &mut cache, len, d, cap);
        len += 1;
        out = attend(&q, &cache, len);
    }
    out
}

#[test]
fn a_session_computes_what_the_cpu_mirror_computes() {
    if !opencl_available_or_skip("a_session_computes_what_the_cpu_mirror_computes") {
        return;
    }
    let mut engine = OpenClEngine::new(OpenClProfile::Clean, 64, 11).unwrap();
    engine.load().unwrap();
    let id = engine.open_session(1, &SessionOptions::default()).unwrap();
    let prompt = Prompt {
        text: String::new(),
        tokens: 12,
    };
    engine.send(id, &prompt).unwrap();
    close_enough(engine.last_output(id).unwrap(), &cpu_session(11, 64, 12, 0));
    let outcome = engine
        .generate(
            id,
            &GenerateRequest {
                max_output_tokens: 5,
                cancel_after_tokens: None,
            },
        )
        .unwrap();
    assert_eq!(outcome.tokens, 5);
    let out = engine.last_output(id).unwrap().to_vec();
    assert!(
        out.iter().any(|v| *v != 0.0),
        "output must not be all zeros"
    );
    close_enough(&out, &cpu_session(11, 64, 12, 5));
    engine.close_session(id).unwrap();
    engine.unload().unwrap();
}

#[test]
fn generation_stops_when_the_kv_cache_is_full() {
    if !opencl_available_or_skip("generation_stops_when_the_kv_cache_is_full") {
        return;
    }
    let mut engine = OpenClEngine::new(OpenClProfile::Clean, 8, 1).unwrap();
    engine.load().unwrap();
    let id = engine.open_session(1, &SessionOptions::default()).unwrap();
    let prompt = Prompt {
        text: String::new(),
        tokens: 6,
    };
    engine.send(id, &prompt).unwrap();
    let request = GenerateRequest {
        max_output_tokens: 10,
        cancel_after_tokens: None,
    };
    assert_eq!(engine.generate(id, &request).unwrap().tokens, 2);
    assert!(
        engine.send(id, &prompt).is_err(),
        "a full cache refuses more prompt"
    );
    engine.close_session(id).unwrap();
    engine.unload().unwrap();
}

/// Runs `turns` open/send/generate/close turns and returns the engine's own ledger counts.
fn run_turns(profile: OpenClProfile, turns: u32) -> (OpenClEngine, Vec<(String, KindCounts)>) {
    let mut engine = OpenClEngine::new(profile, 32, 3).unwrap();
    engine.load().unwrap();
    for turn in 1..=turns {
        let id = engine
            .open_session(turn, &SessionOptions::default())
            .unwrap();
        let prompt = Prompt {
            text: String::new(),
            tokens: 4,
        };
        engine.send(id, &prompt).unwrap();
        let request = GenerateRequest {
            max_output_tokens: 2,
            cancel_after_tokens: None,
        };
        engine.generate(id, &request).unwrap();
        engine.close_session(id).unwrap();
    }
    let ledger = engine.snapshot().unwrap().ledger.into_iter().collect();
    (engine, ledger)
}

fn unbalanced(ledger: &[(String, KindCounts)]) -> Vec<(String, u64, u64)> {
    ledger
        .iter()
        .filter(|(k, c)| c.created != c.deleted && !k.starts_with("cl_"))
        .map(|(k, c)| (k.clone(), c.created, c.deleted))
        .collect()
}

#[rstest]
#[case::clean(OpenClProfile::Clean, &[])]
#[case::leak_scratch(OpenClProfile::LeakScratch, &[("scratch_buffer", 18, 0)])]
#[case::leak_kv(OpenClProfile::LeakKv, &[("kv_cache", 3, 0)])]
#[case::leak_retain(OpenClProfile::LeakRetain, &[("kv_cache_retain", 3, 0)])]
fn each_profile_leaves_its_named_imbalance_in_the_engine_bookkeeping(
    #[case] profile: OpenClProfile,
    #[case] expected: &[(&str, u64, u64)],
) {
    if !opencl_available_or_skip("each_profile_leaves_its_named_imbalance") {
        return;
    }
    let (mut engine, ledger) = run_turns(profile, 3);
    let expected: Vec<(String, u64, u64)> = expected
        .iter()
        .map(|(k, c, d)| ((*k).to_owned(), *c, *d))
        .collect();
    // The engine tier (context, queue, program, kernels, weights) is live until unload.
    let engine_tier = [
        ("command_queue", 1, 0),
        ("context", 1, 0),
        ("kernel", 3, 0),
        ("program", 1, 0),
    ];
    let mut want: Vec<(String, u64, u64)> = engine_tier
        .iter()
        .map(|(k, c, d)| ((*k).to_owned(), *c, *d))
        .chain(expected.iter().cloned())
        .chain([("weight_buffer".to_owned(), 1, 0)])
        .collect();
    want.sort();
    assert_eq!(unbalanced(&ledger), want);
    engine.unload().unwrap();
    let after = engine.snapshot().unwrap();
    let after: Vec<_> = after.ledger.into_iter().collect();
    assert_eq!(
        unbalanced(&after),
        expected,
        "after unload only the fault remains"
    );
    let live = after
        .iter()
        .find(|(k, _)| k == "opencl_buffer_bytes")
        .map(|(_, c)| c.created);
    assert!(live.is_none(), "bytes are metrics, not ledger kinds");
    let bytes = engine.snapshot().unwrap().metrics[ENGINE_BUFFER_BYTES];
    let per_turn = match profile {
        OpenClProfile::Clean => 0,
        OpenClProfile::LeakScratch => engine.scratch_set_bytes(),
        OpenClProfile::LeakKv | OpenClProfile::LeakRetain => engine.kv_cache_bytes(),
    };
    assert_eq!(bytes, 3 * per_turn);
}
