//! Creation sites: the return addresses that led to a create call, from the first frame outside
//! this library, so that a live object can be traced to the code that made it.
//!
//! The stack is walked with the platform unwinder (`_Unwind_Backtrace`, from the unwinder every
//! Rust and C++ program on Linux already loads); only this library's own frames have to be
//! unwound to reach the caller, so the caller's code needs no frame pointers. Addresses are
//! resolved to a library and, where the library exports one, a symbol ([`resolve`], `dladdr`)
//! only when a snapshot is taken, once per distinct address; the harness names functions that
//! only the symbol table knows.

use std::ffi::{c_int, c_void, CStr};
use std::sync::{Mutex, OnceLock};

use rustc_hash::FxHashMap;
use serde::{Deserialize, Serialize};

/// How many return addresses beyond this library a site keeps (the creating call and the calls
/// that led to it: a wrapper crate's frames and the application's own).
pub const SITE_FRAMES: usize = 8;

/// The caller's stack at a create call, innermost first (return addresses, `len` of them).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Stack {
    /// Return addresses; those past `len` are zero.
    pub frames: [usize; SITE_FRAMES],
    /// How many are set.
    pub len: u8,
}

impl Stack {
    /// A stack of the given return addresses (at most [`SITE_FRAMES`] kept).
    pub fn of(addresses: &[usize]) -> Self {
        let mut stack = Stack::default();
        for (slot, a) in stack.frames.iter_mut().zip(addresses) {
            *slot = *a;
        }
        stack.len = addresses.len().min(SITE_FRAMES) as u8;
        stack
    }

    /// The return addresses that are set.
    pub fn addresses(&self) -> &[usize] {
        &self.frames[..usize::from(self.len)]
    }
}

#[repr(C)]
struct UnwindContext {
    _private: [u8; 0],
}

type UnwindTrace = extern "C" fn(*mut UnwindContext, *mut c_void) -> c_int;

unsafe extern "C" {
    fn _Unwind_Backtrace(trace: UnwindTrace, arg: *mut c_void) -> c_int;
    fn _Unwind_GetIP(context: *mut UnwindContext) -> usize;
}

/// `_URC_NO_REASON`: go on walking.
const CONTINUE: c_int = 0;
/// `_URC_NORMAL_STOP`: enough frames.
const STOP: c_int = 4;

struct Walk {
    own: (usize, usize),
    stack: Stack,
}

extern "C" fn visit(context: *mut UnwindContext, arg: *mut c_void) -> c_int {
    // SAFETY: `arg` is the `Walk` that `caller_stack` passed, alive for the whole walk.
    let walk = unsafe { &mut *arg.cast::<Walk>() };
    // SAFETY: the unwinder hands a valid context to its callback.
    let ip = unsafe { _Unwind_GetIP(context) };
    if ip == 0 {
        return STOP;
    }
    let inside = ip >= walk.own.0 && ip < walk.own.1;
    if inside && walk.stack.len == 0 {
        // Still in this library (the entry point and its helpers).
        return CONTINUE;
    }
    walk.stack.frames[usize::from(walk.stack.len)] = ip;
    walk.stack.len += 1;
    if usize::from(walk.stack.len) == SITE_FRAMES {
        STOP
    } else {
        CONTINUE
    }
}

/// The stack of whoever called into this library, innermost first.
#[inline(never)]
pub fn caller_stack() -> Stack {
    let mut walk = Walk {
        own: own_range(),
        stack: Stack::default(),
    };
    // SAFETY: `visit` only touches `walk` through the pointer, for the duration of the call.
    unsafe { _Unwind_Backtrace(visit, (&mut walk as *mut Walk).cast()) };
    walk.stack
}

/// The address range of the object (this library, or the program it is built into) that holds
/// this code, so that its own frames are skipped. Read from the ELF program headers; on Apple
/// platforms (Mach-O, no `dl_iterate_phdr`) only this function's own address is known, and the
/// library's frames are then trimmed by name when the sites are symbolised.
fn own_range() -> (usize, usize) {
    static RANGE: OnceLock<(usize, usize)> = OnceLock::new();
    *RANGE.get_or_init(|| {
        #[cfg_attr(target_vendor = "apple", allow(unused_mut))]
        let mut found = (
            own_range as *const () as usize,
            own_range as *const () as usize + 1,
        );
        // SAFETY: the callback only reads the headers the loader hands it.
        #[cfg(not(target_vendor = "apple"))]
        unsafe {
            libc::dl_iterate_phdr(Some(segments), (&mut found as *mut (usize, usize)).cast())
        };
        found
    })
}

