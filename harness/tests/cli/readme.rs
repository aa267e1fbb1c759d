//! Every `leakloop` command line README.md shows, run, and those of the docs pages in [`PAGES`]
//! (real engines, the command table): the lines of their code blocks (`leakloop ...`,
//! `$ leakloop ...`, `cargo run -p leakloop -- ...`, continued with `\`) and the command forms of
//! the command table. A line must be accepted by the argument parser (it is first run
//! with `--help` added, which parses every argument before it), then it runs for real, from the
//! workspace root with its `--out` moved into a temporary folder, and must exit with the code the
//! README implies where it states one. A line needing what this machine lacks (a LiteRT-LM build,
//! Python) says `SKIPPED: ...`, or fails with `LEAKLOOP_REQUIRE_ENGINE=1` /
//! `LEAKLOOP_REQUIRE_PYTHON=1`. A form of the table is checked flag by flag against its
//! command's `--help`.

use std::path::Path;
use std::process::{Command, Output};

use leakloop::engine::skip_or_require;

use crate::common::{leakloop_command, stdout_and_stderr as text, workspace};
use crate::fixtures::expected_exit;

/// The pages whose command lines and command table this test runs: the README's tour, and the
/// pages the reference moved to that show commands (real engines' runs, compares and bisect; the
/// command table).
const PAGES: [&str; 3] = ["README.md", "docs/real-engines.md", "docs/commands.md"];

/// The text of every page in [`PAGES`], one after the other (each page's code blocks are closed).
fn readme() -> String {
    PAGES
        .iter()
        .map(|page| std::fs::read_to_string(workspace().join(page)).unwrap())
        .collect::<Vec<_>>()
        .join("\n")
}

/// The arguments (after the program) of every `leakloop` command line in README's code blocks.
fn code_block_lines(readme: &str) -> Vec<Vec<String>> {
    let mut lines = Vec::new();
    let mut in_block = false;
    let mut pending = String::new();
    for line in readme.lines() {
        if line.trim_start().starts_with("```") {
            in_block = !in_block;
            pending.clear();
            continue;
        }
        if !in_block {
            continue;
        }
        // A `#` after a space starts a shell comment.
        let line = line.find(" #").map_or(line, |i| &line[..i]).trim_end();
        if let Some(start) = line.strip_suffix('\\') {
            pending.push_str(start);
            pending.push(' ');
            continue;
        }
        let whole = format!("{pending}{line}");
        pending.clear();
        let whole = whole.trim().trim_start_matches("$ ");
        let args = ["cargo run -p leakloop -- ", "leakloop "]
            .iter()
            .find_map(|program| whole.strip_prefix(program));
        if let Some(args) = args {
            lines.push(args.split_whitespace().map(str::to_owned).collect());
        }
    }
    lines
}

/// The command forms of README's command table: the first code span of each row that starts
/// with `leakloop `, with `\|` read as `|`.
fn table_forms(readme: &str) -> Vec<String> {
    readme
        .lines()
        .filter_map(|l| l.strip_prefix("| `leakloop "))
        .filter_map(|rest| rest.split('`').next())
        .map(|form| form.replace("\\|", "|"))
        .collect()
}

