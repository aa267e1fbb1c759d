//! Adapter from the simulator crate (`sim-backend`) to the [`Engine`] trait: picks the scenario's
//! profile (built-in or inline), passes on `max_tokens`, the seed and the engine-side faults, and
//! turns simulator errors into [`EngineError`]s of the right kind.
//!
//! In-process, an injected crash is reported as [`EngineErrorKind::Crashed`] without the process
//! dying; a hang is reported as [`EngineErrorKind::Hung`] after the virtual clock has waited the
//! scenario's `call_timeout`.

use std::collections::BTreeMap;
use std::time::Duration;

use sim_backend::{Profile, SimConfig, SimError, SimFault, SimFaultKind, BUILTIN_PROFILES};

use crate::engine::{
    BackendInfo, Engine, EngineError, EngineErrorKind, EngineSnapshot, GenerateOutcome,
    GenerateRequest, KindCounts, Prompt, SessionId,
};
use crate::scenario::{BackendKind, FaultKind, Scenario, SessionOptions, Step};

/// The simulated engine.
#[derive(Debug)]
pub struct SimEngine {
    inner: sim_backend::SimEngine,
    call_timeout: Duration,
    profile_source: &'static str,
}

impl SimEngine {
    /// Builds the simulator for a scenario (profile, max_tokens, faults, seed).
    pub fn from_scenario(scenario: &Scenario) -> Result<Self, EngineError> {
        Self::build(scenario, None)
    }

    /// Like [`SimEngine::from_scenario`], but really allocates and touches the simulated
    /// native-heap bytes divided by `divisor`, so that process probes can be checked against the
    /// simulator's known truth.
    pub fn with_real_allocation(scenario: &Scenario, divisor: u32) -> Result<Self, EngineError> {
        Self::build(scenario, Some(divisor))
    }

    /// The simulator underneath (its exact metrics, real-allocation bytes, profile).
    pub fn simulator(&self) -> &sim_backend::SimEngine {
        &self.inner
    }

    fn build(scenario: &Scenario, really_allocate: Option<u32>) -> Result<Self, EngineError> {
        let unavailable = |message: String| EngineError::new(EngineErrorKind::Unavailable, message);
        if scenario.engine.backend != BackendKind::Sim {
            return Err(unavailable(format!(
                "scenario `{}` runs backend `{}`, not the simulator",
                scenario.name,
                scenario.engine.backend.as_str()
            )));
        }
        let (profile, profile_source) = resolve_profile(scenario)?;
        let faults = engine_faults(scenario)?;
        let config = SimConfig {
            max_tokens: scenario.engine.max_tokens,
            seed: scenario.seed,
            faults,
            really_allocate,
        };
        let inner = sim_backend::SimEngine::new(profile, config)
            .map_err(|e| unavailable(format!("scenario `{}`: {e}", scenario.name)))?;
        Ok(Self {
            inner,
            call_timeout: scenario.engine.call_timeout,
            profile_source,
        })
    }

    fn error(&mut self, kind: EngineErrorKind, error: SimError) -> EngineError {
        let kind = match error {
            SimError::Crashed { turn } => EngineErrorKind::Crashed {
                how: format!("simulated crash in turn {turn} (in-process: no process died)"),
            },
            SimError::Hung { .. } => {
                // A hung call is given up on after the timeout; that wait is simulated time too.
                self.inner.idle(self.call_timeout);
                EngineErrorKind::Hung {
                    waited_ms: u64::try_from(self.call_timeout.as_millis()).unwrap_or(u64::MAX),
                }
            }
            _ => kind,
        };
        EngineError::new(kind, error.to_string())
    }
}

/// The scenario's profile: an inline one of that name first, then a built-in one.
fn resolve_profile(scenario: &Scenario) -> Result<(Profile, &'static str), EngineError> {
    let unavailable = |message: String| EngineError::new(EngineErrorKind::Unavailable, message);
    let name = scenario.engine.profile.as_deref().ok_or_else(|| {
        unavailable(format!(
            "scenario `{}`: the simulator needs `engine.profile` (one of: {})",
            scenario.name,
            BUILTIN_PROFILES.join(", ")
        ))
    })?;
    if let Some(spec) = scenario.engine.inline_profiles.get(name) {
        let profile = Profile::from_spec(name, spec.clone())
            .map_err(|e| unavailable(format!("scenario `{}`: {e}", scenario.name)))?;
        return Ok((profile, "inline"));
    }
    match Profile::builtin(name) {
        Some(profile) => Ok((profile, "built-in")),
        None => {
            let inline: Vec<&str> = scenario
                .engine
                .inline_profiles
                .keys()
                .map(String::as_str)
                .collect();
            Err(unavailable(format!(
                "scenario `{}`: no sim profile `{name}`; built-in: {}{}",
                scenario.name,
                BUILTIN_PROFILES.join(", "),
                if inline.is_empty() {
                    String::new()
                } else {
                    format!("; inline: {}", inline.join(", "))
                }
            )))
        }
    }
}

