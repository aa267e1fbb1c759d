//! `compare --attribute` on the real LiteRT-LM engine under heaptrack: the allocation sites that
//! grow in B and not in A. Needs heaptrack (`apt-get install heaptrack`;
//! `LEAKLOOP_REQUIRE_HEAPTRACK=1` makes its absence a failure), LiteRT-LM's 0.18.1 library
//! (`ci/fetch-litert-lm.sh`) and, for the binding, its Python package
//! (`LEAKLOOP_REQUIRE_ENGINE=1`); each is skipped visibly without them. The text is what is
//! checked: compare writes no report of its own (each side's report.json has its sites).

use std::path::PathBuf;

use crate::attribution::python_driver_file;
use crate::common::{leakloop_command, streams, workspace};

/// The fetched 0.18.1 release (it keeps its internal symbols, so that sites are named inside
/// LiteRT-LM), or `None` after a visible skip; also skips without heaptrack.
fn release_or_skip(test: &str) -> Option<PathBuf> {
    if !leakloop::attribution::heaptrack_or_skip(test) {
        return None;
    }
    let lib = workspace().join("target/litert-lm/0.18.1/liblitert-lm.so");
    if !lib.is_file() {
        leakloop::engine::skip_or_require(
            "LEAKLOOP_REQUIRE_ENGINE",
            &format!("{test}: no {} (run ci/fetch-litert-lm.sh)", lib.display()),
        );
        return None;
    }
    Some(lib)
}

/// `leakloop compare ARGS --attribute -q --turns 12` from the workspace root: its stdout, after
/// checking that both sides ran to a verdict (a leak fails its expectations, exit 1; a driver
/// that crashes at exit, after its last turn, fails its side's engine, exit 3).
fn compare_attributed(args: &[&std::ffi::OsStr]) -> String {
    let output = leakloop_command()
        .arg("compare")
        .args(args)
        .args(["--attribute", "-q", "--turns", "12"])
        .current_dir(workspace())
        .output()
        .unwrap();
    let (stdout, stderr) = streams(&output);
    assert!(
        matches!(output.status.code(), Some(0 | 1 | 3)),
        "{:?}\n{stdout}\n{stderr}",
        output.status
    );
    assert!(
        stdout.contains("Allocation sites, growth per turn"),
        "no attribution shown:\n{stdout}\n{stderr}"
    );
    stdout
}

/// The site lines under the group whose title starts `title` (`growing in B, not in A`).
fn group<'a>(stdout: &'a str, title: &str) -> Vec<&'a str> {
    let mut lines = stdout.lines().skip_while(|l| !l.starts_with(title));
    assert!(lines.next().is_some(), "no `{title}` in:\n{stdout}");
    lines.take_while(|l| l.starts_with("  ")).collect()
}

/// LiteRT-LM's Python binding, streamed replies cancelled at the 4th chunk: conversations closed
/// (A, `litert-py-cancel.yaml`) against conversations dropped with the cyclic collector off (B,
/// `fixtures/engines/litert-lm-python-dropped.yaml`). The conversation's sites in LiteRT-LM grow
/// in B only (measured: 9 sites, the KV cache's tensor buffers +512.1 KiB/turn first); the
/// driver's own Python sites grow a little in both (3 sites, +1.5 to +2.1 KiB/turn each).
#[test]
fn dropped_conversations_sites_grow_in_b_only() {
    let test = "dropped_conversations_sites_grow_in_b_only";
    if !leakloop::attribution::heaptrack_or_skip(test) || !crate::attach::litert_lm_python_or_skip()
    {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let scenario = python_driver_file(dir.path(), "fixtures/scenarios/litert-py-cancel.yaml");
    let engine = python_driver_file(dir.path(), "fixtures/engines/litert-lm-python-dropped.yaml");
    let stdout = compare_attributed(&[
        scenario.as_os_str(),
        "--engine".as_ref(),
        engine.as_os_str(),
    ]);
    let b_only = group(&stdout, "growing in B, not in A");
    let engine_site = |line: &&str| line.contains("[liblitert-lm.so]");
    assert!(b_only.first().is_some_and(engine_site), "{stdout}");
    assert!(
        b_only.iter().any(|l| l.contains("Conversation::Create")),
        "{stdout}"
    );
    assert!(
        !group(&stdout, "growing in both").iter().any(engine_site),
        "{stdout}"
    );
}

/// The conversation leak against itself (`litert-cpu-skip-close.yaml` on 0.18.1 twice): its
/// sites grow on both sides, matched across the two processes, and none is listed as growing on
/// one side only.
#[test]
fn a_leak_against_itself_lists_no_site_on_one_side_only() {
    let test = "a_leak_against_itself_lists_no_site_on_one_side_only";
    let Some(lib) = release_or_skip(test) else {
        return;
    };
    let stdout = compare_attributed(&[
        "fixtures/scenarios/litert-cpu-skip-close.yaml".as_ref(),
        "--lib".as_ref(),
        lib.as_os_str(),
        "--lib".as_ref(),
        lib.as_os_str(),
    ]);
    assert!(stdout.contains("growing in B, not in A: none"), "{stdout}");
    assert!(stdout.contains("growing in A, not in B: none"), "{stdout}");
    let both = group(&stdout, "growing in both");
    assert!(
        both.first()
            .is_some_and(|l| l.contains("[liblitert-lm.so]")),
        "{stdout}"
    );
}
