//! Every OpenCL fixture (`fixtures/scenarios/opencl-*.yaml`) end to end through `leakloop run`.
//!
//! Each must exit with the code its `# Expected: ... (exit N)` header states. A failing fixture
//! of the reference OpenCL engine must fail for the OpenCL reason: the `opencl/cl_mem` balance
//! (with its created and released counts) and `cl_mem_bytes` growing per turn, both in the report
//! and on the terminal; a passing one must have counted buffers and released them all. The
//! interposer's counts are checked against the engine's own bookkeeping in every run.
//!
//! Needs an OpenCL platform (Debian: `pocl-opencl-icd`): without one the OpenCL fixtures print
//! `SKIPPED: no OpenCL platform (install pocl-opencl-icd)` and fail when
//! `LEAKLOOP_REQUIRE_OPENCL=1`. Needs `libcl_interposer.so` beside the `leakloop` binary:
//! `cargo test --workspace` (or `cargo build -p cl-interposer`) builds it; `cargo test -p
//! leakloop` alone does not.

use std::path::{Path, PathBuf};

use leakloop::analyze::{Classification, ExpectationResult};
use leakloop::engine::opencl::{
    kinds, opencl_available_or_skip, CL_MEM_BYTES, ENGINE_BUFFER_BYTES,
};
use leakloop::report::{read_report, ReportFile};
use leakloop::scenario::{load_scenario, BackendKind};
use rstest::rstest;

use crate::fixtures::{expected_exit, run};

const CL_MEM: &str = "opencl/cl_mem";

/// The binary finds the interposer the way the engine factory does (beside itself, or in
/// `deps/` after a plain `cargo test`), unless `LEAKLOOP_CL_INTERPOSER` names one.
fn require_interposer() {
    if let Err(why) = leakloop::engine::opencl::find_interposer() {
        panic!(
            "{why}: run `cargo build -p cl-interposer` (or `cargo test --workspace`, which builds \
             it) before these tests"
        );
    }
}

fn live(report: &ReportFile, kind: &str) -> i64 {
    report
        .record
        .ledger
        .totals
        .get(&format!("opencl/{kind}"))
        .map_or(0, |c| c.live())
}

fn failed<'a>(report: &'a ReportFile, prefix: &str) -> Vec<&'a ExpectationResult> {
    report
        .verdict
        .expectations
        .iter()
        .filter(|e| !e.passed && e.name.starts_with(prefix))
        .collect()
}

/// The interposer saw exactly the buffers the engine itself says it holds: as many live
/// `cl_mem` objects as live buffers of the engine's own kinds, and the same live bytes.
fn check_interposer_matches_the_engine(name: &str, report: &ReportFile) {
    let engine_live: i64 = [
        kinds::WEIGHT_BUFFER,
        kinds::KV_CACHE,
        kinds::KV_CACHE_RETAIN,
        kinds::SCRATCH_BUFFER,
    ]
    .iter()
    .map(|k| live(report, k))
    .sum();
    assert_eq!(
        live(report, "cl_mem"),
        engine_live,
        "{name}: live cl_mem objects (interposer) vs live buffers (engine's own count)"
    );
    for sample in &report.record.samples {
        assert_eq!(
            sample.metrics.get(CL_MEM_BYTES),
            sample.metrics.get(ENGINE_BUFFER_BYTES),
            "{name}: turn {} {:?}: {CL_MEM_BYTES} (interposer) vs {ENGINE_BUFFER_BYTES} (engine)",
            sample.turn,
            sample.phase
        );
    }
}

/// A leaking fixture fails on the `cl_mem` balance with its counts and on `cl_mem_bytes` growth,
/// in the report and in what the terminal shows.
fn check_names_the_opencl_leak(name: &str, report: &ReportFile, stdout: &str) {
    let counts = report.record.ledger.totals[CL_MEM];
    assert!(
        counts.created > counts.deleted,
        "{name}: cl_mem must be off balance, got {counts:?}"
    );
    let balance = failed(report, &format!("balanced.{CL_MEM}"));
    assert_eq!(balance.len(), 1, "{name}: a failed balance of {CL_MEM}");
    let want = format!(
        "{} created, {} deleted (+{} live)",
        counts.created,
        counts.deleted,
        counts.live()
    );
    assert!(
        balance[0].measured.starts_with(&want),
        "{name}: balance says `{}`, want it to start with `{want}`",
        balance[0].measured
    );

    let growth = &report.verdict.metrics[CL_MEM_BYTES];
    assert_eq!(
        growth.classification,
        Classification::Growth,
        "{name}: {CL_MEM_BYTES} must be classified as growth"
    );
    assert!(
        growth.slope_bytes_per_turn >= (1 << 20) as f64,
        "{name}: the leaked buffers are MiB-sized, got {} B/turn",
        growth.slope_bytes_per_turn
    );
    assert!(
        !failed(report, &format!("{CL_MEM_BYTES}.")).is_empty(),
        "{name}: an expectation on {CL_MEM_BYTES} must fail"
    );

    let balance_line = format!("✗ balanced.{CL_MEM}: ");
    assert!(
        stdout
            .lines()
            .any(|l| l.trim_start().starts_with(&balance_line) && l.contains(&want)),
        "{name}: the terminal names the {CL_MEM} imbalance with `{want}`:\n{stdout}"
    );
    assert!(
        stdout.lines().any(|l| {
            let l = l.trim_start();
            l.starts_with(&format!("✗ {CL_MEM_BYTES}.")) && l.contains("MiB")
        }),
        "{name}: the terminal names the {CL_MEM_BYTES} growth in bytes:\n{stdout}"
    );
}

