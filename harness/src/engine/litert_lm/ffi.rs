//! The LiteRT-LM C API as a table of function pointers, resolved at run time with `libloading`
//! (nothing is linked at build time, so leakloop builds and runs where the library is absent).
//!
//! Only the calls leakloop drives are bound. Signatures follow LiteRT-LM's `c/engine.h`; every
//! handle type is opaque and only ever passed back to the library that made it.

use std::collections::HashMap;
use std::ffi::{c_char, c_int, c_void, CStr};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

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

/// `LiteRtLmStreamCallback`: called from a library thread for every streamed chunk.
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

/// The two generations of LiteRT-LM's C API. Releases up to 0.18 return handles and values
/// directly (NULL on failure); the 0.19 nightlies return a status code (0 = OK) from every call
/// and hand results back through a trailing out-parameter, under the same function names. Calling
/// one with the other's signature crashes, so the generation is detected when the library loads:
/// only the status generation exports `litert_lm_get_api_version`.
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

/// The resolved functions of one loaded `liblitert-lm.so`.
pub(crate) struct Api {
    pub path: PathBuf,
    /// Which generation of the C API the library speaks.
    pub abi: Abi,
    pub set_min_log_level: unsafe extern "C" fn(c_int),
    /// Absent in old releases.
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

    engine_create_fn: Dual<
        unsafe extern "C" fn(*const RawSettings) -> *mut RawEngine,
        unsafe extern "C" fn(*const RawSettings, *mut *mut RawEngine) -> c_int,
    >,
    pub engine_delete: unsafe extern "C" fn(*mut RawEngine),
    engine_tokenize_fn: Dual<
        unsafe extern "C" fn(*mut RawEngine, *const c_char) -> *mut RawTokenizeResult,
        unsafe extern "C" fn(*mut RawEngine, *const c_char, *mut *mut RawTokenizeResult) -> c_int,
    >,
    tokenize_result_get_num_tokens_fn: Dual<
        unsafe extern "C" fn(*const RawTokenizeResult) -> usize,
        unsafe extern "C" fn(*const RawTokenizeResult, *mut usize) -> c_int,
    >,
    pub tokenize_result_delete: unsafe extern "C" fn(*mut RawTokenizeResult),

    sampler_params_create_fn: Dual<
        unsafe extern "C" fn(SamplerType) -> *mut RawSamplerParams,
        unsafe extern "C" fn(SamplerType, *mut *mut RawSamplerParams) -> c_int,
    >,
    pub sampler_params_delete: unsafe extern "C" fn(*mut RawSamplerParams),
    pub sampler_params_set_top_k: unsafe extern "C" fn(*mut RawSamplerParams, i32),
    pub sampler_params_set_top_p: unsafe extern "C" fn(*mut RawSamplerParams, f32),
    pub sampler_params_set_temperature: unsafe extern "C" fn(*mut RawSamplerParams, f32),
    pub sampler_params_set_seed: unsafe extern "C" fn(*mut RawSamplerParams, i32),

    session_config_create_fn: Dual<
        unsafe extern "C" fn() -> *mut RawSessionConfig,
        unsafe extern "C" fn(*mut *mut RawSessionConfig) -> c_int,
    >,
    pub session_config_delete: unsafe extern "C" fn(*mut RawSessionConfig),
    pub session_config_set_max_output_tokens: unsafe extern "C" fn(*mut RawSessionConfig, c_int),
    pub session_config_set_sampler_params:
        unsafe extern "C" fn(*mut RawSessionConfig, *const RawSamplerParams),

    conversation_config_create_fn: Dual<
        unsafe extern "C" fn() -> *mut RawConversationConfig,
        unsafe extern "C" fn(*mut *mut RawConversationConfig) -> c_int,
    >,
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
    conversation_send_message_fn: Dual<
        unsafe extern "C" fn(
            *mut RawConversation,
            *const c_char,
            *const c_char,
            *const RawOptionalArgs,
        ) -> *mut RawJsonResponse,
        unsafe extern "C" fn(
            *mut RawConversation,
            *const c_char,
            *const c_char,
            *const RawOptionalArgs,
            *mut *mut RawJsonResponse,
        ) -> c_int,
    >,
    pub conversation_send_message_stream: unsafe extern "C" fn(
        *mut RawConversation,
        *const c_char,
        *const c_char,
        *const RawOptionalArgs,
        StreamCallback,
        *mut c_void,
    ) -> c_int,
    pub conversation_cancel_process: unsafe extern "C" fn(*mut RawConversation),

