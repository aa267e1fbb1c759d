//! Where a run came from: the leakloop, engine library, model, host, scenario file and build that
//! produced it. Recorded once per run (`record.provenance` in report.json, format 3) so that runs
//! of successive builds can be told apart and compared (`leakloop history`, `run --baseline`).
//! This module holds only the record; `report/provenance.rs` collects it.

use serde::{Deserialize, Serialize};

/// Everything known about where a run came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Provenance {
    /// The leakloop version that ran the scenario.
    pub leakloop_version: String,
    /// The build under test: its id and date, and where they came from.
    pub build: BuildStamp,
    /// The CI system the run happened in, when one was recognised from its environment.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ci: Option<CiRun>,
    /// The machine leakloop ran on.
    pub host: Host,
    /// The scenario file (none for a scenario built in code).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scenario: Option<FileDigest>,
    /// The engine: backend, version and its library file.
    pub engine: EngineOrigin,
    /// The model file of a real engine.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<FileDigest>,
}

/// The build under test.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct BuildStamp {
    /// The build's id (`--build-id`, `LEAKLOOP_BUILD_ID` or the CI system's run id).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// The build's date, RFC 3339 (`--build-date`, `LEAKLOOP_BUILD_DATE`, the CI system's, or
    /// when the run started).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub date: Option<String>,
    /// Where the id came from: `command line`, the environment variable's name, or `none`.
    pub id_source: String,
    /// Where the date came from: `command line`, the environment variable's name, or `run start`.
    pub date_source: String,
}

/// A CI run recognised from its environment variables (docs/history.md lists them).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CiRun {
    /// The CI system: `github-actions`, `gitlab-ci`, `jenkins`, `buildkite`, `circleci`,
    /// `azure-pipelines`.
    pub system: String,
    /// The run (pipeline, build) id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_id: Option<String>,
    /// A link to the run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// The commit under test.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub commit: Option<String>,
    /// The branch or tag under test.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub branch: Option<String>,
}

/// The machine leakloop ran on.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Host {
    /// The operating system and its version (e.g. `Debian GNU/Linux 12`).
    pub os: String,
    /// The kernel version.
    pub kernel: String,
    /// The CPU architecture (e.g. `x86_64`).
    pub arch: String,
    /// The CPU's brand name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu: Option<String>,
    /// The device or board model (DMI product name, device-tree model), where the OS tells.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// The host name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hostname: Option<String>,
}

/// The engine that ran.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EngineOrigin {
    /// The backend (`sim`, `litert-lm`, `opencl`).
    pub backend: String,
    /// The engine's or library's version.
    pub version: String,
    /// The engine library file (none for an engine built into leakloop).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub library: Option<FileDigest>,
    /// The command line of an external engine driver (`backend: exec`), as the scenario gives it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub driver: Option<String>,
}

/// A file and its SHA-256 digest.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileDigest {
    /// The path as given (or as the engine found it).
    pub path: String,
    /// Its size in bytes, when it could be read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes: Option<u64>,
    /// Lower-case hex SHA-256 of its contents, when it could be read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sha256: Option<String>,
    /// Why it could not be hashed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}
