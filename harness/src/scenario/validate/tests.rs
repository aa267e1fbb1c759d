//! Tests of `validate.rs`.

use std::path::PathBuf;

use super::*;
use crate::scenario::{
    parse_scenario, BackendKind, Concurrency, ScenarioErrorKind, StopMode, Tolerance,
};

fn parse(text: &str) -> Result<Scenario, ScenarioError> {
    parse_scenario(text, Path::new("/scenarios/s.yaml"))
}

const MINIMAL: &str =
    "name: m\nengine: {backend: sim, profile: cpu-flat}\nturns: 2\nturn:\n  - open:\n  - close:\n";

#[test]
fn minimal_scenario_gets_documented_defaults() {
    let s = parse(MINIMAL).unwrap();
    assert_eq!(s.source, Some(PathBuf::from("/scenarios/s.yaml")));
    assert_eq!(s.seed, 0);
    assert_eq!((s.warmup_turns, s.turns, s.reload_every), (0, 2, 0));
    assert_eq!(
        s.turn,
        vec![Step::Open(SessionOptions::default()), Step::Close]
    );
    assert_eq!(s.sample.after, vec![SamplePoint::Load, SamplePoint::Close]);
    assert_eq!(s.sample.settle, Duration::ZERO);
    assert!(s.watch.is_empty() && s.faults.is_empty());
    assert_eq!(s.expect, Expectations::default());
    let e = &s.engine;
    assert_eq!(e.backend, BackendKind::Sim);
    assert_eq!(e.profile.as_deref(), Some("cpu-flat"));
    assert_eq!(e.device, Device::Cpu);
    assert_eq!(e.max_tokens, 4096);
    assert_eq!(e.call_timeout, Duration::from_secs(60));
    assert!(!e.isolate, "the simulator runs in-process by default");
    assert_eq!((e.model.as_ref(), e.lib.as_ref()), (None, None));
}

#[test]
fn every_field_resolves() {
    let text = r#"
name: full_1
description: all of it
seed: 9
engine:
  backend: litert-lm
  model: ../models/tiny.litertlm
  device: gpu
  max_tokens: 1024
  lib: /opt/lib/liblitert.so
  call_timeout: 1.5m
  isolate: false
warmup_turns: 3
turns: 40
reload_every: 5
turn:
  - open: {temperature: 0.5, top_k: 4, top_p: 0.9, seed: 3}
  - send: {prompt: "hi"}
  - generate: {max_output_tokens: 16}
  - send: {prompts: [a, b]}
  - cancel: {after_tokens: 0, max_output_tokens: 8}
  - send: {tokens: 64}
  - send: {tokens: [1, 2]}
  - idle: 250ms
  - close: {}
  - idle: 2s
sample: {after: [load, open, generate, close, idle], settle: 0.5s}
watch: [rss, gpu]
faults: [{at_turn: 43, kind: skip_close}]
expect:
  balanced: true
  rss: {tolerance: 2%}
  gpu: {tolerance: 5MiB, warmup_budget: 2GB, max_growth_per_turn: 1024}
"#;
    let s = parse(text).unwrap();
    assert_eq!(s.description.as_deref(), Some("all of it"));
    assert_eq!(s.seed, 9);
    let e = &s.engine;
    assert_eq!(
        e.model,
        Some(PathBuf::from("/scenarios/../models/tiny.litertlm"))
    );
    assert_eq!(e.lib, Some(PathBuf::from("/opt/lib/liblitert.so")));
    assert_eq!((e.device, e.max_tokens), (Device::Gpu, 1024));
    assert_eq!(e.call_timeout, Duration::from_secs(90));
    assert!(!e.isolate, "an explicit isolate: false wins");
    assert_eq!((s.warmup_turns, s.turns, s.reload_every), (3, 40, 5));
    assert_eq!(
        s.turn,
        vec![
            Step::Open(SessionOptions {
                temperature: Some(0.5),
                top_k: Some(4),
                top_p: Some(0.9),
                seed: Some(3),
                session: None,
            }),
            Step::Send(PromptSpec::Text("hi".into())),
            Step::Generate {
                max_output_tokens: 16
            },
            Step::Send(PromptSpec::Cycle(vec!["a".into(), "b".into()])),
            Step::Cancel {
                after_tokens: 0,
                max_output_tokens: 8
            },
            Step::Send(PromptSpec::Tokens(vec![64])),
            Step::Send(PromptSpec::Tokens(vec![1, 2])),
            Step::Idle(Duration::from_millis(250)),
            Step::Close,
            Step::Idle(Duration::from_secs(2)),
        ]
    );
    assert_eq!(s.sample.after.len(), 5);
    assert_eq!(s.sample.settle, Duration::from_millis(500));
    assert_eq!(s.watch, ["rss", "gpu"]);
    assert_eq!(
        s.faults,
        vec![Fault {
            at_turn: 43,
            kind: FaultKind::SkipClose
        }]
    );
    assert_eq!(s.expect.balanced, Some(true));
    assert_eq!(
        s.expect.metrics["rss"].tolerance,
        Some(Tolerance::Percent(2.0))
    );
    let gpu = &s.expect.metrics["gpu"];
    assert_eq!(gpu.tolerance, Some(Tolerance::Bytes(5 << 20)));
    assert_eq!(gpu.warmup_budget, Some(2_000_000_000));
    assert_eq!(gpu.max_growth_per_turn, Some(1024));
}

