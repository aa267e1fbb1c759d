//! Collects a run's provenance ([`Provenance`]): the build stamp (`--build-id`, `--build-date`,
//! `LEAKLOOP_BUILD_ID`, `LEAKLOOP_BUILD_DATE` or a CI system's variables), the host, and SHA-256
//! digests of the scenario, engine library and model files. A digest streams the file through a
//! fixed buffer (a 4 GB model is never held in memory) and is computed once per file and process:
//! a file is hashed again only when its size or modification time changed.

use std::collections::HashMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock, PoisonError};
use std::time::SystemTime;

use sha2::{Digest, Sha256};

use crate::engine::BackendInfo;
use crate::input::shorten;
use crate::report::json::LEAKLOOP_VERSION;
use crate::runner::{BuildStamp, CiRun, EngineOrigin, FileDigest, Host, Provenance};
use crate::scenario::Scenario;

/// The longest build id accepted (a CI run id, a commit, a version string).
pub const MAX_BUILD_ID_CHARS: usize = 128;

/// The read buffer of a digest: large enough for full-speed reads, small enough to never matter.
const DIGEST_BUFFER: usize = 1 << 20;

/// The environment variables that give a build id or date without a CI system.
pub const BUILD_ID_VAR: &str = "LEAKLOOP_BUILD_ID";
/// See [`BUILD_ID_VAR`].
pub const BUILD_DATE_VAR: &str = "LEAKLOOP_BUILD_DATE";

/// One CI system: the variable that says it is running, and the variables of its run.
struct CiSystem {
    name: &'static str,
    /// Set (to anything non-empty) when the run is in this CI system.
    detect: &'static str,
    /// The run id: the first variable set, joined with `.` to the attempt variable when set.
    run_id: &'static [&'static str],
    attempt: Option<&'static str>,
    /// A URL, or the parts to build one from (`server/repository/actions/runs/id` on GitHub).
    url: &'static [&'static str],
    commit: &'static [&'static str],
    branch: &'static [&'static str],
    /// A creation time of the pipeline, RFC 3339, where the system gives one.
    date: Option<&'static str>,
}

/// The CI systems recognised, in the order they are tried (docs/history.md has the table).
const CI_SYSTEMS: &[CiSystem] = &[
    CiSystem {
        name: "github-actions",
        detect: "GITHUB_ACTIONS",
        run_id: &["GITHUB_RUN_ID"],
        attempt: Some("GITHUB_RUN_ATTEMPT"),
        url: &[],
        commit: &["GITHUB_SHA"],
        branch: &["GITHUB_REF_NAME"],
        date: None,
    },
    CiSystem {
        name: "gitlab-ci",
        detect: "GITLAB_CI",
        run_id: &["CI_PIPELINE_ID"],
        attempt: None,
        url: &["CI_PIPELINE_URL"],
        commit: &["CI_COMMIT_SHA"],
        branch: &["CI_COMMIT_REF_NAME"],
        date: Some("CI_PIPELINE_CREATED_AT"),
    },
    CiSystem {
        name: "buildkite",
        detect: "BUILDKITE",
        run_id: &["BUILDKITE_BUILD_NUMBER"],
        attempt: None,
        url: &["BUILDKITE_BUILD_URL"],
        commit: &["BUILDKITE_COMMIT"],
        branch: &["BUILDKITE_BRANCH"],
        date: None,
    },
    CiSystem {
        name: "circleci",
        detect: "CIRCLECI",
        run_id: &["CIRCLE_WORKFLOW_ID", "CIRCLE_BUILD_NUM"],
        attempt: None,
        url: &["CIRCLE_BUILD_URL"],
        commit: &["CIRCLE_SHA1"],
        branch: &["CIRCLE_BRANCH", "CIRCLE_TAG"],
        date: None,
    },
    CiSystem {
        name: "azure-pipelines",
        detect: "TF_BUILD",
        run_id: &["BUILD_BUILDID"],
        attempt: None,
        url: &[],
        commit: &["BUILD_SOURCEVERSION"],
        branch: &["BUILD_SOURCEBRANCHNAME"],
        date: None,
    },
    // Jenkins last: its BUILD_* names are generic enough to be set by hand elsewhere.
    CiSystem {
        name: "jenkins",
        detect: "JENKINS_URL",
        run_id: &["BUILD_TAG", "BUILD_NUMBER"],
        attempt: None,
        url: &["BUILD_URL"],
        commit: &["GIT_COMMIT"],
        branch: &["GIT_BRANCH"],
        date: None,
    },
];

