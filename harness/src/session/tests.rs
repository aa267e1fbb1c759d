//! The session on the in-process simulator: the outcome's fields, the reports it writes, the
//! order in which the observer hears of it, typed errors that leave the folder released, the
//! baseline, and a run taken over through its [`InFlight`].

use std::cell::RefCell;
use std::path::{Path, PathBuf};

use crate::analyze::{Verdict, VerdictStatus};
use crate::engine::transport::BuildError;
use crate::report::{inspect_out_dir, RunState, JUNIT_XML, PLOT_SVG, REPORT_JSON, SUMMARY_MD};
use crate::runner::{NoObserver, RunOutcome, RunRecord};
use crate::scenario::{
    BackendKind, EngineSpec, Overrides, PromptSpec, Scenario, SessionOptions, Step,
};

use super::*;

/// `turns` open/send/generate/close turns on the simulator's `profile`, expected balanced.
fn sim(name: &str, profile: &str, turns: u32) -> Scenario {
    let turn = vec![
        Step::Open(SessionOptions::default()),
        Step::Send(PromptSpec::Text("Summarize the notes.".to_owned())),
        Step::Generate {
            max_output_tokens: 8,
        },
        Step::Close,
    ];
    let mut scenario = Scenario::new(name, EngineSpec::sim(profile), turns, turn);
    scenario.expect.balanced = Some(true);
    scenario
}

/// What the observer heard, in order.
#[derive(Debug, Default)]
struct Heard {
    events: Vec<String>,
    turns_ended: u32,
    /// Whether report.json existed when the verdict was told.
    report_at_verdict: Option<bool>,
}

impl SessionObserver for Heard {
    fn on_start(&mut self, scenario: &Scenario) {
        self.events.push(format!("start {}", scenario.name));
    }

    fn on_turn_end(&mut self, _turn: u32, _total: u32) {
        self.turns_ended += 1;
    }

    fn on_loop_end(&mut self) {
        self.events.push("loop end".to_owned());
    }

    fn on_verdict(&mut self, _record: &RunRecord, verdict: &Verdict, out: Option<&Path>) {
        self.events.push(format!("verdict {:?}", verdict.status));
        self.report_at_verdict = out.map(|dir| dir.join(REPORT_JSON).exists());
    }

    fn on_warning(&mut self, message: &str) {
        self.events.push(format!("warning {message}"));
    }

    fn on_note(&mut self, message: &str) {
        self.events.push(format!("note {message}"));
    }
}

#[test]
fn a_sim_session_judges_the_run_and_writes_every_report() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    let mut heard = Heard::default();
    let outcome = Session::new(sim("flat", "cpu-flat", 4))
        .out(&out)
        .build_stamp(Some("build-7".to_owned()), Some("2026-01-02".to_owned()))
        .run(&mut heard)
        .unwrap();

    assert_eq!(outcome.verdict.status, VerdictStatus::Pass);
    assert!(matches!(outcome.record.outcome, RunOutcome::Completed));
    assert!(!outcome.record.samples.is_empty());
    let provenance = outcome.provenance().expect("provenance collected");
    assert_eq!(provenance.build.id.as_deref(), Some("build-7"));
    assert!(outcome.warnings.is_empty(), "{:?}", outcome.warnings);

    let artifacts = outcome.artifacts.expect("an output folder was given");
    assert_eq!(artifacts.dir, out);
    assert!(artifacts.complete);
    let names: Vec<PathBuf> = [REPORT_JSON, JUNIT_XML, PLOT_SVG, SUMMARY_MD]
        .iter()
        .map(|n| out.join(n))
        .collect();
    assert_eq!(artifacts.reports, names);
    for path in artifacts.reports.iter().chain(artifacts.samples.iter()) {
        assert!(path.is_file(), "{} missing", path.display());
    }
    assert_eq!(artifacts.samples, Some(out.join(SAMPLES_STORE)));
    assert_eq!(
        inspect_out_dir(&out).unwrap().state,
        RunState::Ended,
        "the folder is released"
    );

    // The verdict is told before any report exists (a CLI prints it first).
    assert_eq!(
        heard.events,
        ["start flat", "loop end", "verdict Pass"],
        "{heard:?}"
    );
    assert_eq!(heard.turns_ended, 4);
    assert_eq!(heard.report_at_verdict, Some(false));
}

