//! The `litert-lm` backend: LiteRT-LM's C API (`liblitert-lm.so` from its Python wheel), loaded
//! at run time, with every handle owned, freed once and counted in the call ledger.

mod capabilities;
mod discover;
mod engine;
mod error;
mod ffi;
mod handles;
mod stream;

pub use capabilities::{
    check_library, inspect_library, Capabilities, Capability, CheckedLibrary, InspectError,
    LibraryRefusal,
};
pub use discover::{
    compare_versions, discover_library, fetched_libraries, DiscoverError, LibraryLocation,
    LibrarySource, FETCH_HINT, LIB_ENV, LIB_FILE,
};
pub use engine::{LitertLmEngine, BACKEND_NAME};
pub use error::CallError;
pub use ffi::{library_capabilities, LoadLibraryError};
pub use handles::HandleCounts;
