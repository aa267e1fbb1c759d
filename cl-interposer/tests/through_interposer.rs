//! The reference OpenCL engine run through the built interposer: the interposer's counts must
//! agree with the engine's own bookkeeping, and each injected fault must show as the named
//! imbalance (kind, counts, bytes).
//!
//! A custom test main (no libtest): `OPENCL_DYLIB_PATH` has to be set before anything in the
//! process loads OpenCL, and before any other thread runs. Without an OpenCL platform it prints
//! `SKIPPED` (or fails under `LEAKLOOP_REQUIRE_OPENCL=1`).

use std::collections::BTreeMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::Instant;

use leakloop::engine::opencl::{
    find_interposer, kinds, opencl_available_or_skip, ClKindTotals, ClSnapshot, LoadedInterposer,
    OpenClEngine, OpenClProfile, CL_MEM_BYTES, ENGINE_BUFFER_BYTES,
};
use leakloop::engine::{Engine, EngineSnapshot, GenerateRequest, KindCounts, Ledger, Prompt};
use leakloop::scenario::SessionOptions;

const TURNS: u32 = 3;

fn interposer() -> LoadedInterposer {
    LoadedInterposer::find().expect("the interposer is loaded through OPENCL_DYLIB_PATH")
}

fn cl(snapshot: &ClSnapshot, kind: &str) -> ClKindTotals {
    snapshot.kinds.get(kind).copied().unwrap_or_default()
}

fn own(snapshot: &EngineSnapshot, kind: &str) -> KindCounts {
    snapshot.ledger.get(kind).copied().unwrap_or_default()
}

fn delta(after: ClKindTotals, before: ClKindTotals) -> (u64, u64, i64) {
    (
        after.created - before.created,
        after.released - before.released,
        after.live_bytes as i64 - before.live_bytes as i64,
    )
}

fn one_turn(engine: &mut OpenClEngine, turn: u32) {
    let id = engine
        .open_session(turn, &SessionOptions::default())
        .unwrap();
    let prompt = Prompt {
        text: String::new(),
        tokens: 6,
    };
    engine.send(id, &prompt).unwrap();
    let request = GenerateRequest {
        max_output_tokens: 3,
        cancel_after_tokens: None,
    };
    engine.generate(id, &request).unwrap();
    engine.close_session(id).unwrap();
}

/// Interposer `cl_mem` counts over the turns agree with the engine's own buffer counts, and the
/// fault of `profile` leaves exactly its objects and bytes live.
fn counts_agree_with_the_engine(profile: OpenClProfile) {
    let mut engine = OpenClEngine::new(profile, 64, 5).unwrap();
    let before_load = interposer().read().unwrap();
    engine.load().unwrap();
    assert!(engine.interposer_loaded(), "engine found the interposer");
    let cl0 = interposer().read().unwrap();
    let own0 = engine.snapshot().unwrap();
    for turn in 1..=TURNS {
        one_turn(&mut engine, turn);
    }
    let cl1 = interposer().read().unwrap();
    let own1 = engine.snapshot().unwrap();

    let buffer_kinds = [kinds::KV_CACHE, kinds::SCRATCH_BUFFER, kinds::WEIGHT_BUFFER];
    let own_created: u64 = buffer_kinds
        .iter()
        .map(|k| own(&own1, k).created - own(&own0, k).created)
        .sum();
    let own_deleted: u64 = buffer_kinds
        .iter()
        .map(|k| own(&own1, k).deleted - own(&own0, k).deleted)
        .sum();
    let unpaired_retains = own(&own1, kinds::KV_CACHE_RETAIN).live() as u64
        - own(&own0, kinds::KV_CACHE_RETAIN).live() as u64;
    let (created, released, bytes) = delta(cl(&cl1, "cl_mem"), cl(&cl0, "cl_mem"));
    assert_eq!(
        created, own_created,
        "cl_mem created vs engine buffers created"
    );
    assert_eq!(
        released,
        own_deleted - unpaired_retains,
        "cl_mem released vs engine releases (a release under an extra retain frees nothing)"
    );
    let own_bytes =
        own1.metrics[ENGINE_BUFFER_BYTES] as i64 - own0.metrics[ENGINE_BUFFER_BYTES] as i64;
    assert_eq!(bytes, own_bytes, "cl_mem live bytes vs engine live bytes");
    assert_eq!(
        own1.metrics[CL_MEM_BYTES],
        cl(&cl1, "cl_mem").live_bytes,
        "the engine reports the interposer's bytes as cl_mem_bytes"
    );

    let turns = u64::from(TURNS);
    let (leaked_objects, leaked_bytes) = match profile {
        OpenClProfile::Clean => (0, 0),
        OpenClProfile::LeakScratch => (6 * turns, turns * engine.scratch_set_bytes()),
        OpenClProfile::LeakKv | OpenClProfile::LeakRetain => {
            (turns, turns * engine.kv_cache_bytes())
        }
    };
    assert_eq!(
        created - released,
        leaked_objects,
        "live cl_mem after {TURNS} turns"
    );
    assert_eq!(
        bytes as u64, leaked_bytes,
        "live cl_mem bytes after {TURNS} turns"
    );
    let retains = cl(&cl1, "cl_mem").retains - cl(&cl0, "cl_mem").retains;
    assert_eq!(retains, unpaired_retains, "retains seen by the interposer");

    engine.unload().unwrap();
    let cl2 = interposer().read().unwrap();
    for kind in ["cl_context", "cl_command_queue", "cl_program", "cl_kernel"] {
        let (c, r, _) = delta(cl(&cl2, kind), cl(&before_load, kind));
        assert_eq!(c, r, "{kind} balanced over load and unload");
        assert!(c > 0, "{kind} was created");
    }
    let (c, r, b) = delta(cl(&cl2, "cl_mem"), cl(&before_load, "cl_mem"));
    assert_eq!(
        (c - r, b as u64),
        (leaked_objects, leaked_bytes),
        "only the fault survives unload"
    );
}

