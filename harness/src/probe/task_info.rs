//! macOS process memory as Xcode and Instruments show it: the physical footprint
//! (`phys_footprint`, the number the system's memory pressure and jetsam act on) and the
//! resident size, both in bytes.
//!
//! For this process the numbers come from `task_info(mach_task_self(), TASK_VM_INFO)`. Another
//! process (the engine's worker) has no task port without the debugger entitlement, so its
//! numbers come from `proc_pid_rusage(pid, RUSAGE_INFO_V2)`, which the kernel fills from the same
//! ledger (`ri_phys_footprint`, `ri_resident_size`) for any process of the same user.
//!
//! Only type-checked here (`cargo clippy --target aarch64-apple-darwin`): no Mac was available.

use leakloop_metrics::names::{PHYS_FOOTPRINT, RSS};
use leakloop_metrics::ProbeKind;

use super::{Probe, ProbeError};

/// Reads `phys_footprint` and `rss` of a process on macOS.
#[derive(Debug, Clone, Copy, Default)]
pub struct TaskInfoProbe;

/// Footprint and resident size, in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Footprint {
    phys_footprint: u64,
    resident: u64,
}

fn own() -> Result<Footprint, String> {
    use mach2::kern_return::KERN_SUCCESS;
    use mach2::message::mach_msg_type_number_t;
    use mach2::task::task_info;
    use mach2::task_info::{task_info_t, task_vm_info, TASK_VM_INFO};
    use mach2::traps::mach_task_self;
    use mach2::vm_types::natural_t;

    let mut info = task_vm_info::default();
    let mut count = (std::mem::size_of::<task_vm_info>() / std::mem::size_of::<natural_t>())
        as mach_msg_type_number_t;
    // SAFETY: `info` is a writable task_vm_info of `count` natural_t words, as TASK_VM_INFO
    // requires; the kernel writes at most `count` words and updates `count`.
    let status = unsafe {
        task_info(
            mach_task_self(),
            TASK_VM_INFO,
            (&mut info as *mut task_vm_info).cast::<natural_t>() as task_info_t,
            &mut count,
        )
    };
    if status != KERN_SUCCESS {
        return Err(format!("task_info(TASK_VM_INFO) returned {status}"));
    }
    Ok(Footprint {
        phys_footprint: info.phys_footprint,
        resident: info.resident_size,
    })
}

fn other(pid: u32) -> Result<Footprint, String> {
    let c_pid = libc::c_int::try_from(pid).map_err(|_| format!("pid {pid} is out of range"))?;
    let mut info = std::mem::MaybeUninit::<libc::rusage_info_v2>::zeroed();
    // SAFETY: RUSAGE_INFO_V2 writes one rusage_info_v2 into the buffer, which is that size.
    let status = unsafe {
        libc::proc_pid_rusage(
            c_pid,
            libc::RUSAGE_INFO_V2,
            info.as_mut_ptr().cast::<libc::rusage_info_t>(),
        )
    };
    if status != 0 {
        return Err(format!(
            "proc_pid_rusage: {}",
            std::io::Error::last_os_error()
        ));
    }
    // SAFETY: the call succeeded, so the kernel filled the struct (and it was zeroed before).
    let info = unsafe { info.assume_init() };
    Ok(Footprint {
        phys_footprint: info.ri_phys_footprint,
        resident: info.ri_resident_size,
    })
}

impl Probe for TaskInfoProbe {
    fn kind(&self) -> ProbeKind {
        ProbeKind::TaskInfo
    }

    fn read(&mut self, pid: u32, out: &mut dyn FnMut(&'static str, u64)) -> Result<(), ProbeError> {
        let found = if pid == std::process::id() {
            own()
        } else {
            other(pid)
        }
        .map_err(|cause| ProbeError {
            pid,
            cause,
            fatal: None,
        })?;
        out(PHYS_FOOTPRINT, found.phys_footprint);
        out(RSS, found.resident);
        Ok(())
    }
}
