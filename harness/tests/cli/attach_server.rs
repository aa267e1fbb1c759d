//! A small HTTP chat server over LiteRT-LM's Python package (fixtures/attach/litert_server.py),
//! written the way servers usually are (the model loaded once, a conversation opened and closed
//! per request) and driven by its own load client, judged by attach: the clean server meets its
//! expectations, the variant that never closes its conversations fails them. Both skip visibly
//! without `litert_lm` (and fail then under `LEAKLOOP_REQUIRE_ENGINE=1`).

use leakloop::analyze::VerdictStatus;

use crate::attach::{attach_fixture, litert_lm_python_or_skip, run_attached};

#[test]
fn the_clean_litert_lm_server_passes_with_its_baseline_at_ready() {
    if !litert_lm_python_or_skip() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (code, text, report) = run_attached(&attach_fixture("litert-server.yaml"), dir.path());
    assert_eq!(code, Some(0), "{text}");
    assert_eq!(report.verdict.status, VerdictStatus::Pass, "{text}");
    let details = &report.record.backend.details;
    assert!(
        details["baseline_at"].starts_with("ready line"),
        "{details:?}"
    );
    // The baseline holds the loaded model: the interpreter alone is a few MiB.
    let rss = *report
        .record
        .samples
        .get(0)
        .unwrap()
        .metrics
        .get("rss")
        .unwrap();
    assert!(rss > 32 * 1024 * 1024, "baseline rss {rss}: {text}");
    let totals = &report.record.ledger.totals["attach/conversation"];
    assert_eq!(totals.created, totals.deleted, "{totals:?}");
    assert!(totals.created >= 35, "{totals:?}");
}

#[test]
fn the_litert_lm_server_that_never_closes_its_conversations_fails() {
    if !litert_lm_python_or_skip() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (code, text, report) = run_attached(
        &attach_fixture("litert-server-never-closed.yaml"),
        dir.path(),
    );
    assert_eq!(code, Some(1), "{text}");
    assert!(text.contains("anon_rss.max_growth_per_turn"), "{text}");
    let totals = &report.record.ledger.totals["attach/conversation"];
    assert_eq!(totals.deleted, 0, "{totals:?}");
    assert!(totals.created >= 35, "{totals:?}");
}
