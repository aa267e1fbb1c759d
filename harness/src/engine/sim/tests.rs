//! The adapter reproduces each profile's numbers through the `Engine` trait, maps faults to the
//! right error kinds, and its real-allocation mode is seen by the process probes.

use std::collections::BTreeMap;
use std::time::Duration;

use rstest::rstest;
use sim_backend::ProfileSpec;

use super::*;
use crate::engine::build_engine;
use crate::probe::{native_heap_bytes, probe_process};
use crate::scenario::{EngineSpec, Fault, PromptSpec, SIM_PROFILES};

const KIB: u64 = 1 << 10;
const MIB: u64 = 1 << 20;
/// The android profile's native-heap noise amplitude.
const NATIVE_NOISE: u64 = 1536 * KIB;

fn scenario(profile: &str) -> Scenario {
    Scenario::new(
        "sim-test",
        EngineSpec::sim(profile),
        12,
        vec![
            Step::Open(SessionOptions::default()),
            Step::Send(PromptSpec::Text("Summarize the notes.".into())),
            Step::Generate {
                max_output_tokens: 64,
            },
            Step::Close,
            Step::Idle(Duration::from_secs(8)),
        ],
    )
}

fn prompt() -> Prompt {
    Prompt {
        text: "Summarize the notes.".into(),
        tokens: 3,
    }
}

const GENERATE: GenerateRequest = GenerateRequest {
    max_output_tokens: 64,
    cancel_after_tokens: None,
};

/// One field-style turn through the trait; returns the engine's metrics after close.
fn turn(engine: &mut dyn Engine, n: u32) -> BTreeMap<String, u64> {
    let session = engine.open_session(n, &SessionOptions::default()).unwrap();
    engine.send(session, &prompt()).unwrap();
    engine.generate(session, &GENERATE).unwrap();
    engine.close_session(session).unwrap();
    engine.idle(Duration::from_secs(8));
    engine.snapshot().unwrap().metrics
}

fn within(actual: u64, expected: u64, slack: u64) -> bool {
    actual.abs_diff(expected) <= slack
}

#[test]
fn the_factory_builds_the_simulator() {
    let engine = build_engine(&scenario("cpu-flat")).unwrap();
    let info = engine.describe();
    assert_eq!(info.backend, "sim");
    assert_eq!(
        info.version,
        format!("sim-backend {}", sim_backend::VERSION)
    );
    assert_eq!(info.details["profile"], "cpu-flat");
    assert_eq!(info.details["profile_source"], "built-in");
}

#[test]
fn android_opencl_leak_reproduces_the_field_numbers() {
    let mut engine = SimEngine::from_scenario(&scenario("android-opencl-leak")).unwrap();
    engine.load().unwrap();
    let at_load = engine.snapshot().unwrap().metrics;
    assert!(within(at_load["native_heap"], 127_200 * KIB, NATIVE_NOISE));
    assert!(within(at_load["gpu"], 59_944 * KIB, 256 * KIB));
    assert!(within(at_load["pss"], 705_053 * KIB, 4 * MIB));
    for n in 1..=6u32 {
        let rest = turn(&mut engine, n);
        let expected = 127_200 * KIB + u64::from(n) * 110 * MIB;
        assert!(
            within(rest["native_heap"], expected, NATIVE_NOISE),
            "turn {n}: {} vs {expected}",
            rest["native_heap"]
        );
        assert!(within(rest["gpu"], 1_767_024 * KIB, 256 * KIB), "turn {n}");
    }
    engine.unload().unwrap();
    engine.load().unwrap();
    let reloaded = engine.snapshot().unwrap().metrics;
    assert!(within(reloaded["gpu"], 59_944 * KIB, 256 * KIB));
    assert!(within(reloaded["native_heap"], 127_200 * KIB, NATIVE_NOISE));
    let ledger = engine.snapshot().unwrap().ledger;
    assert_eq!(ledger["conversation"].live(), 0);
    assert_eq!(ledger["gpu_context"].created, 1);
    assert_eq!(ledger["gpu_context"].deleted, 1);
}

