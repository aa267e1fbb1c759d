//! junit.xml: one test suite per scenario, one test case per checked expectation, so that CI
//! systems and device farms list leak regressions as ordinary test failures. The run itself is a
//! test case named `engine`: it errors when the engine failed.

use quick_junit::{NonSuccessKind, Property, Report, TestCase, TestCaseStatus, TestSuite};

use crate::analyze::Verdict;
use crate::report::escape;
use crate::report::facts::{
    backend_line, engine_error_kind_name, engine_error_text, status_word, turns_line,
};
use crate::report::notes;
use crate::report::ReportError;
use crate::runner::{RunOutcome, RunRecord};

/// The name of the JUnit report (`<testsuites name=...>`).
const REPORT_NAME: &str = "leakloop";

/// The test suite of one run: its expectations and the engine test case.
pub fn junit_suite(record: &RunRecord, verdict: &Verdict) -> TestSuite {
    let scenario = &record.scenario.name;
    let mut suite = TestSuite::new(scenario.as_str());
    suite.add_properties([
        Property::new("backend", record.backend.backend.as_str()),
        Property::new("backend_version", record.backend.version.as_str()),
        Property::new("turns", turns_line(record)),
        Property::new("seed", record.scenario.seed.to_string()),
        Property::new("verdict", status_word(verdict.status)),
    ]);
    suite.add_test_case(engine_case(record));
    let below_limit = notes::growth_below_limit(verdict);
    for expectation in &verdict.expectations {
        let status = if expectation.passed {
            TestCaseStatus::success()
        } else {
            let turn = expectation
                .turn
                .map_or(String::new(), |t| format!(" (turn {t})"));
            let mut status = TestCaseStatus::non_success(NonSuccessKind::Failure);
            status
                .set_type(if expectation.inconclusive {
                    "inconclusive"
                } else {
                    "expectation"
                })
                .set_message(format!(
                    "expected {}; measured {}{turn}{}",
                    expectation.expected,
                    expectation.measured,
                    attribution_message(verdict, &expectation.name)
                        + &cl_message(verdict, &expectation.name)
                ))
                .set_description(format!(
                    "expectation: {}\nexpected: {}\nmeasured: {}\nturn: {}\n{}",
                    expectation.name,
                    expectation.expected,
                    expectation.measured,
                    expectation.turn.map_or("-".to_owned(), |t| t.to_string()),
                    attribution_description(verdict, &expectation.name)
                        + &cl_description(verdict, &expectation.name)
                ));
            status
        };
        let mut case = TestCase::new(expectation.name.as_str(), status);
        case.set_classname(scenario.as_str());
        // A test case holds no properties in the JUnit schema: what a reader must know of a
        // case goes to its output. A default says so, and a passing case of a metric that still
        // grows says that: growth below the limit is never silent.
        let mut out = String::new();
        if expectation.defaulted {
            out.push_str(&format!("default expectation ({})\n", notes::OPT_OUT));
        }
        let grows = below_limit.iter().find(|(metric, _)| {
            expectation.passed
                && expectation
                    .name
                    .strip_prefix(*metric)
                    .is_some_and(|rest| rest.starts_with('.'))
        });
        if let Some((_, text)) = grows {
            out.push_str(&format!("{text}\n"));
        }
        if !out.is_empty() {
            case.set_system_out(escape::xml(&out).into_owned());
        }
        suite.add_test_case(case);
    }
    if !record.engine_errors.is_empty() {
        let survived: Vec<String> = record
            .engine_errors
            .iter()
            .map(|(turn, step, e)| format!("turn {turn} ({step}): {}", engine_error_text(e)))
            .collect();
        // quick-junit drops control characters from system-err; escaped, they stay visible.
        suite.set_system_err(
            escape::xml(&format!(
                "engine errors the run survived:\n{}\n",
                survived.join("\n")
            ))
            .into_owned(),
        );
    }
    suite
}

/// The growing OpenCL creation sites when `expectation` is the ledger balance of every kind
/// (`balanced`) or of an OpenCL kind (`balanced.opencl/cl_mem`: that kind's sites).
fn cl_growing(verdict: &Verdict, expectation: &str) -> Vec<String> {
    let Some(c) = &verdict.cl_objects else {
        return Vec::new();
    };
    if expectation == "balanced" {
        return crate::attribution::cl_growing_lines(c, None);
    }
    match expectation
        .strip_prefix("balanced.")
        .and_then(|k| k.rsplit('/').next())
    {
        Some(kind) if kind.starts_with("cl_") => {
            crate::attribution::cl_growing_lines(c, Some(kind))
        }
        _ => Vec::new(),
    }
}

