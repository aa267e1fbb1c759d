//! Command-line values (`leakloop run --turns 2 --backend opencl ...`) that replace a scenario's
//! own. They are applied to the raw scenario before validation, so an overridden scenario passes
//! through exactly the checks `leakloop check` makes, once.

use std::path::{Path, PathBuf};

use crate::scenario::error::ScenarioError;
use crate::scenario::model::{BackendKind, Device, Scenario, StopMode};
use crate::scenario::raw::RawScenario;

/// Values that replace the scenario's own; `None` keeps the scenario's.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Overrides {
    /// `engine.backend`. A different backend also drops the scenario's `profile` and an exec
    /// driver's keys (they belong
    /// to the scenario's own backend) and `isolate` (the new backend's default applies).
    pub backend: Option<BackendKind>,
    /// `engine.profile`.
    pub profile: Option<String>,
    /// `engine.model`, relative to the working directory (not the scenario's folder).
    pub model: Option<PathBuf>,
    /// `engine.lib`, relative to the working directory.
    pub lib: Option<PathBuf>,
    /// `engine.device`.
    pub device: Option<Device>,
    /// `engine.max_tokens`.
    pub max_tokens: Option<u32>,
    /// `turns`.
    pub turns: Option<u32>,
    /// `warmup_turns`.
    pub warmup_turns: Option<u32>,
    /// `seed`.
    pub seed: Option<u64>,
    /// `stop`.
    pub stop: Option<StopMode>,
    /// `engine.pid`: attach to this running process; replaces an attach engine's `command`.
    pub pid: Option<u32>,
    /// `max_turns`.
    pub max_turns: Option<u32>,
    /// `engine.attribute: true` (`run --attribute`).
    pub attribute: bool,
}

impl Overrides {
    /// Whether nothing is overridden.
    pub fn is_empty(&self) -> bool {
        *self == Overrides::default()
    }

    /// Only the values of `engine:` (for an engine read from its own file, as `compare --engine`
    /// does; the turn loop's values apply to the scenario around it).
    pub fn engine_only(&self) -> Overrides {
        Overrides {
            turns: None,
            warmup_turns: None,
            seed: None,
            stop: None,
            max_turns: None,
            ..self.clone()
        }
    }

    /// Writes the overridden values into `raw`.
    pub(crate) fn apply(&self, raw: &mut RawScenario) {
        let engine = &mut raw.engine;
        if let Some(backend) = self.backend {
            if backend != engine.backend {
                engine.backend = backend;
                engine.profile = None;
                engine.isolate = None;
                // An exec driver's keys belong to it too (`--backend` never selects exec).
                engine.command = None;
                engine.env = None;
                engine.cwd = None;
                engine.options = None;
                engine.opencl_interposer = None;
            }
        }
        if let Some(profile) = &self.profile {
            engine.profile = Some(profile.clone());
        }
        if self.attribute {
            engine.attribute = Some(true);
        }
        // Absolute, so that validation does not resolve them against the scenario's folder.
        if let Some(model) = &self.model {
            engine.model = Some(absolute_text(model));
        }
        if let Some(lib) = &self.lib {
            engine.lib = Some(absolute_text(lib));
        }
        if let Some(device) = self.device {
            engine.device = Some(device);
        }
        if let Some(max_tokens) = self.max_tokens {
            engine.max_tokens = Some(i64::from(max_tokens));
        }
        if let Some(turns) = self.turns {
            raw.turns = i64::from(turns);
        }
        if let Some(warmup_turns) = self.warmup_turns {
            raw.warmup_turns = Some(i64::from(warmup_turns));
        }
        if let Some(seed) = self.seed {
            raw.seed = Some(seed);
        }
        if let Some(stop) = self.stop {
            raw.stop = Some(stop);
        }
        if let Some(pid) = self.pid {
            // The process to attach to replaces the one the scenario would start; any other
            // backend refuses the key, blamed on the flag.
            if raw.engine.backend == BackendKind::Attach {
                raw.engine.command = None;
            }
            raw.engine.pid = Some(i64::from(pid));
        }
        if let Some(max_turns) = self.max_turns {
            raw.max_turns = Some(i64::from(max_turns));
        }
    }

