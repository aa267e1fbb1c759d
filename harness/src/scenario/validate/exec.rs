//! Checks of `engine: {backend: exec, command, env, cwd, options, opencl_interposer}`.

use std::path::{Path, PathBuf};

use super::Context;
use crate::scenario::error::ScenarioError;
use crate::scenario::raw::RawEngine;
use crate::scenario::{ExecSpec, OptionValue};

/// The keys only `backend: exec` takes.
const EXEC_KEYS: [&str; 5] = ["command", "env", "cwd", "options", "opencl_interposer"];

/// Refuses the keys only `backend: exec` takes on another backend.
pub(crate) fn refuse_exec_keys(raw: &RawEngine, cx: &Context<'_>) -> Result<(), ScenarioError> {
    let given = [
        raw.command.is_some(),
        raw.env.is_some(),
        raw.cwd.is_some(),
        raw.options.is_some(),
        raw.opencl_interposer.is_some(),
    ];
    if let Some(i) = given.iter().position(|g| *g) {
        let key = EXEC_KEYS[i];
        let owners = if key == "command" {
            "`backend: exec` (an external driver) or `backend: attach` (a process leakloop \
             does not drive)"
        } else {
            "`backend: exec` (an external driver)"
        };
        return Err(cx.invalid_key(
            &format!("engine.{key}"),
            format!(
                "`{key}` belongs to {owners}, not `{}`",
                raw.backend.as_str()
            ),
        ));
    }
    Ok(())
}

/// The driver of an exec engine. Relative paths (`cwd`, a program path with a `/`) resolve
/// against `folder`, the scenario's.
pub(crate) fn validate_exec(
    raw: &mut RawEngine,
    folder: &Path,
    cx: &Context<'_>,
) -> Result<ExecSpec, ScenarioError> {
    let command = raw.command.take();
    let env = raw.env.take();
    let cwd = raw.cwd.take();
    let options = raw.options.take();
    let opencl_interposer = raw.opencl_interposer.take();
    if raw.isolate == Some(false) {
        return Err(cx.invalid(
            "engine.isolate",
            "an exec engine always runs in its own process: drop `isolate: false`",
        ));
    }
    let Some(mut command) = command else {
        return Err(cx.invalid_key(
            "engine.command",
            "the exec backend needs `command`: the driver program and its arguments, \
             e.g. [python3, drivers/reference_sim.py]",
        ));
    };
    if command.is_empty() {
        return Err(cx.invalid(
            "engine.command",
            "`command` is empty: name the driver program",
        ));
    }
    for (i, arg) in command.iter().enumerate() {
        if i == 0 && arg.is_empty() {
            return Err(cx.invalid("engine.command[0]", "the program name is empty"));
        }
        if arg.contains('\0') {
            return Err(cx.invalid(
                &format!("engine.command[{i}]"),
                "contains a NUL character, which no program argument can hold",
            ));
        }
    }
    let resolve = |p: &str| -> PathBuf {
        let p = Path::new(p);
        if p.is_absolute() {
            p.to_owned()
        } else {
            folder.join(p)
        }
    };
    let env = env.unwrap_or_default();
    for (key, value) in &env {
        if key.is_empty() || key.contains(['=', '\0']) {
            return Err(cx.invalid_key(
                &format!("engine.env.{key}"),
                format!(
                    "`{}` is not a valid environment variable name (empty, or holds `=` or NUL)",
                    key.escape_debug()
                ),
            ));
        }
        if value.contains('\0') {
            return Err(cx.invalid(
                &format!("engine.env.{key}"),
                "the value contains a NUL character",
            ));
        }
    }
    let cwd = match cwd.as_deref() {
        Some("") => return Err(cx.invalid("engine.cwd", "`cwd` is empty")),
        Some(dir) if dir.contains('\0') => {
            return Err(cx.invalid("engine.cwd", "`cwd` contains a NUL character"))
        }
        Some(dir) => Some(resolve(dir)),
        // Like every relative path in a scenario, the driver's arguments are relative to the
        // scenario's folder.
        None => (!folder.as_os_str().is_empty()).then(|| folder.to_owned()),
    };
    // A relative program path with a `/` would otherwise resolve against whichever folder the
    // platform picks (the runner's or the driver's); pin it to the scenario's folder, as `cwd`.
    if command[0].contains('/') && !Path::new(&command[0]).is_absolute() {
        command[0] = resolve(&command[0]).display().to_string();
    }
    Ok(ExecSpec {
        command,
        env,
        cwd,
        options: options
            .unwrap_or_default()
            .into_iter()
            .map(|(key, value)| (key, OptionValue::from_json(value)))
            .collect(),
        opencl_interposer: opencl_interposer.unwrap_or(false),
    })
}

