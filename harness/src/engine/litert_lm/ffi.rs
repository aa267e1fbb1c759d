//! The LiteRT-LM C API as a table of function pointers, resolved at run time with `libloading`
//! (nothing is linked at build time, so leakloop builds and runs where the library is absent).
//!
//! Only the calls leakloop drives are bound, each resolved on its own: releases 0.11.0 to the 0.19
//! nightlies export different subsets and, for a few functions, different signatures under one
//! name ([`Abi`], [`SendFn`], [`StreamFn`], [`Sampler`]); which form a library speaks is told
//! apart by the other functions it exports before anything is called, and what it offers is
//! summed up as [`Capabilities`]. Every handle type is opaque and only ever passed back to the
//! library that made it.

use std::collections::HashMap;
use std::ffi::{c_char, c_int, c_void, CStr};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

use crate::engine::litert_lm::capabilities::{Capabilities, Capability, SAMPLER_HANDLE};

macro_rules! opaque {
    ($($(#[$doc:meta])* $name:ident;)*) => {$(
        $(#[$doc])*
        #[repr(C)]
        pub(crate) struct $name {
            _private: [u8; 0],
            _not_send: std::marker::PhantomData<(*mut u8, std::marker::PhantomPinned)>,
        }
    )*};
}

opaque! {
    /// `LiteRtLmEngineSettings`.
    RawSettings;
    /// `LiteRtLmEngine`.
    RawEngine;
    /// `LiteRtLmSamplerParams`.
    RawSamplerParams;
    /// `LiteRtLmSessionConfig`.
    RawSessionConfig;
    /// `LiteRtLmConversationConfig`.
    RawConversationConfig;
    /// `LiteRtLmConversation`.
    RawConversation;
    /// `LiteRtLmConversationOptionalArgs`.
    RawOptionalArgs;
    /// `LiteRtLmJsonResponse`.
    RawJsonResponse;
    /// `LiteRtLmTokenizeResult`.
    RawTokenizeResult;
    /// `LiteRtLmStreamChunk` (owned by the library, valid during a callback only).
    RawStreamChunk;
}

/// `LiteRtLmStreamCallback` from 0.15 on: called from a library thread with every streamed chunk.
pub(crate) type StreamCallback =
    unsafe extern "C" fn(callback_data: *mut c_void, chunk: *const RawStreamChunk);

/// `LiteRtLmSamplerType`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(C)]
pub(crate) enum SamplerType {
    TopK = 1,
    TopP = 2,
}

/// `kLiteRtLmLogSeverityError`: the library logs warnings and info to stderr otherwise.
pub(crate) const LOG_SEVERITY_ERROR: c_int = 4;

/// `LiteRtLmStreamCallback` up to 0.14: the chunk's text, whether it is the last one, and an
/// error message (NULL when none) come as arguments.
pub(crate) type TextStreamCallback = unsafe extern "C" fn(
    callback_data: *mut c_void,
    text: *const c_char,
    is_final: bool,
    error: *const c_char,
);

/// `LiteRtLmSamplerParams` as a plain struct, the form 0.11 to 0.13 take by pointer (0.14 made it
/// an opaque handle with setters).
#[derive(Debug, Clone, Copy, PartialEq)]
#[repr(C)]
pub(crate) struct SamplerStruct {
    pub kind: c_int,
    pub top_k: c_int,
    pub top_p: f32,
    pub temperature: f32,
    pub seed: c_int,
}

/// The two generations of LiteRT-LM's calling convention. Releases up to 0.18 return handles and
/// values directly (NULL on failure); the 0.19 nightlies return a status code (0 = OK) from every
/// call and hand results back through a trailing out-parameter, under the same function names.
/// Calling one with the other's signature crashes, so the generation is detected when the library
/// loads: only the status generation exports `litert_lm_get_api_version`.
///
/// Setters and deleters that gained a status return keep one binding: a `void` call of a function
/// that returns an `int` is sound in the C calling conventions leakloop runs on; only the status
/// is dropped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Abi {
    /// Handles and values returned directly (0.18 and earlier).
    Handle,
    /// A status code returned, results through out-parameters (0.19 nightlies).
    Status,
}

impl Abi {
    /// A short word for reports.
    pub fn as_str(&self) -> &'static str {
        match self {
            Abi::Handle => "handle-returning",
            Abi::Status => "status-returning",
        }
    }
}

