//! From the raw YAML mirror to a validated [`Scenario`]: units resolved, ranges and references
//! checked, defaults applied, steps checked for an order the runner can execute.
//!
//! Every check reports the first problem it finds with the key path and the position of the
//! offending value (from the [`SpanIndex`]), so one run of `leakloop check` leads to one fix.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use crate::scenario::error::{did_you_mean, ScenarioError, ScenarioErrorKind};
use crate::scenario::model::{
    BackendKind, Device, EngineSpec, Expectations, Fault, FaultKind, MetricExpectation, PromptSpec,
    SamplePlan, SamplePoint, Scenario, SessionOptions, Step, MAX_TURNS, OPENCL_PROFILES,
    SIM_PROFILES,
};
use crate::scenario::raw::{
    RawEngine, RawExpect, RawMetricExpect, RawScenario, RawSend, RawStep, UnitText,
};
use crate::scenario::spans::SpanIndex;
use crate::scenario::units::{parse_duration, parse_size, parse_tolerance, UnitError};

/// Metric names the DSL knows (bytes), for `watch` and `expect`.
pub const METRICS: &[&str] = &[
    "rss",
    "pss",
    "anon_rss",
    "swap",
    "native_heap",
    "gpu",
    "pool_allocated",
    "pool_reserved",
    "cl_mem_bytes",
];

/// Default per-call timeout for engines in a worker process.
pub const DEFAULT_CALL_TIMEOUT: Duration = Duration::from_secs(60);

/// Default context size in tokens.
pub const DEFAULT_MAX_TOKENS: u32 = 4096;

/// The longest scenario name.
const MAX_NAME_LEN: usize = 64;

/// What the validator needs to place its errors.
#[derive(Debug)]
pub(crate) struct Context<'a> {
    /// The file named in errors; relative model/lib paths resolve against its folder.
    pub file: &'a Path,
    /// The source text, for snippets.
    pub text: &'a str,
    /// Positions of every key path.
    pub spans: &'a SpanIndex,
}

impl Context<'_> {
    /// An [`ScenarioErrorKind::Invalid`] error pointing at the value of `path`.
    fn invalid(&self, path: &str, message: impl Into<String>) -> ScenarioError {
        ScenarioError::new(self.file, ScenarioErrorKind::Invalid, message)
            .key(path)
            .at(self.spans.value_or_ancestor(path), self.text)
    }

    /// An [`ScenarioErrorKind::Invalid`] error pointing at the key of `path` (for problems with
    /// a whole entry, or a missing key under an existing parent).
    fn invalid_key(&self, path: &str, message: impl Into<String>) -> ScenarioError {
        ScenarioError::new(self.file, ScenarioErrorKind::Invalid, message)
            .key(path)
            .at(self.spans.key_or_ancestor(path), self.text)
    }

    /// A unit that did not parse, quoting the text written.
    fn bad_unit(&self, path: &str, what: &str, text: &UnitText, err: UnitError) -> ScenarioError {
        self.invalid(path, format!("bad {what} `{}`: {}", text.0, err.message))
            .suggest(err.suggestion)
            .expect_one_of(err.expected)
    }

    fn size(&self, path: &str, text: &UnitText) -> Result<u64, ScenarioError> {
        parse_size(&text.0).map_err(|e| self.bad_unit(path, "size", text, e))
    }

    fn duration(&self, path: &str, text: &UnitText) -> Result<Duration, ScenarioError> {
        parse_duration(&text.0).map_err(|e| self.bad_unit(path, "duration", text, e))
    }

    /// A count in `min..=u32::MAX`.
    fn count(&self, path: &str, value: i64, min: u32) -> Result<u32, ScenarioError> {
        if value < i64::from(min) {
            return Err(self.invalid(path, format!("must be at least {min}, got {value}")));
        }
        u32::try_from(value)
            .map_err(|_| self.invalid(path, format!("{value} is too large (at most {})", u32::MAX)))
    }
}

