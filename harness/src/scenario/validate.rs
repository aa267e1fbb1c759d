//! From the raw YAML mirror to a validated [`Scenario`]: units resolved, ranges and references
//! checked, defaults applied, steps checked for an order the runner can execute.
//!
//! Every check reports the first problem it finds with the key path and the position of the
//! offending value (from the [`SpanIndex`]), so one run of `leakloop check` leads to one fix.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use crate::backend::EngineInput;
use crate::scenario::attach::check_attach_target;
use crate::scenario::error::{did_you_mean, ScenarioError, ScenarioErrorKind};
use crate::scenario::model::text_tokens;
use crate::scenario::model::{
    Device, EngineSpec, Expectations, Fault, FaultKind, MetricExpectation, PromptSpec, SamplePlan,
    SamplePoint, Scenario, SessionOptions, Step, StopMode, Tolerance, MAX_BASELINE_SAMPLES,
    MAX_TURNS, SIM_PROFILES,
};
use crate::scenario::raw::{
    RawEngine, RawExpect, RawMetricExpect, RawScenario, RawSend, RawStep, UnitText,
    EXPECT_BALANCED, EXPECT_MAX_LIVE,
};
use crate::scenario::sessions::validate_sessions;
use crate::scenario::spans::SpanIndex;
use crate::scenario::target::validate_target;
use crate::scenario::units::{parse_duration, parse_size, parse_tolerance, UnitError};

/// Metric names the DSL knows (bytes), for `watch` and `expect`: every metric of the registry.
pub const METRICS: &[&str] = &leakloop_metrics::NAMES;

/// Default per-call timeout for engines in a worker process.
pub const DEFAULT_CALL_TIMEOUT: Duration = Duration::from_secs(60);

