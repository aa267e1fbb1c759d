//! `expect.max_live`: a bounded number of objects alive at once per ledger kind, next to
//! `balanced`: on the simulator (a forgotten delete exceeds its bound, a balanced kind stays
//! within it, a bound naming no counted kind fails) and in attach mode (an app that keeps its
//! last 5 conversations open by design passes with `max_live: {conversation: 5}` and fails
//! `balanced` without it).

use leakloop::report::{read_report, ReportFile};

use crate::common::{leakloop_command, stdout_and_stderr, workspace};
use crate::fixtures::{run, run_yaml};

/// The expectation named `name`: whether it held and what was measured.
fn expectation(report: &ReportFile, name: &str) -> (bool, String) {
    let found = report
        .verdict
        .expectations
        .iter()
        .find(|e| e.name == name)
        .unwrap_or_else(|| panic!("no `{name}` in {:#?}", report.verdict.expectations));
    (found.passed, found.measured.clone())
}

fn sim_scenario(profile: &str, expect: &str) -> String {
    format!(
        "name: max-live-{profile}\nseed: 1\nengine: {{backend: sim, profile: {profile}}}\n\
         warmup_turns: 1\nturns: 8\nturn:\n  - open: {{}}\n  - send: {{prompt: hi}}\n  \
         - generate: {{max_output_tokens: 8}}\n  - close: {{}}\nexpect:\n{expect}"
    )
}

#[test]
fn a_forgotten_delete_exceeds_its_bound_and_the_other_kinds_still_balance() {
    let dir = tempfile::tempdir().unwrap();
    let (code, text, report) = run_yaml(
        dir.path(),
        &sim_scenario(
            "forgets-delete",
            "  balanced: true\n  max_live: {conversation: 5}\n",
        ),
    );
    assert_eq!(code, Some(1), "{text}");
    let (passed, measured) = expectation(&report, "max_live.sim/conversation");
    assert!(!passed, "{measured}");
    // 1 warm-up turn and 8 measured turns each leave one conversation behind.
    assert!(measured.starts_with("at most 9 alive"), "{measured}");
    // The bounded kind is judged by its bound only; the rest balance.
    let (balanced, measured) = expectation(&report, "balanced");
    assert!(balanced, "{measured}");
    assert!(
        !report
            .verdict
            .expectations
            .iter()
            .any(|e| e.name == "balanced.sim/conversation"),
        "{:#?}",
        report.verdict.expectations
    );
}

#[test]
fn a_kind_that_is_closed_every_turn_stays_within_a_bound_of_one() {
    let dir = tempfile::tempdir().unwrap();
    let (code, text, report) = run_yaml(
        dir.path(),
        &sim_scenario(
            "cpu-flat",
            "  max_live: {conversation: 1, sim/session: 1}\n",
        ),
    );
    assert_eq!(code, Some(0), "{text}");
    for name in ["max_live.sim/conversation", "max_live.sim/session"] {
        let (passed, measured) = expectation(&report, name);
        assert!(passed, "{name}: {measured}");
    }
}

#[test]
fn a_bound_on_a_kind_the_run_never_counted_fails() {
    let dir = tempfile::tempdir().unwrap();
    let (code, text, report) = run_yaml(
        dir.path(),
        &sim_scenario("cpu-flat", "  max_live: {interpreter: 3}\n"),
    );
    assert_eq!(code, Some(1), "{text}");
    let (passed, measured) = expectation(&report, "max_live.interpreter");
    assert!(!passed);
    assert!(
        measured.contains("no ledger kind `interpreter` was counted"),
        "{measured}"
    );
}

#[test]
fn a_bad_kind_name_is_refused_at_its_key() {
    let dir = tempfile::tempdir().unwrap();
    let scenario = dir.path().join("scenario.yaml");
    std::fs::write(
        &scenario,
        sim_scenario("cpu-flat", "  max_live: {\"../x y\": 3}\n"),
    )
    .unwrap();
    let output = leakloop_command()
        .arg("check")
        .arg(&scenario)
        .output()
        .unwrap();
    let text = stdout_and_stderr(&output);
    assert_eq!(output.status.code(), Some(2), "{text}");
    assert!(text.contains("expect.max_live"), "{text}");
    assert!(text.contains("line 12"), "{text}");
}

#[test]
fn an_app_that_keeps_its_last_five_conversations_passes_its_bound_and_fails_balance() {
    if !crate::attach::python3_or_skip() {
        return;
    }
    let fixture = workspace().join("fixtures/attach/keeps-last-5.yaml");
    let dir = tempfile::tempdir().unwrap();
    let output = run(&fixture, &dir.path().join("bounded"));
    let text = stdout_and_stderr(&output);
    assert_eq!(output.status.code(), Some(0), "{text}");
    let report = read_report(&dir.path().join("bounded/report.json")).unwrap();
    let (passed, measured) = expectation(&report, "max_live.attach/conversation");
    assert!(passed, "{measured}");
    assert!(measured.starts_with("at most 5 alive"), "{measured}");

    // The same app judged by balance alone fails: 5 conversations are never deleted.
    let yaml = std::fs::read_to_string(&fixture)
        .unwrap()
        .replace("  max_live: {conversation: 5}\n", "")
        .replace(
            "keeps_last.py",
            &workspace()
                .join("fixtures/attach/keeps_last.py")
                .display()
                .to_string(),
        );
    let (code, text, report) = run_yaml(dir.path(), &yaml);
    assert_eq!(code, Some(1), "{text}");
    let (passed, measured) = expectation(&report, "balanced.attach/conversation");
    assert!(!passed && measured.contains("(+5 live)"), "{measured}");
}