#[rstest]
#[case::cpu("cpu-flat")]
#[case::metal("metal-flat")]
fn flat_profiles_stay_within_noise_after_the_first_turn(#[case] profile: &str) {
    let mut engine = SimEngine::from_scenario(&scenario(profile)).unwrap();
    engine.load().unwrap();
    let first = turn(&mut engine, 1);
    for n in 2..=12 {
        let rest = turn(&mut engine, n);
        assert!(
            within(rest["native_heap"], first["native_heap"], 2 * MIB),
            "turn {n}"
        );
        assert!(within(rest["gpu"], first["gpu"], 512 * KIB), "turn {n}");
    }
}

#[test]
fn forgets_delete_shows_as_an_unbalanced_conversation() {
    let mut engine = SimEngine::from_scenario(&scenario("forgets-delete")).unwrap();
    engine.load().unwrap();
    let at_load = engine.snapshot().unwrap().metrics;
    let mut rest = at_load.clone();
    for n in 1..=12 {
        rest = turn(&mut engine, n);
    }
    let ledger = engine.snapshot().unwrap().ledger;
    assert_eq!(ledger["conversation"].created, 12);
    assert_eq!(ledger["conversation"].deleted, 0);
    assert_eq!(ledger["session"].live(), 0);
    let grown = rest["native_heap"] - at_load["native_heap"];
    assert!(within(grown, 12 * 48 * MIB, 2 * NATIVE_NOISE), "{grown}");
}

fn noisy_series(seed: u64) -> Vec<BTreeMap<String, u64>> {
    let mut s = scenario("android-opencl-leak");
    s.seed = seed;
    let mut engine = SimEngine::from_scenario(&s).unwrap();
    engine.load().unwrap();
    (1..=8).map(|n| turn(&mut engine, n)).collect()
}

#[test]
fn same_seed_identical_metrics_different_seed_different_noise() {
    assert_eq!(noisy_series(42), noisy_series(42));
    assert_ne!(noisy_series(42), noisy_series(43));
}

#[test]
fn the_virtual_clock_counts_work_and_idle() {
    let mut engine = SimEngine::from_scenario(&scenario("android-opencl-leak")).unwrap();
    assert_eq!(engine.simulated_clock_ms(), Some(0.0));
    engine.load().unwrap();
    turn(&mut engine, 1);
    // load 3 s + open 20 ms + prefill 3 x 2 ms + first inference 1.5 s + decode 64 x 40 ms
    // + close 5 ms + idle 8 s.
    assert_eq!(
        engine.simulated_clock_ms(),
        Some(3000.0 + 20.0 + 6.0 + 1500.0 + 2560.0 + 5.0 + 8000.0)
    );
}

fn faulty(kind: FaultKind) -> SimEngine {
    let mut s = scenario("android-opencl-leak");
    s.faults = vec![Fault { at_turn: 2, kind }];
    let mut engine = SimEngine::from_scenario(&s).unwrap();
    engine.load().unwrap();
    turn(&mut engine, 1);
    engine
}

fn generate_in_turn_2(engine: &mut SimEngine) -> (SessionId, EngineError) {
    let session = engine.open_session(2, &SessionOptions::default()).unwrap();
    engine.send(session, &prompt()).unwrap();
    (session, engine.generate(session, &GENERATE).unwrap_err())
}

#[test]
fn a_crash_fault_is_a_fatal_crashed_error_and_the_engine_stays_dead() {
    let mut engine = faulty(FaultKind::Crash);
    let (session, err) = generate_in_turn_2(&mut engine);
    match &err.kind {
        EngineErrorKind::Crashed { how } => assert!(how.starts_with("simulated crash"), "{how}"),
        other => panic!("{other:?}"),
    }
    assert!(err.kind.is_fatal());
    assert!(err.message.contains("turn 2"), "{}", err.message);
    let close = engine.close_session(session).unwrap_err();
    assert!(matches!(close.kind, EngineErrorKind::Crashed { .. }));
    assert!(engine.snapshot().is_err());
}

#[test]
fn a_hang_fault_waits_the_call_timeout_on_the_virtual_clock() {
    let mut engine = faulty(FaultKind::Hang);
    let before = engine.simulated_clock_ms().unwrap();
    let (_, err) = generate_in_turn_2(&mut engine);
    assert_eq!(err.kind, EngineErrorKind::Hung { waited_ms: 60_000 });
    let waited = engine.simulated_clock_ms().unwrap() - before;
    assert!(waited >= 60_000.0, "{waited}");
}

