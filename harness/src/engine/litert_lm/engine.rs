//! [`LitertLmEngine`]: the [`Engine`] lifecycle on LiteRT-LM's C API.
//!
//! - load: `engine_settings_create(model, "cpu"|"gpu")` + `set_max_num_tokens` + `set_cache_dir`,
//!   then `engine_create`; the settings are freed right after.
//! - open: a session config (output limit, sampler) inside a conversation config, then
//!   `conversation_create`; both configs are freed once the conversation has copied them.
//! - send: keeps the prompt; generate sends it as `{"role":"user","content":...}`, blocking
//!   (`conversation_send_message`, a JSON reply) or streamed when the step cancels after K tokens.
//! - close: `conversation_delete`; unload: `engine_delete` (deferred while a conversation that
//!   was never closed still uses the engine).
//!
//! When the OpenCL interposer is loaded in this process (a worker started with it preloaded),
//! its counts join every snapshot as ledger kinds (`cl_mem`, ...) and `cl_mem_bytes`, so OpenCL
//! the engine uses behind its C API is balanced like the engine's own handles.
//!
//! The engine writes caches next to its model, so it runs on a copy of the model in a private
//! temporary folder that also serves as its cache folder; the source tree stays clean.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use crate::engine::litert_lm::capabilities::{names, Capabilities, Capability};
use crate::engine::litert_lm::discover::{discover_library, LibraryLocation};
use crate::engine::litert_lm::error::CallError;
use crate::engine::litert_lm::ffi::{Api, SamplerType};
use crate::engine::litert_lm::handles::{
    Conversation, HandleCounts, Handles, LmEngine, SamplerChoice,
};
use crate::engine::litert_lm::stream::stream_message;
use crate::engine::opencl::LoadedInterposer;
use crate::engine::{
    BackendInfo, Engine, EngineError, EngineErrorKind, EngineSnapshot, GenerateOutcome,
    GenerateRequest, Prompt, SessionId,
};
use crate::probe::native_heap_bytes;
use crate::scenario::{Device, Scenario, SessionOptions, Step};

/// Backend name in scenarios, reports and ledger kinds (`litert-lm/conversation`).
pub const BACKEND_NAME: &str = "litert-lm";

/// LiteRT-LM driven through its C API in this process.
#[derive(Debug)]
pub struct LitertLmEngine {
    library: LibraryLocation,
    model: PathBuf,
    device: Device,
    max_tokens: u32,
    /// The CPU backend's threads (`None`: the library's choice).
    threads: Option<u32>,
    /// The largest output any step of the scenario asks for: the sessions' own limit.
    session_max_output: u32,
    /// The scenario's name and turn, to refuse what the library cannot run at load.
    scenario_name: String,
    turn: Vec<Step>,
    /// The capabilities the scenario's steps use on this library (decided at load).
    used: BTreeSet<Capability>,
    /// Where a missing capability makes the run fall back, in words (decided at load).
    degraded: BTreeSet<String>,
    call_timeout: Duration,
    counts: HandleCounts,
    handles: Option<Handles>,
    sessions: BTreeMap<SessionId, OpenConversation>,
    engine: Option<Arc<LmEngine>>,
    next_session: u64,
    /// The OpenCL interposer, when it is loaded in this process (looked up at load).
    interposer: Option<LoadedInterposer>,
    /// The model copy and the engine's cache folder; removed after everything else is dropped.
    workdir: Option<tempfile::TempDir>,
}

#[derive(Debug)]
struct OpenConversation {
    conversation: Conversation,
    /// Prompts sent since the last generation, joined into one user message.
    pending: Vec<String>,
}

impl LitertLmEngine {
    /// Prepares the engine a scenario describes: finds the library (`engine.lib`,
    /// `LITERT_LM_LIB`, or the newest fetched version) and checks the model file. Nothing is
    /// loaded until [`Engine::load`].
    pub fn from_scenario(scenario: &Scenario) -> Result<Self, EngineError> {
        Self::with_library(scenario, scenario.engine.lib.as_deref())
    }

