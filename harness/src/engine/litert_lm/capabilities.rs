//! What one loaded `liblitert-lm.so` can do, learned from the functions it exports.
//!
//! LiteRT-LM's C API grew release by release (0.11.0 is the first wheel with a C library; 0.10.x
//! ship only a CPython extension). leakloop resolves each function on its own and describes the
//! library by the capabilities below; a missing capability degrades the run where it can (no
//! per-message output limit: the session's limit; no sampler parameters: the engine's defaults)
//! and refuses a scenario only when one of its steps cannot run at all ([`Capabilities::refusal`]).

use std::collections::BTreeSet;
use std::path::Path;

use crate::engine::litert_lm::discover::{discover_library, DiscoverError, LibraryLocation};
use crate::engine::litert_lm::ffi::{library_capabilities, LoadLibraryError};
use crate::scenario::{Scenario, Step};

/// One thing a LiteRT-LM build may or may not offer through its C API.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Capability {
    /// `conversation_*`: the chat API (every release with a C library has it).
    Conversation,
    /// `conversation_send_message_stream`: streamed replies, one callback per chunk.
    Streaming,
    /// The stream callback receives a chunk object (`stream_chunk_get_*`, 0.15+) instead of
    /// `(text, is_final, error)` arguments.
    StreamChunks,
    /// `conversation_cancel_process`: stopping a generation midway.
    Cancel,
    /// Sampler parameters per session (a plain struct up to 0.13, a handle from 0.14).
    SamplerParams,
    /// `conversation_optional_args_*`: per-message arguments to the send calls (0.12+).
    MessageArgs,
    /// `conversation_optional_args_set_max_output_tokens`: an output limit per message (0.14+).
    MessageOutputLimit,
    /// Every call returns a status code, results come through out-parameters (0.19 nightlies).
    StatusCodes,
    /// `get_last_error_message`: the library explains a failed call (0.18+).
    ErrorMessages,
}

impl Capability {
    /// Every capability, in report order.
    pub const ALL: [Capability; 9] = [
        Capability::Conversation,
        Capability::Streaming,
        Capability::StreamChunks,
        Capability::Cancel,
        Capability::SamplerParams,
        Capability::MessageArgs,
        Capability::MessageOutputLimit,
        Capability::StatusCodes,
        Capability::ErrorMessages,
    ];

    /// The name in reports and docs.
    pub fn as_str(&self) -> &'static str {
        match self {
            Capability::Conversation => "conversation",
            Capability::Streaming => "streaming",
            Capability::StreamChunks => "stream_chunks",
            Capability::Cancel => "cancel",
            Capability::SamplerParams => "sampler_params",
            Capability::MessageArgs => "message_args",
            Capability::MessageOutputLimit => "message_output_limit",
            Capability::StatusCodes => "status_codes",
            Capability::ErrorMessages => "error_messages",
        }
    }
}

/// The capabilities of one library.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Capabilities(BTreeSet<Capability>);

/// The functions each capability needs, all of them exported (besides the core every release
/// has). Which form a library speaks follows from the same names: see [`Capabilities::has`] in
/// `ffi.rs`'s binding.
const NEEDS: &[(Capability, &[&str])] = &[
    (Capability::Conversation, &["litert_lm_conversation_create"]),
    (
        Capability::Streaming,
        &["litert_lm_conversation_send_message_stream"],
    ),
    (
        Capability::StreamChunks,
        &[
            "litert_lm_conversation_send_message_stream",
            "litert_lm_stream_chunk_get_text",
            "litert_lm_stream_chunk_is_final",
            "litert_lm_stream_chunk_get_error",
        ],
    ),
    (
        Capability::Cancel,
        &["litert_lm_conversation_cancel_process"],
    ),
    (
        Capability::SamplerParams,
        &["litert_lm_session_config_set_sampler_params"],
    ),
    (
        Capability::MessageArgs,
        &["litert_lm_conversation_optional_args_create"],
    ),
    (
        Capability::MessageOutputLimit,
        &[
            "litert_lm_conversation_optional_args_create",
            "litert_lm_conversation_optional_args_delete",
            "litert_lm_conversation_optional_args_set_max_output_tokens",
        ],
    ),
    (Capability::StatusCodes, &["litert_lm_get_api_version"]),
    (
        Capability::ErrorMessages,
        &["litert_lm_get_last_error_message"],
    ),
];

