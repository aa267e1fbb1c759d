//! Each built-in profile reproduces its numbers; misuse and faults fail the way they should.

use rstest::rstest;

use super::*;
use crate::faults::SimFault;

const KIB: u64 = 1 << 10;
const MIB: u64 = 1 << 20;

fn engine(profile: &str, config: SimConfig) -> SimEngine {
    SimEngine::new(Profile::builtin(profile).unwrap(), config).unwrap()
}

/// One field-style turn (open, send, generate, close); returns the exact metrics after generate.
fn turn(engine: &mut SimEngine, n: u32, prompt_tokens: u32) -> BTreeMap<String, u64> {
    let session = engine.open_session(n).unwrap();
    engine.send(session, prompt_tokens).unwrap();
    engine.generate(session, 64, None).unwrap();
    let peak = engine.exact_metrics();
    engine.close_session(session).unwrap();
    peak
}

fn open_close(engine: &mut SimEngine, n: u32) {
    let session = engine.open_session(n).unwrap();
    engine.send(session, 12).unwrap();
    engine.close_session(session).unwrap();
}

#[test]
fn reports_exactly_the_registry_metrics_the_simulator_provides() {
    let mut e = engine("android-opencl-leak", SimConfig::default());
    e.load().unwrap();
    let reported: Vec<String> = e.metrics().into_keys().collect();
    let mut registered: Vec<String> = metric_names().map(str::to_owned).collect();
    registered.sort();
    assert_eq!(reported, registered);
}

#[test]
fn android_load_matches_the_field_report() {
    let mut e = engine("android-opencl-leak", SimConfig::default());
    e.load().unwrap();
    let m = e.exact_metrics();
    assert_eq!(m["pss"], 705_053 * KIB);
    assert_eq!(m["rss"], 794_324 * KIB);
    assert_eq!(m["native_heap"], 127_200 * KIB);
    assert_eq!(m["gpu"], 59_944 * KIB);
}

#[test]
fn android_native_heap_ratchets_110_mib_per_turn_and_gpu_context_stays() {
    let mut e = engine("android-opencl-leak", SimConfig::default());
    e.load().unwrap();
    for n in 1..=6 {
        let peak = turn(&mut e, n, 12);
        let rest = e.exact_metrics();
        assert_eq!(
            rest["native_heap"],
            127_200 * KIB + u64::from(n) * 110 * MIB
        );
        assert_eq!(rest["gpu"], 1_767_024 * KIB, "turn {n}");
        assert_eq!(peak["gpu"] - rest["gpu"], (2_220_388 - 1_767_024) * KIB);
    }
    let ledger = e.ledger();
    assert_eq!(
        ledger["gpu_context"],
        Counts {
            created: 1,
            deleted: 0
        }
    );
    assert_eq!(
        ledger["conversation"],
        Counts {
            created: 6,
            deleted: 6
        }
    );
    assert_eq!(
        ledger["response"],
        Counts {
            created: 6,
            deleted: 6
        }
    );
}

#[test]
fn unload_returns_everything_and_a_reload_starts_from_the_load_baseline() {
    let mut e = engine("android-opencl-leak", SimConfig::default());
    e.load().unwrap();
    let at_load = e.exact_metrics();
    for n in 1..=3 {
        turn(&mut e, n, 12);
    }
    e.unload().unwrap();
    let unloaded = e.exact_metrics();
    assert_eq!(unloaded["native_heap"], 0);
    assert_eq!(unloaded["gpu"], 0);
    e.load().unwrap();
    assert_eq!(e.exact_metrics(), at_load);
    let ledger = e.ledger();
    assert_eq!(
        ledger["engine"],
        Counts {
            created: 2,
            deleted: 1
        }
    );
    assert_eq!(
        ledger["gpu_context"],
        Counts {
            created: 1,
            deleted: 1
        }
    );
}

#[rstest]
#[case::quarter(1024, 110 * MIB / 4, 512 * MIB / 4)]
#[case::half(2048, 110 * MIB / 2, 512 * MIB / 2)]
#[case::reference(4096, 110 * MIB, 512 * MIB)]
fn smaller_max_tokens_shrinks_per_turn_and_resident_cost(
    #[case] max_tokens: u32,
    #[case] per_turn: u64,
    #[case] context_scaled: u64,
) {
    let mut e = engine(
        "android-opencl-leak",
        SimConfig {
            max_tokens,
            ..SimConfig::default()
        },
    );
    e.load().unwrap();
    let base = e.exact_metrics();
    turn(&mut e, 1, 12);
    turn(&mut e, 2, 12);
    let rest = e.exact_metrics();
    assert_eq!(rest["native_heap"] - base["native_heap"], 2 * per_turn);
    let fixed_context = (1_767_024 - 59_944) * KIB - 512 * MIB;
    assert_eq!(rest["gpu"] - base["gpu"], fixed_context + context_scaled);
}

