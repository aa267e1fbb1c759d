use std::path::Path;

use super::error::DbErrorKind;
use super::schema::{CURRENT_VERSION, MIGRATIONS};
use super::store::{migrate, Value};
use super::*;
use crate::report::history::RunFigures;
use crate::report::test_support::hostile_run;

fn sqlite_file(dir: &Path) -> String {
    dir.join("results.sqlite").display().to_string()
}

/// The hostile leak run as recorded by `run`, with build `build`.
fn recorded(build: &str, date: &str) -> (RunRow, RunFigures) {
    let (mut record, verdict) = hostile_run();
    let provenance = record.provenance.as_mut().unwrap();
    provenance.build.id = Some(build.to_owned());
    provenance.build.date = Some(date.to_owned());
    let dir = Path::new("/nightly").join(build);
    let row = RunRow::of(RunSource::Run, &record, &verdict, Some(&dir), 1, None);
    let report = crate::report::ReportFile {
        format_version: crate::report::FORMAT_VERSION,
        leakloop_version: String::new(),
        record,
        verdict,
    };
    (row, RunFigures::of(&dir, &report))
}

#[test]
fn a_new_file_gets_the_current_schema_and_reopening_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let target = sqlite_file(dir.path());
    let mut store = open(&target).unwrap();
    assert_eq!(store.version().unwrap(), Some(CURRENT_VERSION));
    drop(store);
    let mut store = open(&target).unwrap();
    assert_eq!(store.version().unwrap(), Some(CURRENT_VERSION));
}

/// What history reads back from a recorded run is what it reads from the run's folder: the same
/// figures, verdict, completion and provenance (so the same label and date).
#[test]
fn history_reads_back_what_the_folder_gives() {
    let dir = tempfile::tempdir().unwrap();
    let target = sqlite_file(dir.path());
    let mut store = open(&target).unwrap();
    let (late, late_figures) = recorded("b2", "2026-01-02T00:00:00Z");
    let (early, early_figures) = recorded("b1", "2026-01-01T00:00:00Z");
    // Recorded out of order: builds come back by date.
    store.insert(std::slice::from_ref(&late)).unwrap();
    store.insert(std::slice::from_ref(&early)).unwrap();
    drop(store);
    let mut store = open_existing(&target).unwrap();
    let builds = read_builds(store.as_mut(), None).unwrap();
    let labels: Vec<String> = builds.iter().map(|b| b.label()).collect();
    assert_eq!(labels, ["b1", "b2"]);
    let scenario = &early.scenario;
    assert_eq!(builds[0].runs[scenario], vec![early_figures]);
    assert_eq!(builds[1].runs[scenario], vec![late_figures]);
    assert_eq!(builds[0].date().as_deref(), Some("2026-01-01T00:00:00Z"));
    // A scenario that never ran has no builds.
    assert!(read_builds(store.as_mut(), Some("nothing"))
        .unwrap()
        .is_empty());
    assert_eq!(
        read_builds(store.as_mut(), Some(scenario)).unwrap().len(),
        2
    );
}

/// A version 1 database (as the first leakloop with `--record` wrote it) keeps its rows through
/// every migration, reads in history, and records new runs afterwards.
#[test]
fn a_version_1_database_migrates_to_the_current_schema_with_its_rows() {
    let dir = tempfile::tempdir().unwrap();
    let target = sqlite_file(dir.path());
    let mut store = super::sqlite::SqliteStore::open(Path::new(&target)).unwrap();
    migrate(&mut store, 1).unwrap();
    assert_eq!(store.version().unwrap(), Some(1));
    let (old, old_figures) = recorded("b1", "2026-01-01T00:00:00Z");
    // Version 1's INSERT: every column but those added later.
    let mut columns = "recorded_at, source, scenario, scenario_file, scenario_sha256, build_id, \
                       build_date, ci_commit, leakloop_version, backend, engine_version, \
                       engine_library_sha256, model_sha256, host, run_dir, started_at, \
                       ended_at, turns_completed, completed, verdict, exit_code, provenance"
        .split(", ")
        .zip(old.run_values())
        .filter(|(c, _)| *c != "ci_commit")
        .collect::<Vec<_>>();
    let values: Vec<rusqlite::types::Value> = columns
        .iter()
        .map(|(_, v)| match v {
            Value::Text(Some(s)) => rusqlite::types::Value::Text(s.clone()),
            Value::Int(Some(i)) => rusqlite::types::Value::Integer(*i),
            Value::Real(Some(r)) => rusqlite::types::Value::Real(*r),
            _ => rusqlite::types::Value::Null,
        })
        .collect();
    let names: Vec<&str> = columns.drain(..).map(|(c, _)| c).collect();
    let placeholders: Vec<String> = (1..=names.len()).map(|i| format!("?{i}")).collect();
    let conn = rusqlite::Connection::open(&target).unwrap();
    conn.execute(
        &format!(
            "INSERT INTO runs ({}) VALUES ({})",
            names.join(", "),
            placeholders.join(", ")
        ),
        rusqlite::params_from_iter(values),
    )
    .unwrap();
    for m in old.metric_values(1) {
        let values: Vec<rusqlite::types::Value> = m
            .iter()
            .map(|v| match v {
                Value::Text(Some(s)) => rusqlite::types::Value::Text(s.clone()),
                Value::Int(Some(i)) => rusqlite::types::Value::Integer(*i),
                Value::Real(Some(r)) => rusqlite::types::Value::Real(*r),
                _ => rusqlite::types::Value::Null,
            })
            .collect();
        conn.execute(
            "INSERT INTO metrics VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
            rusqlite::params_from_iter(values),
        )
        .unwrap();
    }
    drop(conn);
    // Version 1 reads as it is, unchanged.
    let mut reader = open_existing(&target).unwrap();
    assert_eq!(reader.version().unwrap(), Some(1));
    let builds = read_builds(reader.as_mut(), None).unwrap();
    assert_eq!(builds[0].runs[&old.scenario], vec![old_figures.clone()]);
    drop(reader);
    // Opening it to record migrates it.
    let mut store = open(&target).unwrap();
    assert_eq!(store.version().unwrap(), Some(CURRENT_VERSION));
    let (new, new_figures) = recorded("b2", "2026-01-02T00:00:00Z");
    store.insert(std::slice::from_ref(&new)).unwrap();
    let builds = read_builds(store.as_mut(), None).unwrap();
    assert_eq!(builds.len(), 2);
    assert_eq!(builds[0].runs[&old.scenario], vec![old_figures]);
    assert_eq!(builds[1].runs[&new.scenario], vec![new_figures]);
    let conn = rusqlite::Connection::open(&target).unwrap();
    let commits: Vec<Option<String>> = conn
        .prepare("SELECT ci_commit FROM runs ORDER BY id")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(commits, [None, new.ci_commit.clone()]);
}