/// `; cl_mem 12 live: 12 created at f [lib] ...` for a failed balance, the fastest-growing
/// site (the whole document is escaped by [`escape::xml`]).
fn cl_message(verdict: &Verdict, expectation: &str) -> String {
    cl_growing(verdict, expectation)
        .into_iter()
        .next()
        .map_or(String::new(), |line| format!("; {line}"))
}

/// Every growing site, one per line, for the failure's description.
fn cl_description(verdict: &Verdict, expectation: &str) -> String {
    let lines = cl_growing(verdict, expectation);
    if lines.is_empty() {
        return String::new();
    }
    let mut out = "OpenCL objects by creation site:\n".to_owned();
    for line in lines {
        out.push_str(&format!("  {line}\n"));
    }
    out
}

/// The first attribution (native first, then the driver's) whose metric `expectation` is about
/// (`native_heap.growth_per_turn`).
fn attributed<'v>(
    verdict: &'v Verdict,
    expectation: &str,
) -> Option<&'v crate::attribution::Attribution> {
    verdict.attributions().find(|a| {
        a.metric.as_deref().is_some_and(|m| {
            expectation
                .strip_prefix(m)
                .is_some_and(|rest| rest.starts_with('.'))
        })
    })
}

/// `; native_heap +528 KiB/turn: 97 % in 3 sites (...); top: f [lib] <- ...` for a failed
/// expectation on the attributed metric (the whole document is escaped by [`escape::xml`]).
fn attribution_message(verdict: &Verdict, expectation: &str) -> String {
    let Some(a) = attributed(verdict, expectation) else {
        return String::new();
    };
    let top = crate::attribution::site_lines(a).into_iter().next();
    match top {
        Some(top) => format!("; {}; top site: {top}", crate::attribution::headline(a)),
        None => format!("; {}", crate::attribution::headline(a)),
    }
}

/// Every listed site, one per line, for the failure's description.
fn attribution_description(verdict: &Verdict, expectation: &str) -> String {
    let Some(a) = attributed(verdict, expectation) else {
        return String::new();
    };
    let mut out = format!("allocation sites: {}\n", crate::attribution::headline(a));
    for line in crate::attribution::site_lines(a) {
        out.push_str(&format!("  {line}\n"));
    }
    out
}

fn engine_case(record: &RunRecord) -> TestCase {
    let status = match &record.outcome {
        RunOutcome::Completed => TestCaseStatus::success(),
        RunOutcome::EngineFailed { turn, step, error } => {
            let mut status = TestCaseStatus::non_success(NonSuccessKind::Error);
            status
                .set_type(engine_error_kind_name(&error.kind))
                .set_message(format!(
                    "turn {turn} ({step}): {}",
                    engine_error_text(error)
                ))
                .set_description(format!(
                    "the engine failed in turn {turn} during {step}; {} completed\n",
                    turns_line(record)
                ));
            status
        }
        RunOutcome::Interrupted { signal, turn } => {
            let mut status = TestCaseStatus::non_success(NonSuccessKind::Error);
            status
                .set_type("interrupted")
                .set_message(format!("interrupted by {signal} in turn {turn}"))
                .set_description(format!(
                    "the run was stopped by {signal} in turn {turn} before it ended; {} \
                     completed; the expectations were checked on the samples taken so far\n",
                    turns_line(record)
                ));
            status
        }
    };
    let mut case = TestCase::new("engine", status);
    case.set_classname(record.scenario.name.as_str());
    case.set_system_out(
        escape::xml(&format!(
            "{}; {}\n",
            backend_line(record),
            turns_line(record)
        ))
        .into_owned(),
    );
    case
}

/// Renders junit.xml for several runs, one suite each.
pub fn render_junit_suites<'a>(
    runs: impl IntoIterator<Item = (&'a RunRecord, &'a Verdict)>,
) -> Result<String, ReportError> {
    let mut report = Report::new(REPORT_NAME);
    for (record, verdict) in runs {
        report.add_test_suite(junit_suite(record, verdict));
    }
    let xml = report.to_string().map_err(|e| ReportError::Render {
        artifact: "junit.xml",
        message: e.to_string(),
    })?;
    // quick-junit escapes markup but passes ESC and NUL through into names and messages.
    Ok(strip_testsuites_skipped(&escape::xml(&xml)))
}