/// One function in its two generations.
#[derive(Clone, Copy)]
enum Dual<H, S> {
    Handle(H),
    Status(S),
}

/// Runs a status-returning call with one out-parameter; `empty` when the status is not OK.
///
/// # Safety
/// `call` must be a C-API call whose only out-parameter is the pointer it is given.
unsafe fn out_param<T: Copy>(empty: T, call: impl FnOnce(*mut T) -> c_int) -> T {
    let mut value = empty;
    if call(&mut value) == 0 {
        value
    } else {
        empty
    }
}

type CreateFn<T> =
    Dual<unsafe extern "C" fn() -> *mut T, unsafe extern "C" fn(*mut *mut T) -> c_int>;
type GetFn<H, T> =
    Dual<unsafe extern "C" fn(*const H) -> T, unsafe extern "C" fn(*const H, *mut T) -> c_int>;

/// `conversation_send_message` in its three forms.
#[derive(Clone, Copy)]
enum SendFn {
    /// 0.11: `(conversation, message, context) -> response`.
    Plain(
        unsafe extern "C" fn(
            *mut RawConversation,
            *const c_char,
            *const c_char,
        ) -> *mut RawJsonResponse,
    ),
    /// 0.12 to 0.18: optional args (may be NULL) after the context.
    Args(
        unsafe extern "C" fn(
            *mut RawConversation,
            *const c_char,
            *const c_char,
            *const RawOptionalArgs,
        ) -> *mut RawJsonResponse,
    ),
    /// 0.19: a status, the response through an out-parameter.
    Status(
        unsafe extern "C" fn(
            *mut RawConversation,
            *const c_char,
            *const c_char,
            *const RawOptionalArgs,
            *mut *mut RawJsonResponse,
        ) -> c_int,
    ),
}

/// `conversation_send_message_stream` in its three forms (each returns 0 when the stream
/// started).
#[derive(Clone, Copy)]
pub(crate) enum StreamFn {
    /// 0.11: no optional args, text callback.
    TextPlain(
        unsafe extern "C" fn(
            *mut RawConversation,
            *const c_char,
            *const c_char,
            TextStreamCallback,
            *mut c_void,
        ) -> c_int,
    ),
    /// 0.12 to 0.14: optional args, text callback.
    Text(
        unsafe extern "C" fn(
            *mut RawConversation,
            *const c_char,
            *const c_char,
            *const RawOptionalArgs,
            TextStreamCallback,
            *mut c_void,
        ) -> c_int,
    ),
    /// 0.15 on: optional args, chunk callback.
    Chunk(
        unsafe extern "C" fn(
            *mut RawConversation,
            *const c_char,
            *const c_char,
            *const RawOptionalArgs,
            StreamCallback,
            *mut c_void,
        ) -> c_int,
    ),
}

/// How a library takes sampler parameters.
pub(crate) enum Sampler {
    /// 0.11 to 0.13: `session_config_set_sampler_params(config, const LiteRtLmSamplerParams*)`.
    Struct(unsafe extern "C" fn(*mut RawSessionConfig, *const SamplerStruct)),
    /// 0.14 on: an opaque handle with setters.
    Handle(SamplerHandleFns),
}

/// The sampler-handle functions (0.14 on).
pub(crate) struct SamplerHandleFns {
    create: Dual<
        unsafe extern "C" fn(SamplerType) -> *mut RawSamplerParams,
        unsafe extern "C" fn(SamplerType, *mut *mut RawSamplerParams) -> c_int,
    >,
    pub delete: unsafe extern "C" fn(*mut RawSamplerParams),
    pub set_top_k: unsafe extern "C" fn(*mut RawSamplerParams, i32),
    pub set_top_p: unsafe extern "C" fn(*mut RawSamplerParams, f32),
    pub set_temperature: unsafe extern "C" fn(*mut RawSamplerParams, f32),
    pub set_seed: unsafe extern "C" fn(*mut RawSamplerParams, i32),
    pub set: unsafe extern "C" fn(*mut RawSessionConfig, *const RawSamplerParams),
}