#[test]
fn a_generate_error_fault_is_recoverable() {
    let mut engine = faulty(FaultKind::GenerateError);
    let (session, err) = generate_in_turn_2(&mut engine);
    assert_eq!(err.kind, EngineErrorKind::Generate);
    assert!(!err.kind.is_fatal());
    engine.close_session(session).unwrap();
    turn(&mut engine, 3);
}

#[test]
fn skip_close_is_left_to_the_runner() {
    let mut s = scenario("cpu-flat");
    s.faults = vec![Fault {
        at_turn: 1,
        kind: FaultKind::SkipClose,
    }];
    let mut engine = SimEngine::from_scenario(&s).unwrap();
    engine.load().unwrap();
    turn(&mut engine, 1);
}

#[test]
fn an_engine_fault_in_a_turn_without_generation_is_refused() {
    let mut s = scenario("no-generation");
    s.turn.retain(|step| !matches!(step, Step::Generate { .. }));
    s.faults = vec![Fault {
        at_turn: 3,
        kind: FaultKind::Crash,
    }];
    let err = SimEngine::from_scenario(&s).unwrap_err();
    assert_eq!(err.kind, EngineErrorKind::Unavailable);
    assert!(
        err.message.contains("fault `crash` at turn 3"),
        "{}",
        err.message
    );
}

#[test]
fn misuse_reports_the_call_kind() {
    let mut engine = SimEngine::from_scenario(&scenario("cpu-flat")).unwrap();
    let err = engine
        .open_session(1, &SessionOptions::default())
        .unwrap_err();
    assert_eq!(err.kind, EngineErrorKind::Open);
    assert_eq!(err.message, "open_session: the engine is not loaded");
    engine.load().unwrap();
    let session = engine.open_session(1, &SessionOptions::default()).unwrap();
    engine.close_session(session).unwrap();
    let err = engine.generate(session, &GENERATE).unwrap_err();
    assert_eq!(err.kind, EngineErrorKind::Generate);
    assert!(err.message.contains("is closed"));
}

#[test]
fn an_inline_profile_is_used_by_name() {
    let mut s = scenario("my-phone");
    let spec: ProfileSpec = serde_yaml::from_str(
        "native_base: 100MiB\nleak_per_generation: 10MiB\nreference_max_tokens: 2048",
    )
    .unwrap();
    s.engine.inline_profiles.insert("my-phone".into(), spec);
    let mut engine = SimEngine::from_scenario(&s).unwrap();
    assert_eq!(engine.describe().details["profile_source"], "inline");
    engine.load().unwrap();
    let rest = turn(&mut engine, 1);
    // max_tokens 4096 is twice the reference: 20 MiB per generation.
    assert_eq!(rest["native_heap"], 120 * MIB);
}

#[rstest]
#[case::unknown("pixel-9", "no sim profile `pixel-9`; built-in: android-opencl-leak")]
#[case::invalid(
    "bad",
    "sim profile `bad`: field `pool_min_bucket`: must be at least 1"
)]
fn profile_errors_name_the_profile(#[case] name: &str, #[case] needle: &str) {
    let mut s = scenario(name);
    let bad = ProfileSpec {
        pool_min_bucket: 0,
        ..ProfileSpec::default()
    };
    s.engine.inline_profiles.insert("bad".into(), bad);
    let err = SimEngine::from_scenario(&s).unwrap_err();
    assert_eq!(err.kind, EngineErrorKind::Unavailable);
    assert!(err.message.contains(needle), "{}", err.message);
}

#[test]
fn a_missing_profile_lists_the_built_in_ones() {
    let mut s = scenario("cpu-flat");
    s.engine.profile = None;
    let err = SimEngine::from_scenario(&s).unwrap_err();
    assert!(
        err.message.contains("needs `engine.profile`"),
        "{}",
        err.message
    );
    assert!(err.message.contains("forgets-delete"), "{}", err.message);
}

/// Median of the differences between consecutive values (robust to a few samples disturbed by
/// other tests allocating in this process at the same time).
fn median_step(series: &[u64]) -> i64 {
    let mut steps: Vec<i64> = series
        .windows(2)
        .map(|w| w[1] as i64 - w[0] as i64)
        .collect();
    steps.sort_unstable();
    steps[steps.len() / 2]
}