#[cfg(test)]
mod tests {
    use rstest::rstest;

    use super::*;
    use crate::scenario::{parse_scenario, Scenario, ScenarioErrorKind};

    fn parse(engine: &str) -> Result<Scenario, ScenarioError> {
        let text = format!("name: x\nengine: {engine}\nturns: 2\nturn:\n  - open:\n  - close:\n");
        parse_scenario(&text, Path::new("/scenarios/s.yaml"))
    }

    #[test]
    fn a_driver_with_env_cwd_and_options_is_read_with_paths_resolved() {
        let s = parse(
            "{backend: exec, command: [./drivers/x.py, --fast], env: {A: '1'}, cwd: ../run, \
             options: {grow_kib: 64, name: tiny}, opencl_interposer: true, model: m.bin}",
        )
        .unwrap();
        let exec = s.engine.exec.unwrap();
        assert_eq!(exec.command, ["/scenarios/./drivers/x.py", "--fast"]);
        assert_eq!(exec.env["A"], "1");
        assert_eq!(exec.cwd, Some(PathBuf::from("/scenarios/../run")));
        assert_eq!(exec.options["grow_kib"], OptionValue::from(64_u64));
        assert!(exec.opencl_interposer);
        assert!(s.engine.isolate);
        assert_eq!(s.engine.model, Some(PathBuf::from("/scenarios/m.bin")));
    }

    #[test]
    fn a_bare_program_name_is_left_to_path() {
        let s = parse("{backend: exec, command: [python3, drivers/x.py]}").unwrap();
        let exec = s.engine.exec.unwrap();
        assert_eq!(exec.command, ["python3", "drivers/x.py"]);
        // It runs in the scenario's folder, so its relative arguments are the scenario's.
        assert_eq!(exec.cwd, Some(PathBuf::from("/scenarios")));
    }

    #[rstest]
    #[case::no_command("{backend: exec}", "engine.command", "needs `command`")]
    #[case::empty_command("{backend: exec, command: []}", "engine.command", "is empty")]
    #[case::empty_program("{backend: exec, command: ['']}", "engine.command[0]", "empty")]
    #[case::nul("{backend: exec, command: [a, \"b\\0\"]}", "engine.command[1]", "NUL")]
    #[case::bad_env(
        "{backend: exec, command: [a], env: {'A=B': x}}",
        "engine.env.A=B",
        "not a valid"
    )]
    #[case::empty_cwd("{backend: exec, command: [a], cwd: ''}", "engine.cwd", "empty")]
    #[case::in_process(
        "{backend: exec, command: [a], isolate: false}",
        "engine.isolate",
        "own process"
    )]
    #[case::not_exec(
        "{backend: sim, profile: cpu-flat, command: [a]}",
        "engine.command",
        "belongs to `backend: exec`"
    )]
    #[case::env_not_exec("{backend: opencl, env: {A: b}}", "engine.env", "not `opencl`")]
    fn bad_drivers_are_located_errors(#[case] engine: &str, #[case] key: &str, #[case] says: &str) {
        let err = parse(engine).unwrap_err();
        assert_eq!(err.kind(), ScenarioErrorKind::Invalid, "{err}");
        assert!(err.message().contains(says), "{err}");
        assert_eq!(err.key_path(), Some(key), "{err}");
        assert!(err.location().is_some(), "{err}");
    }

    #[test]
    fn process_faults_are_refused_for_a_driver() {
        let text = "name: x\nengine: {backend: exec, command: [a]}\nturns: 2\nturn:\n  - open:\n  \
                    - generate: {max_output_tokens: 4}\n  - close:\nfaults:\n  - {at_turn: 1, kind: crash}\n";
        let err = parse_scenario(text, Path::new("/s.yaml")).unwrap_err();
        assert!(err.message().contains("external driver"), "{err}");
    }
}