/// Per-message optional arguments with an output limit (0.14 on).
pub(crate) struct OptionalArgsFns {
    create: CreateFn<RawOptionalArgs>,
    pub delete: unsafe extern "C" fn(*mut RawOptionalArgs),
    pub set_max_output_tokens: unsafe extern "C" fn(*mut RawOptionalArgs, c_int),
}

/// The stream-chunk getters (0.15 on).
struct ChunkFns {
    text: GetFn<RawStreamChunk, *const c_char>,
    is_final: GetFn<RawStreamChunk, bool>,
    error: GetFn<RawStreamChunk, *const c_char>,
}

/// The engine-settings setter of the CPU thread count.
pub(crate) const SET_NUM_THREADS: &str = "litert_lm_engine_settings_set_num_threads";

/// The resolved functions of one loaded `liblitert-lm.so`: a core every release with a C library
/// exports, and optional groups that describe its [`Capabilities`].
pub(crate) struct Api {
    pub path: PathBuf,
    /// Which calling convention the library speaks.
    pub abi: Abi,
    /// What it can do, from the functions it exports.
    pub capabilities: Capabilities,
    pub set_min_log_level: unsafe extern "C" fn(c_int),
    /// Absent before 0.18.
    pub get_last_error_message: Option<unsafe extern "C" fn() -> *const c_char>,

    engine_settings_create_fn: Dual<
        unsafe extern "C" fn(
            *const c_char,
            *const c_char,
            *const c_char,
            *const c_char,
        ) -> *mut RawSettings,
        unsafe extern "C" fn(
            *const c_char,
            *const c_char,
            *const c_char,
            *const c_char,
            *mut *mut RawSettings,
        ) -> c_int,
    >,
    pub engine_settings_delete: unsafe extern "C" fn(*mut RawSettings),
    pub engine_settings_set_max_num_tokens: unsafe extern "C" fn(*mut RawSettings, c_int),
    pub engine_settings_set_cache_dir: unsafe extern "C" fn(*mut RawSettings, *const c_char),
    /// `litert_lm_engine_settings_set_num_threads`: the CPU backend's thread count (absent in
    /// releases that do not export it).
    pub engine_settings_set_num_threads: Option<unsafe extern "C" fn(*mut RawSettings, c_int)>,

    engine_create_fn: Dual<
        unsafe extern "C" fn(*const RawSettings) -> *mut RawEngine,
        unsafe extern "C" fn(*const RawSettings, *mut *mut RawEngine) -> c_int,
    >,
    pub engine_delete: unsafe extern "C" fn(*mut RawEngine),
    engine_tokenize_fn: Dual<
        unsafe extern "C" fn(*mut RawEngine, *const c_char) -> *mut RawTokenizeResult,
        unsafe extern "C" fn(*mut RawEngine, *const c_char, *mut *mut RawTokenizeResult) -> c_int,
    >,
    tokenize_result_get_num_tokens_fn: GetFn<RawTokenizeResult, usize>,
    pub tokenize_result_delete: unsafe extern "C" fn(*mut RawTokenizeResult),

    /// Absent: the engine's default sampler.
    pub sampler: Option<Sampler>,

    session_config_create_fn: CreateFn<RawSessionConfig>,
    pub session_config_delete: unsafe extern "C" fn(*mut RawSessionConfig),
    pub session_config_set_max_output_tokens: unsafe extern "C" fn(*mut RawSessionConfig, c_int),

    conversation_config_create_fn: CreateFn<RawConversationConfig>,
    pub conversation_config_delete: unsafe extern "C" fn(*mut RawConversationConfig),
    pub conversation_config_set_session_config:
        unsafe extern "C" fn(*mut RawConversationConfig, *const RawSessionConfig),

    conversation_create_fn: Dual<
        unsafe extern "C" fn(*mut RawEngine, *mut RawConversationConfig) -> *mut RawConversation,
        unsafe extern "C" fn(
            *mut RawEngine,
            *mut RawConversationConfig,
            *mut *mut RawConversation,
        ) -> c_int,
    >,
    pub conversation_delete: unsafe extern "C" fn(*mut RawConversation),
    send_fn: SendFn,
    /// Absent: no streaming (and so no cancel after K tokens).
    pub stream: Option<StreamFn>,
    /// Absent: a generation cannot be stopped midway.
    pub conversation_cancel_process: Option<unsafe extern "C" fn(*mut RawConversation)>,
    /// Absent: the session's output limit applies to every message.
    pub optional_args: Option<OptionalArgsFns>,