/// Validates `raw` and resolves it into a [`Scenario`].
pub(crate) fn validate(raw: RawScenario, cx: &Context<'_>) -> Result<Scenario, ScenarioError> {
    check_name(&raw.name, cx)?;
    let warmup_turns = match raw.warmup_turns {
        Some(v) => cx.count("warmup_turns", v, 0)?,
        None => 0,
    };
    let turns = cx.count("turns", raw.turns, 1)?;
    if u64::from(warmup_turns) + u64::from(turns) > u64::from(MAX_TURNS) {
        let path = if turns > MAX_TURNS {
            "turns"
        } else {
            "warmup_turns"
        };
        return Err(cx.invalid(
            path,
            format!(
                "warmup_turns + turns = {} is more than the limit of {MAX_TURNS} turns",
                u64::from(warmup_turns) + u64::from(turns)
            ),
        ));
    }
    let total_turns = warmup_turns + turns;
    let reload_every = match raw.reload_every {
        Some(v) => cx.count("reload_every", v, 0)?,
        None => 0,
    };
    let inline_profiles = raw.profiles.unwrap_or_default();
    check_inline_profiles(&inline_profiles, cx)?;
    let engine = validate_engine(raw.engine, inline_profiles, cx)?;
    let turn = validate_turn(&raw.turn, cx)?;
    let sample = validate_sample(raw.sample, &turn, cx)?;
    let watch = validate_watch(raw.watch.unwrap_or_default(), cx)?;
    let faults = validate_faults(raw.faults.unwrap_or_default(), &engine, total_turns, cx)?;
    let expect = validate_expect(raw.expect.unwrap_or_default(), cx)?;
    check_samples_for_expectations(&expect, &sample, cx)?;
    Ok(Scenario {
        name: raw.name,
        description: raw.description,
        source: Some(cx.file.to_owned()),
        engine,
        warmup_turns,
        turns,
        turn,
        reload_every,
        sample,
        watch,
        faults,
        expect,
        seed: raw.seed.unwrap_or(0),
    })
}

fn is_identifier(name: &str) -> bool {
    !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_')
}

fn check_name(name: &str, cx: &Context<'_>) -> Result<(), ScenarioError> {
    if !is_identifier(name) {
        return Err(cx.invalid(
            "name",
            format!(
                "`{name}` is not a valid name: use lowercase letters, digits, `-` and `_` \
                 (it names report files)"
            ),
        ));
    }
    if name.len() > MAX_NAME_LEN {
        return Err(cx.invalid(
            "name",
            format!(
                "name is {} characters long; the limit is {MAX_NAME_LEN}",
                name.len()
            ),
        ));
    }
    Ok(())
}

fn check_inline_profiles(
    profiles: &BTreeMap<String, sim_backend::ProfileSpec>,
    cx: &Context<'_>,
) -> Result<(), ScenarioError> {
    for (name, spec) in profiles {
        let path = format!("profiles.{name}");
        if !is_identifier(name) {
            return Err(cx.invalid_key(
                &path,
                format!("`{name}` is not a valid profile name: use lowercase letters, digits, `-` and `_`"),
            ));
        }
        if SIM_PROFILES.contains(&name.as_str()) {
            return Err(cx.invalid_key(
                &path,
                format!("`{name}` is a built-in simulator profile; give the inline profile another name"),
            ));
        }
        // The simulator's own checks (sizes, probabilities, token counts), at `check` time
        // rather than when `run` builds the engine.
        if let Err(e) = sim_backend::Profile::from_spec(name.clone(), spec.clone()) {
            return Err(cx.invalid_key(&format!("{path}.{}", e.field), e.problem));
        }
    }
    Ok(())
}