#[cfg(not(target_vendor = "apple"))]
unsafe extern "C" fn segments(
    info: *mut libc::dl_phdr_info,
    _size: libc::size_t,
    data: *mut c_void,
) -> c_int {
    // SAFETY: the loader's info for one object and our `(usize, usize)`.
    let (info, found) = unsafe { (&*info, &mut *data.cast::<(usize, usize)>()) };
    let target = found.0;
    let base = info.dlpi_addr as usize;
    let (mut lo, mut hi, mut hit) = (usize::MAX, 0usize, false);
    for i in 0..usize::from(info.dlpi_phnum) {
        // SAFETY: `dlpi_phdr` holds `dlpi_phnum` headers.
        let ph = unsafe { &*info.dlpi_phdr.add(i) };
        if ph.p_type != libc::PT_LOAD {
            continue;
        }
        let start = base + ph.p_vaddr as usize;
        let end = start + ph.p_memsz as usize;
        lo = lo.min(start);
        hi = hi.max(end);
        hit |= target >= start && target < end;
    }
    if hit {
        *found = (lo, hi);
        1
    } else {
        0
    }
}

/// A return address resolved to its library and, where the library's dynamic symbols name it,
/// its function.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SiteFrame {
    /// The return address in this process.
    pub address: u64,
    /// The library or executable holding it, as the loader names it (`?` when unknown).
    pub module: String,
    /// Offset of the call instruction (the return address minus one) from the module's load
    /// address: what `addr2line -e <module>` wants for a position-independent object.
    pub offset: u64,
    /// The exported symbol holding it, as `dladdr` finds it (mangled); absent for functions the
    /// dynamic symbol table does not list.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub symbol: Option<String>,
}

/// Resolves `address` with `dladdr`, once per address (cached for the process's life: a
/// library that is unloaded and another loaded in its place would keep the old name, which the
/// snapshot of a leak test does not meet).
pub fn resolve(address: usize) -> SiteFrame {
    static CACHE: Mutex<Option<FxHashMap<usize, SiteFrame>>> = Mutex::new(None);
    let mut cache = CACHE.lock().unwrap_or_else(|p| p.into_inner());
    let cache = cache.get_or_insert_with(FxHashMap::default);
    if let Some(frame) = cache.get(&address) {
        return frame.clone();
    }
    let frame = dladdr(address);
    cache.insert(address, frame.clone());
    frame
}

fn dladdr(address: usize) -> SiteFrame {
    // The call instruction, not the one after it (which may be the next function's first).
    let call = address.saturating_sub(1);
    // SAFETY: an all-zero Dl_info is valid; dladdr fills it or leaves it.
    let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
    // SAFETY: dladdr only reads the address as a number.
    let ok = unsafe { libc::dladdr(call as *const c_void, &mut info) } != 0;
    let text = |p: *const libc::c_char| {
        // SAFETY: non-NULL names from dladdr are NUL-terminated and live while the object is.
        (!p.is_null()).then(|| unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned())
    };
    if !ok {
        return SiteFrame {
            address: address as u64,
            module: "?".into(),
            offset: call as u64,
            symbol: None,
        };
    }
    SiteFrame {
        address: address as u64,
        module: text(info.dli_fname)
            .filter(|m| !m.is_empty())
            .unwrap_or_else(|| "?".into()),
        offset: (call - info.dli_fbase as usize) as u64,
        symbol: text(info.dli_sname),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stack_keeps_at_most_its_frame_count() {
        let long: Vec<usize> = (1..=20).collect();
        let stack = Stack::of(&long);
        assert_eq!(stack.addresses(), &long[..SITE_FRAMES]);
        assert_eq!(Stack::of(&[7, 8]).addresses(), &[7, 8]);
    }

    #[test]
    fn the_callers_stack_starts_outside_the_object_holding_this_code() {
        // Built into the test program, "this library" is the test program itself: every frame
        // up to the test runner's own is skipped, and whatever is left lies outside it.
        let (lo, hi) = own_range();
        assert!(
            lo <= caller_stack as *const () as usize && (caller_stack as *const () as usize) < hi
        );
        let stack = caller_stack();
        if let Some(first) = stack.addresses().first() {
            assert!(
                *first < lo || *first >= hi,
                "{first:#x} in {lo:#x}..{hi:#x}"
            );
        }
    }

    #[test]
    fn an_address_is_resolved_to_its_module() {
        let frame = resolve(libc::malloc as *const () as usize + 1);
        assert!(frame.module.contains("libc"), "{frame:?}");
        assert!(frame.symbol.is_some(), "{frame:?}");
        let unknown = resolve(16);
        assert_eq!(unknown.module, "?");
    }
}
