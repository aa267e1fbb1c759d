//! Safe owners of LiteRT-LM's C handles.
//!
//! Every handle the library returns is adopted by an [`Owned`] at once, freed exactly once in its
//! `Drop` with the library's matching `*_delete`, and both events are counted per C-API kind in
//! [`HandleCounts`]. Those counts are the backend's part of the call ledger
//! (`litert-lm/conversation`, `litert-lm/response`, ...): a binding that forgets a delete shows up
//! there even when the runner's own calls balance.
//!
//! A conversation holds a reference to its engine, so the engine cannot be deleted under a live
//! conversation: a conversation that is never closed keeps its engine alive, as it would in an
//! application that leaks one.

use std::collections::BTreeMap;
use std::ffi::CString;
use std::path::Path;
use std::ptr::NonNull;
use std::sync::{Arc, Mutex};

use crate::engine::litert_lm::error::CallError;
use crate::engine::litert_lm::ffi::{
    opt_str, Api, RawConversation, RawConversationConfig, RawEngine, RawJsonResponse,
    RawOptionalArgs, RawSamplerParams, RawSessionConfig, RawSettings, RawTokenizeResult, Sampler,
    SamplerStruct, SamplerType,
};
use crate::engine::KindCounts;

/// Created/deleted counts per C-API kind, shared by every handle of one engine.
#[derive(Debug, Clone, Default)]
pub struct HandleCounts(Arc<Mutex<BTreeMap<&'static str, KindCounts>>>);

impl HandleCounts {
    fn bump(&self, kind: &'static str, created: bool) {
        let mut map = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let entry = map.entry(kind).or_default();
        if created {
            entry.created += 1;
        } else {
            entry.deleted += 1;
        }
    }

    /// Cumulative counts per kind, as `Engine::snapshot` reports them.
    pub fn snapshot(&self) -> BTreeMap<String, KindCounts> {
        let map = self.0.lock().unwrap_or_else(|e| e.into_inner());
        map.iter().map(|(k, v)| ((*k).to_owned(), *v)).collect()
    }
}

/// A raw handle type: its ledger kind and the library call that frees it.
pub(crate) trait RawKind {
    /// Ledger kind, e.g. `conversation`.
    const KIND: &'static str;
    /// The `*_delete` function for this handle type; `None` where the library has none (then it
    /// has no constructor either, and no such handle is ever made).
    fn deleter(api: &Api) -> Option<unsafe extern "C" fn(*mut Self)>;
}

macro_rules! raw_kind {
    ($($raw:ty => $kind:literal, |$api:ident| $deleter:expr;)*) => {$(
        impl RawKind for $raw {
            const KIND: &'static str = $kind;
            fn deleter($api: &Api) -> Option<unsafe extern "C" fn(*mut Self)> {
                $deleter
            }
        }
    )*};
}

raw_kind! {
    RawSettings => "settings", |api| Some(api.engine_settings_delete);
    RawEngine => "engine", |api| Some(api.engine_delete);
    RawSamplerParams => "sampler_params", |api| match &api.sampler {
        Some(Sampler::Handle(fns)) => Some(fns.delete),
        _ => None,
    };
    RawSessionConfig => "session_config", |api| Some(api.session_config_delete);
    RawConversationConfig => "conversation_config", |api| Some(api.conversation_config_delete);
    RawConversation => "conversation", |api| Some(api.conversation_delete);
    RawOptionalArgs => "optional_args", |api| api.optional_args.as_ref().map(|f| f.delete);
    RawJsonResponse => "response", |api| Some(api.json_response_delete);
    RawTokenizeResult => "tokenize_result", |api| Some(api.tokenize_result_delete);
}

/// Sole owner of one library handle: deletes it exactly once when dropped.
pub(crate) struct Owned<T: RawKind> {
    ptr: NonNull<T>,
    delete: unsafe extern "C" fn(*mut T),
    api: &'static Api,
    counts: HandleCounts,
}

// SAFETY: LiteRT-LM's handles are not bound to the thread that made them; leakloop uses each one
// from one thread at a time (`&mut` access through the engine). Stream callbacks run on library
// threads but never touch these handles.
unsafe impl<T: RawKind> Send for Owned<T> {}

impl<T: RawKind> Owned<T> {
    /// Takes ownership of what `call` returned; NULL becomes an error with the library's message.
    fn adopt(
        api: &'static Api,
        counts: &HandleCounts,
        ptr: *mut T,
        call: &'static str,
    ) -> Result<Self, CallError> {
        let ptr = NonNull::new(ptr).ok_or_else(|| CallError::from_library(api, call))?;
        let Some(delete) = T::deleter(api) else {
            // Unreachable with a consistent library (constructors are bound only with their
            // deleters); leaking the handle is the only safe thing left.
            return Err(CallError::new(
                call,
                "the library has no matching delete function",
            ));
        };
        counts.bump(T::KIND, true);
        Ok(Self {
            ptr,
            delete,
            api,
            counts: counts.clone(),
        })
    }

    pub(crate) fn as_ptr(&self) -> *mut T {
        self.ptr.as_ptr()
    }
}

impl<T: RawKind> Drop for Owned<T> {
    fn drop(&mut self) {
        // SAFETY: `ptr` came from the library's matching create call, is owned only here and is
        // freed only here, once.
        unsafe { (self.delete)(self.ptr.as_ptr()) };
        self.counts.bump(T::KIND, false);
    }
}

impl<T: RawKind> std::fmt::Debug for Owned<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}@{:p}", T::KIND, self.ptr)
    }
}

