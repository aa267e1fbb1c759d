//! Helpers for the report module's tests.

use std::path::{Path, PathBuf};

/// What a planted symlink points at: a file that must stay untouched.
pub(crate) const PRECIOUS: &str = "precious";

/// Plants `folder/name` as a symlink to a victim file (created beside `folder`, holding
/// [`PRECIOUS`]) and returns the victim's path.
pub(crate) fn plant_symlink(folder: &Path, name: &str) -> PathBuf {
    let parent = folder.parent().expect("a folder with a parent");
    let victim = parent.join(format!("victim-{name}"));
    std::fs::write(&victim, PRECIOUS).unwrap();
    std::fs::create_dir_all(folder).unwrap();
    std::os::unix::fs::symlink(&victim, folder.join(name)).unwrap();
    victim
}

/// Text a hostile driver, app or edited report could put in any name or message: raw HTML, a
/// Markdown heading and table break on a new line, backticks, ESC and NUL.
pub(crate) const HOSTILE: &str =
    "<script>alert(1)</script><img src=x onerror=alert(1)>\u{1b}[2J\u{0}\n# pwned | cell ``x`";

/// The leak run with [`HOSTILE`] text in every foreign string a renderer shows: the scenario,
/// backend name and version, a watched metric (in the samples, the scenario and the verdict),
/// an unbalanced ledger kind, an expectation, a survived engine error and the provenance.
pub(crate) fn hostile_run() -> (crate::runner::RunRecord, crate::analyze::Verdict) {
    use crate::engine::{EngineError, EngineErrorKind};
    let (mut record, mut verdict) = crate::report::examples::leak_run();
    let metric = format!("heap{HOSTILE}");
    record.scenario.name = format!("chat{HOSTILE}");
    record.backend.backend = format!("sim{HOSTILE}");
    record.backend.version = format!("1.0{HOSTILE}");
    record.samples.modify_each(|_, sample| {
        if let Some(&value) = sample.metrics.get("native_heap") {
            sample.metrics.insert(&metric, value);
        }
    });
    record.scenario.watch = vec![metric.clone(), "native_heap".to_owned()];
    if let Some(analysis) = verdict.metrics.get("native_heap").cloned() {
        verdict.metrics.insert(metric.clone(), analysis);
    }
    record
        .ledger
        .record_create(3, &format!("sim/<b>kind</b>{HOSTILE}"));
    for e in &mut verdict.expectations {
        if !e.passed {
            e.name = format!("{metric}.max_growth_per_turn");
            e.expected = format!("at most `1 MiB`{HOSTILE}");
            e.measured = format!("<i>2 MiB</i>{HOSTILE}");
            break;
        }
    }
    record.engine_errors = vec![(
        2,
        "generate".to_owned(),
        EngineError::new(
            EngineErrorKind::Generate,
            format!("failed: ```rm -rf```{HOSTILE}"),
        ),
    )];
    let (build, _) = crate::report::provenance::resolve_build(
        Some("nightly"),
        None,
        &|_: &str| None,
        std::time::SystemTime::now(),
    )
    .unwrap();
    let mut provenance =
        crate::report::provenance::collect(&record.scenario, &record.backend, &build, None);
    provenance.host.hostname = Some(format!("box<img src=x>{HOSTILE}"));
    record.provenance = Some(provenance);
    (record, verdict)
}
