//! Hand-built runs (a leak, a clean run, a crash, an interrupted run) with their verdicts, shaped after the field bug:
//! a one-time GPU context of about 1.7 GiB plus a native heap that ratchets about 110 MiB per turn.
//! Tests of every renderer and of `leakloop report` use them; they do not come from the runner.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::analyze::{
    Classification, ExpectationResult, MetricAnalysis, PlateauInfo, Reason, Verdict, VerdictStatus,
};
use crate::engine::{BackendInfo, EngineError, EngineErrorKind, Ledger};
use crate::runner::{Phase, RunOutcome, RunRecord, Sample};
use crate::scenario::{
    BackendKind, Device, EngineSpec, Expectations, MetricExpectation, PromptSpec, SamplePlan,
    SamplePoint, Scenario, SessionOptions, Step, Tolerance,
};

const MIB: u64 = 1 << 20;
const GIB: u64 = 1 << 30;

fn scenario(name: &str, profile: &str, warmup_turns: u32, turns: u32) -> Scenario {
    Scenario {
        name: name.to_owned(),
        description: Some(format!("per-turn chat on the {profile} profile")),
        source: Some(format!("/home/ci/leakloop/fixtures/scenarios/{name}.yaml").into()),
        engine: EngineSpec {
            attribute: false,
            backend: BackendKind::Sim,
            profile: Some(profile.to_owned()),
            inline_profiles: BTreeMap::new(),
            model: None,
            device: Device::Gpu,
            max_tokens: 4096,
            threads: None,
            lib: None,
            call_timeout: Duration::from_secs(60),
            isolate: false,
            attach: None,
            exec: None,
        },
        warmup_turns,
        turns,
        turn: vec![
            Step::Open(SessionOptions {
                temperature: Some(0.2),
                top_k: Some(20),
                ..SessionOptions::default()
            }),
            Step::Send(PromptSpec::Text("Summarize the notes.".to_owned())),
            Step::Generate {
                max_output_tokens: 64,
            },
            Step::Close,
        ],
        reload_every: 0,
        sample: SamplePlan {
            after: vec![SamplePoint::Load, SamplePoint::Generate, SamplePoint::Close],
            settle: Duration::from_millis(500),
            baseline: 1,
        },
        watch: Vec::new(),
        faults: Vec::new(),
        expect: Expectations::default(),
        seed: 7,
        target: crate::scenario::Target::Local,
        stop: crate::scenario::StopMode::Turns,
        max_turns: None,
        concurrency: None,
        sessions: None,
    }
}

fn backend(profile: &str) -> BackendInfo {
    BackendInfo {
        backend: "sim".to_owned(),
        version: format!("sim-backend 0.1.0 ({profile})"),
        details: BTreeMap::from([("profile".to_owned(), profile.to_owned())]),
    }
}

fn sample(turn: u32, phase: Phase, epoch: u32, metrics: &[(&str, u64)]) -> Sample {
    let offset = match phase {
        Phase::Load => 0.0,
        Phase::Open => 100.0,
        Phase::Generate => 600.0,
        Phase::Close => 900.0,
        Phase::Idle => 950.0,
        Phase::Reload => 990.0,
    };
    Sample {
        turn,
        phase,
        epoch,
        t_ms: f64::from(turn) * 1000.0 + offset,
        metrics: metrics
            .iter()
            .map(|(name, value)| ((*name).to_owned(), *value))
            .collect(),
        key: None,
    }
}

fn expectation(
    name: &str,
    passed: bool,
    expected: &str,
    measured: &str,
    turn: Option<u32>,
) -> ExpectationResult {
    ExpectationResult {
        name: name.to_owned(),
        passed,
        inconclusive: false,
        expected: expected.to_owned(),
        measured: measured.to_owned(),
        turn: turn.map(u64::from),
        defaulted: false,
    }
}