/// The faults the simulator injects (`skip_close` is the runner's). They strike in a turn's
/// generation, so a turn without one could never trigger them: that is refused, not ignored.
fn engine_faults(scenario: &Scenario) -> Result<Vec<SimFault>, EngineError> {
    let generates = scenario
        .turn
        .iter()
        .any(|step| matches!(step, Step::Generate { .. } | Step::Cancel { .. }));
    let mut faults = Vec::new();
    for fault in &scenario.faults {
        let kind = match fault.kind {
            FaultKind::Crash => SimFaultKind::Crash,
            FaultKind::Hang => SimFaultKind::Hang,
            FaultKind::GenerateError => SimFaultKind::GenerateError,
            FaultKind::SkipClose => continue,
        };
        if !generates {
            return Err(EngineError::new(
                EngineErrorKind::Unavailable,
                format!(
                    "scenario `{}`: fault `{}` at turn {} strikes during generation, but the \
                     turn has no `generate` or `cancel` step",
                    scenario.name,
                    kind.as_str(),
                    fault.at_turn
                ),
            ));
        }
        faults.push(SimFault {
            at_turn: fault.at_turn,
            kind,
        });
    }
    Ok(faults)
}

impl Engine for SimEngine {
    fn describe(&self) -> BackendInfo {
        let profile = self.inner.profile();
        BackendInfo {
            backend: "sim".into(),
            version: format!("sim-backend {}", sim_backend::VERSION),
            details: BTreeMap::from([
                ("profile".into(), profile.name().to_owned()),
                ("profile_source".into(), self.profile_source.into()),
                (
                    "max_tokens".into(),
                    self.inner.config().max_tokens.to_string(),
                ),
            ]),
        }
    }

    fn load(&mut self) -> Result<(), EngineError> {
        self.inner
            .load()
            .map_err(|e| self.error(EngineErrorKind::Load, e))
    }

    fn open_session(
        &mut self,
        turn: u32,
        options: &SessionOptions,
    ) -> Result<SessionId, EngineError> {
        // A named session (the scenario's `sessions:`) finds its prefix-cache entry again.
        self.inner
            .open_named_session(turn, options.session.as_deref())
            .map(|s| SessionId(s.0))
            .map_err(|e| self.error(EngineErrorKind::Open, e))
    }

    fn send(&mut self, session: SessionId, prompt: &Prompt) -> Result<(), EngineError> {
        self.inner
            .send(sim_backend::SessionId(session.0), prompt.tokens)
            .map_err(|e| self.error(EngineErrorKind::Send, e))
    }

    fn generate(
        &mut self,
        session: SessionId,
        request: &GenerateRequest,
    ) -> Result<GenerateOutcome, EngineError> {
        self.inner
            .generate(
                sim_backend::SessionId(session.0),
                request.max_output_tokens,
                request.cancel_after_tokens,
            )
            .map(|g| GenerateOutcome {
                tokens: g.tokens,
                cancelled: g.cancelled,
            })
            .map_err(|e| self.error(EngineErrorKind::Generate, e))
    }

    fn close_session(&mut self, session: SessionId) -> Result<(), EngineError> {
        self.inner
            .close_session(sim_backend::SessionId(session.0))
            .map_err(|e| self.error(EngineErrorKind::Close, e))
    }

    fn unload(&mut self) -> Result<(), EngineError> {
        self.inner
            .unload()
            .map_err(|e| self.error(EngineErrorKind::Unload, e))
    }

    fn snapshot(&mut self) -> Result<EngineSnapshot, EngineError> {
        // A crashed or hung engine answers nothing, as a dead worker would not.
        if let Some(failure) = self.inner.failure() {
            return Err(self.error(EngineErrorKind::Protocol, failure));
        }
        let ledger = self
            .inner
            .ledger()
            .into_iter()
            .map(|(kind, c)| {
                (
                    kind,
                    KindCounts {
                        created: c.created,
                        deleted: c.deleted,
                    },
                )
            })
            .collect();
        Ok(EngineSnapshot {
            ledger,
            metrics: self.inner.metrics(),
            ..Default::default()
        })
    }

    fn idle(&mut self, duration: Duration) {
        self.inner.idle(duration);
    }

    fn simulated_clock_ms(&self) -> Option<f64> {
        Some(self.inner.clock_ms())
    }
}

#[cfg(test)]
mod tests;