fn validate_engine(
    raw: RawEngine,
    inline_profiles: BTreeMap<String, sim_backend::ProfileSpec>,
    cx: &Context<'_>,
) -> Result<EngineSpec, ScenarioError> {
    let backend = raw.backend;
    match (backend, &raw.profile) {
        (BackendKind::Sim, None) => {
            return Err(cx
                .invalid_key(
                    "engine.profile",
                    "the sim backend needs `profile`: a built-in profile or one defined under `profiles`",
                )
                .expect_one_of(SIM_PROFILES.iter().copied().chain(inline_profiles.keys().map(String::as_str))));
        }
        (BackendKind::Sim, Some(profile)) => {
            let known = || {
                SIM_PROFILES
                    .iter()
                    .copied()
                    .chain(inline_profiles.keys().map(String::as_str))
            };
            if !known().any(|p| p == profile) {
                return Err(cx
                    .invalid(
                        "engine.profile",
                        format!("unknown simulator profile `{profile}`"),
                    )
                    .suggest(did_you_mean(profile, known()))
                    .expect_one_of(known()));
            }
        }
        (BackendKind::Opencl, Some(profile)) if !OPENCL_PROFILES.contains(&profile.as_str()) => {
            return Err(cx
                .invalid(
                    "engine.profile",
                    format!("unknown opencl profile `{profile}`"),
                )
                .suggest(did_you_mean(profile, OPENCL_PROFILES.iter().copied()))
                .expect_one_of(OPENCL_PROFILES.iter().copied()));
        }
        _ => {}
    }
    if backend == BackendKind::LitertLm && raw.model.is_none() {
        return Err(cx.invalid_key(
            "engine.model",
            "the litert-lm backend needs `model`: the path of a .litertlm file",
        ));
    }
    let folder = cx.file.parent().unwrap_or(Path::new(""));
    let resolve = |p: &str| {
        let p = Path::new(p);
        if p.is_absolute() {
            p.to_owned()
        } else {
            folder.join(p)
        }
    };
    if raw.model.as_deref() == Some("") {
        return Err(cx.invalid("engine.model", "`model` is empty"));
    }
    if raw.lib.as_deref() == Some("") {
        return Err(cx.invalid("engine.lib", "`lib` is empty"));
    }
    let max_tokens = match raw.max_tokens {
        Some(v) => cx.count("engine.max_tokens", v, 1)?,
        None => DEFAULT_MAX_TOKENS,
    };
    let call_timeout = match &raw.call_timeout {
        Some(text) => {
            let t = cx.duration("engine.call_timeout", text)?;
            if t.is_zero() {
                return Err(cx.invalid("engine.call_timeout", "`call_timeout` must be more than 0"));
            }
            t
        }
        None => DEFAULT_CALL_TIMEOUT,
    };
    Ok(EngineSpec {
        backend,
        profile: raw.profile,
        inline_profiles,
        model: raw.model.as_deref().map(resolve),
        device: raw.device.unwrap_or(Device::Cpu),
        max_tokens,
        lib: raw.lib.as_deref().map(resolve),
        call_timeout,
        isolate: raw.isolate.unwrap_or(backend != BackendKind::Sim),
    })
}

fn step_name(step: &RawStep) -> &'static str {
    match step {
        RawStep::Open(_) => "open",
        RawStep::Send(_) => "send",
        RawStep::Generate(_) => "generate",
        RawStep::Cancel(_) => "cancel",
        RawStep::Close(_) => "close",
        RawStep::Idle(_) => "idle",
    }
}

fn validate_turn(steps: &[RawStep], cx: &Context<'_>) -> Result<Vec<Step>, ScenarioError> {
    if steps.is_empty() {
        return Err(cx.invalid(
            "turn",
            "`turn` has no steps; a turn is usually open, send, generate, close",
        ));
    }
    let mut out = Vec::with_capacity(steps.len());
    // The index of the `open` whose session is live, if any.
    let mut open_at: Option<usize> = None;
    for (i, step) in steps.iter().enumerate() {
        let name = step_name(step);
        let path = format!("turn[{i}].{name}");
        let needs_session = matches!(
            step,
            RawStep::Send(_) | RawStep::Generate(_) | RawStep::Cancel(_) | RawStep::Close(_)
        );
        if needs_session && open_at.is_none() {
            return Err(cx.invalid_key(
                &path,
                format!("`{name}` needs an open session, but no `open` step comes before it in this turn"),
            ));
        }
        let resolved = match step {
            RawStep::Open(o) => {
                if let Some(at) = open_at {
                    return Err(cx.invalid_key(
                        &path,
                        format!("a session is already open (from turn[{at}]); `close` it before opening another"),
                    ));
                }
                open_at = Some(i);
                Step::Open(validate_open(o, &path, cx)?)
            }
            RawStep::Send(s) => Step::Send(validate_send(s, &path, cx)?),
            RawStep::Generate(g) => Step::Generate {
                max_output_tokens: cx.count(
                    &format!("{path}.max_output_tokens"),
                    g.max_output_tokens,
                    1,
                )?,
            },
            RawStep::Cancel(c) => {
                let max_output_tokens =
                    cx.count(&format!("{path}.max_output_tokens"), c.max_output_tokens, 1)?;
                let after_tokens = cx.count(&format!("{path}.after_tokens"), c.after_tokens, 0)?;
                if after_tokens >= max_output_tokens {
                    return Err(cx.invalid(
                        &format!("{path}.after_tokens"),
                        format!(
                            "`after_tokens` ({after_tokens}) must be less than `max_output_tokens` \
                             ({max_output_tokens}), or the generation ends before it is cancelled"
                        ),
                    ));
                }
                Step::Cancel {
                    after_tokens,
                    max_output_tokens,
                }
            }
            RawStep::Close(_) => {
                open_at = None;
                Step::Close
            }
            RawStep::Idle(text) => Step::Idle(cx.duration(&path, text)?),
        };
        out.push(resolved);
    }
    if let Some(at) = open_at {
        return Err(cx.invalid_key(
            &format!("turn[{at}].open"),
            "this session is never closed in the same turn; add a `close: {}` step after it",
        ));
    }
    Ok(out)
}