    /// [`LitertLmEngine::from_scenario`] with the library given explicitly (overriding the
    /// scenario's `engine.lib`), as `leakloop compare --lib A --lib B` does.
    pub fn with_library(scenario: &Scenario, lib: Option<&Path>) -> Result<Self, EngineError> {
        let unavailable = |m: String| EngineError::new(EngineErrorKind::Unavailable, m);
        let library = discover_library(lib).map_err(|e| unavailable(e.to_string()))?;
        let model = scenario.engine.model.clone().ok_or_else(|| {
            unavailable(format!(
                "scenario `{}` names no engine.model (a .litertlm file)",
                scenario.name
            ))
        })?;
        if !model.is_file() {
            return Err(unavailable(format!(
                "model `{}` of scenario `{}` is not a file (the tiny models live in \
                 fixtures/models/; fixtures/models/build_models.py rebuilds them)",
                model.display(),
                scenario.name
            )));
        }
        let session_max_output = scenario
            .turn
            .iter()
            .filter_map(|step| match step {
                Step::Generate { max_output_tokens }
                | Step::Cancel {
                    max_output_tokens, ..
                } => Some(*max_output_tokens),
                _ => None,
            })
            .max()
            .unwrap_or(64);
        Ok(Self {
            library,
            model,
            device: scenario.engine.device,
            max_tokens: scenario.engine.max_tokens,
            threads: scenario.engine.threads,
            session_max_output,
            scenario_name: scenario.name.clone(),
            turn: scenario.turn.clone(),
            used: BTreeSet::new(),
            degraded: BTreeSet::new(),
            call_timeout: scenario.engine.call_timeout,
            counts: HandleCounts::default(),
            handles: None,
            sessions: BTreeMap::new(),
            engine: None,
            next_session: 1,
            interposer: None,
            workdir: None,
        })
    }

    /// The library this engine runs on.
    pub fn library(&self) -> &LibraryLocation {
        &self.library
    }

    /// Cumulative create/delete counts per C-API kind.
    pub fn handle_counts(&self) -> BTreeMap<String, crate::engine::KindCounts> {
        self.counts.snapshot()
    }

    fn device_name(&self) -> &'static str {
        match self.device {
            Device::Cpu => "cpu",
            Device::Gpu => "gpu",
        }
    }

    fn handles(&mut self) -> Result<Handles, EngineError> {
        if let Some(h) = &self.handles {
            return Ok(h.clone());
        }
        let api = Api::load(&self.library.path)
            .map_err(|e| EngineError::new(EngineErrorKind::Unavailable, e.to_string()))?;
        let handles = Handles::new(api, self.counts.clone());
        self.handles = Some(handles.clone());
        Ok(handles)
    }

    /// The private copy of the model (made on first load) and the cache folder beside it.
    fn prepare_workdir(&mut self) -> Result<(PathBuf, PathBuf), EngineError> {
        let load_err = |m: String| EngineError::new(EngineErrorKind::Load, m);
        if self.workdir.is_none() {
            let dir = tempfile::Builder::new()
                .prefix("leakloop-litert-lm-")
                .tempdir()
                .map_err(|e| load_err(format!("cannot create a temporary folder: {e}")))?;
            let name = self.model.file_name().unwrap_or("model.litertlm".as_ref());
            std::fs::copy(&self.model, dir.path().join(name)).map_err(|e| {
                load_err(format!("cannot copy model `{}`: {e}", self.model.display()))
            })?;
            std::fs::create_dir_all(dir.path().join("cache"))
                .map_err(|e| load_err(format!("cannot create the cache folder: {e}")))?;
            self.workdir = Some(dir);
        }
        let dir = self.workdir.as_ref().expect("just made").path();
        let name = self.model.file_name().unwrap_or("model.litertlm".as_ref());
        Ok((dir.join(name), dir.join("cache")))
    }

    fn session(
        &mut self,
        id: SessionId,
        kind: EngineErrorKind,
    ) -> Result<&mut OpenConversation, EngineError> {
        self.sessions
            .get_mut(&id)
            .ok_or_else(|| EngineError::new(kind, format!("no open session {}", id.0)))
    }
}