#[test]
fn a_session_without_a_folder_writes_nothing_and_a_leak_fails() {
    let outcome = Session::new(sim("forgets", "forgets-delete", 3))
        .run(&mut NoObserver)
        .unwrap();
    assert_eq!(outcome.verdict.status, VerdictStatus::Fail);
    assert!(outcome.artifacts.is_none());
    assert!(outcome.provenance().is_some());
}

#[test]
fn a_library_that_cannot_load_is_a_typed_error_and_the_folder_is_released() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    std::fs::create_dir(&out).unwrap();
    // An earlier run's verdict, which must not survive a run that could not start.
    std::fs::write(out.join(REPORT_JSON), "{}").unwrap();
    let not_a_library = tmp.path().join("liblitert-lm.so");
    std::fs::write(&not_a_library, "not a shared library").unwrap();
    let mut scenario = sim("bad-lib", "cpu-flat", 2);
    scenario.engine = EngineSpec {
        lib: Some(not_a_library),
        model: Some(tmp.path().join("model.litertlm")),
        isolate: false,
        ..EngineSpec::new(BackendKind::LitertLm)
    };

    let error = Session::new(scenario)
        .out(&out)
        .run(&mut NoObserver)
        .unwrap_err();

    match &error {
        SessionError::Start {
            backend, source, ..
        } => {
            assert_eq!(*backend, "litert-lm");
            assert!(matches!(source, BuildError::Engine(_)), "{source:?}");
        }
        other => panic!("expected a start error, got {other:?}"),
    }
    assert!(error.to_string().contains("bad-lib"), "{error}");
    assert!(!out.join(REPORT_JSON).exists());
    assert_eq!(inspect_out_dir(&out).unwrap().state, RunState::Ended);
}

#[test]
fn a_scenario_file_that_does_not_load_is_refused_after_the_claim() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    let error = Session::from_file(tmp.path().join("missing.yaml"), Overrides::default())
        .out(&out)
        .run(&mut NoObserver)
        .unwrap_err();
    assert!(matches!(error, SessionError::Scenario(_)), "{error:?}");
    assert_eq!(inspect_out_dir(&out).unwrap().state, RunState::Ended);
}

#[test]
fn a_stamp_given_resolved_is_recorded_as_it_is() {
    let build = crate::runner::BuildStamp {
        id: Some("suite-build".to_owned()),
        ..Default::default()
    };
    let outcome = Session::new(sim("flat", "cpu-flat", 1))
        .stamp(build.clone(), None)
        .run(&mut NoObserver)
        .unwrap();
    assert_eq!(outcome.provenance().unwrap().build, build);
}

#[test]
fn a_build_date_that_is_no_date_is_refused() {
    let error = Session::new(sim("flat", "cpu-flat", 1))
        .build_stamp(None, Some("yesterday".to_owned()))
        .run(&mut NoObserver)
        .unwrap_err();
    assert!(matches!(error, SessionError::BuildStamp(_)), "{error:?}");
}

#[test]
fn a_baseline_adds_its_checks_and_a_bad_one_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let old = tmp.path().join("old");
    let watched = || Scenario {
        watch: vec!["native_heap".to_owned()],
        ..sim("flat", "cpu-flat", 8)
    };
    Session::new(watched())
        .out(&old)
        .run(&mut NoObserver)
        .unwrap();

    let outcome = Session::new(watched())
        .baseline(&old, Some("4KiB".to_owned()))
        .run(&mut NoObserver)
        .unwrap();
    let names: Vec<&str> = outcome
        .verdict
        .expectations
        .iter()
        .map(|e| e.name.as_str())
        .collect();
    assert!(
        names.iter().any(|n| n.starts_with("baseline.")),
        "{names:?}"
    );

    // A baseline loaded by the caller (a suite loads it before claiming the folder) adds the
    // same checks.
    let loaded = Baseline::load(&old, &watched(), None).unwrap();
    let again = Session::new(watched())
        .with_baseline(loaded)
        .run(&mut NoObserver)
        .unwrap();
    let again: Vec<&str> = again
        .verdict
        .expectations
        .iter()
        .map(|e| e.name.as_str())
        .collect();
    assert_eq!(again, names);

    let error = Session::new(sim("other", "cpu-flat", 3))
        .baseline(&old, None)
        .run(&mut NoObserver)
        .unwrap_err();
    assert!(
        matches!(error, SessionError::Baseline(BaselineError::NotFound(_))),
        "{error:?}"
    );
    let error = Session::new(watched())
        .baseline(&old, Some("four".to_owned()))
        .run(&mut NoObserver)
        .unwrap_err();
    assert!(
        matches!(error, SessionError::Baseline(BaselineError::MinChange(_))),
        "{error:?}"
    );
}

