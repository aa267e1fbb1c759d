//! Which builds `leakloop bisect --versions SPEC` runs, oldest first.
//!
//! For a `litert-lm` scenario a build is a LiteRT-LM library: a release name (`0.14.0`), the
//! pinned or newest fetched nightly (`nightly`), or a library path (a `liblitert-lm.so` or a
//! folder holding one). A range `FROM..TO` takes every known version between the two, inclusive:
//! the published releases (`ci/litert-lm-releases.txt`) and whatever is already fetched. Versions
//! not fetched yet are fetched only by a program the user names (`--fetch-script PATH` or
//! [`FETCH_SCRIPT_ENV`]; `ci/fetch-litert-lm.sh` of a leakloop checkout is one). Nothing found at
//! a path baked in when leakloop was built is ever run: whoever could write there would run code
//! as the user of every copy of the binary. Without a named program, a missing build is reported
//! as not fetched, with the command that fetches it.
//!
//! For a `sim` scenario a build is one of the scenario's own `profiles:` (named like versions,
//! e.g. `"1.3"`): simulated builds with an injected change, the test bed of the search itself.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use crate::backend::BuildAxis;
use crate::bisect::BisectError;
use crate::engine::litert_lm::{
    compare_versions, discover_library, fetched_libraries, LibraryLocation,
};
use crate::process::output::{run_capped, RunError};
use crate::scenario::Scenario;

/// The published releases with a C library and the pinned nightly, oldest first.
const RELEASES: &str = include_str!("../../../ci/litert-lm-releases.txt");

/// One build to run the scenario on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Build {
    /// A LiteRT-LM library on disk.
    Library(LibraryLocation),
    /// A version not fetched yet (fetched before the runs, or skipped offline).
    Unfetched(String),
    /// A simulator profile of the scenario.
    Profile(String),
}

impl Build {
    /// The build's name in the table and the plot.
    pub(crate) fn label(&self) -> String {
        match self {
            Build::Library(l) => l.version.clone(),
            Build::Unfetched(v) | Build::Profile(v) => v.clone(),
        }
    }
}

/// The published versions, from `ci/litert-lm-releases.txt`.
pub(crate) fn published() -> Vec<String> {
    RELEASES
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(str::to_owned)
        .collect()
}

fn is_path(item: &str) -> bool {
    item.contains('/') || item.ends_with(".so")
}

fn is_nightly(version: &str) -> bool {
    version.contains(".dev")
}

/// Resolves `spec` (`FROM..TO` or a comma-separated list) for `scenario`.
pub(crate) fn resolve(scenario: &Scenario, spec: &str) -> Result<Vec<Build>, BisectError> {
    match crate::backend::of(scenario.engine.backend).builds {
        Some(BuildAxis::Profiles) => resolve_profiles(scenario, spec).map_err(BisectError::Builds),
        Some(BuildAxis::Libraries) => {
            let fetched = fetched_libraries();
            resolve_libraries(spec, &published(), &fetched)
        }
        None => Err(BisectError::Builds(format!(
            "bisect runs litert-lm scenarios across library builds and sim scenarios across their \
             own profiles; this scenario uses `{}`",
            scenario.engine.backend.as_str()
        ))),
    }
}

fn split_range(spec: &str) -> Option<(&str, &str)> {
    spec.split_once("..")
        .map(|(a, b)| (a.trim(), b.trim()))
        .filter(|(a, b)| !a.is_empty() && !b.is_empty() && !is_path(a) && !is_path(b))
}

fn resolve_profiles(scenario: &Scenario, spec: &str) -> Result<Vec<Build>, String> {
    let mut names: Vec<String> = scenario.engine.inline_profiles.keys().cloned().collect();
    names.sort_by_key(|n| natural_key(n));
    let known = |n: &str| {
        if names.iter().any(|p| p == n) {
            Ok(n.to_owned())
        } else {
            Err(format!(
                "`{n}` is not one of the scenario's profiles ({})",
                names.join(", ")
            ))
        }
    };
    let picked: Vec<String> = if let Some((from, to)) = split_range(spec) {
        let (from, to) = (known(from)?, known(to)?);
        names
            .iter()
            .filter(|n| {
                let k = natural_key(n);
                k >= natural_key(&from) && k <= natural_key(&to)
            })
            .cloned()
            .collect()
    } else {
        spec.split(',')
            .map(|s| known(s.trim()))
            .collect::<Result<_, _>>()?
    };
    Ok(picked.into_iter().map(Build::Profile).collect())
}

