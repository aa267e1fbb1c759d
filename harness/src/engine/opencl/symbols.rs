//! Names for the interposer's creation-site frames, read in the engine's own process: the
//! interposer resolves an address to its library and, where the dynamic symbol table lists it,
//! a symbol (`dladdr`); functions only the full symbol table (`.symtab`) names, such as a Rust
//! program's own, are looked up here in the library's file. Rust's legacy mangling is undone;
//! file:line would need the debug info's line tables and is left out.
//!
//! Frames of the OpenCL wrapper crates (`opencl3`, `cl3`) and of the OpenCL libraries are
//! trimmed, and then the standard library's generic glue left innermost, so that a site names
//! the application's code that asked for the object.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use object::{Object, ObjectSegment, ObjectSymbol};

use crate::attribution::Frame;

/// Upper bound on a library file read for its symbols (a larger one is named by `dladdr` only).
const MAX_SYMBOL_FILE: u64 = 1 << 30;

/// One module's function symbols, sorted by address.
struct Symbols {
    /// The lowest load address of its segments (what `dladdr`'s base maps to).
    base: u64,
    /// `(address, size, name)`.
    functions: Vec<(u64, u64, String)>,
}

impl Symbols {
    fn read(path: &Path) -> Option<Self> {
        if std::fs::metadata(path).ok()?.len() > MAX_SYMBOL_FILE {
            return None;
        }
        let data = std::fs::read(path).ok()?;
        let file = object::File::parse(&*data).ok()?;
        let base = file.segments().map(|s| s.address()).min().unwrap_or(0) & !0xfff;
        let mut functions: Vec<(u64, u64, String)> = file
            .symbols()
            .filter(|s| s.kind() == object::SymbolKind::Text && s.address() != 0)
            .filter_map(|s| Some((s.address(), s.size(), s.name().ok()?.to_owned())))
            .collect();
        functions.sort();
        Some(Self { base, functions })
    }

    /// The function holding `offset` from the module's load address.
    fn lookup(&self, offset: u64) -> Option<&str> {
        let address = self.base + offset;
        let i = self.functions.partition_point(|f| f.0 <= address);
        let (start, size, name) = self.functions.get(i.checked_sub(1)?)?;
        (size == &0 || address < start + size).then_some(name.as_str())
    }
}

/// The file behind a module name `dladdr` gave: the main program may be named by its `argv[0]`,
/// which need not be a path from here.
fn module_file(module: &str) -> PathBuf {
    let path = PathBuf::from(module);
    if path.is_absolute() && path.is_file() {
        return path;
    }
    std::env::current_exe().unwrap_or(path)
}

/// The function at `offset` in `module`, from its symbol table (read once per module).
fn function_at(module: &str, offset: u64) -> Option<String> {
    static CACHE: Mutex<Option<HashMap<String, Option<Symbols>>>> = Mutex::new(None);
    let mut cache = CACHE.lock().unwrap_or_else(|p| p.into_inner());
    let cache = cache.get_or_insert_with(HashMap::new);
    let symbols = cache
        .entry(module.to_owned())
        .or_insert_with(|| Symbols::read(&module_file(module)));
    symbols.as_ref()?.lookup(offset).map(str::to_owned)
}

/// A frame for the interposer's `(module, offset, dynamic symbol)`.
pub(super) fn frame(module: &str, offset: u64, symbol: Option<&str>, address: u64) -> Frame {
    let function = symbol
        .map(str::to_owned)
        .or_else(|| {
            (module != "?")
                .then(|| function_at(module, offset))
                .flatten()
        })
        .map(|f| demangle(&f));
    Frame {
        function,
        module: Path::new(module)
            .file_name()
            .map_or_else(|| module.to_owned(), |f| f.to_string_lossy().into_owned()),
        file: None,
        line: None,
        address,
    }
}

/// Whether a frame belongs to the OpenCL wrappers or libraries rather than the application.
pub(super) fn is_opencl_plumbing(frame: &Frame) -> bool {
    let module = frame.module.as_str();
    if module.starts_with("libOpenCL") || module.starts_with("libcl_interposer") {
        return true;
    }
    frame.function.as_deref().is_some_and(|f| {
        let f = f.trim_start_matches('<');
        ["cl3::", "opencl3::", "core::ops::function::"]
            .iter()
            .any(|p| f.starts_with(p))
    })
}

/// Whether a frame is the standard library's generic glue (`core::option::Option<T>::map`
/// around a wrapper's call): skipped while it is the innermost left, so that a site starts at
/// the application's code.
pub(super) fn is_std_glue(frame: &Frame) -> bool {
    frame.function.as_deref().is_some_and(|f| {
        let f = f.trim_start_matches('<');
        ["core::", "std::", "alloc::"]
            .iter()
            .any(|p| f.starts_with(p))
    })
}