    optional_args_create_fn: Dual<
        unsafe extern "C" fn() -> *mut RawOptionalArgs,
        unsafe extern "C" fn(*mut *mut RawOptionalArgs) -> c_int,
    >,
    pub optional_args_delete: unsafe extern "C" fn(*mut RawOptionalArgs),
    pub optional_args_set_max_output_tokens: unsafe extern "C" fn(*mut RawOptionalArgs, c_int),

    json_response_get_string_fn: Dual<
        unsafe extern "C" fn(*const RawJsonResponse) -> *const c_char,
        unsafe extern "C" fn(*const RawJsonResponse, *mut *const c_char) -> c_int,
    >,
    pub json_response_delete: unsafe extern "C" fn(*mut RawJsonResponse),

    stream_chunk_get_text_fn: Dual<
        unsafe extern "C" fn(*const RawStreamChunk) -> *const c_char,
        unsafe extern "C" fn(*const RawStreamChunk, *mut *const c_char) -> c_int,
    >,
    stream_chunk_is_final_fn: Dual<
        unsafe extern "C" fn(*const RawStreamChunk) -> bool,
        unsafe extern "C" fn(*const RawStreamChunk, *mut bool) -> c_int,
    >,
    stream_chunk_get_error_fn: Dual<
        unsafe extern "C" fn(*const RawStreamChunk) -> *const c_char,
        unsafe extern "C" fn(*const RawStreamChunk, *mut *const c_char) -> c_int,
    >,
}

