//! `--record DB` and `history --db DB` (docs/results-db.md): simulated nightly builds recorded
//! as they run, whose history from the database must print exactly what history over their
//! folders prints; a database that cannot be written keeps the run. The same on PostgreSQL when
//! `LEAKLOOP_TEST_POSTGRES` names a server (.ci/run starts one; `LEAKLOOP_REQUIRE_POSTGRES=1`
//! forbids skipping).

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common::streams as text;
use crate::history::{leakloop, SCENARIO};

/// A fresh database on the test server, named after the test, or `None` (skipped visibly).
fn postgres_database(test: &str) -> Option<String> {
    let Some(base) = std::env::var("LEAKLOOP_TEST_POSTGRES")
        .ok()
        .filter(|u| !u.is_empty())
    else {
        leakloop::engine::skip_or_require(
            "LEAKLOOP_REQUIRE_POSTGRES",
            &format!(
                "{test}: PostgreSQL (set LEAKLOOP_TEST_POSTGRES=postgres://...; .ci/run starts one)"
            ),
        );
        return None;
    };
    let name = format!("{test}_{}", std::process::id());
    for (tool, args) in [
        (
            "dropdb",
            vec!["--if-exists", "--maintenance-db", &base, &name],
        ),
        ("createdb", vec!["--maintenance-db", &base, &name]),
    ] {
        let out = Command::new(tool)
            .args(&args)
            .output()
            .expect("createdb runs");
        assert!(out.status.success(), "{tool}: {:?}", text(&out));
    }
    // postgres://user@host:port/DB?params: the same server, the new database.
    let (head, params) = base.split_once('?').unwrap_or((&base, ""));
    let server = &head[..head
        .rfind('/')
        .filter(|&i| i > "postgres://".len())
        .unwrap_or(head.len())];
    let query = if params.is_empty() {
        String::new()
    } else {
        format!("?{params}")
    };
    Some(format!("{server}/{name}{query}"))
}

/// Runs build `i` into `root/bNN` (leaking from build `step_at` on) and records it in `db`.
fn record_build(root: &Path, db: &str, i: usize, step_at: usize) -> PathBuf {
    let dir = root.join(format!("b{i:02}"));
    let seed = (100 + i).to_string();
    let id = format!("b{i:02}");
    let date = format!("2026-03-{:02}", i + 1);
    let profile = if i >= step_at { "leaky" } else { "steady" };
    let out = leakloop(&[
        "run",
        SCENARIO,
        "--quiet",
        "--seed",
        &seed,
        "--profile",
        profile,
        "--build-id",
        &id,
        "--build-date",
        &date,
        "--out",
        dir.to_str().unwrap(),
        "--record",
        db,
    ]);
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    assert!(stderr.contains("recorded 1 run(s) in "), "{stderr}");
    dir
}

/// Thirteen builds (the nightlies of `history.rs`'s test, a leak from b07), recorded out of
/// date order, then history from the folders (in date order) and from the database: the same
/// text and the same exit code.
fn history_from_the_database_matches_the_folders(db: &str) {
    let root = tempfile::tempdir().unwrap();
    let mut dirs: Vec<PathBuf> = [3, 0, 1, 2, 12, 4, 5, 6, 7, 8, 9, 10, 11]
        .into_iter()
        .map(|i| record_build(root.path(), db, i, 7))
        .collect();
    dirs.sort();
    let mut args = vec!["history".to_owned()];
    args.extend(dirs.iter().map(|d| d.display().to_string()));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let from_folders = leakloop(&args);
    let from_db = leakloop(&["history", "--db", db, "--scenario", "history-sim"]);
    let (folders_out, folders_err) = text(&from_folders);
    let (db_out, db_err) = text(&from_db);
    assert_eq!(
        from_folders.status.code(),
        Some(1),
        "{folders_out}\n{folders_err}"
    );
    assert!(
        folders_out.contains("history: 13 builds (b00 .. b12)"),
        "{folders_out}"
    );
    assert!(folders_out.contains("from build b07"), "{folders_out}");
    assert_eq!(db_out, folders_out, "{db_err}");
    assert_eq!(from_db.status.code(), Some(1), "{db_err}");
}

#[test]
fn history_from_a_sqlite_database_prints_what_the_folders_print() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("results.sqlite");
    history_from_the_database_matches_the_folders(db.to_str().unwrap());
}

#[test]
fn history_from_a_postgres_database_prints_what_the_folders_print() {
    let Some(url) = postgres_database("history_from_postgres") else {
        return;
    };
    history_from_the_database_matches_the_folders(&url);
}

/// A database that cannot be opened does not stop the run: its folder is complete, and a
/// passing verdict becomes exit 4 with the reason on stderr.
#[test]
fn a_database_that_cannot_be_written_keeps_the_run_and_exits_4() {
    let root = tempfile::tempdir().unwrap();
    // A folder is no SQLite file.
    let db = root.path().join("not-a-file");
    std::fs::create_dir(&db).unwrap();
    let out_dir = root.path().join("run");
    let out = leakloop(&[
        "run",
        SCENARIO,
        "--quiet",
        "--out",
        out_dir.to_str().unwrap(),
        "--record",
        db.to_str().unwrap(),
    ]);
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(4), "{stdout}\n{stderr}");
    assert!(
        stderr
            .contains("error: 1 run(s) not recorded (their reports are written): results database"),
        "{stderr}"
    );
    assert!(out_dir.join("report.json").is_file());
    // history refuses what is not a database, as bad input.
    let out = leakloop(&["history", "--db", db.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2), "{:?}", text(&out));
    let missing = root.path().join("missing.sqlite");
    let out = leakloop(&["history", "--db", missing.to_str().unwrap()]);
    let (_, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("no such file"), "{stderr}");
    assert!(!missing.exists());
}

/// A suite records every scenario from its threads, and `LEAKLOOP_RECORD` stands for the flag.
#[test]
fn a_suite_records_each_scenario_through_the_environment() {
    let root = tempfile::tempdir().unwrap();
    let db = root.path().join("results.sqlite");
    let suite = root.path().join("suite");
    std::fs::create_dir(&suite).unwrap();
    let text_of = std::fs::read_to_string(crate::common::workspace().join(SCENARIO)).unwrap();
    for name in ["one", "two", "three"] {
        std::fs::write(
            suite.join(format!("{name}.yaml")),
            text_of.replace("name: history-sim", &format!("name: {name}")),
        )
        .unwrap();
    }
    let out = crate::common::leakloop_command()
        .args([
            "run",
            suite.to_str().unwrap(),
            "--quiet",
            "-j",
            "2",
            "--build-id",
            "b1",
        ])
        .args(["--out", root.path().join("out").to_str().unwrap()])
        .env("LEAKLOOP_RECORD", &db)
        .output()
        .unwrap();
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    assert!(stderr.contains("recorded 3 run(s) in "), "{stderr}");
    // One build only: history says it needs two, naming the database.
    let out = leakloop(&["history", "--db", db.to_str().unwrap()]);
    let (_, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("holds 1 build(s): history needs at least two"),
        "{stderr}"
    );
}