/// Undoes Rust's legacy symbol mangling (`_ZN4core3fmt5write17h0123456789abcdefE` ->
/// `core::fmt::write`); any other name is returned as it is.
pub(crate) fn demangle(name: &str) -> String {
    let Some(mut rest) = name.strip_prefix("_ZN") else {
        return name.to_owned();
    };
    let mut parts: Vec<String> = Vec::new();
    while !rest.starts_with('E') {
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        let Some(len) = rest[..digits].parse::<usize>().ok().filter(|_| digits > 0) else {
            return name.to_owned();
        };
        let Some(part) = rest.get(digits..digits + len) else {
            return name.to_owned();
        };
        parts.push(unescape(part));
        rest = &rest[digits + len..];
    }
    // The last part is the hash (`h` and 16 hex digits).
    if parts.last().is_some_and(|p| {
        p.len() == 17 && p.starts_with('h') && p[1..].bytes().all(|b| b.is_ascii_hexdigit())
    }) {
        parts.pop();
    }
    parts.join("::")
}

fn unescape(part: &str) -> String {
    let part = part
        .strip_prefix("_$")
        .map_or(part.to_owned(), |p| format!("${p}"));
    let mut out = String::new();
    let mut rest = part.as_str();
    while !rest.is_empty() {
        if let Some(after) = rest.strip_prefix("..") {
            out.push_str("::");
            rest = after;
        } else if let Some(inner) = rest.strip_prefix('$') {
            let Some(end) = inner.find('$') else {
                out.push_str(rest);
                break;
            };
            let code = &inner[..end];
            let decoded = match code {
                "SP" => Some('@'),
                "BP" => Some('*'),
                "RF" => Some('&'),
                "LT" => Some('<'),
                "GT" => Some('>'),
                "LP" => Some('('),
                "RP" => Some(')'),
                "C" => Some(','),
                _ => code
                    .strip_prefix('u')
                    .and_then(|hex| u32::from_str_radix(hex, 16).ok())
                    .and_then(char::from_u32),
            };
            match decoded {
                Some(c) => out.push(c),
                None => out.push_str(&rest[..end + 2]),
            }
            rest = &inner[end + 1..];
        } else {
            let c = rest.chars().next().unwrap_or_default();
            out.push(c);
            rest = &rest[c.len_utf8()..];
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn legacy_rust_names_are_demangled() {
        assert_eq!(
            demangle("_ZN4core3fmt5write17h0123456789abcdefE"),
            "core::fmt::write"
        );
        assert_eq!(
            demangle("_ZN8leakloop6engine6opencl7runtime7Runtime6buffer17h5c1b4c7ad2b1e3f0E"),
            "leakloop::engine::opencl::runtime::Runtime::buffer"
        );
        assert_eq!(
            demangle("_ZN68_$LT$opencl3..memory..Buffer$LT$T$GT$$u20$as$u20$core..ops..Drop$GT$4drop17h0123456789abcdefE"),
            "<opencl3::memory::Buffer<T> as core::ops::Drop>::drop"
        );
        assert_eq!(demangle("clCreateBuffer"), "clCreateBuffer");
        assert_eq!(
            demangle("_ZN3foo"),
            "_ZN3foo",
            "truncated names stay as they are"
        );
    }

    #[test]
    fn this_programs_own_functions_are_named_from_its_symbol_table() {
        // `frame` is found by its offset in this test program, which exports no symbols.
        let exe = std::env::current_exe().unwrap();
        let exe = exe.to_string_lossy();
        let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
        let here = (frame as fn(&str, u64, Option<&str>, u64) -> Frame) as usize + 4;
        assert_ne!(unsafe { libc::dladdr(here as *const _, &mut info) }, 0);
        let offset = (here - info.dli_fbase as usize) as u64;
        let f = frame(&exe, offset, None, here as u64);
        let name = f.function.clone().expect("named");
        assert!(name.ends_with("opencl::symbols::frame"), "{name}");
        assert!(!is_opencl_plumbing(&f));
    }

    #[test]
    fn wrapper_frames_are_plumbing() {
        let f = |function: &str, module: &str| Frame {
            function: Some(function.into()),
            module: module.into(),
            file: None,
            line: None,
            address: 0,
        };
        assert!(is_opencl_plumbing(&f(
            "cl3::memory::create_buffer",
            "leakloop"
        )));
        assert!(is_opencl_plumbing(&f(
            "<opencl3::memory::Buffer<T>>::create",
            "leakloop"
        )));
        assert!(is_opencl_plumbing(&f("clCreateBuffer", "libOpenCL.so.1")));
        assert!(!is_opencl_plumbing(&f(
            "leakloop::engine::opencl::runtime::Runtime::buffer",
            "leakloop"
        )));
        assert!(is_std_glue(&f("core::option::Option<T>::map", "leakloop")));
        assert!(!is_std_glue(&f(
            "leakloop::engine::opencl::runtime::Runtime::buffer",
            "leakloop"
        )));
    }
}