/// The longest generated prompt for a backend that reads prompt words (about 7 MiB of text).
pub const MAX_GENERATED_PROMPT_TOKENS: u32 = 1 << 20;

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
    pub(crate) fn invalid(&self, path: &str, message: impl Into<String>) -> ScenarioError {
        ScenarioError::new(self.file, ScenarioErrorKind::Invalid, message)
            .key(path)
            .at(self.spans.value_or_ancestor(path), self.text)
    }

    /// An [`ScenarioErrorKind::Invalid`] error pointing at the key of `path` (for problems with
    /// a whole entry, or a missing key under an existing parent).
    pub(crate) fn invalid_key(&self, path: &str, message: impl Into<String>) -> ScenarioError {
        ScenarioError::new(self.file, ScenarioErrorKind::Invalid, message)
            .key(path)
            .at(self.spans.key_or_ancestor(path), self.text)
    }

    /// A unit that did not parse, quoting the text written.
    fn bad_unit(&self, path: &str, what: &str, text: &UnitText, err: UnitError) -> ScenarioError {
        self.invalid(path, err.describe(what, &text.0))
            .suggest(err.suggestion)
            .expect_one_of(err.expected)
    }

    fn size(&self, path: &str, text: &UnitText) -> Result<u64, ScenarioError> {
        parse_size(&text.0).map_err(|e| self.bad_unit(path, "size", text, e))
    }

    pub(crate) fn duration(&self, path: &str, text: &UnitText) -> Result<Duration, ScenarioError> {
        parse_duration(&text.0).map_err(|e| self.bad_unit(path, "duration", text, e))
    }

    /// A duration more than zero at `path`, or `default` when none is written.
    pub(crate) fn positive_duration(
        &self,
        path: &str,
        text: Option<&UnitText>,
        default: Duration,
    ) -> Result<Duration, ScenarioError> {
        let Some(text) = text else {
            return Ok(default);
        };
        let t = self.duration(path, text)?;
        if t.is_zero() {
            let key = path.rsplit('.').next().unwrap_or(path);
            return Err(self.invalid(path, format!("`{key}` must be more than 0")));
        }
        Ok(t)
    }

    /// A count in `min..=u32::MAX`.
    pub(crate) fn count(&self, path: &str, value: i64, min: u32) -> Result<u32, ScenarioError> {
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
    let max_turns = validate_max_turns(&raw, warmup_turns, turns, cx)?;
    let total_turns = warmup_turns + max_turns.unwrap_or(turns);
    let reload_every = match raw.reload_every {
        Some(v) => cx.count("reload_every", v, 0)?,
        None => 0,
    };
    let inline_profiles = raw.profiles.unwrap_or_default();
    check_inline_profiles(&inline_profiles, cx)?;
    let isolate_written = raw.engine.isolate;
    let mut engine = validate_engine(raw.engine, inline_profiles, cx)?;
    let target = validate_target(raw.target, &engine, cx)?;
    if let Some(why) = crate::backend::of(engine.backend).remote_refusal {
        if target.remote_worker().is_some() {
            return Err(cx.invalid_key("target", why));
        }
    }
    if let Some(attach) = &engine.attach {
        check_attach_target(attach, &target, cx)?;
    }
    if target.remote_worker().is_some() {
        // The engine runs in the worker on the target; there is no in-process form of that.
        if isolate_written == Some(false) {
            return Err(cx.invalid(
                "engine.isolate",
                "a remote target runs the engine in a worker process there; `isolate: false` \
                 cannot hold",
            ));
        }
        engine.isolate = true;
    }
    let turn = match (&raw.turn, &engine.attach) {
        (Some(steps), None) => validate_turn(steps, &engine, cx)?,
        (None, None) => {
            // Placed at `turns`, which every scenario has and `turn` usually follows.
            return Err(ScenarioError::new(
                cx.file,
                ScenarioErrorKind::Invalid,
                "missing key `turn`: list the steps of one turn (usually open, send, generate, close)",
            )
            .key("turn")
            .at(cx.spans.key_or_ancestor("turns"), cx.text));
        }
        (Some(_), Some(_)) => {
            return Err(cx.invalid_key(
                "turn",
                "an attached process runs its own turns and marks their ends; remove `turn`",
            ))
        }
        (None, Some(_)) => {
            check_attached_loop(raw.reload_every, raw.faults.as_deref(), cx)?;
            Vec::new()
        }
    };
    let sample = validate_sample(raw.sample, &turn, engine.attach.is_some(), cx)?;
    let watch = validate_watch(raw.watch.unwrap_or_default(), cx)?;
    let faults = validate_faults(
        raw.faults.unwrap_or_default(),
        &engine,
        &turn,
        total_turns,
        cx,
    )?;
    let expect = validate_expect(raw.expect.unwrap_or_default(), cx)?;
    check_samples_for_expectations(&expect, &sample, cx)?;
    let sessions = validate_sessions(raw.sessions, cx)?;
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
        stop: raw.stop.unwrap_or_default(),
        max_turns,
        target,
        concurrency: raw.concurrency,
        sessions,
    })
}

/// `max_turns`: at least `turns`, within the turn limit with the warm-up, and only where `turns`
/// is the minimum (`stop: turns`).
fn validate_max_turns(
    raw: &RawScenario,
    warmup_turns: u32,
    turns: u32,
    cx: &Context<'_>,
) -> Result<Option<u32>, ScenarioError> {
    let Some(value) = raw.max_turns else {
        return Ok(None);
    };
    let max_turns = cx.count("max_turns", value, turns.max(1))?;
    if raw.stop == Some(StopMode::Decided) {
        return Err(cx.invalid(
            "max_turns",
            "`max_turns` extends a `stop: turns` run; with `stop: decided`, `turns` is already \
             the maximum",
        ));
    }
    if u64::from(warmup_turns) + u64::from(max_turns) > u64::from(MAX_TURNS) {
        return Err(cx.invalid(
            "max_turns",
            format!(
                "warmup_turns + max_turns = {} is more than the limit of {MAX_TURNS} turns",
                u64::from(warmup_turns) + u64::from(max_turns)
            ),
        ));
    }
    Ok(Some(max_turns))
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
    mut raw: RawEngine,
    inline_profiles: BTreeMap<String, sim_backend::ProfileSpec>,
    cx: &Context<'_>,
) -> Result<EngineSpec, ScenarioError> {
    let backend = crate::backend::of(raw.backend);
    let folder = cx.file.parent().unwrap_or(Path::new(""));
    let parts = (backend.check)(
        &mut raw,
        &EngineInput {
            inline_profiles: &inline_profiles,
            folder,
            cx,
        },
    )?;
    let folder = parts.folder.as_deref().unwrap_or(folder);
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
    let threads = match raw.threads {
        Some(v) => Some(cx.count("engine.threads", v, 1)?),
        None => None,
    };
    let call_timeout = cx.positive_duration(
        "engine.call_timeout",
        raw.call_timeout.as_ref(),
        DEFAULT_CALL_TIMEOUT,
    )?;
    Ok(EngineSpec {
        backend: backend.kind,
        profile: raw.profile,
        inline_profiles,
        model: raw.model.as_deref().map(resolve),
        device: raw.device.unwrap_or(Device::Cpu),
        max_tokens,
        threads,
        lib: raw.lib.as_deref().map(resolve),
        call_timeout,
        isolate: raw.isolate.unwrap_or(backend.isolate_by_default),
        attach: parts.attach,
        exec: parts.exec,
        attribute: raw.attribute.unwrap_or(false),
    })
}