/// The field bug: native heap +110 MiB per turn, a one-time 1.7 GiB GPU context, a scratch
/// buffer created every turn and never deleted, and a reload after turn 5 that drops the GPU
/// context (it comes back on the next turn) but not the leaked heap.
pub fn leak_run() -> (RunRecord, Verdict) {
    let mut scenario = scenario("per-turn-chat-leak", "android-opencl-leak", 1, 8);
    scenario.reload_every = 5;
    scenario.expect = Expectations {
        balanced: Some(true),
        max_live: BTreeMap::new(),
        metrics: BTreeMap::from([
            (
                "native_heap".to_owned(),
                MetricExpectation {
                    tolerance: Some(Tolerance::Bytes(5 * MIB)),
                    warmup_budget: None,
                    max_growth_per_turn: Some(MIB),
                    max: None,
                    report_only: false,
                },
            ),
            (
                "gpu".to_owned(),
                MetricExpectation {
                    tolerance: Some(Tolerance::Percent(2.0)),
                    warmup_budget: Some(2 * GIB),
                    max_growth_per_turn: None,
                    max: None,
                    report_only: false,
                },
            ),
        ]),
    };
    let heap = |turn: u32| 120 * MIB + u64::from(turn) * 110 * MIB;
    let gpu_context = 1770 * MIB;
    let mut samples = vec![sample(
        0,
        Phase::Load,
        1,
        &[("gpu", 60 * MIB), ("native_heap", heap(0))],
    )];
    let mut ledger = Ledger::new();
    ledger.record_create(0, "runner/engine");
    let mut epoch = 1;
    // The example ran its `turns` and was decided there: it did not extend.
    for turn in 1..=scenario.warmup_turns + scenario.turns {
        samples.push(sample(
            turn,
            Phase::Generate,
            epoch,
            &[
                ("gpu", gpu_context + 200 * MIB),
                ("native_heap", heap(turn) + 600 * MIB),
            ],
        ));
        samples.push(sample(
            turn,
            Phase::Close,
            epoch,
            &[("gpu", gpu_context), ("native_heap", heap(turn))],
        ));
        for kind in ["runner/session", "sim/conversation"] {
            ledger.record_create(turn, kind);
            ledger.record_delete(turn, kind);
        }
        ledger.record_create(turn, "sim/scratch_buffer");
        if turn == 5 {
            epoch += 1;
            ledger.record_delete(turn, "runner/engine");
            ledger.record_create(turn, "runner/engine");
            samples.push(sample(
                turn,
                Phase::Reload,
                epoch,
                &[("gpu", 60 * MIB), ("native_heap", heap(turn))],
            ));
        }
    }
    let total = scenario.warmup_turns + scenario.turns;
    ledger.record_delete(total, "runner/engine");
    let record = RunRecord {
        scenario,
        backend: backend("android-opencl-leak"),
        samples: samples.into(),
        ledger,
        turns_completed: total,
        engine_errors: Vec::new(),
        outcome: RunOutcome::Completed,
        early_stop: None,
        provenance: None,
    };
    let verdict = Verdict {
        attribution: None,
        driver_attribution: None,
        cl_objects: None,
        status: VerdictStatus::Fail,
        metrics: BTreeMap::from([
            (
                "gpu".to_owned(),
                MetricAnalysis {
                    classification: Classification::Plateau,
                    baseline: 60 * MIB,
                    after_warmup: Some(gpu_context),
                    last: gpu_context,
                    slope_bytes_per_turn: 0.0,
                    slope_interval: Some((-0.4 * MIB as f64, 0.4 * MIB as f64)),
                    confidence: 0.95,
                    plateau: Some(PlateauInfo {
                        size_bytes: (gpu_context - 60 * MIB) as i64,
                        settled_at_turn: 1,
                    }),
                    turns_needed: None,
                    points: 10,
                    reason: Reason::Text(
                        "one-time rise of 1.7 GiB at turn 1, flat afterwards".to_owned(),
                    ),
                    epochs: 1,
                    ..MetricAnalysis::default()
                },
            ),
            (
                "native_heap".to_owned(),
                MetricAnalysis {
                    classification: Classification::Growth,
                    baseline: heap(0),
                    after_warmup: Some(heap(1)),
                    last: heap(total),
                    slope_bytes_per_turn: 110.0 * MIB as f64,
                    slope_interval: Some((108.5 * MIB as f64, 111.5 * MIB as f64)),
                    confidence: 0.95,
                    plateau: None,
                    turns_needed: None,
                    points: 10,
                    reason: Reason::Text(
                        "rises 110.0 MiB per turn after warm-up; the interval excludes zero"
                            .to_owned(),
                    ),
                    epochs: 1,
                    ..MetricAnalysis::default()
                },
            ),
        ]),
        expectations: vec![
            expectation(
                "balanced",
                false,
                "every create has its delete",
                "sim/scratch_buffer: 9 created, 0 deleted",
                Some(1),
            ),
            expectation(
                "gpu.warmup_budget",
                true,
                "one-time rise <= 2.0 GiB",
                "+1.7 GiB",
                None,
            ),
            expectation(
                "native_heap.max_growth_per_turn",
                false,
                "<= +1.0 MiB/turn (upper 95% bound)",
                "+111.5 MiB/turn",
                None,
            ),
            expectation(
                "native_heap.tolerance",
                false,
                "within 5.0 MiB of the baseline 120.0 MiB",
                "+220.0 MiB",
                Some(2),
            ),
        ],
    };
    (record, verdict)
}