/// The sampler-handle functions (0.14 on): when `litert_lm_sampler_params_create` is exported,
/// sampler parameters are a handle and need all of these; otherwise they are a struct.
pub(crate) const SAMPLER_HANDLE: &[&str] = &[
    "litert_lm_sampler_params_create",
    "litert_lm_sampler_params_delete",
    "litert_lm_sampler_params_set_top_k",
    "litert_lm_sampler_params_set_top_p",
    "litert_lm_sampler_params_set_temperature",
    "litert_lm_sampler_params_set_seed",
];

impl Capabilities {
    /// The capabilities of a library that exports the functions for which `exports` is true.
    /// The one definition, used on a loaded library (its symbols) and on a library file before
    /// it is loaded (its dynamic symbol table).
    pub fn from_exports(exports: impl Fn(&str) -> bool) -> Self {
        let sampler_handle = exports(SAMPLER_HANDLE[0]);
        Self::new(NEEDS.iter().filter_map(|(cap, names)| {
            let mut present = names.iter().all(|n| exports(n));
            if *cap == Capability::SamplerParams && sampler_handle {
                present &= SAMPLER_HANDLE.iter().all(|n| exports(n));
            }
            if *cap == Capability::StreamChunks && !exports(names[1]) {
                present = false;
            }
            present.then_some(*cap)
        }))
    }

    /// A set of capabilities.
    pub fn new(caps: impl IntoIterator<Item = Capability>) -> Self {
        Self(caps.into_iter().collect())
    }

    /// Whether the library offers `cap`.
    pub fn has(&self, cap: Capability) -> bool {
        self.0.contains(&cap)
    }

    /// The names, comma-separated in [`Capability::ALL`] order (as reports write them).
    pub fn names(&self) -> String {
        names(self.0.iter().copied())
    }

    /// Why this library cannot run `scenario`, or `None` when every step can run (perhaps
    /// degraded). Only a step that has no substitute is refused: a `cancel` step needs streaming
    /// and cancel (a blocking generation cannot be stopped after K tokens).
    pub fn refusal(&self, scenario: &Scenario) -> Option<String> {
        self.refusal_of(&scenario.name, &scenario.turn)
    }

    /// [`Capabilities::refusal`] for a scenario's name and turn steps.
    pub fn refusal_of(&self, name: &str, turn: &[Step]) -> Option<String> {
        let cancels = turn.iter().any(|s| matches!(s, Step::Cancel { .. }));
        let missing: Vec<&str> = [Capability::Streaming, Capability::Cancel]
            .into_iter()
            .filter(|c| cancels && !self.has(*c))
            .map(|c| c.as_str())
            .collect();
        (!missing.is_empty()).then(|| {
            format!(
                "scenario `{}` has a `cancel` step, which needs the C API's {} (this library lacks {}; \
                 it offers: {})",
                name,
                "streaming and cancel",
                missing.join(" and "),
                self.names()
            )
        })
    }
}

/// A library checked against a scenario before it runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckedLibrary {
    /// Where it is.
    pub location: LibraryLocation,
    /// What it can do.
    pub capabilities: Capabilities,
}

/// A LiteRT-LM library that cannot run a step of a scenario (bad input: the CLI's one exit
/// mapping in `cli/error.rs` turns it into exit 2).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("LiteRT-LM {version} ({}) cannot run it: {why}", path.display())]
pub struct LibraryRefusal {
    /// The library's version.
    pub version: String,
    /// Where the library is.
    pub path: std::path::PathBuf,
    /// Which step needs what the library lacks.
    pub why: String,
}

/// Checks, before anything runs, that the LiteRT-LM library a `litert-lm` scenario would run on
/// (`lib`, else the scenario's `engine.lib`, else `LITERT_LM_LIB` or the newest fetched one) can
/// run every step of it. `Err` is the reason it cannot; `Ok(None)` means
/// there is nothing to check here (another backend, or no readable library: the run itself
/// reports that).
pub fn check_library(
    scenario: &Scenario,
    lib: Option<&Path>,
) -> Result<Option<CheckedLibrary>, LibraryRefusal> {
    if !crate::backend::of(scenario.engine.backend).loads_library {
        return Ok(None);
    }
    let Ok(location) = discover_library(lib.or(scenario.engine.lib.as_deref())) else {
        return Ok(None);
    };
    let Ok(capabilities) = library_capabilities(&location.path) else {
        return Ok(None);
    };
    if let Some(why) = capabilities.refusal(scenario) {
        return Err(LibraryRefusal {
            version: location.version,
            path: location.path,
            why,
        });
    }
    Ok(Some(CheckedLibrary {
        location,
        capabilities,
    }))
}

