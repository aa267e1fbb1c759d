//! Targets and transports: how leakloop reaches an engine whose process lives elsewhere (a
//! machine over `ssh`, an Android device over `adb`), carrying the same worker protocol as the
//! pipes to a local worker, and how that process's memory is sampled there.
//!
//! [`command`] runs commands on a target, [`stage`] puts a worker there, [`remote`] drives and
//! stops it, `watchdog` ends a remote worker whose runner hung up, [`adb`] reads adb's errors.
//! Sampling there is the probe layer's (`probe::target_for`): it runs its commands through the
//! [`Transport`] here.

mod adb;
mod command;
mod error;
mod remote;
mod stage;
// Only the command line's `leakloop worker --remote` serves as a remote worker.
#[cfg(feature = "cli")]
mod watchdog;

pub(crate) use command::{shown, Transport};
pub use command::{ADB_PROGRAM_ENV, SSH_PROGRAM_ENV};
pub use error::{BuildError, TargetError, TargetErrorKind};
pub(crate) use remote::remote_parts;
pub use remote::RemoteEngine;
pub(crate) use stage::COMMAND_TIMEOUT;
pub use stage::TARGET_BIN_ENV;
#[cfg(feature = "cli")]
pub(crate) use watchdog::{exit_on_hangup, HANGUP_GRACE};