#[test]
fn a_database_of_a_newer_leakloop_or_of_another_program_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let target = sqlite_file(dir.path());
    drop(open(&target).unwrap());
    let conn = rusqlite::Connection::open(&target).unwrap();
    conn.execute("UPDATE schema_version SET version = 99", [])
        .unwrap();
    drop(conn);
    for result in [open(&target), open_existing(&target)] {
        let err = result.unwrap_err();
        assert!(
            matches!(err.kind, DbErrorKind::NewerSchema { found: 99, .. }),
            "{err}"
        );
    }
    let other = dir.path().join("other.sqlite").display().to_string();
    let conn = rusqlite::Connection::open(&other).unwrap();
    conn.execute("CREATE TABLE notes (text TEXT)", []).unwrap();
    drop(conn);
    let err = open(&other).unwrap_err();
    assert!(matches!(err.kind, DbErrorKind::NotOurs), "{err}");
    let missing = dir.path().join("missing.sqlite").display().to_string();
    let err = open_existing(&missing).unwrap_err();
    assert!(matches!(err.kind, DbErrorKind::Missing), "{err}");
    assert!(!Path::new(&missing).exists());
}

#[test]
fn a_url_password_never_reaches_a_message() {
    assert_eq!(
        super::error::shown_target("postgres://ci:s3cret@db.example:5432/nightly"),
        "postgres://ci:***@db.example:5432/nightly"
    );
    assert_eq!(
        super::error::shown_target("postgres://db.example/nightly"),
        "postgres://db.example/nightly"
    );
    assert_eq!(
        super::error::shown_target("results.sqlite"),
        "results.sqlite"
    );
}

const DOC: &str = include_str!("../../../docs/results-db.md");

/// docs/results-db.md lists every migration with what it adds.
#[test]
fn the_doc_lists_every_migration() {
    for m in MIGRATIONS {
        let row = format!("| {} | {} |", m.version, m.why);
        assert!(DOC.contains(&row), "docs/results-db.md lacks `{row}`");
    }
}

/// The SQL query docs/results-db.md shows runs against a recorded database and gives each
/// build's native_heap growth, oldest build first.
#[test]
fn the_doc_query_runs_against_a_recorded_database() {
    let query = DOC
        .split("```sql\n")
        .nth(1)
        .and_then(|rest| rest.split("```").next())
        .expect("docs/results-db.md shows a SQL query");
    let dir = tempfile::tempdir().unwrap();
    let target = sqlite_file(dir.path());
    let mut store = open(&target).unwrap();
    let (late, _) = recorded("b2", "2026-01-02T00:00:00Z");
    let (early, _) = recorded("b1", "2026-01-01T00:00:00Z");
    store.insert(std::slice::from_ref(&late)).unwrap();
    store.insert(std::slice::from_ref(&early)).unwrap();
    let growth = early
        .metrics
        .iter()
        .find(|m| m.metric == "native_heap")
        .expect("the leak run analyses native_heap")
        .growth_per_turn;
    let conn = rusqlite::Connection::open(&target).unwrap();
    let rows: Vec<(String, String, f64, String)> = conn
        .prepare(query)
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(2)?, r.get(3)?, r.get(6)?)))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(
        rows,
        [
            ("b1".into(), "growth".into(), growth, early.verdict.clone()),
            ("b2".into(), "growth".into(), growth, late.verdict.clone()),
        ]
    );
}