/// Reloads and faults are things the runner does to an engine it drives; an attached process
/// runs its own loop.
fn check_attached_loop(
    reload_every: Option<i64>,
    faults: Option<&[crate::scenario::raw::RawFault]>,
    cx: &Context<'_>,
) -> Result<(), ScenarioError> {
    if reload_every.is_some_and(|k| k != 0) {
        return Err(cx.invalid(
            "reload_every",
            "leakloop cannot reload an attached process; remove `reload_every`",
        ));
    }
    if faults.is_some_and(|f| !f.is_empty()) {
        return Err(cx.invalid_key(
            "faults",
            "faults are injected into engines leakloop drives; an attached process runs its own loop",
        ));
    }
    Ok(())
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

fn validate_turn(
    steps: &[RawStep],
    engine: &EngineSpec,
    cx: &Context<'_>,
) -> Result<Vec<Step>, ScenarioError> {
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
            RawStep::Send(s) => Step::Send(validate_send(s, &path, engine, cx)?),
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
        session: None,
    })
}

fn validate_send(
    s: &RawSend,
    path: &str,
    engine: &EngineSpec,
    cx: &Context<'_>,
) -> Result<PromptSpec, ScenarioError> {
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
    // A list item's own span where it has one; a scalar written for a list has only the key's.
    let item_path = |key: &str, i: usize| {
        let item = format!("{path}.{key}[{i}]");
        if cx.spans.get(&item).is_some() {
            item
        } else {
            format!("{path}.{key}")
        }
    };
    if let Some(text) = &s.prompt {
        check_prompt_fits(
            text_tokens(text),
            false,
            &format!("{path}.prompt"),
            engine,
            cx,
        )?;
        return Ok(PromptSpec::Text(text.clone()));
    }
    if let Some(texts) = &s.prompts {
        if texts.is_empty() {
            return Err(cx.invalid(&format!("{path}.prompts"), "`prompts` is an empty list"));
        }
        for (i, text) in texts.iter().enumerate() {
            check_prompt_fits(
                text_tokens(text),
                false,
                &item_path("prompts", i),
                engine,
                cx,
            )?;
        }
        return Ok(PromptSpec::Cycle(texts.clone()));
    }
    let counts = &s.tokens.as_ref().map(|t| t.0.clone()).unwrap_or_default();
    if counts.is_empty() {
        return Err(cx.invalid(&format!("{path}.tokens"), "`tokens` is an empty list"));
    }
    let mut tokens = Vec::with_capacity(counts.len());
    for (i, &c) in counts.iter().enumerate() {
        let item = item_path("tokens", i);
        let count = cx.count(&item, c, 1)?;
        check_prompt_fits(count, true, &item, engine, cx)?;
        tokens.push(count);
    }
    Ok(PromptSpec::Tokens(tokens))
}