/// The runner's ledger, fed with the engine's cumulative snapshots per turn, names the kind, the
/// counts and the first turn of the leak.
fn ledger_names_the_leak() {
    let mut engine = OpenClEngine::new(OpenClProfile::LeakKv, 64, 5).unwrap();
    let mut ledger = Ledger::new();
    engine.load().unwrap();
    ledger
        .absorb_cumulative(0, "opencl", &engine.snapshot().unwrap().ledger)
        .unwrap();
    for turn in 1..=TURNS {
        one_turn(&mut engine, turn);
        ledger
            .absorb_cumulative(turn, "opencl", &engine.snapshot().unwrap().ledger)
            .unwrap();
    }
    engine.unload().unwrap();
    ledger
        .absorb_cumulative(TURNS + 1, "opencl", &engine.snapshot().unwrap().ledger)
        .unwrap();
    let imbalances: BTreeMap<String, (u64, u64, Option<u32>)> = ledger
        .imbalances()
        .into_iter()
        .map(|i| (i.kind, (i.created, i.deleted, i.first_turn)))
        .collect();
    // One KV buffer stays live per turn.
    for turn in 1..=TURNS {
        let counts = ledger.counts_in_turn("opencl/cl_mem", turn);
        assert_eq!(counts.live(), 1, "turn {turn}: {counts:?}");
    }
    // Run first in this process, so the interposer's cumulative counts start clean here.
    let mem = imbalances["opencl/cl_mem"];
    assert_eq!(mem.0 - mem.1, u64::from(TURNS), "{imbalances:?}");
    // The weights are live from load (turn 0) until unload; the ledger still pins the leak to
    // turn 1, the first turn after which more buffers stayed live than the load holds.
    assert_eq!(mem.2, Some(1));
    assert_eq!(
        imbalances["opencl/kv_cache"],
        (u64::from(TURNS), 0, Some(1))
    );
    assert!(!imbalances.contains_key("opencl/scratch_buffer"));
}

/// A retain followed by its release through the interposer leaves the buffer as alive as
/// before and is not a leak.
fn a_legal_retain_release_pair_is_not_a_leak() {
    use opencl3::context::Context;
    use opencl3::device::{get_all_devices, Device, CL_DEVICE_TYPE_ALL};
    use opencl3::memory::{Buffer, ClMem, CL_MEM_READ_WRITE};
    let before = interposer().read().unwrap();
    {
        let device = Device::new(get_all_devices(CL_DEVICE_TYPE_ALL).unwrap()[0]);
        let context = Context::from_device(&device).unwrap();
        let buffer = unsafe {
            Buffer::<f32>::create(&context, CL_MEM_READ_WRITE, 1024, std::ptr::null_mut())
        }
        .unwrap();
        unsafe { opencl3::memory::retain_mem_object(buffer.get()) }.unwrap();
        let mid = interposer().read().unwrap();
        assert_eq!(cl(&mid, "cl_mem").live, cl(&before, "cl_mem").live + 1);
        unsafe { opencl3::memory::release_mem_object(buffer.get()) }.unwrap();
    }
    let after = interposer().read().unwrap();
    let (c, r, b) = delta(cl(&after, "cl_mem"), cl(&before, "cl_mem"));
    assert_eq!((c, r, b), (1, 1, 0));
    assert_eq!(
        cl(&after, "cl_mem").retains - cl(&before, "cl_mem").retains,
        1
    );
}