/// Why a library named explicitly cannot be inspected.
#[derive(Debug, thiserror::Error)]
pub enum InspectError {
    /// There is no library at the path (or in the folder) given.
    #[error(transparent)]
    Missing(#[from] DiscoverError),
    /// The file is there but is no LiteRT-LM library leakloop can read.
    #[error(transparent)]
    NotALibrary(#[from] LoadLibraryError),
}

/// Opens the library at `path` (a `liblitert-lm.so` or a folder holding one) and reads what it
/// can do from its exported functions, without loading it. Unlike [`check_library`], which
/// passes over a library it cannot find (the run reports it), a library named explicitly that
/// is missing or is not a LiteRT-LM library is an error here.
pub fn inspect_library(path: &Path) -> Result<CheckedLibrary, InspectError> {
    let location = discover_library(Some(path))?;
    let capabilities = library_capabilities(&location.path)?;
    Ok(CheckedLibrary {
        location,
        capabilities,
    })
}

/// Capability names, comma-separated, in [`Capability::ALL`] order.
pub(crate) fn names(caps: impl IntoIterator<Item = Capability>) -> String {
    let set: BTreeSet<Capability> = caps.into_iter().collect();
    set.iter().map(|c| c.as_str()).collect::<Vec<_>>().join(",")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::{BackendKind, EngineSpec};

    fn scenario(turn: Vec<Step>) -> Scenario {
        Scenario::new("caps", EngineSpec::new(BackendKind::LitertLm), 3, turn)
    }

    fn all_but(missing: &[Capability]) -> Capabilities {
        Capabilities::new(Capability::ALL.into_iter().filter(|c| !missing.contains(c)))
    }

    #[test]
    fn a_cancel_step_is_refused_without_cancel_and_names_what_is_missing() {
        let s = scenario(vec![Step::Cancel {
            after_tokens: 4,
            max_output_tokens: 32,
        }]);
        let why = all_but(&[Capability::Cancel]).refusal(&s).expect("refused");
        assert!(why.contains("lacks cancel"), "{why}");
        assert!(why.contains("`caps`"), "{why}");
        let why = all_but(&[Capability::Streaming, Capability::Cancel])
            .refusal(&s)
            .expect("refused");
        assert!(why.contains("lacks streaming and cancel"), "{why}");
        assert_eq!(all_but(&[]).refusal(&s), None);
    }

    #[test]
    fn a_chat_degrades_instead_of_being_refused() {
        let s = scenario(vec![
            Step::Open(Default::default()),
            Step::Generate {
                max_output_tokens: 8,
            },
            Step::Close,
        ]);
        let bare = Capabilities::new([Capability::Conversation]);
        assert_eq!(bare.refusal(&s), None);
        assert_eq!(bare.names(), "conversation");
    }

    #[test]
    fn capabilities_follow_from_the_exported_functions() {
        // What 0.11.0 exports of the functions above: no optional args, no chunk getters, the
        // sampler as a struct, no status codes.
        let v011 = [
            "litert_lm_conversation_create",
            "litert_lm_conversation_send_message_stream",
            "litert_lm_conversation_cancel_process",
            "litert_lm_session_config_set_sampler_params",
        ];
        let caps = Capabilities::from_exports(|n| v011.contains(&n));
        assert_eq!(caps.names(), "conversation,streaming,cancel,sampler_params");
        // A sampler handle constructor without its setters is no usable sampler.
        let broken = Capabilities::from_exports(|n| {
            v011.contains(&n) || n == "litert_lm_sampler_params_create"
        });
        assert!(!broken.has(Capability::SamplerParams));
        // Everything exported: everything offered.
        assert_eq!(
            Capabilities::from_exports(|_| true),
            Capabilities::new(Capability::ALL)
        );
    }

    #[test]
    fn names_follow_the_report_order() {
        let caps = Capabilities::new([Capability::Cancel, Capability::Conversation]);
        assert_eq!(caps.names(), "conversation,cancel");
    }
}
