//! The schema, as the list of migrations that build it: version 1 creates the tables, each
//! later version changes them. A database records its version in `schema_version`; opening one
//! for recording applies the migrations it lacks, each in its own transaction. The SQL is
//! shared by SQLite and PostgreSQL: only the id column differs ([`Dialect`]).
//! docs/results-db.md describes the current schema; a test there keeps it in step.

/// The SQL dialect of a store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    /// SQLite (an `INTEGER PRIMARY KEY` is the row id).
    #[cfg_attr(
        any(target_os = "android", target_vendor = "apple"),
        expect(dead_code, reason = "these builds have no SQLite")
    )]
    Sqlite,
    /// PostgreSQL (a `BIGSERIAL`).
    #[cfg_attr(
        not(feature = "postgres"),
        expect(dead_code, reason = "only the `postgres` feature connects to one")
    )]
    Postgres,
}

/// One step of the schema.
#[derive(Debug, Clone, Copy)]
pub struct Migration {
    /// The version the database has after it.
    pub version: u32,
    /// Why it exists (docs/results-db.md lists it; a test checks).
    #[cfg_attr(not(test), expect(dead_code, reason = "read by the docs test"))]
    pub why: &'static str,
    /// Its statements; `{ID}` stands for the dialect's auto-numbered primary key.
    pub sql: &'static str,
}

impl Migration {
    /// The statements for `dialect`.
    pub fn sql_for(&self, dialect: Dialect) -> String {
        let id = match dialect {
            Dialect::Sqlite => "INTEGER PRIMARY KEY",
            Dialect::Postgres => "BIGSERIAL PRIMARY KEY",
        };
        self.sql.replace("{ID}", id)
    }
}

/// Every migration, oldest first; the last one's version is [`CURRENT_VERSION`].
pub const MIGRATIONS: &[Migration] = &[
    Migration {
        version: 1,
        why: "the runs, their metrics and their expectations",
        sql: "
CREATE TABLE schema_version (version BIGINT NOT NULL);
INSERT INTO schema_version (version) VALUES (0);
CREATE TABLE runs (
    id {ID},
    recorded_at TEXT NOT NULL,
    source TEXT NOT NULL,
    scenario TEXT NOT NULL,
    scenario_file TEXT,
    scenario_sha256 TEXT,
    build_id TEXT,
    build_date TEXT,
    leakloop_version TEXT NOT NULL,
    backend TEXT NOT NULL,
    engine_version TEXT,
    engine_library_sha256 TEXT,
    model_sha256 TEXT,
    host TEXT,
    run_dir TEXT,
    started_at TEXT,
    ended_at TEXT,
    turns_completed BIGINT NOT NULL,
    completed BIGINT NOT NULL,
    verdict TEXT NOT NULL,
    exit_code BIGINT NOT NULL,
    provenance TEXT
);
CREATE TABLE metrics (
    run_id BIGINT NOT NULL REFERENCES runs (id),
    metric TEXT NOT NULL,
    class TEXT NOT NULL,
    growth_per_turn DOUBLE PRECISION NOT NULL,
    growth_low DOUBLE PRECISION,
    growth_high DOUBLE PRECISION,
    plateau_bytes BIGINT,
    verdict TEXT NOT NULL,
    PRIMARY KEY (run_id, metric)
);
CREATE TABLE expectations (
    run_id BIGINT NOT NULL REFERENCES runs (id),
    position BIGINT NOT NULL,
    name TEXT NOT NULL,
    outcome TEXT NOT NULL,
    expected TEXT NOT NULL,
    measured TEXT NOT NULL,
    turn BIGINT,
    PRIMARY KEY (run_id, position)
);
",
    },
    Migration {
        version: 2,
        why: "the commit under test, and indexes for history over a year of nightlies",
        sql: "
ALTER TABLE runs ADD COLUMN ci_commit TEXT;
CREATE INDEX runs_by_scenario ON runs (scenario, build_date);
CREATE INDEX runs_by_build ON runs (build_id);
",
    },
];

/// The schema version this leakloop writes.
pub const CURRENT_VERSION: u32 = MIGRATIONS[MIGRATIONS.len() - 1].version;