    json_response_get_string_fn: GetFn<RawJsonResponse, *const c_char>,
    pub json_response_delete: unsafe extern "C" fn(*mut RawJsonResponse),

    chunk: Option<ChunkFns>,
}

impl std::fmt::Debug for Api {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Api")
            .field("path", &self.path)
            .field("abi", &self.abi)
            .field("capabilities", &self.capabilities)
            .finish()
    }
}

/// The library could not be opened or lacks a function leakloop needs.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("cannot use LiteRT-LM library {path}: {cause}")]
pub struct LoadLibraryError {
    /// The library.
    pub path: PathBuf,
    /// Why.
    pub cause: String,
}

impl Api {
    /// Opens the library at `path` once per process and resolves every function.
    ///
    /// The library stays loaded until the process ends: unloading a C++ library that started
    /// threads is not safe, and a run loads each library only once anyway.
    pub(crate) fn load(path: &Path) -> Result<&'static Api, LoadLibraryError> {
        static LOADED: OnceLock<Mutex<HashMap<PathBuf, &'static Api>>> = OnceLock::new();
        let key = path.canonicalize().unwrap_or_else(|_| path.to_path_buf());
        let mut loaded = LOADED
            .get_or_init(Default::default)
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        if let Some(api) = loaded.get(&key) {
            return Ok(api);
        }
        let err = |cause: String| LoadLibraryError {
            path: path.to_path_buf(),
            cause,
        };
        preload_libm();
        // SAFETY: loading runs the library's initialisers; liblitert-lm.so is a plain C/C++
        // library whose initialisers have no preconditions on the loading process.
        let library = unsafe { libloading::Library::new(&key) }.map_err(|e| err(e.to_string()))?;
        let library: &'static libloading::Library = Box::leak(Box::new(library));
        let api = Self::resolve(library, &key).map_err(err)?;
        // SAFETY: a plain setter with an in-range severity.
        unsafe { (api.set_min_log_level)(LOG_SEVERITY_ERROR) };
        let api: &'static Api = Box::leak(Box::new(api));
        loaded.insert(key, api);
        Ok(api)
    }

    fn resolve(lib: &'static libloading::Library, path: &Path) -> Result<Api, String> {
        macro_rules! opt {
            ($name:literal) => {{
                // SAFETY: the field's type spells the C signature for this name in the releases
                // that export it (learned from each release's headers and Python bindings); a
                // form that changed between releases is told apart by the other functions the
                // library exports before it is called.
                unsafe { lib.get(concat!($name, "\0").as_bytes()) }
                    .ok()
                    .map(|s| *s)
            }};
        }
        macro_rules! sym {
            ($name:literal) => {
                opt!($name).ok_or_else(|| {
                    format!(
                        "missing function `{}`, which every LiteRT-LM release with a C library \
                         (0.11.0 on) exports: this is not a liblitert-lm.so leakloop can drive",
                        $name
                    )
                })?
            };
        }
        let has = |name: &str| {
            // SAFETY: only the presence of the symbol is looked at; it is never called here.
            unsafe { lib.get::<*const c_void>(format!("{name}\0").as_bytes()) }.is_ok()
        };
        let capabilities = Capabilities::from_exports(has);
        let abi = if capabilities.has(Capability::StatusCodes) {
            Abi::Status
        } else {
            Abi::Handle
        };
        macro_rules! dual {
            ($name:literal) => {
                match abi {
                    Abi::Handle => Dual::Handle(sym!($name)),
                    Abi::Status => Dual::Status(sym!($name)),
                }
            };
        }
        // Each capability's functions are bound in the form the capabilities imply; `sym!` fails
        // only if a name was exported but does not resolve, which no release does.
        let message_args = capabilities.has(Capability::MessageArgs);
        let send_fn = match (abi, message_args) {
            (Abi::Status, _) => SendFn::Status(sym!("litert_lm_conversation_send_message")),
            (Abi::Handle, true) => SendFn::Args(sym!("litert_lm_conversation_send_message")),
            (Abi::Handle, false) => SendFn::Plain(sym!("litert_lm_conversation_send_message")),
        };
        let chunk = if capabilities.has(Capability::StreamChunks) {
            Some(ChunkFns {
                text: dual!("litert_lm_stream_chunk_get_text"),
                is_final: dual!("litert_lm_stream_chunk_is_final"),
                error: dual!("litert_lm_stream_chunk_get_error"),
            })
        } else {
            None
        };
        let stream = match (
            capabilities.has(Capability::Streaming),
            capabilities.has(Capability::StreamChunks),
            message_args,
        ) {
            (false, _, _) => None,
            (true, true, _) => Some(StreamFn::Chunk(sym!(
                "litert_lm_conversation_send_message_stream"
            ))),
            (true, false, true) => Some(StreamFn::Text(sym!(
                "litert_lm_conversation_send_message_stream"
            ))),
            (true, false, false) => Some(StreamFn::TextPlain(sym!(
                "litert_lm_conversation_send_message_stream"
            ))),
        };
        let sampler = match (
            capabilities.has(Capability::SamplerParams),
            has(SAMPLER_HANDLE[0]),
        ) {
            (false, _) => None,
            (true, true) => Some(Sampler::Handle(SamplerHandleFns {
                create: dual!("litert_lm_sampler_params_create"),
                delete: sym!("litert_lm_sampler_params_delete"),
                set_top_k: sym!("litert_lm_sampler_params_set_top_k"),
                set_top_p: sym!("litert_lm_sampler_params_set_top_p"),
                set_temperature: sym!("litert_lm_sampler_params_set_temperature"),
                set_seed: sym!("litert_lm_sampler_params_set_seed"),
                set: sym!("litert_lm_session_config_set_sampler_params"),
            })),
            (true, false) => Some(Sampler::Struct(sym!(
                "litert_lm_session_config_set_sampler_params"
            ))),
        };
        let optional_args = if capabilities.has(Capability::MessageOutputLimit) {
            Some(OptionalArgsFns {
                create: dual!("litert_lm_conversation_optional_args_create"),
                delete: sym!("litert_lm_conversation_optional_args_delete"),
                set_max_output_tokens: sym!(
                    "litert_lm_conversation_optional_args_set_max_output_tokens"
                ),
            })
        } else {
            None
        };
        let conversation_cancel_process = if capabilities.has(Capability::Cancel) {
            Some(sym!("litert_lm_conversation_cancel_process"))
        } else {
            None
        };
        let get_last_error_message = if capabilities.has(Capability::ErrorMessages) {
            Some(sym!("litert_lm_get_last_error_message"))
        } else {
            None
        };
        let engine_settings_set_num_threads = if has(SET_NUM_THREADS) {
            Some(sym!("litert_lm_engine_settings_set_num_threads"))
        } else {
            None
        };
        Ok(Api {
            abi,
            engine_settings_set_num_threads,
            capabilities,
            path: path.to_path_buf(),
            set_min_log_level: sym!("litert_lm_set_min_log_level"),
            get_last_error_message,
            engine_settings_create_fn: dual!("litert_lm_engine_settings_create"),
            engine_settings_delete: sym!("litert_lm_engine_settings_delete"),
            engine_settings_set_max_num_tokens: sym!(
                "litert_lm_engine_settings_set_max_num_tokens"
            ),
            engine_settings_set_cache_dir: sym!("litert_lm_engine_settings_set_cache_dir"),
            engine_create_fn: dual!("litert_lm_engine_create"),
            engine_delete: sym!("litert_lm_engine_delete"),
            engine_tokenize_fn: dual!("litert_lm_engine_tokenize"),
            tokenize_result_get_num_tokens_fn: dual!("litert_lm_tokenize_result_get_num_tokens"),
            tokenize_result_delete: sym!("litert_lm_tokenize_result_delete"),
            sampler,
            session_config_create_fn: dual!("litert_lm_session_config_create"),
            session_config_delete: sym!("litert_lm_session_config_delete"),
            session_config_set_max_output_tokens: sym!(
                "litert_lm_session_config_set_max_output_tokens"
            ),
            conversation_config_create_fn: dual!("litert_lm_conversation_config_create"),
            conversation_config_delete: sym!("litert_lm_conversation_config_delete"),
            conversation_config_set_session_config: sym!(
                "litert_lm_conversation_config_set_session_config"
            ),
            conversation_create_fn: dual!("litert_lm_conversation_create"),
            conversation_delete: sym!("litert_lm_conversation_delete"),
            send_fn,
            stream,
            conversation_cancel_process,
            optional_args,
            json_response_get_string_fn: dual!("litert_lm_json_response_get_string"),
            json_response_delete: sym!("litert_lm_json_response_delete"),
            chunk,
        })
    }

    /// `litert_lm_engine_settings_create(model, backend, NULL, NULL)`; NULL on failure.
    ///
    /// # Safety
    /// Valid C strings.
    pub(crate) unsafe fn engine_settings_create(
        &self,
        model: *const c_char,
        backend: *const c_char,
    ) -> *mut RawSettings {
        let none = std::ptr::null();
        // SAFETY: per this function's contract; NULL vision/audio backends mean "not set".
        unsafe {
            match self.engine_settings_create_fn {
                Dual::Handle(f) => f(model, backend, none, none),
                Dual::Status(f) => {
                    out_param(std::ptr::null_mut(), |o| f(model, backend, none, none, o))
                }
            }
        }
    }

    /// `litert_lm_engine_create`; NULL on failure.
    ///
    /// # Safety
    /// A live settings handle.
    pub(crate) unsafe fn engine_create(&self, settings: *const RawSettings) -> *mut RawEngine {
        // SAFETY: per this function's contract.
        unsafe {
            match self.engine_create_fn {
                Dual::Handle(f) => f(settings),
                Dual::Status(f) => out_param(std::ptr::null_mut(), |o| f(settings, o)),
            }
        }
    }

    /// `litert_lm_engine_tokenize`; NULL on failure.
    ///
    /// # Safety
    /// A live engine and a C string.
    pub(crate) unsafe fn engine_tokenize(
        &self,
        engine: *mut RawEngine,
        text: *const c_char,
    ) -> *mut RawTokenizeResult {
        // SAFETY: per this function's contract.
        unsafe {
            match self.engine_tokenize_fn {
                Dual::Handle(f) => f(engine, text),
                Dual::Status(f) => out_param(std::ptr::null_mut(), |o| f(engine, text, o)),
            }
        }
    }

    /// `litert_lm_tokenize_result_get_num_tokens`.
    ///
    /// # Safety
    /// A live tokenize result.
    pub(crate) unsafe fn tokenize_result_num_tokens(
        &self,
        result: *const RawTokenizeResult,
    ) -> usize {
        // SAFETY: per this function's contract.
        unsafe { get(self.tokenize_result_get_num_tokens_fn, result, 0) }
    }

    /// `litert_lm_sampler_params_create` (libraries with sampler handles); NULL on failure or
    /// when the library takes sampler parameters as a struct.
    pub(crate) fn sampler_params_create(&self, kind: SamplerType) -> *mut RawSamplerParams {
        let Some(Sampler::Handle(fns)) = &self.sampler else {
            return std::ptr::null_mut();
        };
        // SAFETY: a valid sampler type and an out-parameter of the right type.
        unsafe {
            match fns.create {
                Dual::Handle(f) => f(kind),
                Dual::Status(f) => out_param(std::ptr::null_mut(), |o| f(kind, o)),
            }
        }
    }

    /// `litert_lm_session_config_create`; NULL on failure.
    pub(crate) fn session_config_create(&self) -> *mut RawSessionConfig {
        // SAFETY: no arguments besides the out-parameter.
        unsafe { create(self.session_config_create_fn) }
    }

    /// `litert_lm_conversation_config_create`; NULL on failure.
    pub(crate) fn conversation_config_create(&self) -> *mut RawConversationConfig {
        // SAFETY: no arguments besides the out-parameter.
        unsafe { create(self.conversation_config_create_fn) }
    }

    /// `litert_lm_conversation_create`; NULL on failure.
    ///
    /// # Safety
    /// A live engine and conversation config.
    pub(crate) unsafe fn conversation_create(
        &self,
        engine: *mut RawEngine,
        config: *mut RawConversationConfig,
    ) -> *mut RawConversation {
        // SAFETY: per this function's contract.
        unsafe {
            match self.conversation_create_fn {
                Dual::Handle(f) => f(engine, config),
                Dual::Status(f) => out_param(std::ptr::null_mut(), |o| f(engine, config, o)),
            }
        }
    }

    /// The blocking `litert_lm_conversation_send_message`; NULL on failure. `args` may be NULL,
    /// and is not passed to a library whose send takes none.
    ///
    /// # Safety
    /// A live conversation, C strings, and live optional args or NULL.
    pub(crate) unsafe fn conversation_send_message(
        &self,
        conversation: *mut RawConversation,
        message: *const c_char,
        context: *const c_char,
        args: *const RawOptionalArgs,
    ) -> *mut RawJsonResponse {
        // SAFETY: per this function's contract.
        unsafe {
            match self.send_fn {
                SendFn::Plain(f) => f(conversation, message, context),
                SendFn::Args(f) => f(conversation, message, context, args),
                SendFn::Status(f) => out_param(std::ptr::null_mut(), |o| {
                    f(conversation, message, context, args, o)
                }),
            }
        }
    }

    /// `litert_lm_conversation_optional_args_create`; NULL on failure or when the library has no
    /// per-message output limit.
    pub(crate) fn optional_args_create(&self) -> *mut RawOptionalArgs {
        let Some(fns) = &self.optional_args else {
            return std::ptr::null_mut();
        };
        // SAFETY: no arguments besides the out-parameter.
        unsafe { create(fns.create) }
    }

    /// `litert_lm_json_response_get_string`: a string owned by the response, or NULL.
    ///
    /// # Safety
    /// A live response.
    pub(crate) unsafe fn json_response_string(
        &self,
        response: *const RawJsonResponse,
    ) -> *const c_char {
        // SAFETY: per this function's contract.
        unsafe { get(self.json_response_get_string_fn, response, std::ptr::null()) }
    }

    /// `litert_lm_stream_chunk_get_text`: a string owned by the chunk, or NULL.
    ///
    /// # Safety
    /// A chunk inside its callback.
    pub(crate) unsafe fn chunk_text(&self, chunk: *const RawStreamChunk) -> *const c_char {
        let Some(fns) = &self.chunk else {
            return std::ptr::null();
        };
        // SAFETY: per this function's contract.
        unsafe { get(fns.text, chunk, std::ptr::null()) }
    }

    /// `litert_lm_stream_chunk_is_final`.
    ///
    /// # Safety
    /// A chunk inside its callback.
    pub(crate) unsafe fn chunk_is_final(&self, chunk: *const RawStreamChunk) -> bool {
        let Some(fns) = &self.chunk else {
            return false;
        };
        // SAFETY: per this function's contract.
        unsafe { get(fns.is_final, chunk, false) }
    }

    /// `litert_lm_stream_chunk_get_error`: a string owned by the chunk, or NULL.
    ///
    /// # Safety
    /// A chunk inside its callback.
    pub(crate) unsafe fn chunk_error(&self, chunk: *const RawStreamChunk) -> *const c_char {
        let Some(fns) = &self.chunk else {
            return std::ptr::null();
        };
        // SAFETY: per this function's contract.
        unsafe { get(fns.error, chunk, std::ptr::null()) }
    }

    /// The library's message for the last failed call on this thread, if it offers one.
    pub(crate) fn last_error(&self) -> Option<String> {
        let get = self.get_last_error_message?;
        // SAFETY: returns NULL or a NUL-terminated string owned by the library, valid until the
        // next call on this thread; it is copied at once.
        let text = unsafe { opt_str(get()) }?;
        (!text.is_empty()).then_some(text)
    }
}

