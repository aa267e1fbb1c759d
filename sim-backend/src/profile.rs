//! Profiles: how much memory each component of a simulated device and engine holds, where it
//! lives, how long the engine's calls take and how noisy its measurements are.
//!
//! A [`ProfileSpec`] is what a scenario writes inline under `profiles:` (every field optional,
//! unknown fields rejected, sizes such as `110MiB` or `1.77GB`, durations such as `40ms`, read by
//! the DSL's own parser in `leakloop-units`); a
//! [`Profile`] is a validated spec with its name. The built-in profiles live in `builtin.rs`.

use std::time::Duration;

use bytesize::ByteSize;
use serde::{Deserialize, Serialize, Serializer};

use crate::builtin;

/// Where a component's bytes live.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize,
)]
#[serde(rename_all = "snake_case")]
#[cfg_attr(feature = "schema", schemars(rename = "place"))]
pub enum Place {
    /// The C heap of the engine's process (`native_heap`).
    #[default]
    Native,
    /// Graphics/GPU memory (`gpu`; Android's dumpsys "Graphics").
    Gpu,
}

/// The memory a simulated device and engine hold, component by component.
///
/// Sizes marked *scaled* are given at [`ProfileSpec::reference_max_tokens`] and scale linearly
/// with the scenario's `max_tokens` (a smaller context shrinks them). Every field is optional in
/// YAML; an omitted size is zero.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
#[cfg_attr(feature = "schema", schemars(rename = "sim_profile_spec"))]
pub struct ProfileSpec {
    /// What the profile models and where its numbers come from.
    pub description: String,
    /// The context size (tokens) at which the *scaled* sizes are given.
    pub reference_max_tokens: u32,