fn validate_open(
    o: &crate::scenario::raw::RawOpen,
    path: &str,
    cx: &Context<'_>,
) -> Result<SessionOptions, ScenarioError> {
    if let Some(t) = o.temperature {
        if !(0.0..=100.0).contains(&t) {
            return Err(cx.invalid(
                &format!("{path}.temperature"),
                format!("temperature must be between 0 and 100, got {t}"),
            ));
        }
    }
    if let Some(p) = o.top_p {
        if !(p > 0.0 && p <= 1.0) {
            return Err(cx.invalid(
                &format!("{path}.top_p"),
                format!("top_p must be in (0, 1], got {p}"),
            ));
        }
    }
    let top_k = o
        .top_k
        .map(|k| cx.count(&format!("{path}.top_k"), k, 1))
        .transpose()?;
    Ok(SessionOptions {
        temperature: o.temperature.map(|t| t as f32),
        top_k,
        top_p: o.top_p.map(|p| p as f32),
        seed: o.seed,
    })
}

fn validate_send(s: &RawSend, path: &str, cx: &Context<'_>) -> Result<PromptSpec, ScenarioError> {
    let given = [s.prompt.is_some(), s.prompts.is_some(), s.tokens.is_some()]
        .iter()
        .filter(|g| **g)
        .count();
    if given != 1 {
        return Err(cx
            .invalid(
                path,
                format!(
                    "`send` needs exactly one of `prompt`, `prompts` or `tokens`, found {given}"
                ),
            )
            .expect_one_of(["prompt", "prompts", "tokens"]));
    }
    if let Some(text) = &s.prompt {
        return Ok(PromptSpec::Text(text.clone()));
    }
    if let Some(texts) = &s.prompts {
        if texts.is_empty() {
            return Err(cx.invalid(&format!("{path}.prompts"), "`prompts` is an empty list"));
        }
        return Ok(PromptSpec::Cycle(texts.clone()));
    }
    let counts = &s.tokens.as_ref().map(|t| t.0.clone()).unwrap_or_default();
    if counts.is_empty() {
        return Err(cx.invalid(&format!("{path}.tokens"), "`tokens` is an empty list"));
    }
    let mut tokens = Vec::with_capacity(counts.len());
    for (i, &c) in counts.iter().enumerate() {
        let item = format!("{path}.tokens[{i}]");
        // A single count may be written as a scalar; then its span is `tokens` itself.
        let item = if cx.spans.get(&item).is_some() {
            item
        } else {
            format!("{path}.tokens")
        };
        tokens.push(cx.count(&item, c, 1)?);
    }
    Ok(PromptSpec::Tokens(tokens))
}

fn sample_point_name(p: SamplePoint) -> &'static str {
    match p {
        SamplePoint::Load => "load",
        SamplePoint::Open => "open",
        SamplePoint::Generate => "generate",
        SamplePoint::Close => "close",
        SamplePoint::Idle => "idle",
    }
}

