//! Finding the real OpenCL implementation this library forwards to.
//!
//! Candidates, first that provides `clGetPlatformIDs` wins, and every entry point is then taken
//! from that one library (mixing two implementations would hand one library's handles to the
//! other):
//! 1. `LEAKLOOP_CL_REAL_LIB`, an explicit path (needed when this library is installed under the
//!    name `libOpenCL.so` so that a program which opens OpenCL by name loads it);
//! 2. `dlsym(RTLD_NEXT)`: the next definition after this library in the global search order
//!    (the case of `LD_PRELOAD` into a program linked against `libOpenCL`);
//! 3. `dlopen("libOpenCL.so.1")`, then `libOpenCL.so` (the case of a program that loaded this
//!    library privately, e.g. through `OPENCL_DYLIB_PATH`).
//!
//! Any address that lies inside this library itself is rejected, so a search that finds this
//! library again under another name cannot make a function call itself.

use std::ffi::{CStr, CString};
use std::sync::atomic::Ordering;
use std::sync::OnceLock;

use crate::symbols::{Sym, COUNT, NAMES, SLOTS};

/// Environment variable naming the real OpenCL library explicitly.
pub const REAL_LIB_ENV: &str = "LEAKLOOP_CL_REAL_LIB";

/// Where the real entry points came from, or why none were found.
#[derive(Debug)]
struct Resolution {
    /// A human-readable description of the library that was used, or the failure.
    origin: Result<String, String>,
}

static RESOLUTION: OnceLock<Resolution> = OnceLock::new();

/// The base address of this library, to recognise our own symbols.
fn own_base() -> usize {
    let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
    // SAFETY: dladdr only reads the loader's tables; the address is one of our own functions.
    let found = unsafe { libc::dladdr(own_base as *const libc::c_void, &mut info) };
    if found == 0 {
        0
    } else {
        info.dli_fbase as usize
    }
}

fn object_base(addr: usize) -> usize {
    let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
    // SAFETY: as above; `addr` came from dlsym.
    let found = unsafe { libc::dladdr(addr as *const libc::c_void, &mut info) };
    if found == 0 {
        0
    } else {
        info.dli_fbase as usize
    }
}

/// Looks `name` (NUL-terminated) up in `handle`, refusing addresses inside this library.
fn lookup(handle: *mut libc::c_void, name: &str, own: usize) -> usize {
    // SAFETY: `name` is NUL-terminated (see `symbols::NAMES`) and `handle` is a dlopen handle or
    // RTLD_NEXT.
    let addr = unsafe { libc::dlsym(handle, name.as_ptr().cast()) } as usize;
    if addr == 0 || (own != 0 && object_base(addr) == own) {
        0
    } else {
        addr
    }
}

fn open(path: &str) -> Option<*mut libc::c_void> {
    let c = CString::new(path).ok()?;
    // SAFETY: a plain dlopen of a NUL-terminated path.
    let handle = unsafe { libc::dlopen(c.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
    (!handle.is_null()).then_some(handle)
}

fn resolve() -> Resolution {
    let own = own_base();
    let probe = NAMES[Sym::clGetPlatformIDs as usize];
    let mut candidates: Vec<(String, *mut libc::c_void)> = Vec::new();
    let mut tried = Vec::new();
    if let Ok(path) = std::env::var(REAL_LIB_ENV) {
        match open(&path) {
            Some(h) => candidates.push((path, h)),
            None => tried.push(format!("{REAL_LIB_ENV}={path}: {}", dl_error())),
        }
    }
    candidates.push(("RTLD_NEXT".to_owned(), libc::RTLD_NEXT));
    for name in ["libOpenCL.so.1", "libOpenCL.so"] {
        match open(name) {
            Some(h) => candidates.push((name.to_owned(), h)),
            None => tried.push(format!("{name}: {}", dl_error())),
        }
    }
    for (origin, handle) in candidates {
        if lookup(handle, probe, own) == 0 {
            tried.push(format!(
                "{origin}: no clGetPlatformIDs other than this library's"
            ));
            continue;
        }
        for (slot, name) in SLOTS.iter().zip(NAMES) {
            slot.store(lookup(handle, name, own), Ordering::Release);
        }
        return Resolution { origin: Ok(origin) };
    }
    Resolution {
        origin: Err(format!(
            "no real OpenCL library found (tried {})",
            tried.join("; ")
        )),
    }
}

fn dl_error() -> String {
    // SAFETY: dlerror returns a thread-local message or NULL.
    let msg = unsafe { libc::dlerror() };
    if msg.is_null() {
        "unknown dlopen error".to_owned()
    } else {
        // SAFETY: non-NULL dlerror results are NUL-terminated strings.
        unsafe { CStr::from_ptr(msg) }
            .to_string_lossy()
            .into_owned()
    }
}

fn resolution() -> &'static Resolution {
    RESOLUTION.get_or_init(resolve)
}

/// The real address of `sym`, or 0 when the real library lacks it (or none was found).
pub(crate) fn address(sym: Sym) -> usize {
    let slot = &SLOTS[sym as usize];
    let addr = slot.load(Ordering::Acquire);
    if addr != 0 {
        return addr;
    }
    resolution();
    slot.load(Ordering::Acquire)
}

/// Where the real implementation came from (`Ok(origin)`) or why there is none.
pub fn origin() -> Result<&'static str, &'static str> {
    match &resolution().origin {
        Ok(o) => Ok(o),
        Err(e) => Err(e),
    }
}

/// Called by the jump stubs when a slot is still empty: resolves and returns the address, or
/// aborts with the entry point's name when the real library does not have it (there is no
/// correct value a stub that does not know the signature could return).
pub(crate) extern "C" fn resolve_slot(slot: *const std::sync::atomic::AtomicUsize) -> usize {
    let index = (slot as usize - SLOTS.as_ptr() as usize) / std::mem::size_of::<usize>();
    resolution();
    let addr = if index < COUNT {
        SLOTS[index].load(Ordering::Acquire)
    } else {
        0
    };
    if addr == 0 {
        let name = NAMES.get(index).map_or("?", |n| n.trim_end_matches('\0'));
        let why = match origin() {
            Ok(o) => format!("`{name}` is not provided by {o}"),
            Err(e) => e.to_owned(),
        };
        eprintln!("leakloop cl-interposer: cannot forward `{name}`: {why}");
        std::process::abort();
    }
    addr
}

/// Reads the real address of an entry point as its typed function pointer (`None` if missing):
/// `real!(clCreateBuffer as clCreateBuffer_t)`, the type from `opencl_sys::cl_function_types`.
macro_rules! real {
    ($name:ident as $ty:ident) => {{
        let addr = $crate::real::address($crate::symbols::Sym::$name);
        // SAFETY: the address was found under this exact name in the real OpenCL library, whose
        // signature is the one opencl-sys declares; 0 becomes `None`.
        unsafe { std::mem::transmute::<usize, ::opencl_sys::cl_function_types::$ty>(addr) }
    }};
}
pub(crate) use real;