/// Orders profile names with their numbers compared as numbers (`build-9` before `build-10`).
fn natural_key(name: &str) -> Vec<(String, u64)> {
    let mut key = Vec::new();
    let mut text = String::new();
    let mut digits = String::new();
    for c in name.chars() {
        if c.is_ascii_digit() {
            digits.push(c);
        } else {
            if !digits.is_empty() {
                key.push((
                    std::mem::take(&mut text),
                    digits.parse().unwrap_or(u64::MAX),
                ));
                digits.clear();
            }
            text.push(c);
        }
    }
    key.push((text, digits.parse().unwrap_or(0)));
    key
}

/// Resolves library builds against the `published` versions and the `fetched` libraries.
pub(crate) fn resolve_libraries(
    spec: &str,
    published: &[String],
    fetched: &[LibraryLocation],
) -> Result<Vec<Build>, BisectError> {
    let mut known: Vec<String> = published.to_vec();
    for l in fetched {
        if !known.contains(&l.version) {
            known.push(l.version.clone());
        }
    }
    known.sort_by(|a, b| compare_versions(a, b));
    let newest_nightly = || {
        known
            .iter()
            .rev()
            .find(|v| is_nightly(v))
            .cloned()
            .ok_or_else(|| {
                "no nightly is known: fetch one with `ci/fetch-litert-lm.sh nightly`".to_owned()
            })
    };
    let version = |item: &str| -> Result<String, String> {
        if item == "nightly" {
            return newest_nightly();
        }
        if known.iter().any(|v| v == item) {
            Ok(item.to_owned())
        } else {
            Err(format!(
                "`{item}` is no known LiteRT-LM version (known: {}; releases before 0.11.0 ship no \
                 C library; or give a library path)",
                known.join(", ")
            ))
        }
    };
    let build_of = |v: String| match fetched.iter().find(|l| l.version == v) {
        Some(l) => Build::Library(l.clone()),
        None => Build::Unfetched(v),
    };
    if let Some((from, to)) = split_range(spec) {
        let (from, to) = (
            version(from).map_err(BisectError::Builds)?,
            version(to).map_err(BisectError::Builds)?,
        );
        if compare_versions(&from, &to).is_gt() {
            return Err(BisectError::Builds(format!(
                "the range {from}..{to} runs backwards"
            )));
        }
        return Ok(known
            .iter()
            .filter(|v| compare_versions(v, &from).is_ge() && compare_versions(v, &to).is_le())
            .cloned()
            .map(build_of)
            .collect());
    }
    spec.split(',')
        .map(str::trim)
        .map(|item| {
            if is_path(item) {
                discover_library(Some(Path::new(item)))
                    .map(Build::Library)
                    .map_err(BisectError::Library)
            } else {
                version(item).map(build_of).map_err(BisectError::Builds)
            }
        })
        .collect()
}

/// Environment variable naming the program `bisect` fetches missing builds with, when
/// `--fetch-script` is not given.
pub(crate) const FETCH_SCRIPT_ENV: &str = "LEAKLOOP_FETCH_SCRIPT";

/// The fetch program the user named: `--fetch-script`, else [`FETCH_SCRIPT_ENV`]; `None` when
/// neither names one (nothing is fetched then).
pub(crate) fn fetch_script(flag: Option<&Path>) -> Option<PathBuf> {
    flag.map(Path::to_path_buf).or_else(|| {
        std::env::var_os(FETCH_SCRIPT_ENV)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    })
}

/// The argument the fetch program takes for `version`: the version, or `nightly==VERSION`.
fn fetch_arg(version: &str) -> String {
    if is_nightly(version) {
        format!("nightly=={version}")
    } else {
        version.to_owned()
    }
}

/// How long a fetch script may take (it downloads a wheel of about 45 MB): past it, it is killed
/// with its process group.
const FETCH_TIMEOUT: Duration = Duration::from_secs(30 * 60);

/// How much of a fetch script's stdout and stderr is kept, each.
const FETCH_OUTPUT_CAP: usize = 1 << 20;

/// The command that fetches `version` from a leakloop checkout, for a build that was not fetched.
pub(crate) fn fetch_command(version: &str) -> String {
    format!("ci/fetch-litert-lm.sh {}", fetch_arg(version))
}