    /// Puts the paths back exactly as they were given (validation saw them as text).
    pub(crate) fn restore_paths(&self, scenario: &mut Scenario) {
        if let Some(model) = &self.model {
            scenario.engine.model = Some(model.clone());
        }
        if let Some(lib) = &self.lib {
            scenario.engine.lib = Some(lib.clone());
        }
    }

    /// The flags given, as typed (`--turns 2 --profile nope`).
    fn flags(&self) -> Vec<(&'static str, String)> {
        let path = |p: &Path| p.display().to_string();
        [
            (
                "engine.backend",
                "--backend",
                self.backend.map(|b| b.as_str().to_owned()),
            ),
            ("engine.profile", "--profile", self.profile.clone()),
            ("engine.model", "--model", self.model.as_deref().map(path)),
            ("engine.lib", "--lib", self.lib.as_deref().map(path)),
            (
                "engine.device",
                "--device",
                self.device.map(|d| d.as_str().to_owned()),
            ),
            (
                "engine.max_tokens",
                "--max-tokens",
                self.max_tokens.map(|n| n.to_string()),
            ),
            ("turns", "--turns", self.turns.map(|n| n.to_string())),
            (
                "warmup_turns",
                "--warmup-turns",
                self.warmup_turns.map(|n| n.to_string()),
            ),
            ("seed", "--seed", self.seed.map(|n| n.to_string())),
            ("stop", "--stop", self.stop.map(|s| s.as_str().to_owned())),
            ("engine.pid", "--pid", self.pid.map(|n| n.to_string())),
            (
                "max_turns",
                "--max-turns",
                self.max_turns.map(|n| n.to_string()),
            ),
        ]
        .into_iter()
        .filter_map(|(key, flag, value)| value.map(|v| (key, format!("{flag} {v}"))))
        .collect()
    }

    /// Places a validation error: a value that came from a flag is blamed on the flag; any
    /// other error of an overridden scenario notes the flags it was checked with.
    pub(crate) fn explain(&self, err: ScenarioError) -> ScenarioError {
        let flags = self.flags();
        if flags.is_empty() {
            return err;
        }
        if let Some((_, flag)) = flags.iter().find(|(key, _)| err.key_path() == Some(*key)) {
            let flag = flag.clone();
            return err.blame_flag(flag);
        }
        let all: Vec<String> = flags.into_iter().map(|(_, f)| f).collect();
        err.note(format!(
            "checked with {} from the command line",
            all.join(" ")
        ))
    }
}

fn absolute_text(path: &Path) -> String {
    std::path::absolute(path)
        .unwrap_or_else(|_| path.to_owned())
        .to_string_lossy()
        .into_owned()
}

#[cfg(test)]
mod tests {
    use std::path::{Path, PathBuf};

    use super::*;
    use crate::scenario::load_scenario_with;