fn validate_sample(
    raw: Option<crate::scenario::raw::RawSample>,
    turn: &[Step],
    cx: &Context<'_>,
) -> Result<SamplePlan, ScenarioError> {
    let Some(raw) = raw else {
        return Ok(SamplePlan {
            after: vec![SamplePoint::Load, SamplePoint::Close],
            settle: Duration::ZERO,
        });
    };
    let after = raw
        .after
        .unwrap_or_else(|| vec![SamplePoint::Load, SamplePoint::Close]);
    if after.is_empty() {
        return Err(cx.invalid("sample.after", "`after` is empty: nothing would be sampled"));
    }
    for (i, point) in after.iter().enumerate() {
        let path = format!("sample.after[{i}]");
        let name = sample_point_name(*point);
        if after[..i].contains(point) {
            return Err(cx.invalid(&path, format!("`{name}` is listed twice")));
        }
        let happens = match point {
            SamplePoint::Load => true,
            SamplePoint::Open => turn.iter().any(|s| matches!(s, Step::Open(_))),
            SamplePoint::Generate => turn
                .iter()
                .any(|s| matches!(s, Step::Generate { .. } | Step::Cancel { .. })),
            SamplePoint::Close => turn.iter().any(|s| matches!(s, Step::Close)),
            SamplePoint::Idle => turn.iter().any(|s| matches!(s, Step::Idle(_))),
        };
        if !happens {
            return Err(cx.invalid(
                &path,
                format!("the turn has no `{name}` step, so there is nothing to sample after"),
            ));
        }
    }
    let settle = match &raw.settle {
        Some(text) => cx.duration("sample.settle", text)?,
        None => Duration::ZERO,
    };
    Ok(SamplePlan { after, settle })
}

fn unknown_metric(path: &str, name: &str, cx: &Context<'_>) -> ScenarioError {
    cx.invalid(path, format!("unknown metric `{name}`"))
        .suggest(did_you_mean(name, METRICS.iter().copied()))
        .expect_one_of(METRICS.iter().copied())
}

fn validate_watch(watch: Vec<String>, cx: &Context<'_>) -> Result<Vec<String>, ScenarioError> {
    for (i, name) in watch.iter().enumerate() {
        let path = format!("watch[{i}]");
        if !METRICS.contains(&name.as_str()) {
            return Err(unknown_metric(&path, name, cx));
        }
        if watch[..i].contains(name) {
            return Err(cx.invalid(&path, format!("`{name}` is listed twice")));
        }
    }
    Ok(watch)
}

fn validate_faults(
    faults: Vec<crate::scenario::raw::RawFault>,
    engine: &EngineSpec,
    total_turns: u32,
    cx: &Context<'_>,
) -> Result<Vec<Fault>, ScenarioError> {
    let mut out = Vec::with_capacity(faults.len());
    for (i, f) in faults.into_iter().enumerate() {
        let at_turn = cx.count(&format!("faults[{i}].at_turn"), f.at_turn, 1)?;
        if at_turn > total_turns {
            return Err(cx.invalid(
                &format!("faults[{i}].at_turn"),
                format!("turn {at_turn} never runs: the scenario has {total_turns} turns (warm-up included)"),
            ));
        }
        if let Some(why) = fault_refusal(f.kind, engine) {
            return Err(cx.invalid(&format!("faults[{i}].kind"), why));
        }
        out.push(Fault {
            at_turn,
            kind: f.kind,
        });
    }
    Ok(out)
}

/// Why `kind` cannot be injected into `engine`, if it cannot. `skip_close` is harness-side and
/// works everywhere; `crash` and `hang` are struck by the worker process, so any engine running
/// isolated can take them (in-process, only the simulator fakes them); `generate_error` is a
/// simulator fault.
fn fault_refusal(kind: FaultKind, engine: &EngineSpec) -> Option<String> {
    let backend = engine.backend.as_str();
    match kind {
        FaultKind::SkipClose => None,
        _ if engine.backend == BackendKind::Sim => None,
        FaultKind::Crash | FaultKind::Hang if engine.isolate => None,
        FaultKind::Crash | FaultKind::Hang => Some(format!(
            "`{}` is struck by the worker process, and this `{backend}` engine runs in-process: \
             set `engine.isolate: true` (the default for real engines)",
            fault_name(kind)
        )),
        FaultKind::GenerateError => Some(format!(
            "only the sim backend can inject `generate_error`; `{backend}` supports `skip_close`, \
             and `crash` and `hang` when isolated"
        )),
    }
}

fn fault_name(kind: FaultKind) -> &'static str {
    match kind {
        FaultKind::Crash => "crash",
        FaultKind::Hang => "hang",
        FaultKind::GenerateError => "generate_error",
        FaultKind::SkipClose => "skip_close",
    }
}