/// The text of a reply in LiteRT-LM's message JSON: `content` as a string or as a list of
/// `{"type": "text", "text": ...}` parts.
pub(crate) fn reply_text(json: &str) -> Result<String, String> {
    let value: serde_json::Value =
        serde_json::from_str(json).map_err(|e| format!("reply is not JSON ({e}): {json}"))?;
    match value.get("content") {
        Some(serde_json::Value::String(s)) => Ok(s.clone()),
        Some(serde_json::Value::Array(parts)) => Ok(parts
            .iter()
            .filter_map(|p| p.get("text").and_then(|t| t.as_str()))
            .collect()),
        _ => Err(format!("reply has no `content`: {json}")),
    }
}

/// Which of the library's capabilities a scenario's steps use, and where they fall back for lack
/// of one: every session is a conversation; an `open` with sampler options uses the sampler
/// parameters (else the engine's default sampler); a generation passes its output limit per
/// message (else the session's limit, the largest any step asks for, applies to every message); a
/// `cancel` step streams and cancels (refused at load without them); status codes are used
/// wherever the library returns them.
fn plan_capabilities(
    caps: &Capabilities,
    turn: &[Step],
    session_max_output: u32,
) -> (BTreeSet<Capability>, BTreeSet<String>) {
    let mut used = BTreeSet::from([Capability::Conversation]);
    let mut degraded = BTreeSet::new();
    let mut want = |cap: Capability, fallback: Option<String>| {
        if caps.has(cap) {
            used.insert(cap);
        } else if let Some(fallback) = fallback {
            degraded.insert(format!("{}: {fallback}", cap.as_str()));
        }
    };
    for step in turn {
        match step {
            Step::Open(options) if sampler_choice(options).is_some() => want(
                Capability::SamplerParams,
                Some("the engine's default sampler".to_owned()),
            ),
            Step::Generate { .. } | Step::Cancel { .. } => {
                want(Capability::MessageArgs, None);
                want(
                    Capability::MessageOutputLimit,
                    Some(format!(
                        "the session's limit ({session_max_output} tokens) for every message"
                    )),
                );
                if matches!(step, Step::Cancel { .. }) {
                    want(Capability::Streaming, None);
                    want(Capability::StreamChunks, None);
                    want(Capability::Cancel, None);
                }
            }
            _ => {}
        }
    }
    want(Capability::StatusCodes, None);
    (used, degraded)
}

/// The sampler a session's options ask for, or `None` when they leave it to the engine.
fn sampler_choice(options: &SessionOptions) -> Option<SamplerChoice> {
    let kind = if options.top_p.is_some() {
        SamplerType::TopP
    } else if options.top_k.is_some() || options.temperature.is_some() || options.seed.is_some() {
        SamplerType::TopK
    } else {
        return None;
    };
    Some(SamplerChoice {
        kind,
        top_k: options.top_k,
        top_p: options.top_p,
        temperature: options.temperature,
        seed: options.seed,
    })
}

impl Engine for LitertLmEngine {
    fn describe(&self) -> BackendInfo {
        let mut details = BTreeMap::from([
            (
                "library".to_owned(),
                self.library.path.display().to_string(),
            ),
            (
                "library_source".to_owned(),
                self.library.source.as_str().to_owned(),
            ),
            ("device".to_owned(), self.device_name().to_owned()),
            ("model".to_owned(), self.model.display().to_string()),
            ("max_tokens".to_owned(), self.max_tokens.to_string()),
        ]);
        if let Some(threads) = self.threads {
            details.insert("threads".to_owned(), threads.to_string());
        }
        if let Some(handles) = &self.handles {
            let api = handles.api();
            details.insert("c_api".to_owned(), api.abi.as_str().to_owned());
            details.insert("capabilities".to_owned(), api.capabilities.names());
            details.insert(
                "capabilities_used".to_owned(),
                names(self.used.iter().copied()),
            );
            if !self.degraded.is_empty() {
                details.insert(
                    "degraded".to_owned(),
                    self.degraded.iter().cloned().collect::<Vec<_>>().join("; "),
                );
            }
        }
        details.insert(
            "opencl_interposer".to_owned(),
            // Looked up here, not taken from `load`: reports describe the engine before load.
            if LoadedInterposer::find().is_some() {
                "loaded"
            } else {
                "not loaded"
            }
            .to_owned(),
        );
        if let Ok(meta) = std::fs::metadata(&self.model) {
            details.insert("model_bytes".to_owned(), meta.len().to_string());
        }
        BackendInfo {
            backend: BACKEND_NAME.to_owned(),
            version: self.library.version.clone(),
            details,
        }
    }