/// A lookup of environment variables (the process's, or a table in tests).
pub type Env<'a> = &'a dyn Fn(&str) -> Option<String>;

/// The process's environment, with empty values treated as unset.
pub fn process_env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}

/// The CI run described by `env`, if a known CI system is running.
pub fn ci_from_env(env: Env<'_>) -> Option<CiRun> {
    let system = CI_SYSTEMS.iter().find(|s| env(s.detect).is_some())?;
    let first = |names: &[&str]| names.iter().find_map(|n| env(n)).map(|v| clean(&v));
    let run_id = first(system.run_id).map(|id| match system.attempt.and_then(env) {
        Some(attempt) if attempt != "1" => format!("{id}.{}", clean(&attempt)),
        _ => id,
    });
    let url = first(system.url).or_else(|| {
        // GitHub gives the parts of the run's address, not the address.
        let (server, repo, id) = (
            env("GITHUB_SERVER_URL")?,
            env("GITHUB_REPOSITORY")?,
            env("GITHUB_RUN_ID")?,
        );
        (system.name == "github-actions")
            .then(|| clean(&format!("{server}/{repo}/actions/runs/{id}")))
    });
    Some(CiRun {
        system: system.name.to_owned(),
        run_id,
        url,
        commit: first(system.commit),
        branch: first(system.branch),
    })
}

/// A value from the environment or a system file: its first [`MAX_BUILD_ID_CHARS`] characters,
/// control characters replaced.
fn clean(value: &str) -> String {
    value
        .trim()
        .chars()
        .take(MAX_BUILD_ID_CHARS)
        .map(|c| if c.is_control() { '?' } else { c })
        .collect()
}

/// Checks a build id given on the command line: non-empty, at most [`MAX_BUILD_ID_CHARS`]
/// characters, no control characters.
pub fn check_build_id(id: &str) -> Result<(), String> {
    if id.trim().is_empty() {
        return Err("a build id cannot be empty".to_owned());
    }
    if id.chars().count() > MAX_BUILD_ID_CHARS {
        return Err(format!(
            "a build id is at most {MAX_BUILD_ID_CHARS} characters; this one has {}",
            id.chars().count()
        ));
    }
    if let Some(c) = id.chars().find(|c| c.is_control()) {
        return Err(format!(
            "a build id cannot hold control characters (found {})",
            c.escape_default()
        ));
    }
    Ok(())
}

/// Parses a build date: RFC 3339 (`2026-12-01T02:00:00Z`, an offset is allowed) or a day
/// (`2026-12-01`); returns it as RFC 3339 in UTC, to the second.
pub fn parse_build_date(text: &str) -> Result<String, String> {
    let text = text.trim();
    let full = if text.len() == 10 {
        format!("{text}T00:00:00Z")
    } else {
        text.to_owned()
    };
    let time = humantime::parse_rfc3339_weak(&full)
        .or_else(|_| parse_with_offset(&full).ok_or(()))
        .map_err(|_| {
            format!(
                "`{}` is not a date: expected RFC 3339 such as 2026-12-01T02:00:00Z, or 2026-12-01",
                shorten(&text.escape_default().to_string(), 40)
            )
        })?;
    Ok(humantime::format_rfc3339_seconds(time).to_string())
}

/// RFC 3339 with a `+HH:MM` / `-HH:MM` offset, which humantime does not read.
fn parse_with_offset(text: &str) -> Option<SystemTime> {
    let split = text.len().checked_sub(6)?;
    let (local, offset) = text.split_at(split);
    let sign = match offset.as_bytes().first()? {
        b'+' => 1i64,
        b'-' => -1,
        _ => return None,
    };
    let (hours, minutes) = offset[1..].split_once(':')?;
    let seconds = sign * (hours.parse::<i64>().ok()? * 3600 + minutes.parse::<i64>().ok()? * 60);
    let local = humantime::parse_rfc3339_weak(local).ok()?;
    let delta = std::time::Duration::from_secs(seconds.unsigned_abs());
    if seconds >= 0 {
        local.checked_sub(delta)
    } else {
        local.checked_add(delta)
    }
}