/// Refuses a prompt longer than the engine's context (`engine.max_tokens`), and a generated
/// prompt longer than [`MAX_GENERATED_PROMPT_TOKENS`] for an engine that reads its words (they
/// are made in memory before each send).
fn check_prompt_fits(
    tokens: u32,
    generated: bool,
    path: &str,
    engine: &EngineSpec,
    cx: &Context<'_>,
) -> Result<(), ScenarioError> {
    let what = if generated {
        format!("a prompt of {tokens} tokens")
    } else {
        format!("this prompt ({tokens} words, about as many tokens)")
    };
    if tokens > engine.max_tokens {
        return Err(cx.invalid(
            path,
            format!(
                "{what} does not fit the engine's context of {} tokens (`engine.max_tokens`); \
                 send fewer tokens or raise `engine.max_tokens`",
                engine.max_tokens
            ),
        ));
    }
    if generated && engine.backend.reads_prompt_text() && tokens > MAX_GENERATED_PROMPT_TOKENS {
        return Err(cx.invalid(
            path,
            format!(
                "{what} is more than the {MAX_GENERATED_PROMPT_TOKENS} tokens a generated prompt \
                 for the {} backend may have (its words are made in memory for every send)",
                engine.backend.as_str()
            ),
        ));
    }
    Ok(())
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
    attached: bool,
    cx: &Context<'_>,
) -> Result<SamplePlan, ScenarioError> {
    let Some(raw) = raw else {
        return Ok(SamplePlan {
            after: vec![SamplePoint::Load, SamplePoint::Close],
            settle: Duration::ZERO,
            baseline: 1,
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
            // An attached process's only turn boundary is its marker, sampled as `close`.
            SamplePoint::Close if attached => true,
            _ if attached => {
                return Err(cx.invalid(
                    &path,
                    format!(
                        "an attached process is sampled at its turn markers (`close`) and after \
                         attaching (`load`), not after `{name}`"
                    ),
                ))
            }
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
    let baseline = match raw.baseline {
        Some(k) => {
            let k = cx.count("sample.baseline", k, 1)?;
            if k > MAX_BASELINE_SAMPLES {
                return Err(cx.invalid(
                    "sample.baseline",
                    format!(
                        "{k} baseline samples is more than the limit of {MAX_BASELINE_SAMPLES}"
                    ),
                ));
            }
            if !after.contains(&SamplePoint::Load) {
                return Err(cx.invalid(
                    "sample.baseline",
                    "baseline samples are taken after load, but `sample.after` does not include `load`",
                ));
            }
            k
        }
        None => 1,
    };
    Ok(SamplePlan {
        after,
        settle,
        baseline,
    })
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
    turn: &[Step],
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
        if let Some(why) = (crate::backend::of(engine.backend).fault_refusal)(f.kind, engine)
            .or_else(|| never_strikes(f.kind, engine, turn))
        {
            return Err(cx.invalid(&format!("faults[{i}].kind"), why));
        }
        out.push(Fault {
            at_turn,
            kind: f.kind,
        });
    }
    Ok(out)
}

/// Why `kind` would never strike in this turn, if it would not. Engine faults strike during
/// generation; a worker process that strikes `crash` or `hang` does it when the session opens
/// if the turn never generates.
fn never_strikes(kind: FaultKind, engine: &EngineSpec, turn: &[Step]) -> Option<String> {
    let generates = turn
        .iter()
        .any(|s| matches!(s, Step::Generate { .. } | Step::Cancel { .. }));
    let opens = turn.iter().any(|s| matches!(s, Step::Open(_)));
    let name = fault_name(kind);
    match kind {
        FaultKind::SkipClose => None,
        _ if generates => None,
        FaultKind::Crash | FaultKind::Hang if engine.isolate && opens => None,
        FaultKind::Crash | FaultKind::Hang if engine.isolate => Some(format!(
            "`{name}` strikes when a session opens or generates, and the turn has no `open`, \
             `generate` or `cancel` step"
        )),
        _ => Some(format!(
            "`{name}` strikes during generation, and the turn has no `generate` or `cancel` step"
        )),
    }
}

/// A fault's name as written in `faults[].kind`.
pub(crate) fn fault_name(kind: FaultKind) -> &'static str {
    match kind {
        FaultKind::Crash => "crash",
        FaultKind::Hang => "hang",
        FaultKind::GenerateError => "generate_error",
        FaultKind::SkipClose => "skip_close",
    }
}

fn validate_expect(raw: RawExpect, cx: &Context<'_>) -> Result<Expectations, ScenarioError> {
    if let Some(name) = &raw.unknown {
        let known = || {
            [EXPECT_BALANCED, EXPECT_MAX_LIVE]
                .into_iter()
                .chain(METRICS.iter().copied())
        };
        return Err(cx
            .invalid_key(
                &format!("expect.{name}"),
                format!("unknown metric `{name}`"),
            )
            .suggest(did_you_mean(name, known()))
            .expect_one_of(known()));
    }
    let mut metrics = BTreeMap::new();
    for (name, entry) in &raw.metrics {
        let path = format!("expect.{name}");
        metrics.insert(name.clone(), validate_metric(name, entry, &path, cx)?);
    }
    let mut max_live = BTreeMap::new();
    for (kind, bound) in raw.max_live.unwrap_or_default() {
        let path = format!("expect.{EXPECT_MAX_LIVE}.{kind}");
        let valid = !kind.is_empty()
            && kind.len() <= 128
            && !kind.starts_with('/')
            && !kind.ends_with('/')
            && kind
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "_./-".contains(c));
        if !valid {
            return Err(cx.invalid(
                &path,
                "a ledger kind is a name such as `conversation`, or `source/kind` such as \
                 `sim/conversation` (letters, digits, `_`, `.`, `-`, at most 128 characters)"
                    .to_owned(),
            ));
        }
        max_live.insert(kind, bound);
    }
    Ok(Expectations {
        balanced: raw.balanced,
        max_live,
        metrics,
    })
}

