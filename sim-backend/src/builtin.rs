//! The built-in profiles and where their numbers come from.
//!
//! The Android numbers are the field report's `dumpsys meminfo` App Summary (Pixel 4a, Qwen 2.5
//! 0.5B, LiteRT-LM, OpenCL GPU backend) and the maintainer's per-layer measurements of the same
//! loop (CPU and Metal flat, OpenCL +~110 MB per turn). Where the report gives no number (the
//! split of the GPU context into fixed and context-sized parts, the KV cache size, timings) the
//! values are estimates, documented in `docs/simulator.md`.

use std::time::Duration;

use bytesize::ByteSize;

use crate::profile::{NoiseSpec, Place, ProfileSpec, TimingSpec};

/// Names of the built-in profiles.
pub const BUILTIN_PROFILES: &[&str] = &[
    "android-opencl-leak",
    "cpu-flat",
    "metal-flat",
    "no-generation",
    "allocator-warmup",
    "prefix-cache-unbounded",
    "forgets-delete",
];

// Field report, App Summary "Model loaded, idle": Native Heap 127200 KB, Graphics 59944 KB,
// TOTAL PSS 705053 KB, TOTAL RSS 794324 KB.
const PIXEL_NATIVE_AT_LOAD: ByteSize = ByteSize::kib(127_200);
const PIXEL_GRAPHICS_AT_LOAD: ByteSize = ByteSize::kib(59_944);
const PIXEL_SHARED: ByteSize = ByteSize::kib(794_324 - 705_053);
/// Qwen 2.5 0.5B as a quantized `.litertlm` file (estimate).
const QWEN_05B_WEIGHTS: ByteSize = ByteSize::mib(400);
/// The rest of the 705053 KB PSS at load: runtime, Dart/Java heaps, code.
const PIXEL_PRIVATE: ByteSize = ByteSize::kib(705_053 - 127_200 - 59_944 - 400 * 1024);
// Field report, "Rests here after inference #1": Graphics 1767024 KB; peak during an inference:
// Graphics 2220388 KB.
const PIXEL_GRAPHICS_AFTER_FIRST: u64 = 1_767_024;
const PIXEL_GRAPHICS_PEAK: u64 = 2_220_388;
/// Context-sized buffers of the OpenCL delegate, part of the 1.77 GB context (estimate).
const OPENCL_CONTEXT_SCALED: ByteSize = ByteSize::mib(512);
/// Qwen 2.5 0.5B: 24 layers x (K, V) x 2 KV heads x 64 dims x 2 bytes = 12 KiB per token.
const QWEN_05B_KV_4096: ByteSize = ByteSize::kib(12 * 4096);

/// The spec of a built-in profile.
pub(crate) fn spec(name: &str) -> Option<ProfileSpec> {
    Some(match name {
        "android-opencl-leak" => android_opencl_leak(),
        "no-generation" => ProfileSpec {
            description: "android-opencl-leak's device and engine, for loops that open and close \
                          without generating: the leak comes from generation, so memory stays \
                          flat (the maintainer's first layer check)"
                .into(),
            ..android_opencl_leak()
        },
        "cpu-flat" => cpu_flat(),
        "metal-flat" => metal_flat(),
        "allocator-warmup" => allocator_warmup(),
        "prefix-cache-unbounded" => prefix_cache_unbounded(),
        "forgets-delete" => forgets_delete(),
        _ => return None,
    })
}

fn pixel_4a_base() -> ProfileSpec {
    ProfileSpec {
        weights: QWEN_05B_WEIGHTS,
        process_private: PIXEL_PRIVATE,
        shared_pages: PIXEL_SHARED,
        native_base: PIXEL_NATIVE_AT_LOAD,
        gpu_base: PIXEL_GRAPHICS_AT_LOAD,
        noise: NoiseSpec {
            native: ByteSize::kib(1536),
            gpu: ByteSize::kib(256),
            process: ByteSize::mib(2),
            ..NoiseSpec::default()
        },
        ..ProfileSpec::default()
    }
}

fn android_opencl_leak() -> ProfileSpec {
    let context_total = ByteSize::kib(PIXEL_GRAPHICS_AFTER_FIRST - PIXEL_GRAPHICS_AT_LOAD.0 / 1024);
    let peak_above_rest = ByteSize::kib(PIXEL_GRAPHICS_PEAK - PIXEL_GRAPHICS_AFTER_FIRST);
    ProfileSpec {
        description: "Pixel 4a, Qwen 2.5 0.5B, LiteRT-LM on the OpenCL GPU backend: a 1.77 GB \
                      GPU context on the first inference (held until unload) and ~110 MB of \
                      delegate scratch per generation that closing the conversation does not \
                      reclaim"
            .into(),
        context: context_total - OPENCL_CONTEXT_SCALED,
        context_scaled: OPENCL_CONTEXT_SCALED,
        context_on: Place::Gpu,
        kv_cache: QWEN_05B_KV_4096,
        kv_cache_on: Place::Gpu,
        activations: peak_above_rest - QWEN_05B_KV_4096,
        activations_on: Place::Gpu,
        leak_per_generation: ByteSize::mib(110),
        leak_on: Place::Native,
        timing: TimingSpec {
            load: Duration::from_secs(3),
            first_inference: Duration::from_millis(1500),
            open: Duration::from_millis(20),
            prefill_per_token: Duration::from_millis(2),
            decode_per_token: Duration::from_millis(40),
            close: Duration::from_millis(5),
            slowdown_per_generation: Duration::ZERO,
            unload: Duration::from_millis(300),
        },
        ..pixel_4a_base()
    }
}