    /// Model weights mapped from the model file at load (counted in `rss` and `pss`).
    #[serde(serialize_with = "exact_bytes", deserialize_with = "size")]
    #[cfg_attr(
        feature = "schema",
        schemars(schema_with = "leakloop_units::schema::size")
    )]
    pub weights: ByteSize,
    /// Other private memory of the process (runtime, code, managed heap), present whether or not
    /// the engine is loaded (counted in `rss` and `pss`).
    #[serde(serialize_with = "exact_bytes", deserialize_with = "size")]
    #[cfg_attr(
        feature = "schema",
        schemars(schema_with = "leakloop_units::schema::size")
    )]
    pub process_private: ByteSize,
    /// Shared pages counted fully in `rss` but only in part in `pss` (shared libraries).
    #[serde(serialize_with = "exact_bytes", deserialize_with = "size")]
    #[cfg_attr(
        feature = "schema",
        schemars(schema_with = "leakloop_units::schema::size")
    )]
    pub shared_pages: ByteSize,
    /// Native heap the loaded engine holds at rest before the first inference.
    #[serde(serialize_with = "exact_bytes", deserialize_with = "size")]
    #[cfg_attr(
        feature = "schema",
        schemars(schema_with = "leakloop_units::schema::size")
    )]
    pub native_base: ByteSize,
    /// GPU memory the loaded engine holds at rest before the first inference.
    #[serde(serialize_with = "exact_bytes", deserialize_with = "size")]
    #[cfg_attr(
        feature = "schema",
        schemars(schema_with = "leakloop_units::schema::size")
    )]
    pub gpu_base: ByteSize,

    /// One-time engine context (GPU delegate, compiled kernels) built by the first inference after
    /// a load and freed only by unload: the part that does not depend on `max_tokens`.
    #[serde(serialize_with = "exact_bytes", deserialize_with = "size")]
    #[cfg_attr(
        feature = "schema",
        schemars(schema_with = "leakloop_units::schema::size")
    )]
    pub context: ByteSize,
    /// *Scaled* part of the one-time engine context (buffers sized for the whole context).
    #[serde(serialize_with = "exact_bytes", deserialize_with = "size")]
    #[cfg_attr(
        feature = "schema",
        schemars(schema_with = "leakloop_units::schema::size")
    )]
    pub context_scaled: ByteSize,
    /// Where the engine context lives.
    pub context_on: Place,

    /// *Scaled* KV cache of one conversation, allocated when it opens and freed when the engine
    /// deletes it.
    #[serde(serialize_with = "exact_bytes", deserialize_with = "size")]
    #[cfg_attr(
        feature = "schema",
        schemars(schema_with = "leakloop_units::schema::size")
    )]
    pub kv_cache: ByteSize,
    /// Where KV caches live.
    pub kv_cache_on: Place,

    /// Activations and scratch of one generation, held by its response until the session closes
    /// (the turn's peak above rest).
    #[serde(serialize_with = "exact_bytes", deserialize_with = "size")]
    #[cfg_attr(
        feature = "schema",
        schemars(schema_with = "leakloop_units::schema::size")
    )]
    pub activations: ByteSize,
    /// Where activations live.
    pub activations_on: Place,

    /// *Scaled* bytes each generation leaves behind that closing the conversation does not
    /// reclaim (the field's OpenCL delegate scratch); only unload returns them.
    #[serde(serialize_with = "exact_bytes", deserialize_with = "size")]
    #[cfg_attr(
        feature = "schema",
        schemars(schema_with = "leakloop_units::schema::size")
    )]
    pub leak_per_generation: ByteSize,
    /// Where the leaked bytes live.
    pub leak_on: Place,

    /// Whether closing a session also deletes the engine's conversation. `false` models a
    /// binding layer whose close tears down only its own state: the conversation and its KV
    /// cache stay until unload.
    pub close_deletes_conversation: bool,

    /// Caching-allocator workspace per prompt token: a generation over a prompt of `n` tokens
    /// uses a block of `bucket(n) * pool_per_token` bytes, where `bucket(n)` is `n` rounded up to
    /// a power of two (at least [`ProfileSpec::pool_min_bucket`]). The pool keeps (reserves) one
    /// block per size class it has seen until unload; it is allocated only while a generation's
    /// response lives.
    #[serde(serialize_with = "exact_bytes", deserialize_with = "size")]
    #[cfg_attr(
        feature = "schema",
        schemars(schema_with = "leakloop_units::schema::size")
    )]
    pub pool_per_token: ByteSize,
    /// The smallest size class of the pool, in tokens.
    pub pool_min_bucket: u32,
    /// Where the pool's reserved memory lives.
    pub pool_on: Place,

    /// Bytes of one prefix-cache entry, stored when a session is first sent a prompt.
    #[serde(serialize_with = "exact_bytes", deserialize_with = "size")]
    #[cfg_attr(
        feature = "schema",
        schemars(schema_with = "leakloop_units::schema::size")
    )]
    pub prefix_cache_entry: ByteSize,
    /// The most prefix-cache entries kept (oldest evicted first); absent means unbounded (no
    /// eviction: one entry per unique session, forever).
    pub prefix_cache_capacity: Option<u32>,
    /// Where the prefix cache lives.
    pub prefix_cache_on: Place,

    /// Measurement noise.
    pub noise: NoiseSpec,
    /// How long the engine's calls take on the virtual clock.
    pub timing: TimingSpec,
}

impl Default for ProfileSpec {
    fn default() -> Self {
        Self {
            description: String::new(),
            reference_max_tokens: 4096,
            weights: ByteSize(0),
            process_private: ByteSize(0),
            shared_pages: ByteSize(0),
            native_base: ByteSize(0),
            gpu_base: ByteSize(0),
            context: ByteSize(0),
            context_scaled: ByteSize(0),
            context_on: Place::Gpu,
            kv_cache: ByteSize(0),
            kv_cache_on: Place::Native,
            activations: ByteSize(0),
            activations_on: Place::Native,
            leak_per_generation: ByteSize(0),
            leak_on: Place::Native,
            close_deletes_conversation: true,
            pool_per_token: ByteSize(0),
            pool_min_bucket: 64,
            pool_on: Place::Gpu,
            prefix_cache_entry: ByteSize(0),
            prefix_cache_capacity: None,
            prefix_cache_on: Place::Native,
            noise: NoiseSpec::default(),
            timing: TimingSpec::default(),
        }
    }
}