#[rstest]
#[case::cpu("cpu-flat")]
#[case::metal("metal-flat")]
fn flat_profiles_rest_at_the_same_footprint_after_the_first_turn(#[case] profile: &str) {
    let mut e = engine(profile, SimConfig::default());
    e.load().unwrap();
    turn(&mut e, 1, 12);
    let after_first = e.exact_metrics();
    for n in 2..=12 {
        let peak = turn(&mut e, n, 12);
        assert!(peak["pss"] > after_first["pss"], "a turn has a peak");
        assert_eq!(e.exact_metrics(), after_first, "{profile} turn {n}");
    }
    let ledger = e.ledger();
    for kind in ["session", "conversation", "response"] {
        assert_eq!(
            ledger[kind],
            Counts {
                created: 12,
                deleted: 12
            },
            "{kind}"
        );
    }
}

#[test]
fn cpu_flat_has_no_gpu_context() {
    let mut e = engine("cpu-flat", SimConfig::default());
    e.load().unwrap();
    let at_load = e.exact_metrics();
    turn(&mut e, 1, 12);
    assert_eq!(e.exact_metrics()["gpu"], at_load["gpu"]);
    assert_eq!(
        e.exact_metrics()["native_heap"] - at_load["native_heap"],
        64 * MIB
    );
    assert!(e.ledger().contains_key("engine_context"));
}

#[rstest]
#[case::no_generation("no-generation")]
#[case::android_without_generate("android-opencl-leak")]
fn open_close_without_generating_stays_at_the_load_footprint(#[case] profile: &str) {
    let mut e = engine(profile, SimConfig::default());
    e.load().unwrap();
    let at_load = e.exact_metrics();
    for n in 1..=12 {
        open_close(&mut e, n);
        assert_eq!(e.exact_metrics(), at_load, "turn {n}");
    }
}

#[test]
fn allocator_pool_reserves_per_new_shape_then_plateaus_and_frees_allocated_on_close() {
    let mut e = engine("allocator-warmup", SimConfig::default());
    e.load().unwrap();
    let shapes = [64, 128, 256, 512, 1024];
    let mut reserved = Vec::new();
    for n in 1..=15u32 {
        let peak = turn(&mut e, n, shapes[(n as usize - 1) % shapes.len()]);
        assert!(peak["pool_allocated"] > 0);
        let rest = e.exact_metrics();
        assert_eq!(rest["pool_allocated"], 0);
        reserved.push(rest["pool_reserved"]);
    }
    // 64..1024 tokens at 256 KiB/token: 16 + 32 + 64 + 128 + 256 MiB.
    assert_eq!(reserved[4], 496 * MIB);
    assert!(reserved[..5].windows(2).all(|w| w[1] > w[0]));
    assert!(reserved[4..].iter().all(|r| *r == 496 * MIB));
}

#[test]
fn unbounded_prefix_cache_grows_with_every_session_and_a_bounded_one_plateaus() {
    let mut unbounded = engine("prefix-cache-unbounded", SimConfig::default());
    unbounded.load().unwrap();
    let base = unbounded.exact_metrics()["native_heap"];
    for n in 1..=10 {
        turn(&mut unbounded, n, 12);
        assert_eq!(
            unbounded.exact_metrics()["native_heap"],
            base + u64::from(n) * 8 * MIB
        );
    }
    let mut spec = Profile::builtin("prefix-cache-unbounded")
        .unwrap()
        .spec()
        .clone();
    spec.prefix_cache_capacity = Some(3);
    let bounded = Profile::from_spec("bounded", spec).unwrap();
    let mut bounded = SimEngine::new(bounded, SimConfig::default()).unwrap();
    bounded.load().unwrap();
    for n in 1..=10 {
        turn(&mut bounded, n, 12);
    }
    assert_eq!(bounded.exact_metrics()["native_heap"], base + 3 * 8 * MIB);
}