fn validate_expect(raw: RawExpect, cx: &Context<'_>) -> Result<Expectations, ScenarioError> {
    let mut metrics = BTreeMap::new();
    for (name, entry) in raw.metric_fields() {
        let Some(entry) = entry else { continue };
        let path = format!("expect.{name}");
        metrics.insert(name.to_owned(), validate_metric(entry, &path, cx)?);
    }
    Ok(Expectations {
        balanced: raw.balanced.unwrap_or(false),
        metrics,
    })
}

fn validate_metric(
    raw: &RawMetricExpect,
    path: &str,
    cx: &Context<'_>,
) -> Result<MetricExpectation, ScenarioError> {
    if raw.tolerance.is_none() && raw.warmup_budget.is_none() && raw.max_growth_per_turn.is_none() {
        return Err(cx
            .invalid(
                path,
                "sets no limit; give `tolerance`, `warmup_budget` or `max_growth_per_turn` \
                 (to only plot a metric, list it under `watch`)",
            )
            .expect_one_of(["tolerance", "warmup_budget", "max_growth_per_turn"]));
    }
    let tolerance = match &raw.tolerance {
        Some(text) => {
            let p = format!("{path}.tolerance");
            Some(parse_tolerance(&text.0).map_err(|e| cx.bad_unit(&p, "tolerance", text, e))?)
        }
        None => None,
    };
    let warmup_budget = raw
        .warmup_budget
        .as_ref()
        .map(|t| cx.size(&format!("{path}.warmup_budget"), t))
        .transpose()?;
    let max_growth_per_turn = raw
        .max_growth_per_turn
        .as_ref()
        .map(|t| cx.size(&format!("{path}.max_growth_per_turn"), t))
        .transpose()?;
    Ok(MetricExpectation {
        tolerance,
        warmup_budget,
        max_growth_per_turn,
    })
}

/// Metric expectations are judged on the post-close series against the after-load baseline, so
/// both points must be sampled.
fn check_samples_for_expectations(
    expect: &Expectations,
    sample: &SamplePlan,
    cx: &Context<'_>,
) -> Result<(), ScenarioError> {
    if expect.metrics.is_empty() {
        return Ok(());
    }
    for needed in [SamplePoint::Load, SamplePoint::Close] {
        if !sample.after.contains(&needed) {
            return Err(cx.invalid(
                "sample.after",
                format!(
                    "`expect` judges memory after close against the baseline after load, \
                     so `sample.after` must include `{}`",
                    sample_point_name(needed)
                ),
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;
    use crate::scenario::{parse_scenario, ScenarioErrorKind, Tolerance};

    fn parse(text: &str) -> Result<Scenario, ScenarioError> {
        parse_scenario(text, Path::new("/scenarios/s.yaml"))
    }

    const MINIMAL: &str = "name: m\nengine: {backend: sim, profile: cpu-flat}\nturns: 2\nturn:\n  - open:\n  - close:\n";

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
                    seed: Some(3)
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
        assert!(s.expect.balanced);
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
        let text = format!(
            "name: f\nengine: {engine}\nturns: 3\nturn: [open: {{}}, close: {{}}]\nfaults: [{{at_turn: 1, kind: {kind}}}]\n"
        );
        match (parse(&text), refused) {
            (Ok(s), None) => assert_eq!(s.faults.len(), 1),
            (Err(e), Some(why)) => {
                assert_eq!(e.key_path(), Some("faults[0].kind"), "{e}");
                assert!(e.message().contains(why), "{e}");
            }
            (result, _) => panic!("{engine} with {kind}: {result:?}"),
        }
    }

    #[test]
    fn idle_may_come_anywhere_and_sessions_may_repeat() {
        let text = "name: i\nengine: {backend: sim, profile: cpu-flat}\nturns: 1\nturn: [idle: 1s, open: {}, idle: 0, close: {}, open: {}, close: {}, idle: 1m]\n";
        assert_eq!(parse(text).unwrap().turn.len(), 7);
    }

    #[test]
    fn metrics_list_matches_expect_fields() {
        let names: Vec<&str> = RawExpect::default()
            .metric_fields()
            .iter()
            .map(|(n, _)| *n)
            .collect();
        assert_eq!(names, METRICS);
    }
}