/// Seeded measurement noise, added to each sample (never retained).
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
#[cfg_attr(feature = "schema", schemars(rename = "sim_noise"))]
pub struct NoiseSpec {
    /// Native heap jitter: uniform within plus or minus this many bytes.
    #[serde(serialize_with = "exact_bytes", deserialize_with = "size")]
    #[cfg_attr(
        feature = "schema",
        schemars(schema_with = "leakloop_units::schema::size")
    )]
    pub native: ByteSize,
    /// GPU memory jitter: uniform within plus or minus this many bytes.
    #[serde(serialize_with = "exact_bytes", deserialize_with = "size")]
    #[cfg_attr(
        feature = "schema",
        schemars(schema_with = "leakloop_units::schema::size")
    )]
    pub gpu: ByteSize,
    /// Jitter of the rest of the process (counted in `rss` and `pss` only).
    #[serde(serialize_with = "exact_bytes", deserialize_with = "size")]
    #[cfg_attr(
        feature = "schema",
        schemars(schema_with = "leakloop_units::schema::size")
    )]
    pub process: ByteSize,
    /// Chance (0 to 1) that a sample catches a transient native spike.
    pub spike_probability: f64,
    /// Size of a transient spike.
    #[serde(serialize_with = "exact_bytes", deserialize_with = "size")]
    #[cfg_attr(
        feature = "schema",
        schemars(schema_with = "leakloop_units::schema::size")
    )]
    pub spike: ByteSize,
}

impl Default for NoiseSpec {
    fn default() -> Self {
        Self {
            native: ByteSize(0),
            gpu: ByteSize(0),
            process: ByteSize(0),
            spike_probability: 0.0,
            spike: ByteSize(0),
        }
    }
}

/// How long each engine call takes on the virtual clock (written as `3s`, `40ms`, `900us`).
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
#[cfg_attr(feature = "schema", schemars(rename = "sim_timing"))]
pub struct TimingSpec {
    /// Loading the engine.
    #[serde(
        serialize_with = "leakloop_units::serde::serialize_duration",
        deserialize_with = "leakloop_units::serde::duration"
    )]
    #[cfg_attr(
        feature = "schema",
        schemars(schema_with = "leakloop_units::schema::duration")
    )]
    pub load: Duration,
    /// Building the engine context on the first inference after a load.
    #[serde(
        serialize_with = "leakloop_units::serde::serialize_duration",
        deserialize_with = "leakloop_units::serde::duration"
    )]
    #[cfg_attr(
        feature = "schema",
        schemars(schema_with = "leakloop_units::schema::duration")
    )]
    pub first_inference: Duration,
    /// Opening a session.
    #[serde(
        serialize_with = "leakloop_units::serde::serialize_duration",
        deserialize_with = "leakloop_units::serde::duration"
    )]
    #[cfg_attr(
        feature = "schema",
        schemars(schema_with = "leakloop_units::schema::duration")
    )]
    pub open: Duration,
    /// Prefill, per prompt token.
    #[serde(
        serialize_with = "leakloop_units::serde::serialize_duration",
        deserialize_with = "leakloop_units::serde::duration"
    )]
    #[cfg_attr(
        feature = "schema",
        schemars(schema_with = "leakloop_units::schema::duration")
    )]
    pub prefill_per_token: Duration,
    /// Decode, per generated token.
    #[serde(
        serialize_with = "leakloop_units::serde::serialize_duration",
        deserialize_with = "leakloop_units::serde::duration"
    )]
    #[cfg_attr(
        feature = "schema",
        schemars(schema_with = "leakloop_units::schema::duration")
    )]
    pub decode_per_token: Duration,
    /// Closing a session.
    #[serde(
        serialize_with = "leakloop_units::serde::serialize_duration",
        deserialize_with = "leakloop_units::serde::duration"
    )]
    #[cfg_attr(
        feature = "schema",
        schemars(schema_with = "leakloop_units::schema::duration")
    )]
    pub close: Duration,
    /// Extra time each generation takes for every generation before it since the load: the
    /// n-th generation after a load takes `n - 1` times this on top of its decode time (a
    /// list or cache the engine scans on every call and never trims; latency creep).
    #[serde(
        serialize_with = "leakloop_units::serde::serialize_duration",
        deserialize_with = "leakloop_units::serde::duration"
    )]
    #[cfg_attr(
        feature = "schema",
        schemars(schema_with = "leakloop_units::schema::duration")
    )]
    pub slowdown_per_generation: Duration,
    /// Unloading the engine.
    #[serde(
        serialize_with = "leakloop_units::serde::serialize_duration",
        deserialize_with = "leakloop_units::serde::duration"
    )]
    #[cfg_attr(
        feature = "schema",
        schemars(schema_with = "leakloop_units::schema::duration")
    )]
    pub unload: Duration,
}