/// What the library file at `path` can do, read from its dynamic symbol table without loading it
/// (no initialisers run, and any number of builds can be checked in one process): the checks made
/// before a run (`leakloop check --lib`, `compare`, `bisect`). The same [`Capabilities`] the
/// loaded library reports.
pub fn library_capabilities(path: &Path) -> Result<Capabilities, LoadLibraryError> {
    use object::{Object, ObjectSymbol};
    let err = |cause: String| LoadLibraryError {
        path: path.to_path_buf(),
        cause,
    };
    let data = std::fs::read(path).map_err(|e| err(format!("cannot read it: {e}")))?;
    let file = object::File::parse(&*data)
        .map_err(|e| err(format!("not a shared library leakloop can read: {e}")))?;
    let exported: std::collections::HashSet<&str> = file
        .dynamic_symbols()
        .filter(|s| s.is_definition())
        .filter_map(|s| s.name().ok())
        // A versioned name (`litert_lm_x@@LITERT_LM_C_API_1.0`) is the plain name to dlsym.
        .map(|n| n.split('@').next().unwrap_or(n))
        .collect();
    if !exported.contains("litert_lm_conversation_send_message") {
        return Err(err(
            "it exports no `litert_lm_conversation_send_message`, which every LiteRT-LM release \
             with a C library (0.11.0 on) exports"
                .to_owned(),
        ));
    }
    Ok(Capabilities::from_exports(|n| exported.contains(n)))
}

