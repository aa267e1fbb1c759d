//! Jump stubs for the entry points this library does not track: each exported symbol jumps
//! straight to the real implementation, so it works for any signature without knowing it (the
//! argument registers and the stack are untouched).
//!
//! A stub whose slot is still empty goes through a shared slow path that saves the argument
//! registers, resolves the real library once, restores them and jumps.

use crate::real::resolve_slot;

#[cfg(target_arch = "x86_64")]
macro_rules! stub {
    ($name:ident) => {
        #[doc = concat!("Forwards `", stringify!($name), "` to the real OpenCL library.")]
        #[unsafe(no_mangle)]
        #[unsafe(naked)]
        pub unsafe extern "C" fn $name() {
            core::arch::naked_asm!(
                "lea r11, [rip + {slots} + {offset}]",
                "mov rax, qword ptr [r11]",
                "test rax, rax",
                "jz {slow}",
                "jmp rax",
                slots = sym $crate::symbols::SLOTS,
                offset = const $crate::symbols::Sym::$name as usize * 8,
                slow = sym $crate::forward::slow_path,
            )
        }
    };
}

#[cfg(target_arch = "aarch64")]
macro_rules! stub {
    ($name:ident) => {
        #[doc = concat!("Forwards `", stringify!($name), "` to the real OpenCL library.")]
        #[unsafe(no_mangle)]
        #[unsafe(naked)]
        pub unsafe extern "C" fn $name() {
            core::arch::naked_asm!(
                "adrp x16, {slots} + {offset}",
                "add x16, x16, :lo12:{slots} + {offset}",
                "ldr x17, [x16]",
                "cbz x17, 1f",
                "br x17",
                "1:",
                "b {slow}",
                slots = sym $crate::symbols::SLOTS,
                offset = const $crate::symbols::Sym::$name as usize * 8,
                slow = sym $crate::forward::slow_path,
            )
        }
    };
}

#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
compile_error!("cl-interposer has jump stubs for x86_64 and aarch64 only");

pub(crate) use stub;

/// Slow path of the x86_64 stubs: `r11` holds the slot's address.
#[cfg(target_arch = "x86_64")]
#[unsafe(naked)]
pub(crate) unsafe extern "C" fn slow_path() {
    // Entered by a jump from a stub, so the stack is as the caller left it at the call (rsp is
    // 8 mod 16); seven pushes and 128 bytes of vector registers realign it for the call.
    core::arch::naked_asm!(
        "push rdi",
        "push rsi",
        "push rdx",
        "push rcx",
        "push r8",
        "push r9",
        "push r11",
        "sub rsp, 128",
        "movdqu [rsp + 0], xmm0",
        "movdqu [rsp + 16], xmm1",
        "movdqu [rsp + 32], xmm2",
        "movdqu [rsp + 48], xmm3",
        "movdqu [rsp + 64], xmm4",
        "movdqu [rsp + 80], xmm5",
        "movdqu [rsp + 96], xmm6",
        "movdqu [rsp + 112], xmm7",
        "mov rdi, r11",
        "call {resolve}",
        "movdqu xmm0, [rsp + 0]",
        "movdqu xmm1, [rsp + 16]",
        "movdqu xmm2, [rsp + 32]",
        "movdqu xmm3, [rsp + 48]",
        "movdqu xmm4, [rsp + 64]",
        "movdqu xmm5, [rsp + 80]",
        "movdqu xmm6, [rsp + 96]",
        "movdqu xmm7, [rsp + 112]",
        "add rsp, 128",
        "pop r11",
        "pop r9",
        "pop r8",
        "pop rcx",
        "pop rdx",
        "pop rsi",
        "pop rdi",
        "jmp rax",
        resolve = sym resolve_slot,
    )
}

/// Slow path of the aarch64 stubs: `x16` holds the slot's address.
#[cfg(target_arch = "aarch64")]
#[unsafe(naked)]
pub(crate) unsafe extern "C" fn slow_path() {
    core::arch::naked_asm!(
        "stp x29, x30, [sp, #-16]!",
        "stp x0, x1, [sp, #-16]!",
        "stp x2, x3, [sp, #-16]!",
        "stp x4, x5, [sp, #-16]!",
        "stp x6, x7, [sp, #-16]!",
        "stp x8, x16, [sp, #-16]!",
        "stp q0, q1, [sp, #-32]!",
        "stp q2, q3, [sp, #-32]!",
        "stp q4, q5, [sp, #-32]!",
        "stp q6, q7, [sp, #-32]!",
        "mov x0, x16",
        "bl {resolve}",
        "mov x17, x0",
        "ldp q6, q7, [sp], #32",
        "ldp q4, q5, [sp], #32",
        "ldp q2, q3, [sp], #32",
        "ldp q0, q1, [sp], #32",
        "ldp x8, x16, [sp], #16",
        "ldp x6, x7, [sp], #16",
        "ldp x4, x5, [sp], #16",
        "ldp x2, x3, [sp], #16",
        "ldp x0, x1, [sp], #16",
        "ldp x29, x30, [sp], #16",
        "br x17",
        resolve = sym resolve_slot,
    )
}