#[test]
fn an_inline_profile_the_simulator_refuses_is_an_error_at_its_field() {
    let err = parse(
        "name: p\nengine: {backend: sim, profile: mine}\nprofiles:\n  mine: {reference_max_tokens: 0}\nturns: 1\nturn: [open: {}, close: {}]\n",
    )
    .unwrap_err();
    assert_eq!(err.key_path(), Some("profiles.mine.reference_max_tokens"));
    assert_eq!(err.location().map(|l| l.line), Some(4));
    assert!(err.to_string().contains("at least 1"), "{err}");
}

#[test]
fn real_engines_run_isolated_by_default() {
    let text = "name: o\nengine: {backend: opencl}\nturns: 1\nturn: [open: {}, close: {}]\n";
    let s = parse(text).unwrap();
    assert!(s.engine.isolate);
    assert_eq!(s.engine.profile, None);
}

/// Inline profiles go through `sim_backend::ProfileSpec`'s own serde, whatever its fields.
#[test]
fn inline_profile_can_be_named() {
    let spec = serde_yaml::to_string(&sim_backend::ProfileSpec::default()).unwrap();
    let spec: String = spec.lines().map(|l| format!("    {l}\n")).collect();
    let text = format!(
        "name: p\nengine: {{backend: sim, profile: my-phone}}\nprofiles:\n  my-phone:\n{spec}turns: 1\nturn: [open: {{}}, close: {{}}]\n"
    );
    let s = parse(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    assert!(s.engine.inline_profiles.contains_key("my-phone"));
}

#[test]
fn inline_profile_may_not_shadow_a_builtin() {
    let spec = serde_yaml::to_string(&sim_backend::ProfileSpec::default()).unwrap();
    let spec: String = spec.lines().map(|l| format!("    {l}\n")).collect();
    let text = format!(
        "name: p\nengine: {{backend: sim, profile: cpu-flat}}\nprofiles:\n  cpu-flat:\n{spec}turns: 1\nturn: [open: {{}}, close: {{}}]\n"
    );
    let err = parse(&text).unwrap_err();
    assert_eq!(err.kind(), ScenarioErrorKind::Invalid);
    assert_eq!(err.key_path(), Some("profiles.cpu-flat"));
}

#[rstest::rstest]
#[case::isolated_real_engine_crashes("{backend: opencl}", "crash", None)]
#[case::isolated_real_engine_hangs("{backend: litert-lm, model: m.litertlm}", "hang", None)]
#[case::in_process_real_engine_cannot_crash(
    "{backend: opencl, isolate: false}",
    "crash",
    Some("struck by the worker process")
)]
#[case::in_process_real_engine_cannot_hang(
    "{backend: litert-lm, model: m.litertlm, isolate: false}",
    "hang",
    Some("engine.isolate: true")
)]
#[case::generate_error_is_simulated_only(
    "{backend: litert-lm, model: m.litertlm}",
    "generate_error",
    Some("only the sim backend")
)]
#[case::skip_close_everywhere("{backend: opencl, isolate: false}", "skip_close", None)]
#[case::sim_fakes_a_crash_in_process("{backend: sim, profile: cpu-flat}", "crash", None)]
#[case::sim_generate_error("{backend: sim, profile: cpu-flat}", "generate_error", None)]
fn faults_a_backend_can_take(
    #[case] engine: &str,
    #[case] kind: &str,
    #[case] refused: Option<&str>,
) {
    let turn = "[open: {}, generate: {max_output_tokens: 4}, close: {}]";
    assert_fault_verdict(engine, turn, kind, refused);
}

