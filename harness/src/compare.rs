//! Compare: one scenario on two engines, side by side. The sides are either two builds of the
//! LiteRT-LM library ([`lib_sides`]) or two engine specs ([`engine_sides`]: the scenario's own
//! and an engine file, or two engine files), both checked before anything runs; each side then
//! runs through a [`Session`] ([`run_side`]), and [`spec_differences`] lists what tells the two
//! engines apart. `report::compare_runs` renders the table; `cli/compare.rs` parses the flags
//! and prints it.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use crate::analyze::Verdict;
use crate::engine::litert_lm::{check_library, discover_library, DiscoverError, LibraryRefusal};
use crate::report::{OutDir, ReportError};
use crate::runner::RunRecord;
use crate::scenario::{parse_scenario_with, EngineSpec, Overrides, Scenario, ScenarioError};
use crate::session::{Session, SessionError, SessionObserver};

/// Why two sides could not be compared. Each kind keeps the typed error of its cause, with the
/// side it concerns, so that the caller maps it to an exit code by its cause.
#[derive(Debug, thiserror::Error)]
pub(crate) enum CompareError {
    /// Not exactly two libraries.
    #[error("compare needs exactly two --lib (A and B) or one or two --engine, got {got} --lib")]
    LibCount {
        /// How many were given.
        got: usize,
    },
    /// Libraries swapped under a scenario whose backend loads none.
    #[error(
        "compare swaps the engine library, which only the litert-lm backend loads; {} uses \
         `{backend}` (--engine FILE swaps the whole engine)",
        scenario.display()
    )]
    NotLitert {
        /// The scenario file.
        scenario: PathBuf,
        /// Its backend.
        backend: &'static str,
    },
    /// Not one or two engine files.
    #[error(
        "compare takes one --engine (B, against the scenario's own engine) or two (A and B), got \
         {got}"
    )]
    EngineCount {
        /// How many were given.
        got: usize,
    },
    /// A side's `--lib` is no library.
    #[error("--lib for side {side}: {error}")]
    Library {
        /// `A` or `B`.
        side: &'static str,
        /// Why.
        error: DiscoverError,
    },
    /// A side's library cannot run a step of the scenario (`--lib for side A`, `side B`).
    #[error("{context}: {error}")]
    Refused {
        /// Which side, as the flag that chose it.
        context: String,
        /// What the library lacks.
        error: LibraryRefusal,
    },
    /// A side's engine file cannot be used.
    #[error("--engine for side {side}: {error}")]
    EngineFile {
        /// `A` or `B`.
        side: &'static str,
        /// Why.
        error: EngineFileError,
    },
    /// A side's output folder cannot be claimed.
    #[error(transparent)]
    Out(Box<ReportError>),
    /// A side could not run.
    #[error("side {side} ({what}): {error}")]
    Run {
        /// `A` or `B`.
        side: &'static str,
        /// What ran there.
        what: String,
        /// Why.
        error: Box<SessionError>,
    },
}

/// Why an engine file (`--engine FILE`) cannot be used.
#[derive(Debug, thiserror::Error)]
pub(crate) enum EngineFileError {
    /// It cannot be read.
    #[error("cannot read engine file {}: {error}", path.display())]
    Unreadable {
        /// The file.
        path: PathBuf,
        /// The file system's error.
        error: std::io::Error,
    },
    /// It is no YAML mapping.
    #[error("{}: an engine file is a YAML mapping with one key, `engine`: {error}", path.display())]
    NotAMapping {
        /// The file.
        path: PathBuf,
        /// The YAML parser's error.
        error: serde_yaml::Error,
    },
    /// It holds another key than `engine`.
    #[error("{}: an engine file holds only `engine:`, found `{key}`", path.display())]
    OtherKey {
        /// The file.
        path: PathBuf,
        /// The key, as YAML.
        key: String,
    },
    /// Its `engine:` is not a valid engine spec.
    #[error(transparent)]
    Scenario(#[from] ScenarioError),
}

/// One side of a comparison: the scenario as it runs there, and how to name it.
#[derive(Debug)]
pub(crate) struct Side {
    /// `A` or `B`.
    pub label: &'static str,
    /// The scenario on this side's engine.
    pub scenario: Scenario,
    /// What runs, for the line shown before the side starts.
    pub what: String,
}

/// `--lib A --lib B`: the scenario (from `file`) on two builds of the LiteRT-LM library. Both
/// libraries are checked before anything runs, so a typo in B does not cost a run of A.
pub(crate) fn lib_sides(
    file: &Path,
    scenario: &Scenario,
    libs: &[PathBuf],
) -> Result<[Side; 2], CompareError> {
    let [a, b] = libs else {
        return Err(CompareError::LibCount { got: libs.len() });
    };
    if !crate::backend::of(scenario.engine.backend).loads_library {
        return Err(CompareError::NotLitert {
            scenario: file.to_owned(),
            backend: scenario.engine.backend.as_str(),
        });
    }
    let side = |label: &'static str, lib: &PathBuf| -> Result<Side, CompareError> {
        let library = discover_library(Some(lib))
            .map_err(|error| CompareError::Library { side: label, error })?;
        check_library(scenario, Some(&library.path)).map_err(|error| CompareError::Refused {
            context: format!("--lib for side {label}"),
            error,
        })?;
        let mut scenario = scenario.clone();
        // Absolute, so that the worker process finds it whatever its working directory.
        let path = std::path::absolute(&library.path).unwrap_or_else(|_| library.path.clone());
        scenario.engine.lib = Some(path.clone());
        let what = format!("LiteRT-LM {} ({})", library.version, path.display());
        Ok(Side {
            label,
            scenario,
            what,
        })
    };
    Ok([side("A", a)?, side("B", b)?])
}