    fn fixture(name: &str) -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../fixtures/scenarios")
            .join(name)
    }

    #[test]
    fn fewer_turns_cannot_drop_a_scripted_fault() {
        let overrides = Overrides {
            turns: Some(2),
            ..Overrides::default()
        };
        let err = load_scenario_with(&fixture("fault-crash.yaml"), &overrides).unwrap_err();
        assert_eq!(err.key_path(), Some("faults[0].at_turn"), "{err}");
        assert!(
            err.to_string()
                .contains("= note: checked with --turns 2 from the command line"),
            "{err}"
        );
    }

    #[test]
    fn another_backend_is_checked_against_the_faults() {
        let overrides = Overrides {
            backend: Some(BackendKind::Opencl),
            ..Overrides::default()
        };
        let err =
            load_scenario_with(&fixture("fault-generate-error.yaml"), &overrides).unwrap_err();
        assert_eq!(err.key_path(), Some("faults[0].kind"), "{err}");
        assert!(err.message().contains("only the sim backend"), "{err}");
    }

    #[test]
    fn a_misspelt_profile_is_blamed_on_the_flag_with_a_suggestion() {
        let overrides = Overrides {
            profile: Some("cpu-flot".into()),
            ..Overrides::default()
        };
        let err =
            load_scenario_with(&fixture("flutter-gemma-cpu-flat.yaml"), &overrides).unwrap_err();
        assert_eq!(err.key_path(), Some("--profile cpu-flot"), "{err}");
        assert_eq!(err.suggestion(), Some("cpu-flat"), "{err}");
        assert_eq!(err.location(), None, "the file's line would mislead: {err}");
    }

    #[test]
    fn zero_max_tokens_is_blamed_on_the_flag() {
        let overrides = Overrides {
            max_tokens: Some(0),
            ..Overrides::default()
        };
        let err =
            load_scenario_with(&fixture("flutter-gemma-cpu-flat.yaml"), &overrides).unwrap_err();
        assert_eq!(err.key_path(), Some("--max-tokens 0"), "{err}");
    }

    /// Regression: a smaller context given on the command line was applied after the prompt-size
    /// check, so a prompt longer than `--max-tokens` reached the engine.
    #[test]
    fn a_smaller_context_is_checked_against_the_prompts() {
        let overrides = Overrides {
            max_tokens: Some(8),
            ..Overrides::default()
        };
        let err =
            load_scenario_with(&fixture("flutter-gemma-cpu-flat.yaml"), &overrides).unwrap_err();
        assert_eq!(err.key_path(), Some("turn[1].send.prompt"), "{err}");
        assert!(
            err.message()
                .contains("does not fit the engine's context of 8 tokens"),
            "{err}"
        );
        assert!(err.to_string().contains("--max-tokens 8"), "{err}");
    }

    /// Regression: a generated prompt the simulator only counts is made in memory by LiteRT-LM,
    /// so `--backend litert-lm` must meet that backend's cap on generated prompts.
    #[test]
    fn another_backend_is_checked_against_the_prompt_sizes() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("big-prompt.yaml");
        std::fs::write(
            &path,
            "name: big\nengine: {backend: sim, profile: cpu-flat, max_tokens: 100000000}\n\
             turns: 3\nturn:\n  - open: {}\n  - send: {tokens: 50000000}\n\
             \x20 - generate: {max_output_tokens: 8}\n  - close: {}\n",
        )
        .unwrap();
        load_scenario_with(&path, &Overrides::default()).expect("the simulator counts tokens");
        let overrides = Overrides {
            backend: Some(BackendKind::LitertLm),
            model: Some(PathBuf::from("models/tiny.litertlm")),
            ..Overrides::default()
        };
        let err = load_scenario_with(&path, &overrides).unwrap_err();
        assert_eq!(err.key_path(), Some("turn[1].send.tokens"), "{err}");
        assert!(err.message().contains("for the litert-lm backend"), "{err}");
        assert!(err.to_string().contains("--backend litert-lm"), "{err}");
    }

    #[test]
    fn accepted_overrides_replace_the_values_and_keep_paths_as_given() {
        let overrides = Overrides {
            backend: Some(BackendKind::LitertLm),
            model: Some(PathBuf::from("models/tiny.litertlm")),
            lib: Some(PathBuf::from("libs/liblitert-lm.so")),
            device: Some(Device::Gpu),
            max_tokens: Some(512),
            turns: Some(7),
            seed: Some(9),
            stop: Some(StopMode::Decided),
            ..Overrides::default()
        };
        let s = load_scenario_with(&fixture("flutter-gemma-cpu-flat.yaml"), &overrides).unwrap();
        assert_eq!(s.engine.backend, BackendKind::LitertLm);
        assert_eq!(
            s.engine.profile, None,
            "a sim profile does not follow to litert-lm"
        );
        assert!(s.engine.isolate, "real engines run isolated by default");
        assert_eq!(s.engine.model, Some(PathBuf::from("models/tiny.litertlm")));
        assert_eq!(s.engine.lib, Some(PathBuf::from("libs/liblitert-lm.so")));
        assert_eq!(s.engine.device, Device::Gpu);
        assert_eq!((s.engine.max_tokens, s.turns, s.seed), (512, 7, 9));
        assert_eq!(s.stop, StopMode::Decided);
    }

    /// A warm-up long enough for a cache that fills slowly, from the command line; one that
    /// cannot be (more turns than a run holds) is blamed on the flag.
    #[test]
    fn the_warm_up_is_overridden_and_a_bad_one_blames_the_flag() {
        let overrides = Overrides {
            warmup_turns: Some(16),
            ..Overrides::default()
        };
        let s = load_scenario_with(&fixture("flutter-gemma-cpu-flat.yaml"), &overrides).unwrap();
        assert_eq!(s.warmup_turns, 16);
        let overrides = Overrides {
            warmup_turns: Some(200_000),
            ..Overrides::default()
        };
        let err =
            load_scenario_with(&fixture("flutter-gemma-cpu-flat.yaml"), &overrides).unwrap_err();
        assert!(err.to_string().contains("--warmup-turns 200000"), "{err}");
    }

    #[test]
    fn a_new_backend_without_what_it_needs_is_refused() {
        let overrides = Overrides {
            backend: Some(BackendKind::LitertLm),
            ..Overrides::default()
        };
        let err =
            load_scenario_with(&fixture("flutter-gemma-cpu-flat.yaml"), &overrides).unwrap_err();
        assert_eq!(err.key_path(), Some("engine.model"), "{err}");
        assert!(err.to_string().contains("--backend litert-lm"), "{err}");
    }

    /// `--pid` attaches to a running process instead of the one the scenario starts: the
    /// scenario's `command` gives way; a scenario that cannot take it is blamed on the flag.
    #[test]
    fn a_pid_replaces_the_started_program_and_is_refused_where_it_means_nothing() {
        use crate::scenario::AttachProcess;
        let dir = tempfile::tempdir().unwrap();
        let write = |name: &str, text: &str| {
            let path = dir.path().join(name);
            std::fs::write(&path, text).unwrap();
            path
        };
        let overrides = Overrides {
            pid: Some(4242),
            ..Overrides::default()
        };
        let by_file = write(
            "file.yaml",
            "name: app\nengine:\n  backend: attach\n  command: [./app]\n  markers: {file: app.log}\nturns: 3\nwatch: [rss]\n",
        );
        let s = load_scenario_with(&by_file, &overrides).unwrap();
        let attach = s.engine.attach.unwrap();
        assert_eq!(attach.process, AttachProcess::Pid(4242));
        assert_eq!(
            load_scenario_with(&by_file, &Overrides::default())
                .unwrap()
                .engine
                .attach
                .unwrap()
                .process,
            AttachProcess::Command(vec!["./app".into()])
        );
        // Its markers on the program's stdout, which a running process does not give us.
        let by_stdout = write(
            "stdout.yaml",
            "name: app\nengine:\n  backend: attach\n  command: [./app]\nturns: 3\nwatch: [rss]\n",
        );
        let err = load_scenario_with(&by_stdout, &overrides).unwrap_err();
        assert_eq!(err.key_path(), Some("--pid 4242"), "{err}");
        assert!(err.message().contains("markers: {file: ...}"), "{err}");
        let err =
            load_scenario_with(&fixture("flutter-gemma-cpu-flat.yaml"), &overrides).unwrap_err();
        assert_eq!(err.key_path(), Some("--pid 4242"), "{err}");
        assert!(
            err.message().contains("belongs to `backend: attach`"),
            "{err}"
        );
    }
}