/// Removes the `skipped` attribute of the `<testsuites>` element: the JUnit schema that Jenkins'
/// xUnit plugin validates against (`fixtures/junit/junit-10.xsd`) does not allow it there, and
/// quick-junit always writes it. leakloop never skips a test case, so it is always 0; the
/// `<testsuite>` elements keep theirs, which the schema allows.
pub(crate) fn strip_testsuites_skipped(xml: &str) -> String {
    let Some(start) = xml.find("<testsuites") else {
        return xml.to_owned();
    };
    let Some(len) = xml[start..].find('>') else {
        return xml.to_owned();
    };
    let tag = &xml[start..start + len];
    let Some(at) = tag.find(" skipped=\"") else {
        return xml.to_owned();
    };
    let value_len = tag[at + 10..].find('"').map_or(0, |n| n + 11);
    let cut = start + at;
    format!("{}{}", &xml[..cut], &xml[cut + value_len..])
}

/// Renders junit.xml for one run.
pub fn render_junit(record: &RunRecord, verdict: &Verdict) -> Result<String, ReportError> {
    render_junit_suites([(record, verdict)])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::examples::{clean_run, crashed_run, leak_run};
    use crate::report::redact::Redactor;

    fn redacted_junit(record: &RunRecord, verdict: &Verdict) -> String {
        let redactor = Redactor::for_record(record);
        let (record, verdict) = redactor.redact_run(record, verdict);
        redactor.redact_text(&render_junit(&record, &verdict).unwrap())
    }

    #[test]
    fn leak_run_junit() {
        let (record, verdict) = leak_run();
        let xml = redacted_junit(&record, &verdict);
        assert!(xml.contains(r#"failures="3""#), "{xml}");
        assert!(xml.contains(r#"errors="0""#), "{xml}");
        crate::report::golden!(insta::assert_snapshot!("junit_leak", xml));
    }

    #[test]
    fn clean_run_junit() {
        let (record, verdict) = clean_run();
        let xml = redacted_junit(&record, &verdict);
        assert!(
            xml.contains(r#"<testsuites name="leakloop" tests="4" failures="0" errors="0">"#),
            "{xml}"
        );
        crate::report::golden!(insta::assert_snapshot!("junit_clean", xml));
    }

    /// Jenkins' JUnit schema (fixtures/junit/junit-10.xsd) refuses `skipped` on `<testsuites>`,
    /// which quick-junit writes; `<testsuite>` keeps its own.
    #[test]
    fn testsuites_has_no_skipped_attribute_and_testsuite_keeps_it() {
        let (record, verdict) = clean_run();
        let xml = render_junit(&record, &verdict).unwrap();
        let testsuites = xml.lines().nth(1).unwrap();
        assert!(testsuites.starts_with("<testsuites "), "{xml}");
        assert!(!testsuites.contains("skipped"), "{testsuites}");
        assert!(
            xml.contains(r#"skipped="0" errors="0" failures="0""#),
            "{xml}"
        );
        let untouched = "<a/>";
        assert_eq!(strip_testsuites_skipped(untouched), untouched);
    }

    #[test]
    fn an_interrupted_run_is_an_error_test_case_naming_the_signal() {
        let (record, verdict) = crate::report::examples::interrupted_run();
        let xml = redacted_junit(&record, &verdict);
        assert!(xml.contains(r#"errors="1""#), "{xml}");
        assert!(
            xml.contains(r#"<error message="interrupted by SIGTERM in turn 5" type="interrupted""#),
            "{xml}"
        );
    }

    #[test]
    fn an_engine_failure_is_an_error_test_case() {
        let (record, verdict) = crashed_run();
        let xml = redacted_junit(&record, &verdict);
        assert!(xml.contains(r#"errors="1""#), "{xml}");
        assert!(
            xml.contains(r#"<error message="turn 4 (generate): crashed (signal 9 (SIGKILL))"#),
            "{xml}"
        );
        assert!(xml.contains("engine errors the run survived"), "{xml}");
    }

    #[test]
    fn several_runs_become_several_suites() {
        let (a, va) = leak_run();
        let (b, vb) = clean_run();
        let xml = render_junit_suites([(&a, &va), (&b, &vb)]).unwrap();
        assert_eq!(xml.matches("<testsuite ").count(), 2);
        assert!(
            xml.contains(r#"<testsuites name="leakloop" tests="9" failures="3""#),
            "{xml}"
        );
    }

    /// Regression (issue 20): an ESC in a backend name made the XML malformed.
    #[test]
    fn hostile_names_and_messages_keep_junit_well_formed() {
        let (record, verdict) = crate::report::test_support::hostile_run();
        let xml = render_junit(&record, &verdict).unwrap();
        let problems = crate::report::escape::check::xml_problems(&xml);
        assert!(problems.is_empty(), "{problems:#?}\n{xml}");
        assert!(xml.contains("chat&lt;script&gt;"), "{xml}");
        assert!(xml.contains("\\u{1b}[2J"), "{xml}");
    }
}