    fn load(&mut self) -> Result<(), EngineError> {
        if self.engine.is_some() {
            return Err(EngineError::new(
                EngineErrorKind::Load,
                "the engine is already loaded",
            ));
        }
        let handles = self.handles()?;
        if let Some(why) = handles
            .api()
            .capabilities
            .refusal_of(&self.scenario_name, &self.turn)
        {
            return Err(EngineError::new(EngineErrorKind::Unavailable, why));
        }
        (self.used, self.degraded) = plan_capabilities(
            &handles.api().capabilities,
            &self.turn,
            self.session_max_output,
        );
        self.interposer = LoadedInterposer::find();
        let (model, cache) = self.prepare_workdir()?;
        let load = |e: CallError| e.into_engine(EngineErrorKind::Load);
        let mut settings = handles.settings(&model, self.device_name()).map_err(load)?;
        settings.set_max_num_tokens(self.max_tokens).map_err(load)?;
        settings.set_cache_dir(&cache).map_err(load)?;
        if let Some(threads) = self.threads {
            settings.set_num_threads(threads).map_err(load)?;
        }
        self.engine = Some(handles.engine(&settings).map_err(load)?);
        Ok(())
    }

    fn open_session(
        &mut self,
        _turn: u32,
        options: &SessionOptions,
    ) -> Result<SessionId, EngineError> {
        let open = |e: CallError| e.into_engine(EngineErrorKind::Open);
        let engine = self
            .engine
            .clone()
            .ok_or_else(|| EngineError::new(EngineErrorKind::Open, "the engine is not loaded"))?;
        let handles = self.handles()?;
        let mut session_config = handles.session_config().map_err(open)?;
        session_config
            .set_max_output_tokens(self.session_max_output)
            .map_err(open)?;
        if let Some(choice) = sampler_choice(options) {
            // `false`: the library takes no sampler parameters; the engine's default sampler
            // runs (decided and reported at load).
            handles
                .set_sampler(&mut session_config, &choice)
                .map_err(open)?;
        }
        let mut conversation_config = handles.conversation_config().map_err(open)?;
        conversation_config.set_session_config(&session_config);
        let conversation = handles
            .conversation(&engine, &conversation_config)
            .map_err(open)?;
        let id = SessionId(self.next_session);
        self.next_session += 1;
        self.sessions.insert(
            id,
            OpenConversation {
                conversation,
                pending: Vec::new(),
            },
        );
        Ok(id)
    }

    fn send(&mut self, session: SessionId, prompt: &Prompt) -> Result<(), EngineError> {
        self.session(session, EngineErrorKind::Send)?
            .pending
            .push(prompt.text.clone());
        Ok(())
    }

    fn generate(
        &mut self,
        session: SessionId,
        request: &GenerateRequest,
    ) -> Result<GenerateOutcome, EngineError> {
        let generate = |e: CallError| e.into_engine(EngineErrorKind::Generate);
        let handles = self.handles()?;
        let timeout = self.call_timeout;
        let open = self.session(session, EngineErrorKind::Generate)?;
        if open.pending.is_empty() {
            return Err(EngineError::new(
                EngineErrorKind::Generate,
                format!(
                    "session {} has no prompt to answer (no send before generate)",
                    session.0
                ),
            ));
        }
        let content = std::mem::take(&mut open.pending).join("\n");
        let message = serde_json::json!({ "role": "user", "content": content }).to_string();
        let args = handles
            .optional_args(request.max_output_tokens)
            .map_err(generate)?;
        let open = self.session(session, EngineErrorKind::Generate)?;
        if request.cancel_after_tokens.is_some() {
            let outcome = stream_message(
                &mut open.conversation,
                &message,
                args.as_ref(),
                request.cancel_after_tokens,
                timeout,
            )
            .map_err(generate)?;
            return Ok(GenerateOutcome {
                tokens: outcome.tokens,
                cancelled: outcome.cancelled,
            });
        }
        let reply = open
            .conversation
            .send_message(&handles, &message, args.as_ref())
            .map_err(generate)?;
        let text = reply_text(&reply.text())
            .map_err(|m| EngineError::new(EngineErrorKind::Generate, m))?;
        drop(reply);
        let tokens = open
            .conversation
            .engine()
            .count_tokens(&handles, &text)
            .map_err(generate)?;
        Ok(GenerateOutcome {
            tokens,
            cancelled: false,
        })
    }