/// `--engine [A.yaml] B.yaml`: the scenario (from `file`) on two engine specs; `overrides` (the
/// engine ones) apply to an engine file too. Both sides are loaded and checked before anything
/// runs.
pub(crate) fn engine_sides(
    file: &Path,
    scenario: &Scenario,
    engines: &[PathBuf],
    overrides: &Overrides,
) -> Result<[Side; 2], CompareError> {
    let from_file = |label: &'static str, engine_file: &PathBuf| -> Result<Side, CompareError> {
        let engine = load_engine_file(engine_file, &overrides.engine_only())
            .map_err(|error| CompareError::EngineFile { side: label, error })?;
        let side = Side {
            label,
            what: format!("{} from {}", engine.backend.as_str(), engine_file.display()),
            scenario: Scenario {
                engine,
                ..scenario.clone()
            },
        };
        check_side(&side)?;
        Ok(side)
    };
    match engines {
        [b] => {
            let a = Side {
                label: "A",
                what: format!(
                    "{} from {}",
                    scenario.engine.backend.as_str(),
                    file.display()
                ),
                scenario: scenario.clone(),
            };
            check_side(&a)?;
            Ok([a, from_file("B", b)?])
        }
        [a, b] => Ok([from_file("A", a)?, from_file("B", b)?]),
        more => Err(CompareError::EngineCount { got: more.len() }),
    }
}

/// A side that loads LiteRT-LM's library must find one that can run the scenario (other backends
/// pass).
fn check_side(side: &Side) -> Result<(), CompareError> {
    check_library(&side.scenario, None)
        .map(|_| ())
        .map_err(|error| CompareError::Refused {
            context: format!("side {}", side.label),
            error,
        })
}

/// Reads an engine file: a YAML mapping whose only key is `engine`, written as in a scenario
/// (relative paths resolve against the file's folder). It is validated by the scenario loader,
/// with a one-turn loop appended, so its errors point at its own lines.
/// The engine's values are replaced by `overrides` before validation.
fn load_engine_file(file: &Path, overrides: &Overrides) -> Result<EngineSpec, EngineFileError> {
    let text = std::fs::read_to_string(file).map_err(|error| EngineFileError::Unreadable {
        path: file.to_owned(),
        error,
    })?;
    let keys: serde_yaml::Mapping =
        serde_yaml::from_str(&text).map_err(|error| EngineFileError::NotAMapping {
            path: file.to_owned(),
            error,
        })?;
    if let Some(other) = keys.keys().find(|k| k.as_str() != Some("engine")) {
        return Err(EngineFileError::OtherKey {
            path: file.to_owned(),
            key: serde_yaml::to_string(other)
                .unwrap_or_default()
                .trim()
                .to_owned(),
        });
    }
    let name = file
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let loop_text = format!(
        "{text}\nname: {}\nturns: 1\nturn: [{{open: {{}}}}, {{close: {{}}}}]\n",
        serde_json::to_string(&name).unwrap_or_default()
    );
    Ok(parse_scenario_with(&loop_text, file, overrides)?.engine)
}