/// What this machine lacks to run `args` as README shows it, if anything.
fn missing_resource(args: &[String]) -> Option<String> {
    let root = workspace();
    for arg in args {
        if let Some(version) = arg.strip_prefix("target/litert-lm/") {
            if !root.join(arg).join("liblitert-lm.so").is_file() {
                return Some(format!(
                    "LiteRT-LM {version} is not under target/litert-lm (ci/fetch-litert-lm.sh \
                     {version})"
                ));
            }
        }
    }
    if let Some(range) = flag_value(args, "--versions") {
        // Without --offline, bisect fetches every missing build: only a machine that holds
        // the whole range runs it.
        let from = range.split("..").next().unwrap_or_default();
        if !root.join("target/litert-lm").join(from).is_dir() {
            return Some(format!(
                "the LiteRT-LM builds {range} are not under target/litert-lm \
                 (ci/fetch-litert-lm.sh {from} ... nightly)"
            ));
        }
    }
    // LiteRT-LM's scenarios; the LiteRT Interpreter's (`fixtures/litert-interpreter/`) need
    // only Python and its package, checked below.
    let litert = args.iter().any(|a| {
        a.contains("litert-") && a.ends_with(".yaml") && !a.contains("litert-interpreter/")
    });
    if litert {
        if let Err(e) = leakloop::engine::litert_lm::discover_library(None) {
            return Some(format!("no LiteRT-LM library: {e} (ci/fetch-litert-lm.sh)"));
        }
    }
    let python = args.iter().any(|a| a == "python3") || args.iter().any(|a| a.contains("python"));
    if python && !runs("python3", &["--version"]) {
        return Some("python3 not found (install Python 3)".into());
    }
    if args.iter().any(|a| a.contains("litert-lm-python"))
        && !runs("python3", &["-c", "import litert_lm"])
    {
        return Some(
            "Python's litert_lm is not installed (python3 -m pip install litert-lm-api==0.18.1)"
                .into(),
        );
    }
    if args.iter().any(|a| a.contains("litert-interpreter"))
        && !runs("python3", &["-c", "import ai_edge_litert"])
    {
        return Some(
            "Python's ai_edge_litert is not installed (python3 -m pip install ai-edge-litert==2.3.0)"
                .into(),
        );
    }
    if args.iter().any(|a| a.contains("onnxruntime"))
        && !runs("python3", &["-c", "import onnxruntime"])
    {
        return Some(
            "Python's onnxruntime is not installed (python3 -m pip install onnxruntime==1.32.0)"
                .into(),
        );
    }
    if args.iter().any(|a| a.contains("llama"))
        && !runs("python3", &["-c", "import llama_cpp.server.app"])
    {
        return Some(
            "Python's llama_cpp is not installed (CMAKE_ARGS=-DGGML_NATIVE=OFF python3 -m pip \
             install 'llama-cpp-python[server]==0.3.36')"
                .into(),
        );
    }
    None
}

fn runs(program: &str, args: &[&str]) -> bool {
    Command::new(program)
        .args(args)
        .output()
        .is_ok_and(|o| o.status.success())
}

fn flag_value<'a>(args: &'a [String], flag: &str) -> Option<&'a str> {
    let at = args.iter().position(|a| a == flag)?;
    args.get(at + 1).map(String::as_str)
}

/// The exit code README states for `args`: a scenario's own `# Expected: ... (exit N)`, or what
/// the text around the line says (quoted here).
fn implied_exit(args: &[String]) -> Option<i32> {
    let sub = args.first()?.as_str();
    let has = |needle: &str| args.iter().any(|a| a.contains(needle));
    match sub {
        "run" => {
            let path = workspace().join(&args[1]);
            let text = std::fs::read_to_string(&path).ok()?;
            Some(expected_exit(&text, &path))
        }
        // "conforming: ... steps answered as docs/protocol.md says".
        "driver-check" => Some(0),
        // "exit 3: B's driver dies by SIGSEGV at exit".
        "compare" if has("litert-lm-python-dropped") => Some(3),
        // "A: PASS ... B: PASS".
        "compare" => Some(0),
        // "it exits 0 once the table is printed, whatever the builds' verdicts".
        "bisect" => Some(0),
        _ => None,
    }
}

/// `args` with every `--out DIR` moved under `tmp`, and `--help` added before a `--` (after
/// which the words are a driver's command line) or at the end.
fn with_help(args: &[String]) -> Vec<String> {
    let mut args = args.to_vec();
    let at = args.iter().position(|a| a == "--").unwrap_or(args.len());
    args.insert(at, "--help".into());
    args
}

fn with_out_in(args: &[String], tmp: &Path) -> Vec<String> {
    let mut args = args.to_vec();
    if let Some(at) = args.iter().position(|a| a == "--out") {
        if let Some(dir) = args.get_mut(at + 1) {
            *dir = tmp.join(dir.as_str()).display().to_string();
        }
    }
    args
}

fn leakloop(args: &[String]) -> Output {
    leakloop_command()
        .args(args)
        .current_dir(workspace())
        .output()
        .expect("leakloop runs")
}

#[test]
fn the_readme_shows_command_lines_and_forms_this_test_finds() {
    let readme = readme();
    let lines = code_block_lines(&readme);
    let subcommands: Vec<&str> = lines.iter().map(|l| l[0].as_str()).collect();
    for sub in ["run", "compare", "bisect", "driver-check"] {
        assert!(subcommands.contains(&sub), "no `{sub}` line in {lines:?}");
    }
    // The continued `compare ... \` lines are read whole.
    assert!(
        lines
            .iter()
            .any(|l| l[0] == "compare" && l.iter().any(|a| a == "--engine")),
        "{lines:?}"
    );
    assert!(table_forms(&readme).len() >= 10);
}