    fn close_session(&mut self, session: SessionId) -> Result<(), EngineError> {
        self.sessions.remove(&session).map(drop).ok_or_else(|| {
            EngineError::new(
                EngineErrorKind::Close,
                format!("no open session {}", session.0),
            )
        })
    }

    fn unload(&mut self) -> Result<(), EngineError> {
        self.engine
            .take()
            .map(drop)
            .ok_or_else(|| EngineError::new(EngineErrorKind::Unload, "the engine is not loaded"))
    }

    fn snapshot(&mut self) -> Result<EngineSnapshot, EngineError> {
        let mut metrics = BTreeMap::new();
        if let Some(heap) = native_heap_bytes() {
            metrics.insert(leakloop_metrics::names::NATIVE_HEAP.to_owned(), heap);
        }
        let mut snapshot = EngineSnapshot {
            ledger: self.counts.snapshot(),
            metrics,
            ..Default::default()
        };
        if let Some(interposer) = &self.interposer {
            interposer
                .read()
                .map_err(|m| EngineError::new(EngineErrorKind::Protocol, m))?
                .add_to(&mut snapshot);
        }
        Ok(snapshot)
    }

    fn process_id(&self) -> Option<u32> {
        Some(std::process::id())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;

    #[rstest]
    #[case::parts(r#"{"role":"assistant","content":[{"type":"text","text":"ab"},{"type":"text","text":"c"}]}"#, "abc")]
    #[case::plain(r#"{"role":"assistant","content":"hello"}"#, "hello")]
    #[case::empty_parts(r#"{"role":"assistant","content":[]}"#, "")]
    fn reads_reply_text(#[case] json: &str, #[case] want: &str) {
        assert_eq!(reply_text(json).unwrap(), want);
    }

    #[test]
    fn a_chat_on_an_old_library_falls_back_to_the_session_limit_and_default_sampler() {
        let turn = vec![
            Step::Open(SessionOptions {
                top_k: Some(3),
                ..Default::default()
            }),
            Step::Generate {
                max_output_tokens: 16,
            },
            Step::Close,
        ];
        let old = Capabilities::new([
            Capability::Conversation,
            Capability::Streaming,
            Capability::Cancel,
        ]);
        let (used, degraded) = plan_capabilities(&old, &turn, 16);
        assert_eq!(names(used), "conversation");
        assert_eq!(
            degraded.into_iter().collect::<Vec<_>>(),
            [
                "message_output_limit: the session's limit (16 tokens) for every message",
                "sampler_params: the engine's default sampler"
            ]
        );
        let new = Capabilities::new(Capability::ALL);
        let (used, degraded) = plan_capabilities(&new, &turn, 16);
        assert_eq!(
            names(used),
            "conversation,sampler_params,message_args,message_output_limit,status_codes"
        );
        assert!(degraded.is_empty());
    }

    #[test]
    fn a_cancel_step_uses_streaming_and_cancel() {
        let turn = vec![Step::Cancel {
            after_tokens: 4,
            max_output_tokens: 32,
        }];
        let caps = Capabilities::new([
            Capability::Conversation,
            Capability::Streaming,
            Capability::Cancel,
            Capability::MessageArgs,
        ]);
        let (used, _) = plan_capabilities(&caps, &turn, 32);
        assert_eq!(names(used), "conversation,streaming,cancel,message_args");
    }

    #[rstest]
    #[case::not_json("oops", "not JSON")]
    #[case::no_content(r#"{"role":"assistant"}"#, "no `content`")]
    fn bad_replies_are_errors(#[case] json: &str, #[case] want: &str) {
        let err = reply_text(json).unwrap_err();
        assert!(err.contains(want), "{err}");
    }
}