/// Runs one side's scenario through a [`Session`] (its reports into `out` when given) and
/// returns its record and verdict; errors say which side failed.
pub(crate) fn run_side(
    side: Side,
    out: Option<&Path>,
    observer: &mut dyn SessionObserver,
) -> Result<(RunRecord, Verdict), CompareError> {
    let Side {
        label,
        scenario,
        what,
    } = side;
    let out = out
        .map(OutDir::claim)
        .transpose()
        .map_err(|e| CompareError::Out(Box::new(e)))?;
    let outcome = Session::new(scenario)
        .claimed_out(out)
        .run(observer)
        .map_err(|error| CompareError::Run {
            side: label,
            what,
            error: Box::new(error),
        })?;
    Ok((outcome.record, outcome.verdict))
}

/// Every value that tells the two sides' engines apart: the engine specs as they ran
/// (`engine.model`, `engine.exec.options.threads`, ...) and what each engine said about itself
/// (`backend.version`, `backend.details.library`, ...), as rows of name, A's value, B's value
/// (`-` where a side has none).
pub(crate) fn spec_differences(a: &RunRecord, b: &RunRecord) -> Vec<[String; 3]> {
    let fields = |record: &RunRecord| {
        let mut fields = BTreeMap::new();
        if let Ok(engine) = serde_json::to_value(&record.scenario.engine) {
            flatten("engine", &engine, &mut fields);
        }
        if let Ok(backend) = serde_json::to_value(&record.backend) {
            flatten("backend", &backend, &mut fields);
        }
        fields
    };
    let (fa, fb) = (fields(a), fields(b));
    let names: BTreeSet<&String> = fa.keys().chain(fb.keys()).collect();
    let shown = |value: Option<&String>| value.cloned().unwrap_or_else(|| "-".to_owned());
    names
        .into_iter()
        .filter(|name| fa.get(*name) != fb.get(*name))
        .map(|name| [name.clone(), shown(fa.get(name)), shown(fb.get(name))])
        .collect()
}

/// `value`'s scalars under dotted names starting with `prefix`; nulls are left out, so that an
/// absent value and a null one read the same.
fn flatten(prefix: &str, value: &serde_json::Value, into: &mut BTreeMap<String, String>) {
    match value {
        serde_json::Value::Null => {}
        serde_json::Value::Object(map) => {
            for (key, value) in map {
                flatten(&format!("{prefix}.{key}"), value, into);
            }
        }
        serde_json::Value::Array(items) => {
            let all_scalars = items.iter().all(|v| !v.is_object() && !v.is_array());
            if all_scalars {
                let joined: Vec<String> = items.iter().map(scalar_text).collect();
                into.insert(prefix.to_owned(), joined.join(" "));
            } else {
                for (i, item) in items.iter().enumerate() {
                    flatten(&format!("{prefix}.{i}"), item, into);
                }
            }
        }
        scalar => {
            into.insert(prefix.to_owned(), scalar_text(scalar));
        }
    }
}

/// A JSON scalar as a person writes it: strings without quotes.
fn scalar_text(value: &serde_json::Value) -> String {
    match value {
        serde_json::Value::String(text) => text.clone(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_engine_file_with_another_key_or_no_mapping_is_refused_by_name() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("b.yaml");
        std::fs::write(&file, "engine: {backend: sim}\nturns: 3\n").unwrap();
        let err = load_engine_file(&file, &Overrides::default()).unwrap_err();
        assert!(
            matches!(&err, EngineFileError::OtherKey { key, .. } if key == "turns"),
            "{err:?}"
        );
        std::fs::write(&file, "- a list\n").unwrap();
        let err = load_engine_file(&file, &Overrides::default()).unwrap_err();
        assert!(
            matches!(err, EngineFileError::NotAMapping { .. }),
            "{err:?}"
        );
        let err =
            load_engine_file(&dir.path().join("gone.yaml"), &Overrides::default()).unwrap_err();
        assert!(
            err.to_string().starts_with("cannot read engine file "),
            "{err}"
        );
    }

    #[test]
    fn flattening_drops_nulls_and_joins_scalar_lists() {
        let value = serde_json::json!({"a": null, "b": {"c": [1, "x"]}, "d": [{"e": true}]});
        let mut fields = BTreeMap::new();
        flatten("engine", &value, &mut fields);
        let fields: Vec<(&str, &str)> = fields
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        assert_eq!(fields, [("engine.b.c", "1 x"), ("engine.d.0.e", "true")]);
    }
}
