//! Numbers in a report.json edited within its types (issue 20, class 4): every numeric field of
//! the stored reports set to an extreme must never panic `report`, `analyze`, `history` or
//! `run --baseline`; a report whose numbers cannot be true is refused (exit 2) naming the file
//! and the field.

use std::path::Path;

use serde_json::Value;

use crate::common::{leakloop, stdout_and_stderr, workspace};

/// The stored reports mutated: a format 2 report (ledger runs) and a format 1 report (per-turn
/// ledger entries) of a real engine.
const REPORTS: [&str; 2] = [
    "fixtures/fuzz/report/v2-forgets-delete.json",
    "fixtures/traces/litert-cpu-reload-run1.report.json",
];

/// The extremes each numeric field is set to.
fn extremes() -> Vec<Value> {
    let mut values: Vec<Value> = [0u64, 1, u64::from(u32::MAX), 1 << 53, u64::MAX]
        .into_iter()
        .map(Value::from)
        .collect();
    values.extend([Value::from(-1), Value::from(1e308)]);
    values
}

/// Maps whose keys are names (kinds, metrics): one entry of each stands for the others.
const NAME_MAPS: [&str; 6] = [
    "totals",
    "runs",
    "metrics",
    "kinds",
    "details",
    "inline_profiles",
];

/// The JSON pointer of every numeric field, one entry standing for each array and name map.
fn numeric_fields(value: &Value, at: &str, out: &mut Vec<String>) {
    match value {
        Value::Number(_) => out.push(at.to_owned()),
        Value::Array(items) => {
            if let Some(first) = items.first() {
                numeric_fields(first, &format!("{at}/0"), out);
            }
        }
        Value::Object(map) => {
            let name_map = NAME_MAPS.iter().any(|m| at.ends_with(&format!("/{m}")));
            let keep = if name_map { 1 } else { usize::MAX };
            for (key, item) in map.iter().take(keep) {
                let key = key.replace('~', "~0").replace('/', "~1");
                numeric_fields(item, &format!("{at}/{key}"), out);
            }
        }
        _ => {}
    }
}

fn text(path: &Path) -> &str {
    path.to_str().expect("temporary paths are UTF-8")
}

/// Runs every command on the report in `dir` and returns what went wrong: a panic or an exit
/// code outside the documented ones. `run --baseline` (a simulator run of `scenario`) reads the
/// report as the others do but then uses only its verdict, so it runs for verdict fields only.
fn panics(dir: &Path, good: &Path, scenario: Option<&Path>) -> Vec<String> {
    let report = dir.join("report.json");
    let mut commands: Vec<Vec<&str>> = vec![
        vec!["report", text(dir)],
        vec!["analyze", text(&report)],
        vec!["history", text(good), text(dir)],
    ];
    if let Some(scenario) = scenario {
        commands.push(vec!["run", text(scenario), "-q", "--baseline", text(dir)]);
    }
    let mut problems = Vec::new();
    for args in commands {
        let output = leakloop(&args);
        let all = stdout_and_stderr(&output);
        let code = output.status.code();
        if !matches!(code, Some(0..=3)) || all.contains("panicked") {
            problems.push(format!("{} -> {code:?}: {}", args[0], all.trim()));
        }
    }
    problems
}

/// One mutated report: which file, which field, which value.
struct Case {
    file: &'static str,
    field: String,
    value: Value,
    report: Value,
    baseline: bool,
}

/// Finds every panic first: each numeric field of each stored report, at each extreme. The
/// cases run on a few threads: each is a handful of short processes.
#[test]
fn extreme_numbers_in_a_report_never_panic_a_command() {
    let work = tempfile::tempdir().unwrap();
    let scenario = workspace().join("fixtures/scenarios/forgets-delete.yaml");
    let mut cases = Vec::new();
    for file in REPORTS {
        let original: Value =
            serde_json::from_slice(&std::fs::read(workspace().join(file)).unwrap()).unwrap();
        let good = work.path().join(format!("good-{}", cases.len()));
        std::fs::create_dir(&good).unwrap();
        std::fs::write(good.join("report.json"), original.to_string()).unwrap();
        // `run --baseline` needs the baseline's own scenario: the simulator runs forgets-delete.
        let baseline = original["record"]["scenario"]["name"] == "forgets-delete";
        let mut fields = Vec::new();
        numeric_fields(&original, "", &mut fields);
        assert!(fields.len() > 30, "{file}: only {} numbers", fields.len());
        for field in fields {
            for value in extremes() {
                let mut report = original.clone();
                *report.pointer_mut(&field).unwrap() = value.clone();
                cases.push((
                    good.clone(),
                    Case {
                        file,
                        baseline: baseline && field.starts_with("/verdict/"),
                        field: field.clone(),
                        value,
                        report,
                    },
                ));
            }
        }
    }
    let total = cases.len();
    let next = std::sync::Mutex::new(cases.into_iter().enumerate());
    let problems = std::sync::Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        for _ in 0..4 {
            scope.spawn(|| loop {
                let Some((n, (good, case))) = next.lock().unwrap().next() else {
                    break;
                };
                let dir = work.path().join(format!("case-{n}"));
                std::fs::create_dir(&dir).unwrap();
                std::fs::write(dir.join("report.json"), case.report.to_string()).unwrap();
                let scenario = case.baseline.then_some(scenario.as_path());
                for problem in panics(&dir, &good, scenario) {
                    problems.lock().unwrap().push(format!(
                        "{} {} = {}: {problem}",
                        case.file, case.field, case.value
                    ));
                }
                std::fs::remove_dir_all(&dir).unwrap();
            });
        }
    });
    let problems = problems.into_inner().unwrap();
    assert!(
        problems.is_empty(),
        "{total} cases:\n{}",
        problems.join("\n")
    );
}

/// The reports that panicked before (fixtures/fuzz/report/hostile-*.json): each is refused
/// with exit 2 by every command that reads it, naming the file and the field.
///
/// `analyze` reads a report as a trace: the ledger is read the same way, but a warm-up longer
/// than the samples only leaves it nothing to judge (exit 0, each metric "too few samples").
#[rstest::rstest]
#[case::warmup_turns_overflow("hostile-warmup-turns.json", "record.scenario", false)]
#[case::format1_duplicate_turn("hostile-v1-duplicate-turn.json", "record.ledger", true)]
#[case::format1_last_turn("hostile-v1-turn-u32-max.json", "record.ledger", true)]
#[case::run_ends_before_it_starts("hostile-run-inverted.json", "record.ledger", true)]
fn a_report_with_impossible_numbers_is_refused_naming_the_field(
    #[case] name: &str,
    #[case] field: &str,
    #[case] analyze_refuses: bool,
) {
    let source = workspace().join("fixtures/fuzz/report").join(name);
    let work = tempfile::tempdir().unwrap();
    let dir = work.path().join("run");
    std::fs::create_dir(&dir).unwrap();
    std::fs::copy(&source, dir.join("report.json")).unwrap();
    let report = dir.join("report.json");
    let mut commands = vec![
        vec!["report", text(&dir)],
        vec!["history", text(&dir), text(&dir)],
    ];
    if analyze_refuses {
        commands.push(vec!["analyze", text(&report)]);
    }
    for args in commands {
        let output = leakloop(&args);
        let all = stdout_and_stderr(&output);
        assert_eq!(output.status.code(), Some(2), "{args:?}: {all}");
        assert!(all.contains(text(&report)), "{args:?} names no file: {all}");
        assert!(all.contains(field), "{args:?} names no field: {all}");
    }
}