fn c_string(what: &'static str, text: &str) -> Result<CString, CallError> {
    CString::new(text).map_err(|_| CallError::new(what, "argument contains a NUL byte"))
}

fn c_int(what: &'static str, value: u32) -> Result<i32, CallError> {
    i32::try_from(value).map_err(|_| CallError::new(what, format!("{value} does not fit a C int")))
}

/// Makes handles of one library, all counted in the same [`HandleCounts`].
#[derive(Debug, Clone)]
pub(crate) struct Handles {
    api: &'static Api,
    counts: HandleCounts,
}

impl Handles {
    pub(crate) fn new(api: &'static Api, counts: HandleCounts) -> Self {
        Self { api, counts }
    }

    /// The library these handles come from.
    pub(crate) fn api(&self) -> &'static Api {
        self.api
    }

    /// `litert_lm_engine_settings_create(model, backend, NULL, NULL)`.
    pub(crate) fn settings(&self, model: &Path, backend: &str) -> Result<Settings, CallError> {
        const CALL: &str = "litert_lm_engine_settings_create";
        let model = c_string(CALL, &model.to_string_lossy())?;
        let backend = c_string(CALL, backend)?;
        // SAFETY: two valid C strings; NULL vision/audio backends mean "not set".
        let ptr = unsafe {
            self.api
                .engine_settings_create(model.as_ptr(), backend.as_ptr())
        };
        Owned::adopt(self.api, &self.counts, ptr, CALL).map(Settings)
    }

    /// `litert_lm_engine_create(settings)`.
    pub(crate) fn engine(&self, settings: &Settings) -> Result<Arc<LmEngine>, CallError> {
        const CALL: &str = "litert_lm_engine_create";
        // SAFETY: a live settings handle; the engine copies what it needs from it.
        let ptr = unsafe { self.api.engine_create(settings.0.as_ptr()) };
        Owned::adopt(self.api, &self.counts, ptr, CALL).map(|o| Arc::new(LmEngine(o)))
    }

    /// `litert_lm_session_config_create()`.
    pub(crate) fn session_config(&self) -> Result<SessionConfig, CallError> {
        let ptr = self.api.session_config_create();
        Owned::adopt(
            self.api,
            &self.counts,
            ptr,
            "litert_lm_session_config_create",
        )
        .map(SessionConfig)
    }

    /// `litert_lm_conversation_config_create()`.
    pub(crate) fn conversation_config(&self) -> Result<ConversationConfig, CallError> {
        let ptr = self.api.conversation_config_create();
        Owned::adopt(
            self.api,
            &self.counts,
            ptr,
            "litert_lm_conversation_config_create",
        )
        .map(ConversationConfig)
    }

    /// `litert_lm_conversation_create(engine, config)`.
    pub(crate) fn conversation(
        &self,
        engine: &Arc<LmEngine>,
        config: &ConversationConfig,
    ) -> Result<Conversation, CallError> {
        // SAFETY: a live engine and config; the conversation copies the config.
        let ptr = unsafe {
            self.api
                .conversation_create(engine.0.as_ptr(), config.0.as_ptr())
        };
        let raw = Owned::adopt(self.api, &self.counts, ptr, "litert_lm_conversation_create")?;
        Ok(Conversation {
            raw,
            engine: Arc::clone(engine),
        })
    }

    /// `litert_lm_conversation_optional_args_create()` with the output limit set, or `None` when
    /// the library has no per-message output limit (the session's limit applies then).
    pub(crate) fn optional_args(
        &self,
        max_output_tokens: u32,
    ) -> Result<Option<OptionalArgs>, CallError> {
        const CALL: &str = "litert_lm_conversation_optional_args_create";
        let Some(fns) = &self.api.optional_args else {
            return Ok(None);
        };
        let max = c_int(CALL, max_output_tokens)?;
        let ptr = self.api.optional_args_create();
        let args = Owned::adopt(self.api, &self.counts, ptr, CALL)?;
        // SAFETY: a live optional-args handle.
        unsafe { (fns.set_max_output_tokens)(args.as_ptr(), max) };
        Ok(Some(OptionalArgs(args)))
    }

    /// Sets the sampler a session asks for on `config`, in the form the library takes (a struct
    /// up to 0.13, a handle from 0.14). Returns `false` when the library takes no sampler
    /// parameters (the engine's defaults apply). Fields the session leaves unset take
    /// [`SAMPLER_DEFAULTS`] in the struct form, which has no "unset".
    pub(crate) fn set_sampler(
        &self,
        config: &mut SessionConfig,
        sampler: &SamplerChoice,
    ) -> Result<bool, CallError> {
        match &self.api.sampler {
            None => Ok(false),
            Some(Sampler::Struct(set)) => {
                let d = SAMPLER_DEFAULTS;
                let params = SamplerStruct {
                    kind: sampler.kind as i32,
                    top_k: c_int(
                        "litert_lm_session_config_set_sampler_params",
                        sampler.top_k.unwrap_or(d.top_k as u32),
                    )?,
                    top_p: sampler.top_p.unwrap_or(d.top_p),
                    temperature: sampler.temperature.unwrap_or(d.temperature),
                    seed: sampler.seed.map_or(d.seed, fold_seed),
                };
                // SAFETY: a live config and a struct that outlives the call (the config copies
                // it).
                unsafe { set(config.0.as_ptr(), &params) };
                Ok(true)
            }
            Some(Sampler::Handle(fns)) => {
                const CALL: &str = "litert_lm_sampler_params_create";
                let ptr = self.api.sampler_params_create(sampler.kind);
                let params = Owned::adopt(self.api, &self.counts, ptr, CALL)?;
                // SAFETY (every call below): a live sampler-params handle and config.
                if let Some(k) = sampler.top_k {
                    let k = c_int("litert_lm_sampler_params_set_top_k", k)?;
                    unsafe { (fns.set_top_k)(params.as_ptr(), k) };
                }
                if let Some(p) = sampler.top_p {
                    unsafe { (fns.set_top_p)(params.as_ptr(), p) };
                }
                if let Some(t) = sampler.temperature {
                    unsafe { (fns.set_temperature)(params.as_ptr(), t) };
                }
                if let Some(seed) = sampler.seed {
                    unsafe { (fns.set_seed)(params.as_ptr(), fold_seed(seed)) };
                }
                // The config copies the parameters; `params` is deleted when it goes out of scope.
                unsafe { (fns.set)(config.0.as_ptr(), params.as_ptr()) };
                Ok(true)
            }
        }
    }
}