/// Parses a scenario with one fault of `kind` at turn 1 and checks that it is accepted, or
/// refused on `faults[0].kind` with a message containing `refused`.
fn assert_fault_verdict(engine: &str, turn: &str, kind: &str, refused: Option<&str>) {
    let text = format!(
        "name: f\nengine: {engine}\nturns: 3\nturn: {turn}\nfaults: [{{at_turn: 1, kind: {kind}}}]\n"
    );
    match (parse(&text), refused) {
        (Ok(s), None) => assert_eq!(s.faults.len(), 1),
        (Err(e), Some(why)) => {
            assert_eq!(e.key_path(), Some("faults[0].kind"), "{e}");
            assert!(e.message().contains(why), "{e}");
        }
        (result, _) => panic!("{engine} {turn} with {kind}: {result:?}"),
    }
}

/// A fault that would never strike is refused by `check`, not left for `run` to fail on when it
/// builds the engine (it exited 3, "cannot start the sim engine").
#[rstest::rstest]
#[case::sim_crash_needs_generation(
    "{backend: sim, profile: no-generation}",
    "[open: {}, close: {}]",
    "crash",
    Some("strikes during generation")
)]
#[case::sim_hang_needs_generation(
    "{backend: sim, profile: cpu-flat}",
    "[open: {}, close: {}]",
    "hang",
    Some("no `generate` or `cancel`")
)]
#[case::generate_error_needs_generation(
    "{backend: sim, profile: cpu-flat, isolate: true}",
    "[open: {}, close: {}]",
    "generate_error",
    Some("strikes during generation")
)]
#[case::isolated_crash_strikes_at_open(
    "{backend: sim, profile: cpu-flat, isolate: true}",
    "[open: {}, close: {}]",
    "crash",
    None
)]
#[case::isolated_crash_needs_a_session(
    "{backend: opencl}",
    "[idle: 1s]",
    "crash",
    Some("no `open`, `generate` or `cancel`")
)]
#[case::cancel_is_generation(
    "{backend: sim, profile: cpu-flat}",
    "[open: {}, cancel: {after_tokens: 1, max_output_tokens: 4}, close: {}]",
    "crash",
    None
)]
#[case::skip_close_needs_nothing(
    "{backend: sim, profile: cpu-flat}",
    "[idle: 1s]",
    "skip_close",
    None
)]
fn faults_that_never_strike_are_refused(
    #[case] engine: &str,
    #[case] turn: &str,
    #[case] kind: &str,
    #[case] refused: Option<&str>,
) {
    assert_fault_verdict(engine, turn, kind, refused);
}

#[test]
fn idle_may_come_anywhere_and_sessions_may_repeat() {
    let text = "name: i\nengine: {backend: sim, profile: cpu-flat}\nturns: 1\nturn: [idle: 1s, open: {}, idle: 0, close: {}, open: {}, close: {}, idle: 1m]\n";
    assert_eq!(parse(text).unwrap().turn.len(), 7);
}

/// `expect:` is a map checked against the metric registry: every registered metric is accepted
/// there and in `watch` with no field of its own, and an unknown one is located with a suggestion.
#[test]
fn expect_accepts_every_registry_metric_and_locates_unknown_ones() {
    for metric in leakloop_metrics::REGISTRY {
        let name = metric.name;
        // A time metric's limits are durations (held in nanoseconds), every other one's sizes.
        let (limit, amount) = match metric.unit {
            leakloop_metrics::Unit::Bytes => ("1MiB", 1 << 20),
            leakloop_metrics::Unit::Nanoseconds => ("1ms", 1_000_000),
        };
        let text = format!(
            "{MINIMAL}watch: [{name}]\nexpect:\n  balanced: true\n  {name}: {{max_growth_per_turn: {limit}}}\n"
        );
        let scenario = parse(&text).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(
            scenario.expect.metrics[name].max_growth_per_turn,
            Some(amount)
        );
        assert_eq!(scenario.expect.balanced, Some(true));
    }
    let text = format!("{MINIMAL}expect:\n  turn_time: {{max: 5MiB}}\n");
    let err = parse(&text).unwrap_err();
    assert!(err.to_string().contains("bad duration `5MiB`"), "{err}");
    let text =
        format!("{MINIMAL}expect:\n  balanced: true\n  phys_fotprint: {{tolerance: 1MiB}}\n");
    let err = parse(&text).unwrap_err();
    assert_eq!(err.kind(), ScenarioErrorKind::Invalid);
    assert_eq!(err.message(), "unknown metric `phys_fotprint`");
    assert_eq!(err.key_path(), Some("expect.phys_fotprint"));
    assert_eq!(err.suggestion(), Some("phys_footprint"));
    let location = err.location().unwrap();
    assert_eq!((location.line, location.column), (9, 3));
    assert_eq!(err.expected()[..2], ["balanced", "max_live"]);
    assert_eq!(&err.expected()[2..], METRICS);
    // The unknown name is the first problem, whatever its value; an empty entry is not given.
    let text = format!("{MINIMAL}expect:\n  rss:\n  rsss: 1\n");
    let err = parse(&text).unwrap_err();
    assert_eq!(err.message(), "unknown metric `rsss`");
    assert_eq!(err.suggestion(), Some("rss"));
    let text = format!("{MINIMAL}expect:\n  rss:\n");
    assert!(parse(&text).unwrap().expect.metrics.is_empty());
}

