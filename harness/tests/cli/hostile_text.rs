//! Hostile text from a driver (issue 20, class 5): a backend name, a ledger kind and an error
//! message holding HTML, a Markdown heading and table break, backticks, ESC and NUL reach every
//! output of a real run as text: summary.md without raw HTML or an injected heading, plot.svg
//! and junit.xml well-formed XML, the terminal without an ESC that is not leakloop's own style.

use std::path::Path;
use std::process::Output;

use crate::common::{leakloop_command, stdout_and_stderr, workspace};

/// The hostile text, as a YAML double-quoted string (`\e` is ESC, `\0` NUL, `\n` a line feed).
const HOSTILE_YAML: &str =
    r#"<script>alert(1)</script><img src=x onerror=alert(1)>\e[2J\0\n# pwned | cell ``x`"#;

fn leakloop(args: &[&str]) -> Output {
    leakloop_command()
        .args(args)
        .env_remove("NO_COLOR")
        // leakloop's own styles stay, so that a foreign ESC could not hide among stripped ones.
        .env("CLICOLOR_FORCE", "1")
        .output()
        .expect("the leakloop binary runs")
}

fn text(path: &Path) -> &str {
    path.to_str().expect("temporary paths are UTF-8")
}

/// A scenario for the reference driver with `options` (YAML flow mapping entries).
fn scenario(dir: &Path, options: &str) -> std::path::PathBuf {
    let driver = workspace().join("drivers/reference_sim.py");
    let file = dir.join("hostile.yaml");
    std::fs::write(
        &file,
        format!(
            "name: hostile\nengine:\n  backend: exec\n  command: [python3, \"{}\"]\n  \
             options: {{{options}}}\n  call_timeout: 20s\nwarmup_turns: 1\nturns: 3\nturn:\n  \
             - open: {{}}\n  - send: {{prompt: \"hi\"}}\n  - generate: {{max_output_tokens: 4}}\n  \
             - close: {{}}\nsample: {{after: [load, close]}}\nwatch: [anon_rss]\n\
             expect:\n  balanced: true\n",
            driver.display()
        ),
    )
    .unwrap();
    file
}

/// What is wrong with `doc` as XML: a character XML 1.0 forbids, or a parse error.
fn xml_problems(doc: &str) -> Vec<String> {
    let mut problems = Vec::new();
    let forbidden = |c: char| c < ' ' && !matches!(c, '\t' | '\n' | '\r');
    if let Some(c) = doc.chars().find(|&c| forbidden(c)) {
        problems.push(format!("U+{:04X} is not allowed in XML", u32::from(c)));
    }
    let mut reader = quick_xml::Reader::from_str(doc);
    loop {
        match reader.read_event() {
            Ok(quick_xml::events::Event::Eof) => break,
            Ok(_) => {}
            Err(e) => {
                problems.push(format!("byte {}: {e}", reader.error_position()));
                break;
            }
        }
    }
    problems
}

/// What is wrong with summary.md: raw foreign HTML, an injected heading, a raw ESC or NUL.
fn markdown_problems(md: &str) -> Vec<String> {
    let mut problems = Vec::new();
    for tag in ["<script", "<img"] {
        if md.contains(tag) {
            problems.push(format!("raw {tag}"));
        }
    }
    if md.lines().any(|l| l.trim_start().starts_with("# pwned")) {
        problems.push("an injected heading".to_owned());
    }
    if md.contains(['\u{1b}', '\u{0}']) {
        problems.push("a raw ESC or NUL".to_owned());
    }
    problems
}

/// Every ESC in `terminal` starts one of leakloop's own SGR styles (`ESC [ digits ; m`).
fn foreign_escapes(terminal: &str) -> Vec<String> {
    terminal
        .match_indices('\u{1b}')
        .map(|(at, _)| &terminal[at + 1..])
        .filter(|rest| {
            let Some(body) = rest.strip_prefix('[') else {
                return true;
            };
            let end = body.find(|c: char| !(c.is_ascii_digit() || c == ';'));
            !matches!(end.map(|e| &body[e..e + 1]), Some("m"))
        })
        .map(|rest| rest.chars().take(12).collect())
        .collect()
}

fn check_outputs(out: &Path, run: &Output) {
    let all = stdout_and_stderr(run);
    let md = std::fs::read_to_string(out.join("summary.md")).unwrap();
    let problems = markdown_problems(&md);
    assert!(problems.is_empty(), "{problems:?}\n{md}");
    for file in ["plot.svg", "junit.xml"] {
        let doc = std::fs::read_to_string(out.join(file)).unwrap();
        let problems = xml_problems(&doc);
        assert!(problems.is_empty(), "{file}: {problems:?}");
    }
    assert!(!all.contains('\u{0}'), "{all}");
    let escapes = foreign_escapes(&all);
    assert!(escapes.is_empty(), "{escapes:?}\n{all}");
    let rendered = leakloop(&["report", text(out)]);
    let escapes = foreign_escapes(&stdout_and_stderr(&rendered));
    assert!(escapes.is_empty(), "report: {escapes:?}");
    let md = leakloop(&["report", text(out), "--format", "md", "--no-write"]);
    let problems = markdown_problems(&String::from_utf8_lossy(&md.stdout));
    assert!(problems.is_empty(), "report --format md: {problems:?}");
}

/// Regression (issue 20): a driver's backend name and ledger kind reached summary.md as raw
/// HTML and headings, and an ESC in the name made plot.svg malformed XML.
#[test]
fn a_hostile_backend_name_and_ledger_kind_stay_text_in_every_output() {
    let work = tempfile::tempdir().unwrap();
    let file = scenario(
        work.path(),
        &format!(
            "backend_name: \"drv{HOSTILE_YAML}\", ledger_kind: \"kind{HOSTILE_YAML}\", \
             skip_release: true"
        ),
    );
    let out = work.path().join("out");
    let run = leakloop(&["run", text(&file), "--out", text(&out)]);
    let all = stdout_and_stderr(&run);
    // The conversations are never released: the ledger fails the run.
    assert_eq!(run.status.code(), Some(1), "{all}");
    let md = std::fs::read_to_string(out.join("summary.md")).unwrap();
    assert!(md.contains("drv&lt;script&gt;"), "{md}");
    assert!(md.contains("kind&lt;script&gt;"), "{md}");
    for file in ["plot.svg", "junit.xml"] {
        let doc = std::fs::read_to_string(out.join(file)).unwrap();
        assert!(doc.contains("drv&lt;script&gt;"), "{file} lost the name");
    }
    check_outputs(&out, &run);
}

/// Regression (issue 20): an engine's error message with backticks and markup.
#[test]
fn a_hostile_error_message_stays_text_in_every_output() {
    let work = tempfile::tempdir().unwrap();
    let file = scenario(
        work.path(),
        &format!("backend_name: \"drv<b>\", generate_error: \"```boom``` {HOSTILE_YAML}\""),
    );
    let out = work.path().join("out");
    let run = leakloop(&["run", text(&file), "--out", text(&out)]);
    let all = stdout_and_stderr(&run);
    assert!(matches!(run.status.code(), Some(1 | 3)), "{all}");
    let md = std::fs::read_to_string(out.join("summary.md")).unwrap();
    assert!(md.contains("\\`\\`\\`boom"), "{md}");
    check_outputs(&out, &run);
}