/// A clean run in an isolated worker: flat native heap, a process RSS probed from outside (a
/// machine-dependent value), balanced ledger, every expectation holds.
pub fn clean_run() -> (RunRecord, Verdict) {
    let mut scenario = scenario("cpu-flat-chat", "cpu-flat", 0, 6);
    scenario.engine.device = Device::Cpu;
    scenario.engine.isolate = true;
    scenario.watch = vec!["native_heap".to_owned(), "rss".to_owned()];
    scenario.expect = Expectations {
        balanced: Some(true),
        max_live: BTreeMap::new(),
        metrics: BTreeMap::from([(
            "native_heap".to_owned(),
            MetricExpectation {
                tolerance: Some(Tolerance::Bytes(4 * MIB)),
                warmup_budget: None,
                max_growth_per_turn: Some(256 * 1024),
                max: None,
                report_only: false,
            },
        )]),
    };
    let noise = [0u64, 3, 1, 4, 1, 5, 2];
    let mut samples = Vec::new();
    let mut ledger = Ledger::new();
    ledger.record_create(0, "runner/engine");
    samples.push(sample(
        0,
        Phase::Load,
        1,
        &[("native_heap", 300 * MIB), ("rss", 912 * MIB + 4096)],
    ));
    // The example ran its `turns` and was decided there: it did not extend.
    for turn in 1..=scenario.warmup_turns + scenario.turns {
        let jitter = noise[turn as usize] * 64 * 1024;
        samples.push(sample(
            turn,
            Phase::Generate,
            1,
            &[
                ("native_heap", 420 * MIB + jitter),
                ("rss", 1040 * MIB + jitter),
            ],
        ));
        samples.push(sample(
            turn,
            Phase::Close,
            1,
            &[
                ("native_heap", 300 * MIB + jitter),
                ("rss", 913 * MIB + jitter),
            ],
        ));
        for kind in ["runner/session", "sim/conversation"] {
            ledger.record_create(turn, kind);
            ledger.record_delete(turn, kind);
        }
    }
    let turns = scenario.warmup_turns + scenario.turns;
    ledger.record_delete(turns, "runner/engine");
    let record = RunRecord {
        scenario,
        backend: backend("cpu-flat"),
        samples: samples.into(),
        ledger,
        turns_completed: turns,
        engine_errors: Vec::new(),
        outcome: RunOutcome::Completed,
        early_stop: None,
        provenance: None,
    };
    let clean = |baseline: u64, last: u64, slope: f64, reason: &str| MetricAnalysis {
        classification: Classification::Clean,
        baseline,
        after_warmup: Some(baseline),
        last,
        slope_bytes_per_turn: slope,
        slope_interval: Some((slope - 40_000.0, slope + 40_000.0)),
        confidence: 0.95,
        plateau: None,
        turns_needed: None,
        points: 7,
        reason: Reason::Text(reason.to_owned()),
        epochs: 1,
        ..MetricAnalysis::default()
    };
    let verdict = Verdict {
        attribution: None,
        driver_attribution: None,
        cl_objects: None,
        status: VerdictStatus::Pass,
        metrics: BTreeMap::from([
            (
                "native_heap".to_owned(),
                clean(
                    300 * MIB,
                    300 * MIB + 128 * 1024,
                    9_362.0,
                    "within 4.0 MiB of the baseline; slope interval includes zero",
                ),
            ),
            (
                "rss".to_owned(),
                clean(
                    912 * MIB + 4096,
                    913 * MIB + 128 * 1024,
                    12_288.0,
                    "within tolerance of the baseline",
                ),
            ),
        ]),
        expectations: vec![
            expectation(
                "balanced",
                true,
                "every create has its delete",
                "3 kinds balanced",
                None,
            ),
            expectation(
                "native_heap.max_growth_per_turn",
                true,
                "<= +256.0 KiB/turn (upper 95% bound)",
                "+48.1 KiB/turn",
                None,
            ),
            expectation(
                "native_heap.tolerance",
                true,
                "within 4.0 MiB of the baseline 300.0 MiB",
                "+320.0 KiB",
                None,
            ),
        ],
    };
    (record, verdict)
}

