//! Real addresses of extension entry points that this library wraps when an application looks
//! them up with `clGetExtensionFunctionAddress*` (they are not exported symbols, so the jump
//! table cannot hold them).

use std::ffi::CStr;
use std::sync::atomic::{AtomicUsize, Ordering};

/// The real `clCreateCommandQueueWithPropertiesKHR`.
pub(crate) static CREATE_QUEUE_KHR: AtomicUsize = AtomicUsize::new(0);
/// The real `clCreateProgramWithILKHR`.
pub(crate) static CREATE_PROGRAM_IL_KHR: AtomicUsize = AtomicUsize::new(0);

/// Keeps the real address of a wrapped extension entry point. With several platforms the last
/// lookup wins, which is right for the usual single-platform process.
pub(crate) fn remember(name: &CStr, addr: usize) {
    let slot = match name.to_bytes() {
        b"clCreateCommandQueueWithPropertiesKHR" => &CREATE_QUEUE_KHR,
        b"clCreateProgramWithILKHR" => &CREATE_PROGRAM_IL_KHR,
        _ => return,
    };
    slot.store(addr, Ordering::Release);
}
