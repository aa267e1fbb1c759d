//! Frames of an allocation's stack, and which of them are the allocator's, the profiler's or
//! leakloop's own (trimmed, so that a site names the code that asked for the memory).

use serde::{Deserialize, Serialize};

/// How many frames (after trimming) identify a site: the same allocating code reached from
/// different deep callers is one site.
pub(crate) const SITE_DEPTH: usize = 6;
/// How many frames a site keeps to show its path (those of the first stack seen beyond
/// [`SITE_DEPTH`]: the calls that led there, such as the API entry point).
pub(crate) const SHOWN_DEPTH: usize = 16;

/// One symbolised frame.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Frame {
    /// The function (as the symbol table or debug info names it), or `None` without symbols.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub function: Option<String>,
    /// The library or executable, by file name; empty for an interpreted frame (Python's), whose
    /// file says where it is.
    pub module: String,
    /// The source file, where debug info says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
    /// The source line, where debug info says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub line: Option<u32>,
    /// The return address, which identifies a frame without a symbol (not reported: it differs
    /// between runs).
    #[serde(skip)]
    pub(crate) address: u64,
}

impl Frame {
    /// `function (file:line) [module]` with the function's parameter list left out (C++ names
    /// run to hundreds of characters with it), `?? [module]` without symbols; `function
    /// (file:line)` for an interpreted frame, which has no module.
    pub fn describe(&self) -> String {
        let mut out = match &self.function {
            Some(f) => without_parameters(f).to_owned(),
            None => "??".to_owned(),
        };
        if let (Some(file), Some(line)) = (&self.file, self.line) {
            let file = file.rsplit('/').next().unwrap_or(file);
            out.push_str(&format!(" ({file}:{line})"));
        }
        // An interpreted frame (a driver's Python) has no library: its file says where it is.
        if !self.module.is_empty() {
            out.push_str(&format!(" [{}]", self.module));
        }
        out
    }
}

/// `name` up to the parenthesis that opens its final parameter list
/// (`ns::f(int, std::vector<int>) const` -> `ns::f`); `name` itself when it has none.
fn without_parameters(name: &str) -> &str {
    let trimmed = name.strip_suffix(" const").unwrap_or(name);
    if !trimmed.ends_with(')') {
        return name;
    }
    let mut depth = 0usize;
    for (i, c) in trimmed.char_indices().rev() {
        match c {
            ')' => depth += 1,
            '(' => {
                depth -= 1;
                if depth == 0 {
                    return if i == 0 { name } else { &trimmed[..i] };
                }
            }
            _ => {}
        }
    }
    name
}

/// Function names (or prefixes) of allocators and of their wrappers, mangled and demangled.
const ALLOCATOR_FUNCTIONS: &[&str] = &[
    "malloc",
    "calloc",
    "realloc",
    "reallocarray",
    "free",
    "posix_memalign",
    "aligned_alloc",
    "memalign",
    "valloc",
    "pvalloc",
    "strdup",
    "strndup",
    "_Znwm",
    "_Znam",
    "_ZnwmSt",
    "_ZnamSt",
    "_ZnwmRKSt",
    "_ZnamRKSt",
    "operator new",
    "__libc_",
    "_int_malloc",
    "__rust_alloc",
    "__rust_realloc",
    "__rdl_",
    "__rg_",
    "heaptrack",
    "_ZN5alloc",
    "alloc::",
    "_ZNSt15__new_allocator",
    "_ZN9__gnu_cxx13new_allocator",
    "std::__new_allocator",
    "__gnu_cxx::new_allocator",
    "PyMem_",
    "_PyMem_",
    "PyObject_Malloc",
    "PyObject_Calloc",
    "PyObject_Realloc",
    "_PyObject_Malloc",
    "_PyObject_Calloc",
    "_PyObject_Realloc",
    "pymalloc_",
];

/// Libraries whose frames are never a site of their own (the C library, the loader, the C++
/// runtime's allocation entry points, the profiler).
const RUNTIME_MODULES: &[&str] = &["libheaptrack", "libc.so", "ld-linux", "libc-", "libunwind"];

/// Whether `frame` belongs to the allocator, the profiler, the C runtime or leakloop itself.
pub(crate) fn is_trimmed(frame: &Frame) -> bool {
    // An address in no known library and no symbol says nothing (an allocator's frame in a
    // stripped runtime, a JIT stub).
    if frame.function.is_none() && frame.module == "??" {
        return true;
    }
    if RUNTIME_MODULES.iter().any(|m| frame.module.contains(m)) {
        return true;
    }
    match &frame.function {
        Some(f) => {
            ALLOCATOR_FUNCTIONS
                .iter()
                .any(|a| f == a || (a.len() > 5 && f.starts_with(a)))
                || f.contains("8leakloop")
                || f.starts_with("leakloop::")
        }
        None => false,
    }
}

/// The frames of a site: `stack` (innermost first) without its trimmed frames, at most
/// [`SHOWN_DEPTH`] of them (the first [`SITE_DEPTH`] identify it, see [`site_key`]); the
/// stack's own innermost frames when every frame would be trimmed.
pub(crate) fn site_frames(stack: &[Frame]) -> Vec<Frame> {
    let first = stack.iter().position(|f| !is_trimmed(f));
    match first {
        Some(i) => stack[i..]
            .iter()
            .filter(|f| !is_trimmed(f))
            .take(SHOWN_DEPTH)
            .cloned()
            .collect(),
        None => stack.iter().take(SITE_DEPTH).cloned().collect(),
    }
}

/// What makes two sites one: the function and library of each frame (two lines of one function,
/// or two return addresses in it, are one site).
pub(crate) fn site_key(frames: &[Frame]) -> Vec<(Option<String>, String)> {
    frames
        .iter()
        .take(SITE_DEPTH)
        .map(|f| match &f.function {
            Some(function) => (Some(function.clone()), f.module.clone()),
            // Without a symbol only the address tells frames apart: unnamed frames of one
            // library must not all be one site.
            None => (None, format!("{}+{:#x}", f.module, f.address)),
        })
        .collect()
}