/// What a session asks of the sampler (from the scenario's `open` step).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct SamplerChoice {
    pub kind: SamplerType,
    pub top_k: Option<u32>,
    pub top_p: Option<f32>,
    pub temperature: Option<f32>,
    pub seed: Option<u64>,
}

/// The values the struct form of the sampler gets for fields a session leaves unset: the ones
/// LiteRT-LM's own Python package fills in for that form (top-k 40, top-p 0.95, temperature 1.0,
/// seed 0).
pub(crate) const SAMPLER_DEFAULTS: SamplerStruct = SamplerStruct {
    kind: SamplerType::TopP as i32,
    top_k: 40,
    top_p: 0.95,
    temperature: 1.0,
    seed: 0,
};

/// The C API takes a 32-bit seed: larger seeds are folded into it.
fn fold_seed(seed: u64) -> i32 {
    (seed ^ (seed >> 32)) as u32 as i32
}

/// Engine settings (`LiteRtLmEngineSettings`).
#[derive(Debug)]
pub(crate) struct Settings(Owned<RawSettings>);

impl Settings {
    /// The KV-cache size in tokens.
    pub(crate) fn set_max_num_tokens(&mut self, tokens: u32) -> Result<(), CallError> {
        let n = c_int("litert_lm_engine_settings_set_max_num_tokens", tokens)?;
        // SAFETY: a live settings handle.
        unsafe { (self.0.api.engine_settings_set_max_num_tokens)(self.0.as_ptr(), n) };
        Ok(())
    }

