use std::time::Duration;

use rstest::rstest;

use crate::driver::check_input;
use crate::targets::report_error_is_located;
use crate::{
    fuzz, seed_corpus, workspace_root, FuzzSettings, Mutator, Outcome, Target, FUZZ_FIXTURES,
};
use leakloop::report::ReportError;

/// Every fixture and every input kept from an earlier finding is read without breaking a rule.
#[rstest]
#[case::scenario(Target::Scenario)]
#[case::trace(Target::Trace)]
#[case::report(Target::Report)]
#[case::dumpsys(Target::Dumpsys)]
#[case::suite(Target::Suite)]
#[case::markers(Target::Markers)]
#[case::replies(Target::Replies)]
fn seeds_and_kept_findings_break_no_rule(#[case] target: Target) {
    let corpus = seed_corpus(&workspace_root(), target);
    assert!(corpus.len() >= 3, "too few seeds for {}", target.name());
    for (path, bytes) in corpus {
        if let Err(finding) = check_input(target, &bytes) {
            panic!("{}: {}", path.display(), finding.describe());
        }
    }
}

/// The kept findings are seeds of the target they were found in.
#[test]
fn kept_findings_are_in_the_corpus() {
    let root = workspace_root();
    for target in Target::ALL {
        let folder = root.join(FUZZ_FIXTURES).join(target.name());
        let Ok(entries) = std::fs::read_dir(&folder) else {
            continue;
        };
        let corpus: Vec<_> = seed_corpus(&root, target)
            .into_iter()
            .map(|(p, _)| p)
            .collect();
        for entry in entries {
            let path = entry.unwrap().path();
            assert!(corpus.contains(&path), "{} is not replayed", path.display());
        }
    }
}

/// A short, fixed run of each target (the CI step runs longer, with a new seed each time).
#[rstest]
#[case::scenario(Target::Scenario)]
#[case::trace(Target::Trace)]
#[case::report(Target::Report)]
#[case::dumpsys(Target::Dumpsys)]
#[case::suite(Target::Suite)]
#[case::markers(Target::Markers)]
#[case::replies(Target::Replies)]
fn a_short_fixed_run_breaks_no_rule(#[case] target: Target) {
    let seeds: Vec<Vec<u8>> = seed_corpus(&workspace_root(), target)
        .into_iter()
        .map(|(_, b)| b)
        .collect();
    let settings = FuzzSettings {
        target,
        seed: 20261201,
        duration: Duration::from_secs(600),
        max_inputs: Some(seeds.len() as u64 + 300),
        findings_dir: None,
    };
    let report = fuzz(&settings, &seeds);
    assert_eq!(report.inputs, seeds.len() as u64 + 300);
    assert_eq!(report.accepted + report.refused, report.inputs);
    let findings: Vec<String> = report.findings.iter().map(|(f, _)| f.describe()).collect();
    assert!(findings.is_empty(), "{findings:#?}");
}

#[test]
fn the_mutator_is_deterministic_and_bounded() {
    let seeds = vec![b"name: a\nturns: 3\n".to_vec(), b"turn,rss\n0,1\n".to_vec()];
    let run = |seed| {
        let mut m = Mutator::new(Target::Scenario, seed);
        (0..200).map(|_| m.mutate(&seeds)).collect::<Vec<_>>()
    };
    assert_eq!(run(1), run(1));
    assert_ne!(run(1), run(2));
    assert!(run(3).iter().all(|i| i.len() <= crate::mutate::MAX_INPUT));
    // Mutations change the seeds (a mutator that returned its seeds would test nothing).
    assert!(run(4).iter().filter(|i| !seeds.contains(i)).count() > 150);
}

/// The rule "every error says where" is checked, not assumed: errors without a place are
/// findings.
#[rstest]
#[case::invalid_json(
    ReportError::Parse {
        path: "r.json".into(),
        line: 3,
        column: 1,
        field: None,
        message: "expected value".into(),
    },
    true
)]
#[case::no_line(
    ReportError::Parse {
        path: "r.json".into(),
        line: 0,
        column: 0,
        field: None,
        message: "something".into(),
    },
    false
)]
#[case::whole_file(
    ReportError::FormatVersion {
        path: "r.json".into(),
        message: "not a leakloop report: no `format_version` field".into(),
    },
    true
)]
#[case::nowhere(
    ReportError::Render {
        artifact: "report.json",
        message: "something went wrong".into(),
    },
    false
)]
fn report_errors_must_name_a_place(#[case] error: ReportError, #[case] located: bool) {
    assert_eq!(report_error_is_located(&error), located);
}

#[test]
fn csv_errors_name_their_line() {
    let outcome = check_input(Target::Trace, b"turn,rss\n0,1\n1,x\n").unwrap();
    let Outcome::Refused(message) = outcome else {
        panic!("{outcome:?}");
    };
    assert!(message.contains("line 3"), "{message}");
}

/// The report readers take the layout this build writes (format_version 2, compact, ledger runs)
/// and the one before it (version 1, per-turn ledger), through the real files.
#[rstest]
#[case::version_2("fixtures/fuzz/report/v2-forgets-delete.json")]
#[case::version_1("fixtures/traces/litert-cpu-reload-run1.report.json")]
fn both_report_format_versions_are_accepted(#[case] fixture: &str) {
    let bytes = std::fs::read(workspace_root().join(fixture)).unwrap();
    assert_eq!(Target::Report.run(&bytes), Outcome::Accepted, "{fixture}");
    assert_eq!(Target::Trace.run(&bytes), Outcome::Accepted, "{fixture}");
}