impl Default for TimingSpec {
    fn default() -> Self {
        Self {
            load: Duration::from_secs(1),
            first_inference: Duration::from_millis(500),
            open: Duration::from_millis(10),
            prefill_per_token: Duration::from_millis(1),
            decode_per_token: Duration::from_millis(20),
            close: Duration::from_millis(5),
            slowdown_per_generation: Duration::ZERO,
            unload: Duration::from_millis(200),
        }
    }
}

/// Reads a size with the one parser the scenario DSL uses (`leakloop-units`): whole bytes or
/// `110MiB`, `1.5GB`; `5Mib` is an error with a suggestion, as it is everywhere else.
fn size<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<ByteSize, D::Error> {
    leakloop_units::serde::size(deserializer).map(ByteSize)
}

/// Writes a size as its exact byte count, so that a profile survives a JSON round trip
/// (`ByteSize`'s own human-readable form rounds).
fn exact_bytes<S: Serializer>(size: &ByteSize, serializer: S) -> Result<S::Ok, S::Error> {
    serializer.serialize_u64(size.as_u64())
}

/// A profile that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("sim profile `{profile}`: field `{field}`: {problem}")]
pub struct ProfileError {
    /// The profile's name.
    pub profile: String,
    /// The offending field.
    pub field: &'static str,
    /// What is wrong with it.
    pub problem: String,
}

/// The largest size any one component may have (guards against typos such as `110TiB`).
pub const MAX_COMPONENT_BYTES: u64 = 1 << 40;

/// A validated profile and its name.
#[derive(Debug, Clone, PartialEq)]
pub struct Profile {
    name: String,
    spec: ProfileSpec,
}

impl Profile {
    /// A built-in profile by name (see [`crate::BUILTIN_PROFILES`]).
    pub fn builtin(name: &str) -> Option<Profile> {
        builtin::spec(name).map(|spec| Profile {
            name: name.to_owned(),
            spec,
        })
    }

    /// Validates a spec (e.g. one written inline in a scenario) and names it.
    pub fn from_spec(name: impl Into<String>, spec: ProfileSpec) -> Result<Profile, ProfileError> {
        let name = name.into();
        validate(&name, &spec)?;
        Ok(Profile { name, spec })
    }

    /// The profile's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The profile's components.
    pub fn spec(&self) -> &ProfileSpec {
        &self.spec
    }
}