#[test]
fn a_named_session_opened_again_finds_its_prefix_entry_and_eviction_is_least_recently_used() {
    let mut spec = Profile::builtin("prefix-cache-unbounded")
        .unwrap()
        .spec()
        .clone();
    spec.prefix_cache_capacity = Some(2);
    let mut e = SimEngine::new(
        Profile::from_spec("bounded", spec).unwrap(),
        SimConfig::default(),
    )
    .unwrap();
    e.load().unwrap();
    let base = e.exact_metrics()["native_heap"];
    let named = |e: &mut SimEngine, n: u32, name: &str| {
        let session = e.open_named_session(n, Some(name)).unwrap();
        e.send(session, 12).unwrap();
        e.send(session, 12).unwrap();
        e.close_session(session).unwrap();
        (e.exact_metrics()["native_heap"] - base) / MIB
    };
    assert_eq!(named(&mut e, 1, "a"), 8);
    assert_eq!(named(&mut e, 2, "a"), 8, "a hit stores nothing");
    assert_eq!(named(&mut e, 3, "b"), 16);
    // `a` was used before `b`, but hitting it again makes `b` the one evicted by `c`.
    assert_eq!(named(&mut e, 4, "a"), 16);
    assert_eq!(named(&mut e, 5, "c"), 16);
    assert_eq!(named(&mut e, 6, "a"), 16, "`a` is still cached");
    assert_eq!(
        named(&mut e, 7, "b"),
        16,
        "`b` was evicted: stored again, evicting `c`"
    );
    assert_eq!(named(&mut e, 8, "a"), 16);
    // Unnamed sessions are each new, as before.
    e.open_session(9).map(|s| e.send(s, 12)).unwrap().unwrap();
    assert_eq!(e.prefix_entries.len(), 2);
}

#[test]
fn forgets_delete_leaves_every_conversation_and_its_kv_cache() {
    let mut e = engine("forgets-delete", SimConfig::default());
    e.load().unwrap();
    let base = e.exact_metrics()["native_heap"];
    for n in 1..=12 {
        turn(&mut e, n, 12);
    }
    assert_eq!(e.exact_metrics()["native_heap"], base + 12 * 48 * MIB);
    let ledger = e.ledger();
    assert_eq!(
        ledger["conversation"],
        Counts {
            created: 12,
            deleted: 0
        }
    );
    assert_eq!(
        ledger["session"],
        Counts {
            created: 12,
            deleted: 12
        }
    );
    e.unload().unwrap();
    assert_eq!(e.exact_metrics()["native_heap"], 0);
    assert_eq!(e.ledger()["conversation"].deleted, 0);
}

fn noisy_run(seed: u64) -> Vec<BTreeMap<String, u64>> {
    let mut e = engine(
        "android-opencl-leak",
        SimConfig {
            seed,
            ..SimConfig::default()
        },
    );
    e.load().unwrap();
    let mut samples = vec![e.metrics()];
    for n in 1..=8 {
        turn(&mut e, n, 12);
        samples.push(e.metrics());
    }
    samples
}

#[test]
fn same_seed_gives_identical_metrics_and_another_seed_other_noise() {
    assert_eq!(noisy_run(7), noisy_run(7));
    let other = noisy_run(8);
    assert_ne!(noisy_run(7), other);
    // Noise stays within the profile's amplitude around the exact value.
    for (sample, n) in other.iter().zip(0u64..) {
        let exact = 127_200 * KIB + n * 110 * MIB;
        assert!(sample["native_heap"].abs_diff(exact) <= 1536 * KIB);
    }
}

#[test]
fn spikes_are_transient() {
    let mut spec = Profile::builtin("cpu-flat").unwrap().spec().clone();
    spec.noise = crate::NoiseSpec {
        spike_probability: 1.0,
        spike: bytesize::ByteSize::mib(300),
        ..crate::NoiseSpec::default()
    };
    let mut e = SimEngine::new(
        Profile::from_spec("spiky", spec).unwrap(),
        SimConfig::default(),
    )
    .unwrap();
    e.load().unwrap();
    let exact = e.exact_metrics()["native_heap"];
    assert_eq!(e.metrics()["native_heap"], exact + 300 * MIB);
    assert_eq!(e.exact_metrics()["native_heap"], exact);
}

fn with_fault(at_turn: u32, kind: SimFaultKind) -> SimEngine {
    let mut e = engine(
        "android-opencl-leak",
        SimConfig {
            faults: vec![SimFault { at_turn, kind }],
            ..SimConfig::default()
        },
    );
    e.load().unwrap();
    e
}

#[rstest]
#[case::crash(SimFaultKind::Crash, SimError::Crashed { turn: 3 })]
#[case::hang(SimFaultKind::Hang, SimError::Hung { turn: 3 })]
fn fatal_faults_strike_generate_at_their_turn_and_every_later_call(
    #[case] kind: SimFaultKind,
    #[case] expected: SimError,
) {
    let mut e = with_fault(3, kind);
    turn(&mut e, 1, 12);
    turn(&mut e, 2, 12);
    let session = e.open_session(3).unwrap();
    e.send(session, 12).unwrap();
    assert_eq!(e.generate(session, 64, None).unwrap_err(), expected);
    assert!(expected.is_fatal());
    assert_eq!(e.failure(), Some(expected.clone()));
    assert_eq!(e.close_session(session).unwrap_err(), expected);
    assert_eq!(e.unload().unwrap_err(), expected);
    assert_eq!(e.open_session(4).unwrap_err(), expected);
}