/// Calls a constructor without arguments in either generation; NULL on failure.
///
/// # Safety
/// `f` is such a constructor.
unsafe fn create<T>(f: CreateFn<T>) -> *mut T {
    // SAFETY: per this function's contract.
    unsafe {
        match f {
            Dual::Handle(f) => f(),
            Dual::Status(f) => out_param(std::ptr::null_mut(), |o| f(o)),
        }
    }
}

/// Calls a getter of one handle in either generation; `empty` on failure.
///
/// # Safety
/// `f` is such a getter and `handle` is live.
unsafe fn get<H, T: Copy>(f: GetFn<H, T>, handle: *const H, empty: T) -> T {
    // SAFETY: per this function's contract.
    unsafe {
        match f {
            Dual::Handle(f) => f(handle),
            Dual::Status(f) => out_param(empty, |o| f(handle, o)),
        }
    }
}

/// Makes libm's symbols global before the engine loads. The GPU path loads graphics drivers
/// (Mesa's software Vulkan among them) that expect the process itself to provide libm; a program
/// without it crashed there. A Rust binary does not link libm by itself, and the copy that comes
/// in as a dependency of the engine library is private to it.
fn preload_libm() {
    #[cfg(target_os = "linux")]
    {
        static LIBM: OnceLock<()> = OnceLock::new();
        LIBM.get_or_init(|| {
            use libloading::os::unix::{Library, RTLD_GLOBAL, RTLD_NOW};
            // SAFETY: libm has no initialisers with preconditions; it stays loaded for good.
            if let Ok(lib) = unsafe { Library::open(Some("libm.so.6"), RTLD_NOW | RTLD_GLOBAL) } {
                std::mem::forget(lib);
            }
        });
    }
}