/// Prints the cost of a retain/release pair through the interposer (a figure, not a check).
fn print_overhead() {
    use opencl3::context::Context;
    use opencl3::device::{get_all_devices, Device, CL_DEVICE_TYPE_ALL};
    use opencl3::memory::{Buffer, ClMem, CL_MEM_READ_WRITE};
    let device = Device::new(get_all_devices(CL_DEVICE_TYPE_ALL).unwrap()[0]);
    let context = Context::from_device(&device).unwrap();
    let buffer =
        unsafe { Buffer::<f32>::create(&context, CL_MEM_READ_WRITE, 16, std::ptr::null_mut()) }
            .unwrap();
    let n = 200_000;
    let start = Instant::now();
    for _ in 0..n {
        unsafe { opencl3::memory::retain_mem_object(buffer.get()) }.unwrap();
        unsafe { opencl3::memory::release_mem_object(buffer.get()) }.unwrap();
    }
    let ns = start.elapsed().as_nanos() as f64 / (2 * n) as f64;
    println!("figure: {ns:.1} ns per clRetainMemObject/clReleaseMemObject call through the interposer and PoCL");
    let n_create = 20_000;
    let start = Instant::now();
    for _ in 0..n_create {
        let b =
            unsafe { Buffer::<f32>::create(&context, CL_MEM_READ_WRITE, 16, std::ptr::null_mut()) }
                .unwrap();
        drop(b);
    }
    let ns = start.elapsed().as_nanos() as f64 / n_create as f64;
    println!("figure: {ns:.1} ns per clCreateBuffer/clReleaseMemObject pair through the interposer and PoCL");
    let registry = cl_interposer::Registry::new();
    registry.created(cl_interposer::Kind::Mem, 0x1000, 64);
    let start = Instant::now();
    for _ in 0..n {
        registry.retained(cl_interposer::Kind::Mem, 0x1000);
        registry.released(cl_interposer::Kind::Mem, 0x1000);
    }
    let ns = start.elapsed().as_nanos() as f64 / (2 * n) as f64;
    println!("figure: {ns:.1} ns per registry update (the interposer's own share of a call)");
    let start = Instant::now();
    for _ in 0..n_create {
        std::hint::black_box(cl_interposer::sites::caller_stack());
    }
    let ns = start.elapsed().as_nanos() as f64 / n_create as f64;
    println!("figure: {ns:.1} ns per creation-site stack walk (paid by every create call)");
}

/// A named check.
type Case = (&'static str, Box<dyn Fn()>);

fn main() {
    let path = match find_interposer() {
        Ok(p) => p,
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(1);
        }
    };
    // Single-threaded here, before anything has loaded OpenCL.
    std::env::set_var("OPENCL_DYLIB_PATH", &path);
    if !opencl_available_or_skip("through_interposer") {
        println!("0 passed, 0 failed");
        return;
    }
    let cases: Vec<Case> = vec![
        ("ledger names the leak", Box::new(ledger_names_the_leak)),
        (
            "clean profile: counts agree",
            Box::new(|| counts_agree_with_the_engine(OpenClProfile::Clean)),
        ),
        (
            "leak-scratch: 6 cl_mem and scratch bytes live per turn",
            Box::new(|| counts_agree_with_the_engine(OpenClProfile::LeakScratch)),
        ),
        (
            "leak-kv: 1 cl_mem and KV bytes live per turn",
            Box::new(|| counts_agree_with_the_engine(OpenClProfile::LeakKv)),
        ),
        (
            "leak-retain: 1 cl_mem and KV bytes live per turn",
            Box::new(|| counts_agree_with_the_engine(OpenClProfile::LeakRetain)),
        ),
        (
            "legal retain/release pair",
            Box::new(a_legal_retain_release_pair_is_not_a_leak),
        ),
    ];
    let (mut passed, mut failed) = (0, 0);
    for (name, case) in cases {
        match catch_unwind(AssertUnwindSafe(case)) {
            Ok(()) => {
                println!("test {name} ... ok");
                passed += 1;
            }
            Err(_) => {
                println!("test {name} ... FAILED");
                failed += 1;
            }
        }
    }
    print_overhead();
    println!("{passed} passed, {failed} failed");
    if failed > 0 {
        std::process::exit(1);
    }
}