fn validate(name: &str, spec: &ProfileSpec) -> Result<(), ProfileError> {
    let err = |field: &'static str, problem: String| ProfileError {
        profile: name.to_owned(),
        field,
        problem,
    };
    if spec.reference_max_tokens == 0 {
        return Err(err("reference_max_tokens", "must be at least 1".into()));
    }
    if spec.pool_min_bucket == 0 {
        return Err(err("pool_min_bucket", "must be at least 1".into()));
    }
    let p = spec.noise.spike_probability;
    if !(0.0..=1.0).contains(&p) {
        return Err(err(
            "noise.spike_probability",
            format!("{p} is not a probability between 0 and 1"),
        ));
    }
    let sizes = [
        ("weights", spec.weights),
        ("process_private", spec.process_private),
        ("shared_pages", spec.shared_pages),
        ("native_base", spec.native_base),
        ("gpu_base", spec.gpu_base),
        ("context", spec.context),
        ("context_scaled", spec.context_scaled),
        ("kv_cache", spec.kv_cache),
        ("activations", spec.activations),
        ("leak_per_generation", spec.leak_per_generation),
        ("pool_per_token", spec.pool_per_token),
        ("prefix_cache_entry", spec.prefix_cache_entry),
        ("noise.native", spec.noise.native),
        ("noise.gpu", spec.noise.gpu),
        ("noise.process", spec.noise.process),
        ("noise.spike", spec.noise.spike),
    ];
    for (field, size) in sizes {
        if size.as_u64() > MAX_COMPONENT_BYTES {
            return Err(err(
                field,
                format!(
                    "{} bytes is more than the {} bytes (1 TiB) a component may hold",
                    size.as_u64(),
                    MAX_COMPONENT_BYTES
                ),
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;

    #[test]
    fn empty_inline_profile_is_all_zero_with_documented_defaults() {
        let spec: ProfileSpec = serde_yaml::from_str("{}").unwrap();
        assert_eq!(spec, ProfileSpec::default());
        assert_eq!(spec.reference_max_tokens, 4096);
        assert!(spec.close_deletes_conversation);
    }

    #[rstest]
    #[case::binary_units("110MiB", 110 << 20)]
    #[case::decimal_units("1.5GB", 1_500_000_000)]
    #[case::spaced("64 KiB", 64 << 10)]
    #[case::plain_integer("4096", 4096)]
    fn sizes_accept_units(#[case] text: &str, #[case] bytes: u64) {
        let spec: ProfileSpec =
            serde_yaml::from_str(&format!("leak_per_generation: {text}")).unwrap();
        assert_eq!(spec.leak_per_generation.as_u64(), bytes);
    }

    #[test]
    fn unknown_field_is_rejected_and_named() {
        let err = serde_yaml::from_str::<ProfileSpec>("leak_per_turn: 110MiB").unwrap_err();
        let text = err.to_string();
        assert!(text.contains("unknown field `leak_per_turn`"), "{text}");
        assert!(text.contains("leak_per_generation"), "{text}");
    }

    #[test]
    fn nested_sections_parse_durations_and_reject_unknown_keys() {
        let spec: ProfileSpec = serde_yaml::from_str(
            "timing: {decode_per_token: 900us, load: 3s}\nnoise: {native: 2MiB}",
        )
        .unwrap();
        assert_eq!(spec.timing.decode_per_token, Duration::from_micros(900));
        assert_eq!(spec.timing.load, Duration::from_secs(3));
        assert_eq!(spec.timing.open, TimingSpec::default().open);
        assert_eq!(spec.noise.native, ByteSize::mib(2));
        assert!(serde_yaml::from_str::<ProfileSpec>("noise: {jitter: 1MiB}").is_err());
    }

    #[test]
    fn json_round_trip_is_exact() {
        let spec = Profile::builtin("android-opencl-leak")
            .unwrap()
            .spec()
            .clone();
        let json = serde_json::to_string(&spec).unwrap();
        let back: ProfileSpec = serde_json::from_str(&json).unwrap();
        assert_eq!(back, spec);
    }

    /// Regression: profiles were read by `bytesize` and `humantime`, which took `5Mib` (as
    /// 5 MiB), `5m` (as 5 MB) and `0.5B`, while the DSL refuses `5Mib` with a suggestion. Now the
    /// DSL's parser reads them.
    #[rstest]
    #[case::bits("weights: 5Mib", "unknown size unit `Mib`")]
    #[case::minutes_as_size("weights: 5m", "unknown size unit `m`")]
    #[case::half_a_byte("weights: 0.5B", "a size in bytes is a whole number")]
    #[case::lowercase("noise: {native: 1mib}", "unknown size unit `mib`")]
    #[case::terabytes("weights: 2TiB", "unknown size unit `TiB`")]
    #[case::compound_duration("timing: {load: 1min 30s}", "unknown duration unit `min 30s`")]
    #[case::hours("timing: {load: 1h}", "unknown duration unit `h`")]
    fn units_the_dsl_refuses_are_refused(#[case] yaml: &str, #[case] message: &str) {
        let err = serde_yaml::from_str::<ProfileSpec>(yaml).unwrap_err();
        assert!(err.to_string().contains(message), "{err}");
    }

    #[test]
    fn durations_take_the_dsl_units_and_microseconds() {
        let spec: ProfileSpec =
            serde_yaml::from_str("timing: {load: 1.5s, open: 900us, close: 0}").unwrap();
        assert_eq!(spec.timing.load, Duration::from_millis(1500));
        assert_eq!(spec.timing.open, Duration::from_micros(900));
        assert_eq!(spec.timing.close, Duration::ZERO);
    }

    #[rstest]
    #[case::zero_reference("reference_max_tokens: 0", "reference_max_tokens")]
    #[case::zero_bucket("pool_min_bucket: 0", "pool_min_bucket")]
    #[case::probability("noise: {spike_probability: 1.5}", "noise.spike_probability")]
    #[case::huge("weights: 2000GiB", "weights")]
    fn invalid_specs_name_the_field(#[case] yaml: &str, #[case] field: &str) {
        let spec: ProfileSpec = serde_yaml::from_str(yaml).unwrap();
        let err = Profile::from_spec("mine", spec).unwrap_err();
        assert_eq!(err.field, field);
        assert!(
            err.to_string().starts_with("sim profile `mine`: field"),
            "{err}"
        );
    }
}