/// Takes the run over from its observer after `at` turns, as a signal thread would.
struct Interrupter<'a> {
    in_flight: &'a InFlight,
    at: u32,
    judged: &'a RefCell<Option<Judged>>,
}

impl SessionObserver for Interrupter<'_> {
    fn on_turn_end(&mut self, turn: u32, _total: u32) {
        if turn == self.at {
            self.in_flight.interrupt(|interruption| match interruption {
                Interruption::During(pending) => {
                    *self.judged.borrow_mut() =
                        Some(pending.into_judged("SIGTERM", &mut NoObserver));
                }
                Interruption::BeforeStart => panic!("the run loop is going"),
            });
        }
    }
}

#[test]
fn an_interrupted_run_is_judged_on_the_samples_taken_and_written() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    let in_flight = InFlight::default();
    let judged = RefCell::new(None);
    let mut interrupter = Interrupter {
        in_flight: &in_flight,
        at: 2,
        judged: &judged,
    };
    // The loop still ends (nothing here exits the process), without its folder: the partial run
    // took it over.
    let finished = Session::new(sim("stopped", "cpu-flat", 6))
        .out(&out)
        .in_flight(&in_flight)
        .judge(&mut interrupter)
        .unwrap();
    assert!(finished.out_dir().is_none());

    let partial = judged.into_inner().expect("the run was taken over");
    assert_eq!(partial.out_dir(), Some(out.as_path()));
    assert!(matches!(
        &partial.record.outcome,
        RunOutcome::Interrupted { signal, .. } if signal == "SIGTERM"
    ));
    assert_eq!(partial.verdict.status, VerdictStatus::Interrupted);
    assert!(partial.record.provenance.is_some());
    assert!(!partial.record.samples.is_empty());
    let outcome = partial.write(&mut NoObserver);
    assert!(outcome.artifacts.unwrap().complete);
    assert!(out.join(REPORT_JSON).is_file());
    assert_eq!(inspect_out_dir(&out).unwrap().state, RunState::Ended);
}

/// A one-time limit that failed under attribution is named in a warning (the sources' own
/// memory is in the process); a growth limit is not, nor anything without attribution.
#[test]
fn one_time_limits_failed_under_attribution_are_named() {
    let (_, mut verdict) = crate::report::examples::clean_run();
    let failed = |name: &str| crate::analyze::ExpectationResult {
        name: name.to_owned(),
        passed: false,
        inconclusive: false,
        expected: String::new(),
        measured: String::new(),
        turn: None,
        defaulted: false,
    };
    verdict.expectations.push(failed("rss.warmup_budget"));
    verdict
        .expectations
        .push(failed("native_heap.max_growth_per_turn"));
    assert_eq!(one_time_limits_under_attribution(&verdict), None);
    verdict.attribution = Some(Box::new(crate::attribution::Attribution {
        source: "heaptrack".to_owned(),
        metric: None,
        metric_slope_bytes_per_turn: None,
        explained: None,
        sites: Vec::new(),
        growing_sites: 0,
        sites_seen: 0,
        turns: 0,
        notes: Vec::new(),
        unlisted: Vec::new(),
    }));
    let note = one_time_limits_under_attribution(&verdict).unwrap();
    assert!(
        note.starts_with("rss.warmup_budget failed with attribution on"),
        "{note}"
    );
    assert!(!note.contains("max_growth_per_turn"), "{note}");
}
