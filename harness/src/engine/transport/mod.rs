//! Targets and transports: how leakloop reaches an engine whose process lives elsewhere (a
//! machine over `ssh`, an Android device over `adb`), carrying the same worker protocol as the
//! pipes to a local worker, and how that process's memory is sampled there.
//!
//! [`command`] runs commands on a target, [`stage`] puts a worker there, [`remote`] drives and
//! stops it, [`probed`] adds a target's probe to an engine: [`self_probe`] (the remote worker's
//! own /proc) or [`dumpsys_probe`] (an app's `dumpsys meminfo`); [`watchdog`] ends a remote
//! worker whose runner hung up, [`adb`] reads adb's errors.

mod adb;
mod command;
mod dumpsys_probe;
mod error;
mod probed;
mod remote;
mod self_probe;
mod stage;
mod watchdog;

pub(crate) use command::Transport;
pub use command::{ADB_PROGRAM_ENV, SSH_PROGRAM_ENV};
pub(crate) use dumpsys_probe::DumpsysProbe;
pub use error::{BuildError, TargetError, TargetErrorKind};
pub(crate) use probed::Probed;
pub(crate) use remote::remote_parts;
pub use remote::RemoteEngine;
pub(crate) use self_probe::SelfProbe;
pub use stage::TARGET_BIN_ENV;
pub(crate) use watchdog::{exit_on_hangup, HANGUP_GRACE};