#[test]
fn a_generate_error_leaves_the_session_closable_and_later_turns_normal() {
    let mut e = with_fault(2, SimFaultKind::GenerateError);
    turn(&mut e, 1, 12);
    let session = e.open_session(2).unwrap();
    e.send(session, 12).unwrap();
    let err = e.generate(session, 64, None).unwrap_err();
    assert_eq!(err, SimError::GenerateFailed { turn: 2 });
    assert!(!err.is_fatal());
    assert_eq!(e.failure(), None);
    e.close_session(session).unwrap();
    // The failed generation did no native work: no leak for turn 2.
    assert_eq!(e.exact_metrics()["native_heap"], 127_200 * KIB + 110 * MIB);
    turn(&mut e, 3, 12);
    assert_eq!(
        e.ledger()["conversation"],
        Counts {
            created: 3,
            deleted: 3
        }
    );
}

#[test]
fn misuse_is_an_error_naming_the_call() {
    let mut e = engine("cpu-flat", SimConfig::default());
    assert_eq!(
        e.open_session(1).unwrap_err(),
        SimError::NotLoaded { op: "open_session" }
    );
    e.load().unwrap();
    assert_eq!(e.load().unwrap_err(), SimError::AlreadyLoaded);
    let session = e.open_session(1).unwrap();
    e.close_session(session).unwrap();
    let err = e.generate(session, 8, None).unwrap_err();
    assert_eq!(
        err,
        SimError::SessionClosed {
            op: "generate",
            session: session.0
        }
    );
    assert_eq!(err.to_string(), "generate: session 1 is closed");
    assert!(matches!(
        e.send(SessionId(99), 1).unwrap_err(),
        SimError::UnknownSession { session: 99, .. }
    ));
    let open = e.open_session(2).unwrap();
    e.unload().unwrap();
    e.load().unwrap();
    assert!(matches!(
        e.close_session(open).unwrap_err(),
        SimError::SessionClosed { .. }
    ));
}

#[test]
fn invalid_config_is_refused() {
    let profile = Profile::builtin("cpu-flat").unwrap();
    let zero = SimConfig {
        max_tokens: 0,
        ..SimConfig::default()
    };
    assert!(matches!(
        SimEngine::new(profile, zero).unwrap_err(),
        SimError::InvalidConfig(_)
    ));
}

#[test]
fn cancel_stops_early_and_still_leaves_the_leak() {
    let mut e = engine("android-opencl-leak", SimConfig::default());
    e.load().unwrap();
    let session = e.open_session(1).unwrap();
    e.send(session, 12).unwrap();
    let out = e.generate(session, 64, Some(8)).unwrap();
    assert_eq!(
        out,
        Generation {
            tokens: 8,
            cancelled: true
        }
    );
    e.close_session(session).unwrap();
    assert_eq!(e.exact_metrics()["native_heap"], 127_200 * KIB + 110 * MIB);
    let session = e.open_session(2).unwrap();
    let out = e.generate(session, 4, Some(8)).unwrap();
    assert_eq!(
        out,
        Generation {
            tokens: 4,
            cancelled: false
        }
    );
}

#[test]
fn the_clock_advances_with_work_and_idle() {
    let mut e = engine("android-opencl-leak", SimConfig::default());
    assert_eq!(e.clock_ms(), 0.0);
    e.load().unwrap();
    assert_eq!(e.clock(), Duration::from_secs(3));
    let session = e.open_session(1).unwrap();
    e.send(session, 10).unwrap();
    e.generate(session, 5, None).unwrap();
    e.close_session(session).unwrap();
    e.idle(Duration::from_secs(8));
    // load 3 s + open 20 ms + prefill 10 x 2 ms + first inference 1.5 s + decode 5 x 40 ms
    // + close 5 ms + idle 8 s.
    assert_eq!(
        e.clock(),
        Duration::from_millis(3000 + 20 + 20 + 1500 + 200 + 5 + 8000)
    );
    assert_eq!(e.clock_ms(), 12_745.0);
}

#[test]
fn real_allocation_mode_holds_the_native_heap_divided() {
    let mut e = engine(
        "android-opencl-leak",
        SimConfig {
            really_allocate: Some(64),
            ..SimConfig::default()
        },
    );
    assert_eq!(e.real_heap_bytes(), Some(0));
    e.load().unwrap();
    turn(&mut e, 1, 12);
    turn(&mut e, 2, 12);
    let native = e.exact_metrics()["native_heap"];
    let held = e.real_heap_bytes().unwrap();
    // Each block rounds down separately: at most one byte per block short.
    assert!(native / 64 - held < 8, "{native} / 64 vs {held}");
    e.unload().unwrap();
    assert_eq!(e.real_heap_bytes(), Some(0));
    assert_eq!(
        engine("cpu-flat", SimConfig::default()).real_heap_bytes(),
        None
    );
}