/// The function a leaking profile's buffers are made in, below `Runtime::buffer` (the engine's
/// function that calls `clCreateBuffer`).
fn leaking_function(profile: &str) -> &'static str {
    match profile {
        "leak-scratch" => "workload::Scratch::create",
        "leak-kv" | "leak-retain" => "workload::Cache::create",
        other => panic!("no creation site known for profile `{other}`"),
    }
}

/// The report lists the leaked buffers' creation site as the fastest-growing one: the engine's
/// `Runtime::buffer` reached from the profile's leaking function, one or more buffers per turn,
/// and says so on the terminal and in junit's balance failure.
fn check_names_the_creation_site(
    name: &str,
    profile: &str,
    report: &ReportFile,
    out: &Path,
    stdout: &str,
) {
    let cl = report
        .verdict
        .cl_objects
        .as_ref()
        .unwrap_or_else(|| panic!("{name}: the report lists no OpenCL creation sites"));
    let top = &cl.sites[0];
    let functions: Vec<&str> = top
        .frames
        .iter()
        .filter_map(|f| f.function.as_deref())
        .collect();
    assert_eq!(top.kind, "cl_mem", "{name}: {cl:#?}");
    assert!(
        functions
            .first()
            .is_some_and(|f| f.ends_with("runtime::Runtime::buffer")),
        "{name}: the top site starts at the engine's clCreateBuffer call: {functions:?}"
    );
    assert!(
        functions
            .iter()
            .any(|f| f.contains(leaking_function(profile))),
        "{name}: the top site is reached from {}: {functions:?}",
        leaking_function(profile)
    );
    assert_eq!(
        top.frames[0].module, "leakloop",
        "{name}: {:?}",
        top.frames[0]
    );
    let growth = top
        .objects_per_turn
        .expect("the leaked buffers grow per turn");
    assert!(
        growth.per_turn >= 1.0 && growth.interval.0 > 0.0,
        "{name}: {growth:?}"
    );
    assert!(
        top.bytes_per_turn.is_some(),
        "{name}: buffer sizes are known"
    );
    let site_line = "created at leakloop::engine::opencl::runtime::Runtime::buffer [leakloop]";
    assert!(
        stdout
            .lines()
            .any(|l| l.trim_start().starts_with("cl_mem ") && l.contains(site_line)),
        "{name}: the terminal lists the site:\n{stdout}"
    );
    let junit = std::fs::read_to_string(out.join("junit.xml")).unwrap();
    assert!(
        junit.contains(&format!("live: {} (", top.live)) && junit.contains(site_line),
        "{name}: junit's balance failure names the site:\n{junit}"
    );
}

/// A clean fixture counted buffers through the interposer and released every one.
fn check_clean(name: &str, report: &ReportFile) {
    let counts = report.record.ledger.totals[CL_MEM];
    assert!(
        counts.created > 0,
        "{name}: the interposer counted no buffers at all"
    );
    assert_eq!(counts.live(), 0, "{name}: {counts:?}");
    let flat = &report.verdict.metrics[CL_MEM_BYTES];
    assert_eq!(flat.slope_bytes_per_turn, 0.0, "{name}: {flat:?}");
    let cl = report
        .verdict
        .cl_objects
        .as_ref()
        .unwrap_or_else(|| panic!("{name}: the report lists no OpenCL creation sites"));
    assert_eq!(cl.growing_sites, 0, "{name}: no site grows: {cl:#?}");
    assert!(cl.sites.iter().all(|s| !s.grows()), "{name}: {cl:#?}");
}

#[rstest]
fn opencl_fixture_exits_as_stated_and_names_the_cl_leak(
    #[files("../fixtures/scenarios/opencl-*.yaml")] path: PathBuf,
) {
    let name = path.file_stem().unwrap().to_string_lossy().to_string();
    let text = std::fs::read_to_string(&path).unwrap();
    let expected = expected_exit(&text, &path);
    let scenario = load_scenario(&path).expect("the fixture is a valid scenario");
    assert_eq!(
        scenario.engine.backend,
        BackendKind::Opencl,
        "{name}: fixtures named opencl-* run on the OpenCL engine"
    );
    if !opencl_available_or_skip(&name) {
        return;
    }
    require_interposer();

    let out = tempfile::tempdir().unwrap();
    let output = run(&path, out.path());
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_eq!(
        output.status.code(),
        Some(expected),
        "{name}: expected exit {expected}\nstdout:\n{stdout}\nstderr:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let report = read_report(&out.path().join("report.json")).unwrap();
    check_interposer_matches_the_engine(&name, &report);
    match expected {
        0 => check_clean(&name, &report),
        1 => {
            check_names_the_opencl_leak(&name, &report, &stdout);
            let profile = scenario.engine.profile.as_deref().unwrap_or("clean");
            check_names_the_creation_site(&name, profile, &report, out.path(), &stdout);
        }
        other => panic!("{name}: no OpenCL checks for an expected exit {other}"),
    }
}