    /// Where the engine writes its caches (compiled kernels, tokenizer caches).
    pub(crate) fn set_cache_dir(&mut self, dir: &Path) -> Result<(), CallError> {
        let dir = c_string(
            "litert_lm_engine_settings_set_cache_dir",
            &dir.to_string_lossy(),
        )?;
        // SAFETY: a live settings handle and a C string the library copies.
        unsafe { (self.0.api.engine_settings_set_cache_dir)(self.0.as_ptr(), dir.as_ptr()) };
        Ok(())
    }

    /// How many threads the CPU backend runs; an error when the library has no setter for it.
    pub(crate) fn set_num_threads(&mut self, threads: u32) -> Result<(), CallError> {
        const CALL: &str = crate::engine::litert_lm::ffi::SET_NUM_THREADS;
        let n = c_int(CALL, threads)?;
        let Some(set) = self.0.api.engine_settings_set_num_threads else {
            return Err(CallError::new(
                CALL,
                format!(
                    "{} does not export it: `engine.threads` needs a release that does",
                    self.0.api.path.display()
                ),
            ));
        };
        // SAFETY: a live settings handle.
        unsafe { set(self.0.as_ptr(), n) };
        Ok(())
    }
}

/// A loaded engine (`LiteRtLmEngine`), shared with the conversations made from it.
#[derive(Debug)]
pub(crate) struct LmEngine(Owned<RawEngine>);

// SAFETY: LiteRT-LM's engine is built to be shared by the conversations made from it; through
// `&LmEngine` leakloop only tokenizes, and only from the thread that drives the engine.
unsafe impl Sync for LmEngine {}

impl LmEngine {
    /// How many tokens the engine's tokenizer makes of `text` (`litert_lm_engine_tokenize`).
    pub(crate) fn count_tokens(&self, handles: &Handles, text: &str) -> Result<u32, CallError> {
        const CALL: &str = "litert_lm_engine_tokenize";
        let text = c_string(CALL, text)?;
        // SAFETY: a live engine and a C string.
        let ptr = unsafe { handles.api.engine_tokenize(self.0.as_ptr(), text.as_ptr()) };
        let result = Owned::adopt(handles.api, &handles.counts, ptr, CALL)?;
        // SAFETY: a live tokenize result.
        let n = unsafe { handles.api.tokenize_result_num_tokens(result.as_ptr()) };
        Ok(u32::try_from(n).unwrap_or(u32::MAX))
    }
}