#[rstest::rstest]
#[case::absent("", StopMode::Turns)]
#[case::turns("stop: turns\n", StopMode::Turns)]
#[case::decided("stop: decided\n", StopMode::Decided)]
fn stop_defaults_to_running_every_turn(#[case] line: &str, #[case] stop: StopMode) {
    assert_eq!(parse(&format!("{MINIMAL}{line}")).unwrap().stop, stop);
}

#[test]
fn a_misspelt_stop_names_the_choices() {
    let e = parse(&format!("{MINIMAL}stop: decidd\n")).unwrap_err();
    assert_eq!(e.key_path(), Some("stop"), "{e}");
    assert!(e.to_string().contains("did you mean `decided`?"), "{e}");
}

#[rstest::rstest]
#[case::default("sample: {settle: 1s}\n", Ok(1))]
#[case::several("sample: {baseline: 5, settle: 1s}\n", Ok(5))]
#[case::zero("sample: {baseline: 0}\n", Err("must be at least 1"))]
#[case::too_many("sample: {baseline: 101}\n", Err("more than the limit of 100"))]
#[case::without_load(
    "sample: {after: [close], baseline: 2}\n",
    Err("does not include `load`")
)]
fn baseline_samples_are_counted_and_need_a_load_sample(
    #[case] line: &str,
    #[case] expected: Result<u32, &str>,
) {
    match (parse(&format!("{MINIMAL}{line}")), expected) {
        (Ok(s), Ok(k)) => assert_eq!(s.sample.baseline, k),
        (Err(e), Err(why)) => {
            assert_eq!(e.key_path(), Some("sample.baseline"), "{e}");
            assert!(e.message().contains(why), "{e}");
        }
        (result, _) => panic!("{line}: {result:?}"),
    }
}

#[test]
fn a_literal_prompt_longer_than_the_context_is_refused_at_its_key() {
    let text = "name: p\nengine: {backend: sim, profile: cpu-flat, max_tokens: 2}\nturns: 1\nturn:\n  - open: {}\n  - send: {prompts: [a b, c d e]}\n  - close: {}\n";
    let err = parse(text).unwrap_err();
    assert_eq!(err.key_path(), Some("turn[1].send.prompts[1]"), "{err}");
    assert!(err.to_string().contains("context of 2 tokens"), "{err}");
    let err = parse(&text.replace("prompts: [a b, c d e]", "prompt: a b c")).unwrap_err();
    assert_eq!(err.key_path(), Some("turn[1].send.prompt"), "{err}");
}

#[test]
fn a_prompt_as_long_as_the_context_is_accepted_and_the_simulator_has_no_text_cap() {
    let text = "name: p\nengine: {backend: sim, profile: cpu-flat, max_tokens: 200000000}\nturns: 1\nturn:\n  - open: {}\n  - send: {tokens: 200000000}\n  - close: {}\n";
    parse(text).unwrap();
}

#[rstest::rstest]
#[case::simulator_shares_by_default("", Concurrency::Shared)]
#[case::exclusive_on_request("concurrency: exclusive\n", Concurrency::Exclusive)]
#[case::shared_on_request("concurrency: shared\n", Concurrency::Shared)]
fn concurrency_defaults_by_backend(#[case] line: &str, #[case] expected: Concurrency) {
    let s = parse(&format!("{MINIMAL}{line}")).unwrap();
    assert_eq!(s.effective_concurrency(), expected);
    assert_eq!(
        s.exclusive_device().is_some(),
        expected == Concurrency::Exclusive
    );
}

#[test]
fn a_real_engine_is_exclusive_unless_it_says_shared() {
    let litert = MINIMAL.replace(
        "{backend: sim, profile: cpu-flat}",
        "{backend: opencl, profile: clean}",
    );
    assert_eq!(
        parse(&litert).unwrap().effective_concurrency(),
        Concurrency::Exclusive
    );
    let shared = parse(&format!("{litert}concurrency: shared\n")).unwrap();
    assert_eq!(shared.effective_concurrency(), Concurrency::Shared);
    let err = parse(&format!("{MINIMAL}concurrency: sometimes\n")).unwrap_err();
    assert!(err.to_string().contains("concurrency"), "{err}");
}