impl std::fmt::Debug for Api {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Api")
            .field("path", &self.path)
            .field("abi", &self.abi)
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
        macro_rules! sym {
            ($name:literal) => {{
                // SAFETY: the field's type spells the C signature from engine.h for this name.
                let symbol = unsafe { lib.get(concat!($name, "\0").as_bytes()) }
                    .map_err(|e| format!("missing function `{}`: {e}", $name))?;
                *symbol
            }};
        }
        macro_rules! optional_sym {
            ($name:literal) => {{
                // SAFETY: as above.
                unsafe { lib.get(concat!($name, "\0").as_bytes()) }
                    .ok()
                    .map(|s| *s)
            }};
        }
        let abi = if optional_sym!("litert_lm_get_api_version")
            .map(|f: unsafe extern "C" fn() -> c_int| f)
            .is_some()
        {
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
        Ok(Api {
            abi,
            path: path.to_path_buf(),
            set_min_log_level: sym!("litert_lm_set_min_log_level"),
            get_last_error_message: optional_sym!("litert_lm_get_last_error_message"),
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
            sampler_params_create_fn: dual!("litert_lm_sampler_params_create"),
            sampler_params_delete: sym!("litert_lm_sampler_params_delete"),
            sampler_params_set_top_k: sym!("litert_lm_sampler_params_set_top_k"),
            sampler_params_set_top_p: sym!("litert_lm_sampler_params_set_top_p"),
            sampler_params_set_temperature: sym!("litert_lm_sampler_params_set_temperature"),
            sampler_params_set_seed: sym!("litert_lm_sampler_params_set_seed"),
            session_config_create_fn: dual!("litert_lm_session_config_create"),
            session_config_delete: sym!("litert_lm_session_config_delete"),
            session_config_set_max_output_tokens: sym!(
                "litert_lm_session_config_set_max_output_tokens"
            ),
            session_config_set_sampler_params: sym!("litert_lm_session_config_set_sampler_params"),
            conversation_config_create_fn: dual!("litert_lm_conversation_config_create"),
            conversation_config_delete: sym!("litert_lm_conversation_config_delete"),
            conversation_config_set_session_config: sym!(
                "litert_lm_conversation_config_set_session_config"
            ),
            conversation_create_fn: dual!("litert_lm_conversation_create"),
            conversation_delete: sym!("litert_lm_conversation_delete"),
            conversation_send_message_fn: dual!("litert_lm_conversation_send_message"),
            conversation_send_message_stream: sym!("litert_lm_conversation_send_message_stream"),
            conversation_cancel_process: sym!("litert_lm_conversation_cancel_process"),
            optional_args_create_fn: dual!("litert_lm_conversation_optional_args_create"),
            optional_args_delete: sym!("litert_lm_conversation_optional_args_delete"),
            optional_args_set_max_output_tokens: sym!(
                "litert_lm_conversation_optional_args_set_max_output_tokens"
            ),
            json_response_get_string_fn: dual!("litert_lm_json_response_get_string"),
            json_response_delete: sym!("litert_lm_json_response_delete"),
            stream_chunk_get_text_fn: dual!("litert_lm_stream_chunk_get_text"),
            stream_chunk_is_final_fn: dual!("litert_lm_stream_chunk_is_final"),
            stream_chunk_get_error_fn: dual!("litert_lm_stream_chunk_get_error"),
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
        unsafe {
            match self.tokenize_result_get_num_tokens_fn {
                Dual::Handle(f) => f(result),
                Dual::Status(f) => out_param(0, |o| f(result, o)),
            }
        }
    }

    /// `litert_lm_sampler_params_create`; NULL on failure.
    pub(crate) fn sampler_params_create(&self, kind: SamplerType) -> *mut RawSamplerParams {
        // SAFETY: a valid sampler type and an out-parameter of the right type.
        unsafe {
            match self.sampler_params_create_fn {
                Dual::Handle(f) => f(kind),
                Dual::Status(f) => out_param(std::ptr::null_mut(), |o| f(kind, o)),
            }
        }
    }

    /// `litert_lm_session_config_create`; NULL on failure.
    pub(crate) fn session_config_create(&self) -> *mut RawSessionConfig {
        // SAFETY: no arguments besides the out-parameter.
        unsafe {
            match self.session_config_create_fn {
                Dual::Handle(f) => f(),
                Dual::Status(f) => out_param(std::ptr::null_mut(), |o| f(o)),
            }
        }
    }

    /// `litert_lm_conversation_config_create`; NULL on failure.
    pub(crate) fn conversation_config_create(&self) -> *mut RawConversationConfig {
        // SAFETY: no arguments besides the out-parameter.
        unsafe {
            match self.conversation_config_create_fn {
                Dual::Handle(f) => f(),
                Dual::Status(f) => out_param(std::ptr::null_mut(), |o| f(o)),
            }
        }
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

    /// The blocking `litert_lm_conversation_send_message`; NULL on failure.
    ///
    /// # Safety
    /// A live conversation, C strings and live optional args.
    pub(crate) unsafe fn conversation_send_message(
        &self,
        conversation: *mut RawConversation,
        message: *const c_char,
        context: *const c_char,
        args: *const RawOptionalArgs,
    ) -> *mut RawJsonResponse {
        // SAFETY: per this function's contract.
        unsafe {
            match self.conversation_send_message_fn {
                Dual::Handle(f) => f(conversation, message, context, args),
                Dual::Status(f) => out_param(std::ptr::null_mut(), |o| {
                    f(conversation, message, context, args, o)
                }),
            }
        }
    }

    /// `litert_lm_conversation_optional_args_create`; NULL on failure.
    pub(crate) fn optional_args_create(&self) -> *mut RawOptionalArgs {
        // SAFETY: no arguments besides the out-parameter.
        unsafe {
            match self.optional_args_create_fn {
                Dual::Handle(f) => f(),
                Dual::Status(f) => out_param(std::ptr::null_mut(), |o| f(o)),
            }
        }
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
        unsafe {
            match self.json_response_get_string_fn {
                Dual::Handle(f) => f(response),
                Dual::Status(f) => out_param(std::ptr::null(), |o| f(response, o)),
            }
        }
    }

    /// `litert_lm_stream_chunk_get_text`: a string owned by the chunk, or NULL.
    ///
    /// # Safety
    /// A chunk inside its callback.
    pub(crate) unsafe fn chunk_text(&self, chunk: *const RawStreamChunk) -> *const c_char {
        // SAFETY: per this function's contract.
        unsafe {
            match self.stream_chunk_get_text_fn {
                Dual::Handle(f) => f(chunk),
                Dual::Status(f) => out_param(std::ptr::null(), |o| f(chunk, o)),
            }
        }
    }

    /// `litert_lm_stream_chunk_is_final`.
    ///
    /// # Safety
    /// A chunk inside its callback.
    pub(crate) unsafe fn chunk_is_final(&self, chunk: *const RawStreamChunk) -> bool {
        // SAFETY: per this function's contract.
        unsafe {
            match self.stream_chunk_is_final_fn {
                Dual::Handle(f) => f(chunk),
                Dual::Status(f) => out_param(false, |o| f(chunk, o)),
            }
        }
    }

    /// `litert_lm_stream_chunk_get_error`: a string owned by the chunk, or NULL.
    ///
    /// # Safety
    /// A chunk inside its callback.
    pub(crate) unsafe fn chunk_error(&self, chunk: *const RawStreamChunk) -> *const c_char {
        // SAFETY: per this function's contract.
        unsafe {
            match self.stream_chunk_get_error_fn {
                Dual::Handle(f) => f(chunk),
                Dual::Status(f) => out_param(std::ptr::null(), |o| f(chunk, o)),
            }
        }
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
    fn a_library_without_the_functions_is_named_with_the_first_missing_one() {
        // libc is loaded everywhere and has none of LiteRT-LM's functions.
        let err = Api::load(Path::new("libc.so.6")).expect_err("libc is no LiteRT-LM");
        assert!(err.cause.contains("litert_lm_set_min_log_level"), "{err}");
    }
}