/// A long clean run of `turns` turns sampled after generate and close, reloaded every
/// `reload_every` turns (0: never), with the clean run's verdict: for checking that artifacts
/// stay bounded as runs grow.
pub fn long_run(turns: u32, reload_every: u32) -> (RunRecord, Verdict) {
    let (mut record, verdict) = clean_run();
    record.scenario.turns = turns;
    record.scenario.reload_every = reload_every;
    record.turns_completed = turns;
    record.samples = vec![sample(0, Phase::Load, 1, &[("native_heap", 300 * MIB)])].into();
    let mut ledger = Ledger::new();
    ledger.record_create(0, "runner/engine");
    let mut epoch = 1;
    for turn in 1..=turns {
        let jitter = u64::from(turn.wrapping_mul(2_654_435_761) % 997) * 64;
        let heap = 300 * MIB + jitter;
        record.samples.push(sample(
            turn,
            Phase::Generate,
            epoch,
            &[("native_heap", heap + 40 * MIB)],
        ));
        record
            .samples
            .push(sample(turn, Phase::Close, epoch, &[("native_heap", heap)]));
        ledger.record_create(turn, "runner/session");
        ledger.record_delete(turn, "runner/session");
        if reload_every > 0 && turn % reload_every == 0 && turn < turns {
            epoch += 1;
            ledger.record_delete(turn, "runner/engine");
            ledger.record_create(turn, "runner/engine");
            record.samples.push(sample(
                turn,
                Phase::Reload,
                epoch,
                &[("native_heap", 300 * MIB)],
            ));
        }
    }
    ledger.record_delete(turns, "runner/engine");
    record.ledger = ledger;
    (record, verdict)
}

/// The leak run, killed at turn 4 while generating: the engine's worker died of SIGKILL (the
/// Android low-memory killer), after a non-fatal generate error in turn 2.
pub fn crashed_run() -> (RunRecord, Verdict) {
    let (mut record, mut verdict) = leak_run();
    record.scenario.name = "per-turn-chat-oom".to_owned();
    record.samples.retain(|s| s.turn < 4);
    record.turns_completed = 3;
    record.ledger.truncate_before(4);
    record.engine_errors = vec![(
        2,
        "generate".to_owned(),
        EngineError::new(EngineErrorKind::Generate, "out of memory"),
    )];
    record.outcome = RunOutcome::EngineFailed {
        turn: 4,
        step: "generate".to_owned(),
        error: EngineError::new(
            EngineErrorKind::Crashed {
                how: "signal 9 (SIGKILL)".to_owned(),
            },
            "the worker process died during generate",
        ),
    };
    verdict.status = VerdictStatus::EngineFailed;
    for (metric, analysis) in verdict.metrics.iter_mut() {
        if let Some((_, last)) = record.post_close_series(metric).last() {
            analysis.last = *last;
        }
        analysis.classification = Classification::Inconclusive;
        analysis.turns_needed = Some(6);
        analysis.points = 4;
        analysis.reason = Reason::Text("too few turns after warm-up to decide".to_owned());
    }
    verdict.expectations.clear();
    (record, verdict)
}

/// The leak run stopped by SIGTERM during turn 5 (a CI job's timeout): the samples of turns 0-4,
/// analysed by the real analyzer as the signal handler of `leakloop run` does.
pub fn interrupted_run() -> (RunRecord, Verdict) {
    let (record, _) = leak_run();
    let samples = record.samples.into_iter().filter(|s| s.turn < 5).collect();
    let record =
        crate::report::interrupted_record(record.scenario, record.backend, samples, 4, "SIGTERM");
    let verdict = crate::analyze::analyze_run(&record);
    (record, verdict)
}