fn validate_metric(
    name: &str,
    raw: &RawMetricExpect,
    path: &str,
    cx: &Context<'_>,
) -> Result<MetricExpectation, ScenarioError> {
    const LIMITS: [&str; 4] = ["tolerance", "warmup_budget", "max_growth_per_turn", "max"];
    let limited = raw.tolerance.is_some()
        || raw.warmup_budget.is_some()
        || raw.max_growth_per_turn.is_some()
        || raw.max.is_some();
    let report_only = raw.report_only.unwrap_or(false);
    if report_only && limited {
        // A limit that is never judged would read as a gate that holds.
        return Err(cx.invalid(
            &format!("{path}.report_only"),
            "`report_only: true` judges nothing, so it cannot stand beside a limit; \
             remove the limits or `report_only`",
        ));
    }
    if report_only {
        return Ok(MetricExpectation {
            report_only,
            ..MetricExpectation::default()
        });
    }
    if !limited {
        return Err(cx
            .invalid(
                path,
                "sets no limit; give `tolerance`, `warmup_budget`, `max_growth_per_turn` or `max` \
                 (to only report a metric without judging it, write `report_only: true`)",
            )
            .expect_one_of(LIMITS));
    }
    // A time metric's limits are durations (held in nanoseconds), every other metric's sizes.
    let timed = leakloop_metrics::metric(name)
        .is_some_and(|m| m.unit == leakloop_metrics::Unit::Nanoseconds);
    let amount = |key: &str, text: &UnitText| -> Result<u64, ScenarioError> {
        let p = format!("{path}.{key}");
        if timed {
            let d = cx.duration(&p, text)?;
            Ok(u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
        } else {
            cx.size(&p, text)
        }
    };
    let tolerance = match &raw.tolerance {
        Some(text) if timed && !text.0.trim().ends_with('%') => {
            Some(Tolerance::Bytes(amount("tolerance", text)?))
        }
        Some(text) => {
            let p = format!("{path}.tolerance");
            Some(parse_tolerance(&text.0).map_err(|e| cx.bad_unit(&p, "tolerance", text, e))?)
        }
        None => None,
    };
    let warmup_budget = raw
        .warmup_budget
        .as_ref()
        .map(|t| amount("warmup_budget", t))
        .transpose()?;
    let max_growth_per_turn = raw
        .max_growth_per_turn
        .as_ref()
        .map(|t| amount("max_growth_per_turn", t))
        .transpose()?;
    let max = raw.max.as_ref().map(|t| amount("max", t)).transpose()?;
    Ok(MetricExpectation {
        tolerance,
        warmup_budget,
        max_growth_per_turn,
        max,
        report_only: false,
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
mod tests;

mod exec;
pub(crate) use exec::{refuse_exec_keys, validate_exec};
