//! `concurrency:`: whether a scenario may run alongside others when `leakloop run` is given a
//! suite. Unset, it follows from the backend: the simulator measures nothing of the machine and
//! shares it; a real engine (or, later, a device) runs one scenario at a time per machine, so
//! that another scenario's load on the same CPU, GPU or device cannot show in its figures.

use serde::{Deserialize, Serialize};

use crate::scenario::{Scenario, Target};

/// How a scenario shares the machine it runs on with the other scenarios of a suite.
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[cfg_attr(test, schemars(rename = "concurrency"))]
pub enum Concurrency {
    /// Runs alongside any other scenario, up to `-j` at a time (the simulator's default).
    Shared,
    /// Runs while no other `exclusive` scenario runs on the same device (a real engine's
    /// default). Shared scenarios may still run next to it.
    Exclusive,
}

impl Concurrency {
    /// The word used in the DSL.
    pub fn as_str(&self) -> &'static str {
        match self {
            Concurrency::Shared => "shared",
            Concurrency::Exclusive => "exclusive",
        }
    }
}

impl Scenario {
    /// How this scenario shares its machine: what it says, or its backend's default.
    pub fn effective_concurrency(&self) -> Concurrency {
        self.concurrency
            .unwrap_or(crate::backend::of(self.engine.backend).concurrency)
    }

    /// The device an `exclusive` scenario holds while it runs, or `None` for a shared one: the
    /// machine or device its engine runs on (its `target`), so exclusive scenarios on two
    /// devices run side by side.
    pub fn exclusive_device(&self) -> Option<String> {
        match self.effective_concurrency() {
            Concurrency::Shared => None,
            Concurrency::Exclusive => Some(match &self.target {
                Target::Local => "this machine".to_owned(),
                Target::Ssh(ssh) => match ssh.port {
                    Some(port) => format!("ssh {}:{port}", ssh.host),
                    None => format!("ssh {}", ssh.host),
                },
                Target::Adb(adb) => match &adb.serial {
                    Some(serial) => format!("adb {serial}"),
                    None => "adb (the only device)".to_owned(),
                },
            }),
        }
    }
}