/// Fetches `version` by running `script VERSION` (or `script nightly==VERSION`), a program the
/// user named, which prints the folder holding the library on its last line (as
/// `ci/fetch-litert-lm.sh` does); the library it left, or why not.
pub(crate) fn fetch(script: &Path, version: &str) -> Result<LibraryLocation, String> {
    // A bare name is a file in the working directory, never one looked up on PATH.
    let program = if script.components().count() == 1 && script.is_relative() {
        Path::new(".").join(script)
    } else {
        script.to_path_buf()
    };
    let arg = fetch_arg(version);
    let mut command = Command::new(&program);
    command.arg(&arg).stdin(std::process::Stdio::null());
    // Bounded like every child leakloop starts: its own process group, a deadline, and capped
    // output (the script prints a few lines; the folder is the last one).
    let out = run_capped(command, FETCH_TIMEOUT, FETCH_OUTPUT_CAP).map_err(|e| match e {
        RunError::Start(e) => format!("cannot start the fetch script {}: {e}", script.display()),
        e @ RunError::TimedOut(_) => format!("the fetch script {} {arg}: {e}", script.display()),
    })?;
    if !out.status.success() {
        let stderr = &out.stderr;
        let last = stderr.lines().rev().find(|l| !l.trim().is_empty());
        return Err(format!(
            "{} {arg} failed: {}",
            script.display(),
            last.unwrap_or("no message")
                .chars()
                .map(|c| if c.is_control() { '?' } else { c })
                .take(300)
                .collect::<String>()
        ));
    }
    let folder = out.stdout.lines().last().unwrap_or_default().trim();
    discover_library(Some(Path::new(folder))).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::litert_lm::LibrarySource;

    fn lib(v: &str) -> LibraryLocation {
        LibraryLocation {
            path: PathBuf::from(format!("target/litert-lm/{v}/liblitert-lm.so")),
            version: v.to_owned(),
            source: LibrarySource::Workspace,
        }
    }

    fn labels(builds: &[Build]) -> Vec<String> {
        builds.iter().map(Build::label).collect()
    }

    #[test]
    fn a_range_spans_published_and_fetched_versions_in_version_order() {
        let published: Vec<String> = ["0.11.0", "0.13.1", "0.14.0", "0.19.0.dev20261026"]
            .map(String::from)
            .to_vec();
        let fetched = [lib("0.14.0"), lib("0.19.0.dev20261101")];
        let builds = resolve_libraries("0.13.1..nightly", &published, &fetched).unwrap();
        assert_eq!(
            labels(&builds),
            [
                "0.13.1",
                "0.14.0",
                "0.19.0.dev20261026",
                "0.19.0.dev20261101"
            ]
        );
        assert_eq!(builds[0], Build::Unfetched("0.13.1".into()));
        assert_eq!(builds[1], Build::Library(lib("0.14.0")));
        let err = resolve_libraries("0.14.0..0.11.0", &published, &fetched)
            .unwrap_err()
            .to_string();
        assert!(err.contains("backwards"), "{err}");
        let err = resolve_libraries("0.9.9..0.14.0", &published, &fetched)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("`0.9.9` is no known LiteRT-LM version"),
            "{err}"
        );
    }

    #[test]
    fn a_list_takes_versions_and_paths() {
        let published: Vec<String> = vec!["0.11.0".into()];
        let err =
            resolve_libraries("0.11.0,/nowhere/liblitert-lm.so", &published, &[]).unwrap_err();
        // A library that is not there is an engine failure, as `run --lib` makes it.
        assert!(matches!(err, BisectError::Library(_)), "{err}");
        assert!(
            err.to_string().contains("/nowhere/liblitert-lm.so"),
            "{err}"
        );
        let builds = resolve_libraries("0.11.0", &published, &[]).unwrap();
        assert_eq!(builds, [Build::Unfetched("0.11.0".into())]);
    }

    #[test]
    fn profiles_order_with_their_numbers_as_numbers() {
        let mut names = vec!["build-10", "build-9", "build-1", "base"];
        names.sort_by_key(|n| natural_key(n));
        assert_eq!(names, ["base", "build-1", "build-9", "build-10"]);
    }

    #[test]
    fn the_published_list_starts_at_the_first_release_with_a_c_library() {
        let list = published();
        assert_eq!(list.first().map(String::as_str), Some("0.11.0"));
        assert!(list.iter().any(|v| is_nightly(v)));
        let mut sorted = list.clone();
        sorted.sort_by(|a, b| compare_versions(a, b));
        assert_eq!(sorted, list);
    }
}