/// Resolves the build stamp: the command line first, then `LEAKLOOP_BUILD_ID` /
/// `LEAKLOOP_BUILD_DATE`, then the CI system's run id and pipeline date; the date falls back to
/// `now` (the run's start). A flag's bad value is an error naming the flag; a bad date in the
/// environment is passed over for the next source.
pub fn resolve_build(
    id: Option<&str>,
    date: Option<&str>,
    env: Env<'_>,
    now: SystemTime,
) -> Result<(BuildStamp, Option<CiRun>), String> {
    let ci = ci_from_env(env);
    let system = ci
        .as_ref()
        .and_then(|c| CI_SYSTEMS.iter().find(|s| s.name == c.system));
    let (id, id_source) = match id {
        Some(id) => {
            check_build_id(id).map_err(|e| format!("--build-id: {e}"))?;
            (Some(id.to_owned()), "command line".to_owned())
        }
        None => match env(BUILD_ID_VAR) {
            Some(v) => (Some(clean(&v)), BUILD_ID_VAR.to_owned()),
            None => match (system, ci.as_ref().and_then(|c| c.run_id.clone())) {
                (Some(s), Some(run)) => (Some(run), s.run_id.join("|")),
                _ => (None, "none".to_owned()),
            },
        },
    };
    let (date, date_source) = match date {
        Some(d) => (
            parse_build_date(d).map_err(|e| format!("--build-date: {e}"))?,
            "command line".to_owned(),
        ),
        None => {
            let from_env = [Some(BUILD_DATE_VAR), system.and_then(|s| s.date)]
                .into_iter()
                .flatten()
                .find_map(|var| Some((parse_build_date(&env(var)?).ok()?, var.to_owned())));
            from_env.unwrap_or_else(|| {
                (
                    humantime::format_rfc3339_seconds(now).to_string(),
                    "run start".to_owned(),
                )
            })
        }
    };
    Ok((
        BuildStamp {
            id,
            date: Some(date),
            id_source,
            date_source,
        },
        ci,
    ))
}

/// The machine leakloop runs on (read once per process).
pub fn host() -> Host {
    static HOST: OnceLock<Host> = OnceLock::new();
    HOST.get_or_init(|| {
        let mut system = sysinfo::System::new();
        system.refresh_cpu_list(sysinfo::CpuRefreshKind::nothing());
        let cpu = system
            .cpus()
            .first()
            .map(|c| c.brand().trim().to_owned())
            .filter(|b| !b.is_empty());
        Host {
            os: sysinfo::System::long_os_version().unwrap_or_else(|| std::env::consts::OS.into()),
            kernel: sysinfo::System::kernel_version().unwrap_or_default(),
            arch: std::env::consts::ARCH.to_owned(),
            cpu,
            model: device_model(),
            hostname: sysinfo::System::host_name(),
        }
    })
    .clone()
}

/// The board or device model, where Linux publishes one (DMI on PCs, the device tree on ARM
/// boards).
fn device_model() -> Option<String> {
    let read = |path: &str| {
        std::fs::read(path).ok().map(|b| {
            clean(
                String::from_utf8_lossy(&b)
                    .trim_end_matches(['\0', '\n'])
                    .trim(),
            )
        })
    };
    let dmi = match (
        read("/sys/devices/virtual/dmi/id/sys_vendor"),
        read("/sys/devices/virtual/dmi/id/product_name"),
    ) {
        (Some(vendor), Some(product)) if !product.is_empty() => Some(if vendor.is_empty() {
            product
        } else {
            format!("{vendor} {product}")
        }),
        _ => None,
    };
    dmi.or_else(|| read("/proc/device-tree/model"))
        .filter(|m| !m.is_empty())
}

/// The memo of digests: path -> (size, modification time, digest).
type DigestMemo = HashMap<PathBuf, (u64, Option<SystemTime>, String)>;

fn memo() -> &'static Mutex<DigestMemo> {
    static MEMO: OnceLock<Mutex<DigestMemo>> = OnceLock::new();
    MEMO.get_or_init(Mutex::default)
}

/// The SHA-256 digest of a file, streamed, and remembered for the process while its size and
/// modification time stay the same.
pub fn digest_file(path: &Path) -> FileDigest {
    let shown = path.display().to_string();
    match digest(path) {
        Ok((bytes, sha256)) => FileDigest {
            path: shown,
            bytes: Some(bytes),
            sha256: Some(sha256),
            error: None,
        },
        Err(e) => FileDigest {
            path: shown,
            bytes: None,
            sha256: None,
            error: Some(shorten(&e.to_string(), 200).into_owned()),
        },
    }
}