fn cpu_flat() -> ProfileSpec {
    ProfileSpec {
        description: "android-opencl-leak's device and model on the CPU backend: no GPU \
                      context, KV cache and activations on the native heap and freed on close, \
                      a one-time 64 MiB weight-packing cache on the first inference; flat"
            .into(),
        context: ByteSize::mib(64),
        context_on: Place::Native,
        kv_cache: QWEN_05B_KV_4096,
        kv_cache_on: Place::Native,
        activations: ByteSize::mib(96),
        activations_on: Place::Native,
        timing: TimingSpec {
            load: Duration::from_secs(2),
            first_inference: Duration::from_millis(400),
            open: Duration::from_millis(10),
            prefill_per_token: Duration::from_millis(4),
            decode_per_token: Duration::from_millis(60),
            close: Duration::from_millis(5),
            slowdown_per_generation: Duration::ZERO,
            unload: Duration::from_millis(200),
        },
        ..pixel_4a_base()
    }
}

fn metal_flat() -> ProfileSpec {
    ProfileSpec {
        description: "the same model through the LiteRT-LM C API on a Mac's Metal GPU: a \
                      one-time GPU context, KV cache and activations freed on close; flat"
            .into(),
        weights: QWEN_05B_WEIGHTS,
        process_private: ByteSize::mib(40),
        shared_pages: ByteSize::mib(30),
        native_base: ByteSize::mib(60),
        gpu_base: ByteSize(0),
        context: ByteSize::mib(900),
        context_scaled: ByteSize::mib(256),
        context_on: Place::Gpu,
        kv_cache: QWEN_05B_KV_4096,
        kv_cache_on: Place::Gpu,
        activations: ByteSize::mib(256),
        activations_on: Place::Gpu,
        noise: NoiseSpec {
            native: ByteSize::mib(1),
            gpu: ByteSize::kib(256),
            process: ByteSize::mib(2),
            ..NoiseSpec::default()
        },
        timing: TimingSpec {
            load: Duration::from_millis(1500),
            first_inference: Duration::from_millis(600),
            open: Duration::from_millis(5),
            prefill_per_token: Duration::from_micros(500),
            decode_per_token: Duration::from_millis(10),
            close: Duration::from_millis(2),
            slowdown_per_generation: Duration::ZERO,
            unload: Duration::from_millis(100),
        },
        ..ProfileSpec::default()
    }
}

fn allocator_warmup() -> ProfileSpec {
    ProfileSpec {
        description: "a GPU engine behind a caching allocator: each new prompt-length class \
                      reserves a workspace block that is kept for reuse, so reserved memory \
                      grows while new shapes appear and then plateaus; allocated memory returns \
                      to zero after every close; not a leak"
            .into(),
        weights: ByteSize::gib(1),
        process_private: ByteSize::mib(150),
        shared_pages: ByteSize::mib(60),
        native_base: ByteSize::mib(200),
        gpu_base: ByteSize::mib(300),
        kv_cache: ByteSize::mib(96),
        kv_cache_on: Place::Gpu,
        pool_per_token: ByteSize::kib(256),
        pool_min_bucket: 64,
        pool_on: Place::Gpu,
        noise: NoiseSpec {
            native: ByteSize::mib(1),
            gpu: ByteSize::kib(512),
            process: ByteSize::mib(2),
            ..NoiseSpec::default()
        },
        ..ProfileSpec::default()
    }
}

fn prefix_cache_unbounded() -> ProfileSpec {
    ProfileSpec {
        description: "a prefix cache without eviction: every unique session stores an 8 MiB \
                      entry on the native heap that is never evicted; a leak"
            .into(),
        kv_cache: QWEN_05B_KV_4096,
        kv_cache_on: Place::Native,
        activations: ByteSize::mib(96),
        activations_on: Place::Native,
        prefix_cache_entry: ByteSize::mib(8),
        prefix_cache_capacity: None,
        prefix_cache_on: Place::Native,
        ..pixel_4a_base()
    }
}

fn forgets_delete() -> ProfileSpec {
    ProfileSpec {
        description: "a binding layer whose close tears down only its own session state and \
                      never deletes the engine's conversation: each turn's KV cache stays \
                      resident until unload"
            .into(),
        kv_cache: QWEN_05B_KV_4096,
        kv_cache_on: Place::Native,
        activations: ByteSize::mib(96),
        activations_on: Place::Native,
        close_deletes_conversation: false,
        ..pixel_4a_base()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::Profile;

    #[test]
    fn every_listed_name_has_a_valid_spec_and_nothing_else_does() {
        for name in BUILTIN_PROFILES {
            let profile = Profile::builtin(name).unwrap_or_else(|| panic!("{name}"));
            Profile::from_spec(*name, profile.spec().clone()).unwrap();
            assert!(!profile.spec().description.is_empty(), "{name}");
        }
        assert!(Profile::builtin("android").is_none());
    }

    #[test]
    fn android_numbers_add_up_to_the_field_report() {
        let spec = android_opencl_leak();
        let kib = |b: ByteSize| b.as_u64() / 1024;
        let pss_at_load = kib(spec.weights)
            + kib(spec.process_private)
            + kib(spec.native_base)
            + kib(spec.gpu_base);
        assert_eq!(pss_at_load, 705_053);
        assert_eq!(pss_at_load + kib(spec.shared_pages), 794_324);
        let graphics_at_rest = kib(spec.gpu_base) + kib(spec.context) + kib(spec.context_scaled);
        assert_eq!(graphics_at_rest, PIXEL_GRAPHICS_AFTER_FIRST);
        let graphics_peak = graphics_at_rest + kib(spec.kv_cache) + kib(spec.activations);
        assert_eq!(graphics_peak, PIXEL_GRAPHICS_PEAK);
    }
}