/// Runs 9 turns on a profile whose native heap really is allocated (divided by 64) and returns
/// the per-turn median growth seen by the process probes: (glibc heap in use, RSS).
fn probed_growth(spec: &str) -> (i64, i64) {
    let mut s = scenario("probe-truth");
    s.engine
        .inline_profiles
        .insert("probe-truth".into(), serde_yaml::from_str(spec).unwrap());
    let mut engine = SimEngine::with_real_allocation(&s, 64).unwrap();
    engine.load().unwrap();
    let pid = std::process::id();
    let mut heap = vec![native_heap_bytes().unwrap()];
    let mut rss = vec![probe_process(pid).unwrap()["rss"]];
    for n in 1..=9 {
        turn(&mut engine, n);
        heap.push(native_heap_bytes().unwrap());
        rss.push(probe_process(pid).unwrap()["rss"]);
    }
    let simulated = engine.simulator().exact_metrics()["native_heap"];
    let held = engine.simulator().real_heap_bytes().unwrap();
    assert!(simulated / 64 - held < 64, "{simulated} / 64 vs {held}");
    (median_step(&heap), median_step(&rss))
}

/// Set in the fresh process that runs the real-allocation check.
const PROBE_CHILD_ENV: &str = "LEAKLOOP_SIM_PROBE_CHILD";

/// Runs the real-allocation check alone in a fresh copy of this test binary: RSS is process-wide,
/// and tests running in parallel threads of this process would add their own pages to it.
fn run_probe_check_in_child() {
    crate::test_util::run_alone_in_child(
        "engine::sim::tests::real_allocation_probe_check",
        PROBE_CHILD_ENV,
    );
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[test]
fn real_allocation_mode_is_seen_by_the_process_probes() {
    run_probe_check_in_child();
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[test]
#[ignore = "runs alone in a fresh process, started by real_allocation_mode_is_seen_by_the_process_probes"]
fn real_allocation_probe_check() {
    if std::env::var_os(PROBE_CHILD_ENV).is_none() {
        return run_probe_check_in_child();
    }
    // Leaky: 640 MiB simulated per generation = 10 MiB real per turn, kept.
    let (heap, rss) =
        probed_growth("native_base: 64MiB\nleak_per_generation: 640MiB\nleak_on: native");
    let per_turn = 10 * MIB as i64;
    let slack = 3 * MIB as i64;
    assert!((heap - per_turn).abs() <= slack, "heap grew {heap} B/turn");
    assert!((rss - per_turn).abs() <= slack, "rss grew {rss} B/turn");
    // Flat: the same bytes as activations, freed at every close.
    let (heap, rss) =
        probed_growth("native_base: 64MiB\nactivations: 640MiB\nactivations_on: native");
    assert!(heap.abs() <= slack, "heap grew {heap} B/turn");
    assert!(rss.abs() <= slack, "rss grew {rss} B/turn");
}

/// The scenario fixtures, read as plain YAML: the DSL validates them fully; this pins what the
/// simulator owns in them.
fn fixtures() -> Vec<(String, serde_yaml::Value, String)> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/scenarios");
    let mut out = Vec::new();
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "yaml") {
            let text = std::fs::read_to_string(&path).unwrap();
            let value =
                serde_yaml::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            let name = path.file_stem().unwrap().to_string_lossy().into_owned();
            out.push((name, value, text));
        }
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

#[test]
fn every_sim_fixture_names_a_profile_that_exists_and_says_what_it_expects() {
    let fixtures = fixtures();
    assert!(fixtures.len() >= 13, "{} fixtures", fixtures.len());
    for (file, value, text) in fixtures {
        if value["engine"]["backend"].as_str() != Some("sim") {
            continue;
        }
        assert_eq!(value["name"].as_str(), Some(file.as_str()), "{file}: name");
        let header: String = text.lines().take_while(|l| l.starts_with('#')).collect();
        assert!(
            ["(exit 0)", "(exit 1)", "(exit 3)", "(exit 5)"]
                .iter()
                .any(|code| header.contains(code)),
            "{file}: the header comment must state the expected exit code"
        );
        let profile = value["engine"]["profile"].as_str().unwrap();
        match value["profiles"].get(profile) {
            Some(inline) => {
                let spec: ProfileSpec = serde_yaml::from_value(inline.clone())
                    .unwrap_or_else(|e| panic!("{file}: profiles.{profile}: {e}"));
                sim_backend::Profile::from_spec(profile, spec).unwrap();
            }
            None => assert!(SIM_PROFILES.contains(&profile), "{file}: {profile}"),
        }
    }
}