#[test]
fn every_command_line_in_the_readme_is_accepted_and_exits_as_the_readme_says() {
    for args in code_block_lines(&readme()) {
        let line = args.join(" ");
        let help = leakloop(&with_help(&args));
        assert_eq!(
            help.status.code(),
            Some(0),
            "README's `leakloop {line}` is not accepted:\n{}",
            text(&help)
        );
        if let Some(why) = missing_resource(&args) {
            let variable = if why.contains("ython") {
                "LEAKLOOP_REQUIRE_PYTHON"
            } else {
                "LEAKLOOP_REQUIRE_ENGINE"
            };
            skip_or_require(variable, &format!("README's `leakloop {line}`: {why}"));
            continue;
        }
        let tmp = tempfile::tempdir().unwrap();
        let output = leakloop(&with_out_in(&args, tmp.path()));
        let code = output.status.code();
        assert_ne!(
            code,
            Some(2),
            "README's `leakloop {line}` is refused:\n{}",
            text(&output)
        );
        if let Some(expected) = implied_exit(&args) {
            assert_eq!(
                code,
                Some(expected),
                "README's `leakloop {line}` should exit {expected}:\n{}",
                text(&output)
            );
        }
    }
}

#[test]
fn every_flag_of_the_readme_command_table_is_in_its_commands_help() {
    for form in table_forms(&readme()) {
        let words: Vec<&str> = form.split_whitespace().collect();
        // The command: its leading lower-case words (`bench detection`), before a placeholder
        // (`SCENARIO`) or an option.
        let command: Vec<&str> = words
            .iter()
            .take_while(|w| w.chars().all(|c| c.is_ascii_lowercase() || c == '-') && **w != "--")
            .copied()
            .collect();
        let mut args: Vec<String> = command.iter().map(|w| (*w).to_owned()).collect();
        args.push("--help".into());
        let help = leakloop(&args);
        let shown = text(&help);
        assert_eq!(help.status.code(), Some(0), "`{form}`:\n{shown}");
        let flags = form
            .split(|c: char| !(c.is_ascii_alphanumeric() || c == '-'))
            .filter(|w| w.starts_with('-') && w.len() >= 2 && *w != "--");
        for flag in flags {
            assert!(
                shown.contains(flag),
                "README's form `leakloop {form}` has `{flag}`, which `leakloop {}` does not \
                 list:\n{shown}",
                args.join(" ")
            );
        }
    }
}

/// A table form with its placeholders filled in (`SCENARIO` a simulator fixture, `[x]` as `x`,
/// `a|b` as `a`, `A.yaml` an engine file), for the parser to accept.
fn filled(form: &str) -> Vec<String> {
    let mut args = Vec::new();
    for word in form.split_whitespace() {
        let word = word.trim_matches(|c| c == '[' || c == ']');
        let word = word.split('|').next().unwrap_or_default();
        let word = word.trim_end_matches("...");
        let value = match word {
            "SCENARIO" => "fixtures/scenarios/forgets-delete.yaml",
            "A.yaml" | "B.yaml" => "fixtures/engines/sim-cpu-flat.yaml",
            "DIR" | "OLD_DIR" | "PATH" | "A" | "B" | "TRACE" => "x",
            "N" | "TURNS" | "K" => "2",
            "K/N" => "1/2",
            "DURATION" => "10s",
            "KEY=VALUE" => "k=1",
            "SIZE" => "4KiB",
            "NAME" => "app",
            "FROM..TO" => "build-0..build-1",
            "METRIC" => "rss",
            "ID" => "b1",
            "DATE" => "2026-01-01",
            "COMMAND" => "true",
            other => other,
        };
        if !value.is_empty() && value != "/" {
            args.push(value.to_owned());
        }
    }
    args
}

#[test]
fn every_form_of_the_readme_command_table_is_accepted() {
    for form in table_forms(&readme()) {
        let args = filled(&form);
        let help = leakloop(&with_help(&args));
        assert_eq!(
            help.status.code(),
            Some(0),
            "README's form `leakloop {form}` (as `leakloop {}`) is not accepted:\n{}",
            args.join(" "),
            text(&help)
        );
    }
}