/// PostgreSQL, when `LEAKLOOP_TEST_POSTGRES` names a server (.ci/run starts one): the same
/// schema, migrations and history as SQLite, each test in a database of its own.
#[cfg(feature = "postgres")]
mod postgres {
    use super::*;

    /// A fresh database named `test` on the test server, as a URL; `None` when skipped.
    fn fresh_database(test: &str) -> Option<String> {
        let Some(base) = std::env::var("LEAKLOOP_TEST_POSTGRES")
            .ok()
            .filter(|u| !u.is_empty())
        else {
            crate::engine::skip_or_require(
                "LEAKLOOP_REQUIRE_POSTGRES",
                &format!(
                    "{test}: PostgreSQL (set LEAKLOOP_TEST_POSTGRES=postgres://...; .ci/run starts one)"
                ),
            );
            return None;
        };
        let name = format!("unit_{test}_{}", std::process::id());
        let mut admin = ::postgres::Client::connect(&base, ::postgres::NoTls).unwrap();
        // One statement per call: several in one call form a transaction, inside which
        // PostgreSQL runs neither.
        for statement in [
            format!("DROP DATABASE IF EXISTS {name}"),
            format!("CREATE DATABASE {name}"),
        ] {
            admin.batch_execute(&statement).unwrap();
        }
        let (head, params) = base.split_once('?').unwrap_or((&base, ""));
        let server = &head[..head.rfind('/').unwrap()];
        let query = if params.is_empty() {
            String::new()
        } else {
            format!("?{params}")
        };
        Some(format!("{server}/{name}{query}"))
    }

    /// PostgreSQL keeps no NUL: the hostile scenario's name comes back with U+FFFD.
    fn stored(name: &str) -> String {
        name.replace('\0', "\u{FFFD}")
    }

    #[test]
    fn postgres_reads_back_what_the_folder_gives() {
        let Some(url) = fresh_database("read_back") else {
            return;
        };
        let mut store = open(&url).unwrap();
        assert_eq!(store.version().unwrap(), Some(CURRENT_VERSION));
        let (late, late_figures) = recorded("b2", "2026-01-02T00:00:00Z");
        let (early, early_figures) = recorded("b1", "2026-01-01T00:00:00Z");
        store.insert(std::slice::from_ref(&late)).unwrap();
        store.insert(std::slice::from_ref(&early)).unwrap();
        drop(store);
        let mut store = open_existing(&url).unwrap();
        let builds = read_builds(store.as_mut(), None).unwrap();
        let labels: Vec<String> = builds.iter().map(|b| b.label()).collect();
        assert_eq!(labels, ["b1", "b2"]);
        let scenario = stored(&early.scenario);
        // Metric names are text too (the hostile one holds a NUL).
        let as_stored = |mut figures: RunFigures| {
            figures.metrics = std::mem::take(&mut figures.metrics)
                .into_iter()
                .map(|(name, m)| (stored(&name), m))
                .collect();
            figures
        };
        assert_eq!(builds[0].runs[&scenario], vec![as_stored(early_figures)]);
        assert_eq!(builds[1].runs[&scenario], vec![as_stored(late_figures)]);
        let only = read_builds(store.as_mut(), Some(&scenario)).unwrap();
        assert_eq!(only.len(), 2);
    }

    #[test]
    fn a_version_1_postgres_database_migrates_with_its_rows() {
        let Some(url) = fresh_database("migrate") else {
            return;
        };
        let mut store = super::super::postgres::PostgresStore::connect(&url).unwrap();
        migrate(&mut store, 1).unwrap();
        assert_eq!(store.version().unwrap(), Some(1));
        drop(store);
        let mut client = ::postgres::Client::connect(&url, ::postgres::NoTls).unwrap();
        client
            .batch_execute(
                "INSERT INTO runs (recorded_at, source, scenario, build_id, build_date, \
                 leakloop_version, backend, turns_completed, completed, verdict, exit_code) \
                 VALUES ('2026-01-01T00:00:00Z', 'run', 'chat', 'b1', '2026-01-01', '0.1.0', \
                 'sim', 16, 1, 'pass', 0);
                 INSERT INTO metrics (run_id, metric, class, growth_per_turn, verdict) \
                 SELECT id, 'native_heap', 'clean', 12.5, 'pass' FROM runs",
            )
            .unwrap();
        drop(client);
        let mut store = open(&url).unwrap();
        assert_eq!(store.version().unwrap(), Some(CURRENT_VERSION));
        let (new, _) = recorded("b2", "2026-01-02T00:00:00Z");
        store.insert(std::slice::from_ref(&new)).unwrap();
        let builds = read_builds(store.as_mut(), None).unwrap();
        assert_eq!(builds.len(), 2);
        let old = &builds[0].runs["chat"][0];
        assert_eq!(old.metrics["native_heap"].growth_per_turn, 12.5);
        assert!(old.completed);
    }
}
