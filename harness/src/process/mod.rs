//! Child processes, supervised one way: every process leakloop starts (a worker, an exec driver,
//! an attached program and its marker command, an `ssh` or `adb` command, a fetch script) goes
//! through [`Process::spawn`].
//!
//! A started process leads its own process group, so that a terminal's Ctrl-C reaches leakloop
//! alone and whatever the process starts in turn (a wrapper script's children) is ended with it;
//! on Linux it is also signalled when leakloop dies. Its exit is watched by a thread and read
//! with a bound ([`Process::wait_timeout`]), never waited for without one. Dropping a
//! [`Process`] kills its group; the groups not yet ended are kept in a registry that interrupt
//! handling ends (`end_live_groups`). A child's pipes are read by threads too: [`lines`] bounds
//! each line, [`tail`] keeps the last lines of a stderr, [`output`] runs a command to completion
//! with a timeout and capped output, `hangup` sees a pipe's other end go away; a worker's stdin and
//! stdout are written and read by the thread that asks, with `poll` and a deadline ([`pipes`]),
//! so that a request and its reply cost no thread hand-over. [`describe_exit`] says how any of
//! them ended.
//!
//! One concurrency model: std threads and channels, and `poll` for a request and its reply (no
//! async runtime).

mod child;
mod exit;
mod group;
#[cfg(all(feature = "cli", any(target_os = "linux", target_os = "android")))]
mod hangup;
pub(crate) mod lines;
pub mod output;
pub(crate) mod pipes;
pub(crate) mod tail;

pub(crate) use child::{pid_alive, Process, Stopped, KILL_GRACE};
pub(crate) use exit::{describe_exit, describe_shell_status};
#[cfg(feature = "cli")]
pub(crate) use group::end_live_groups;
#[cfg(all(feature = "cli", any(target_os = "linux", target_os = "android")))]
pub(crate) use hangup::wait_for_hangup;