fn digest(path: &Path) -> std::io::Result<(u64, String)> {
    let meta = std::fs::metadata(path)?;
    if !meta.is_file() {
        return Err(std::io::Error::other("not a regular file"));
    }
    let key = std::fs::canonicalize(path)?;
    let (len, modified) = (meta.len(), meta.modified().ok());
    if let Some((l, m, hex)) = memo()
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .get(&key)
    {
        if *l == len && *m == modified {
            return Ok((len, hex.clone()));
        }
    }
    let mut file = std::fs::File::open(path)?;
    let mut hasher = Sha256::new();
    let mut buffer = vec![0u8; DIGEST_BUFFER];
    let mut read = 0u64;
    loop {
        match file.read(&mut buffer) {
            Ok(0) => break,
            Ok(n) => {
                hasher.update(&buffer[..n]);
                read += n as u64;
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    let hex: String = hasher
        .finalize()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    memo()
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .insert(key, (read, modified, hex.clone()));
    Ok((read, hex))
}

/// The provenance of a run of `scenario` on the engine `backend` describes, for `build`.
pub fn collect(
    scenario: &Scenario,
    backend: &BackendInfo,
    build: &BuildStamp,
    ci: Option<&CiRun>,
) -> Provenance {
    let engine = &scenario.engine;
    // Only an engine built into leakloop names the library it found; a driver's or an app's
    // details are free-form text, never a path to hash (issue 23).
    let built_in = engine.exec.is_none() && engine.attach.is_none();
    let library = backend
        .details
        .get("library")
        .filter(|_| built_in)
        .map(PathBuf::from)
        .or_else(|| engine.lib.clone());
    // The model is the one the scenario names, whatever an engine says about itself.
    let model = engine.model.clone();
    Provenance {
        leakloop_version: LEAKLOOP_VERSION.to_owned(),
        build: build.clone(),
        ci: ci.cloned(),
        host: host(),
        scenario: scenario.source.as_deref().map(digest_file),
        engine: EngineOrigin {
            backend: backend.backend.clone(),
            version: backend.version.clone(),
            library: library.as_deref().map(digest_file),
            driver: engine.exec.as_ref().map(|exec| exec.command.join(" ")),
        },
        model: model.as_deref().map(digest_file),
    }
}

/// The provenance as labelled lines, for summary.md and `history`: build, CI, leakloop, engine,
/// model, scenario, host. Digests are shortened to 12 hex digits (report.json has them whole).
pub fn describe(p: &Provenance) -> Vec<(&'static str, String)> {
    let mut lines = Vec::new();
    let b = &p.build;
    let id = match &b.id {
        Some(id) => format!("`{id}` ({})", b.id_source),
        None => "no id".to_owned(),
    };
    let date = b
        .date
        .as_ref()
        .map_or(String::new(), |d| format!(", {d} ({})", b.date_source));
    lines.push(("build", format!("{id}{date}")));
    if let Some(ci) = &p.ci {
        let mut parts = vec![ci.system.clone()];
        let labelled = [
            ("run", &ci.run_id),
            ("commit", &ci.commit),
            ("branch", &ci.branch),
            ("", &ci.url),
        ];
        for (label, value) in labelled {
            if let Some(v) = value {
                parts.push(format!("{label} {v}").trim().to_owned());
            }
        }
        lines.push(("ci", parts.join(", ")));
    }
    lines.push(("leakloop", p.leakloop_version.clone()));
    let engine = format!("{} {}", p.engine.backend, p.engine.version);
    lines.push((
        "engine",
        match (&p.engine.driver, &p.engine.library) {
            (Some(driver), Some(lib)) => {
                format!("{engine}, exec: {driver}, library {}", digest_text(lib))
            }
            (Some(driver), None) => format!("{engine}, exec: {driver}"),
            (None, Some(lib)) => format!("{engine}, library {}", digest_text(lib)),
            (None, None) => format!("{engine} (built in)"),
        },
    ));
    if let Some(model) = &p.model {
        lines.push(("model", digest_text(model)));
    }
    if let Some(scenario) = &p.scenario {
        lines.push(("scenario", digest_text(scenario)));
    }
    let h = &p.host;
    let mut host = vec![h.os.clone(), format!("kernel {}", h.kernel), h.arch.clone()];
    host.extend(h.cpu.clone());
    host.extend(h.model.clone());
    host.extend(h.hostname.as_ref().map(|n| format!("host {n}")));
    lines.push(("host", host.join(", ")));
    lines
}

/// `` `path` sha256 0123456789ab (N bytes) ``, or why it has no digest.
fn digest_text(d: &FileDigest) -> String {
    match (&d.sha256, &d.error) {
        (Some(sha), _) => format!(
            "`{}` sha256 {}{}",
            d.path,
            &sha[..sha.len().min(12)],
            d.bytes.map_or(String::new(), |b| format!(
                " ({})",
                crate::report::format_bytes(b)
            ))
        ),
        (None, Some(e)) => format!("`{}` (not hashed: {e})", d.path),
        (None, None) => format!("`{}`", d.path),
    }
}

#[cfg(test)]
mod tests;