/// Copies a C string the library owns; `None` for NULL.
///
/// # Safety
/// `ptr` is NULL or points to a NUL-terminated string valid for the duration of this call.
pub(crate) unsafe fn opt_str(ptr: *const c_char) -> Option<String> {
    if ptr.is_null() {
        return None;
    }
    // SAFETY: non-null and NUL-terminated per this function's contract.
    Some(
        unsafe { CStr::from_ptr(ptr) }
            .to_string_lossy()
            .into_owned(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_that_is_not_a_library_is_a_clear_error() {
        let tmp = tempfile::tempdir().unwrap();
        let fake = tmp.path().join("liblitert-lm.so");
        std::fs::write(&fake, b"not an ELF file").unwrap();
        let err = Api::load(&fake).expect_err("loading garbage must fail");
        assert!(err.to_string().contains("liblitert-lm.so"), "{err}");
    }

    #[test]
    fn a_file_without_the_c_api_is_refused_before_loading() {
        let tmp = tempfile::tempdir().unwrap();
        let fake = tmp.path().join("liblitert-lm.so");
        std::fs::write(&fake, b"not an ELF file").unwrap();
        let err = library_capabilities(&fake).expect_err("garbage has no symbols");
        assert!(err.cause.contains("not a shared library"), "{err}");
        // This test binary is an ELF file without LiteRT-LM's functions.
        let exe = std::env::current_exe().unwrap();
        let err = library_capabilities(&exe).expect_err("no C API");
        assert!(err.cause.contains("0.11.0 on"), "{err}");
    }

    #[test]
    fn a_library_without_the_functions_is_named_with_the_first_missing_one() {
        // libc is loaded everywhere and has none of LiteRT-LM's functions.
        let err = Api::load(Path::new("libc.so.6")).expect_err("libc is no LiteRT-LM");
        assert!(
            err.cause
                .contains("missing function `litert_lm_conversation_send_message`"),
            "{err}"
        );
        assert!(err.cause.contains("0.11.0 on"), "{err}");
    }
}