/// Session configuration (`LiteRtLmSessionConfig`).
#[derive(Debug)]
pub(crate) struct SessionConfig(Owned<RawSessionConfig>);

impl SessionConfig {
    pub(crate) fn set_max_output_tokens(&mut self, tokens: u32) -> Result<(), CallError> {
        let n = c_int("litert_lm_session_config_set_max_output_tokens", tokens)?;
        // SAFETY: a live handle.
        unsafe { (self.0.api.session_config_set_max_output_tokens)(self.0.as_ptr(), n) };
        Ok(())
    }
}

/// Conversation configuration (`LiteRtLmConversationConfig`).
#[derive(Debug)]
pub(crate) struct ConversationConfig(Owned<RawConversationConfig>);

impl ConversationConfig {
    /// Copies the session config into this config (the session config may be dropped after).
    pub(crate) fn set_session_config(&mut self, session: &SessionConfig) {
        // SAFETY: two live handles; the conversation config copies the session config.
        unsafe {
            (self.0.api.conversation_config_set_session_config)(self.0.as_ptr(), session.0.as_ptr())
        };
    }
}

/// Per-message options (`LiteRtLmConversationOptionalArgs`).
#[derive(Debug)]
pub(crate) struct OptionalArgs(Owned<RawOptionalArgs>);

impl OptionalArgs {
    pub(crate) fn as_ptr(&self) -> *const RawOptionalArgs {
        self.0.as_ptr()
    }

    /// The pointer to pass for optional args that may be absent (NULL then).
    pub(crate) fn ptr_or_null(args: Option<&OptionalArgs>) -> *const RawOptionalArgs {
        args.map_or(std::ptr::null(), OptionalArgs::as_ptr)
    }
}

/// An open conversation (`LiteRtLmConversation`); keeps its engine alive.
#[derive(Debug)]
pub(crate) struct Conversation {
    // Dropped before `_engine`: the conversation is deleted before the engine can be.
    raw: Owned<RawConversation>,
    engine: Arc<LmEngine>,
}

impl Conversation {
    pub(crate) fn as_ptr(&self) -> *mut RawConversation {
        self.raw.as_ptr()
    }

    /// The engine this conversation was made from.
    pub(crate) fn engine(&self) -> &Arc<LmEngine> {
        &self.engine
    }

    pub(crate) fn api(&self) -> &'static Api {
        self.raw.api
    }

    /// The blocking `litert_lm_conversation_send_message`: sends `message_json` and returns the
    /// model's reply as JSON.
    pub(crate) fn send_message(
        &mut self,
        handles: &Handles,
        message_json: &str,
        args: Option<&OptionalArgs>,
    ) -> Result<JsonResponse, CallError> {
        const CALL: &str = "litert_lm_conversation_send_message";
        let message = c_string(CALL, message_json)?;
        let context = c_string(CALL, "{}")?;
        // SAFETY: a live conversation, two C strings and live optional args, all outliving the
        // blocking call.
        let ptr = unsafe {
            handles.api.conversation_send_message(
                self.raw.as_ptr(),
                message.as_ptr(),
                context.as_ptr(),
                OptionalArgs::ptr_or_null(args),
            )
        };
        Owned::adopt(handles.api, &handles.counts, ptr, CALL).map(JsonResponse)
    }
}

/// A reply from the blocking send (`LiteRtLmJsonResponse`).
#[derive(Debug)]
pub(crate) struct JsonResponse(Owned<RawJsonResponse>);

impl JsonResponse {
    /// The reply as a JSON string.
    pub(crate) fn text(&self) -> String {
        // SAFETY: the string is owned by the live response and copied at once.
        unsafe { opt_str(self.0.api.json_response_string(self.0.as_ptr())) }.unwrap_or_default()
    }
}
