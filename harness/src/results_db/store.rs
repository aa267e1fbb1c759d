//! The one interface both databases implement ([`Store`]), the statements they share, and
//! [`open`]: a `postgres://` URL is PostgreSQL, anything else a SQLite file.

use std::path::Path;

use super::error::{DbError, DbErrorKind};
use super::row::RunRow;
use super::schema::{Dialect, CURRENT_VERSION, MIGRATIONS};

/// A value bound to a statement, whatever the database.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Value {
    Text(Option<String>),
    Int(Option<i64>),
    Real(Option<f64>),
}

/// One run as history reads it back.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct RunHead {
    pub id: i64,
    pub scenario: String,
    pub build_id: Option<String>,
    pub build_date: Option<String>,
    pub run_dir: Option<String>,
    pub completed: bool,
    pub verdict: String,
    pub provenance: Option<String>,
}

/// One metric's figures as history reads them back.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct MetricFigure {
    pub run_id: i64,
    pub metric: String,
    pub growth_per_turn: f64,
    pub plateau_bytes: Option<i64>,
}

/// A results database: SQLite or PostgreSQL, the same schema and statements.
pub trait Store: Send + std::fmt::Debug {
    /// The database as messages name it.
    fn target(&self) -> &str;
    /// Its SQL dialect.
    fn dialect(&self) -> Dialect;
    /// Its schema version: `None` for an empty database, [`DbErrorKind::NotOurs`] for one with
    /// tables but no `schema_version`.
    fn version(&mut self) -> Result<Option<u32>, DbError>;
    /// Runs `sql` and sets the version to `version`, in one transaction.
    fn apply(&mut self, sql: &str, version: u32) -> Result<(), DbError>;
    /// Records runs with their metrics and expectations, all in one transaction.
    fn insert(&mut self, rows: &[RunRow]) -> Result<(), DbError>;
    /// Every run (of `scenario` only, when given) in the order recorded, with its metrics.
    fn history_rows(
        &mut self,
        scenario: Option<&str>,
    ) -> Result<(Vec<RunHead>, Vec<MetricFigure>), DbError>;
}

pub(crate) const INSERT_RUN: &str = "INSERT INTO runs (recorded_at, source, scenario, \
    scenario_file, scenario_sha256, build_id, build_date, ci_commit, leakloop_version, backend, \
    engine_version, engine_library_sha256, model_sha256, host, run_dir, started_at, ended_at, \
    turns_completed, completed, verdict, exit_code, provenance) VALUES ($1, $2, $3, $4, $5, $6, \
    $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22) RETURNING id";
pub(crate) const INSERT_METRIC: &str = "INSERT INTO metrics (run_id, metric, class, \
    growth_per_turn, growth_low, growth_high, plateau_bytes, verdict) VALUES ($1, $2, $3, $4, \
    $5, $6, $7, $8)";
pub(crate) const INSERT_EXPECTATION: &str = "INSERT INTO expectations (run_id, position, name, \
    outcome, expected, measured, turn) VALUES ($1, $2, $3, $4, $5, $6, $7)";
pub(crate) const SET_VERSION: &str = "UPDATE schema_version SET version = $1";
pub(crate) const SELECT_VERSION: &str = "SELECT version FROM schema_version";
const RUN_COLUMNS: &str =
    "SELECT id, scenario, build_id, build_date, run_dir, completed, verdict, provenance FROM runs";
const METRIC_COLUMNS: &str =
    "SELECT m.run_id, m.metric, m.growth_per_turn, m.plateau_bytes FROM metrics m";

/// The queries history runs: its runs, then their metrics.
pub(crate) fn history_queries(scenario: Option<&str>) -> (String, String) {
    match scenario {
        Some(_) => (
            format!("{RUN_COLUMNS} WHERE scenario = $1 ORDER BY id"),
            format!("{METRIC_COLUMNS} JOIN runs r ON r.id = m.run_id WHERE r.scenario = $1"),
        ),
        None => (
            format!("{RUN_COLUMNS} ORDER BY id"),
            METRIC_COLUMNS.to_owned(),
        ),
    }
}

fn text(s: &Option<String>) -> Value {
    Value::Text(s.clone())
}

impl RunRow {
    /// The values of [`INSERT_RUN`], in order.
    pub(crate) fn run_values(&self) -> Vec<Value> {
        vec![
            Value::Text(Some(self.recorded_at.clone())),
            Value::Text(Some(self.source.as_str().to_owned())),
            Value::Text(Some(self.scenario.clone())),
            text(&self.scenario_file),
            text(&self.scenario_sha256),
            text(&self.build_id),
            text(&self.build_date),
            text(&self.ci_commit),
            Value::Text(Some(self.leakloop_version.clone())),
            Value::Text(Some(self.backend.clone())),
            text(&self.engine_version),
            text(&self.engine_library_sha256),
            text(&self.model_sha256),
            text(&self.host),
            text(&self.run_dir),
            text(&self.started_at),
            text(&self.ended_at),
            Value::Int(Some(i64::from(self.turns_completed))),
            Value::Int(Some(i64::from(self.completed))),
            Value::Text(Some(self.verdict.clone())),
            Value::Int(Some(i64::from(self.exit_code))),
            text(&self.provenance),
        ]
    }

    /// The values of [`INSERT_METRIC`] per metric, for the run `id`.
    pub(crate) fn metric_values(&self, id: i64) -> Vec<Vec<Value>> {
        self.metrics
            .iter()
            .map(|m| {
                vec![
                    Value::Int(Some(id)),
                    Value::Text(Some(m.metric.clone())),
                    Value::Text(Some(m.class.clone())),
                    Value::Real(Some(m.growth_per_turn)),
                    Value::Real(m.growth_low),
                    Value::Real(m.growth_high),
                    Value::Int(m.plateau_bytes),
                    Value::Text(Some(m.verdict.clone())),
                ]
            })
            .collect()
    }

    /// The values of [`INSERT_EXPECTATION`] per expectation, for the run `id`.
    pub(crate) fn expectation_values(&self, id: i64) -> Vec<Vec<Value>> {
        self.expectations
            .iter()
            .enumerate()
            .map(|(i, e)| {
                vec![
                    Value::Int(Some(id)),
                    Value::Int(Some(i as i64)),
                    Value::Text(Some(e.name.clone())),
                    Value::Text(Some(e.outcome.clone())),
                    Value::Text(Some(e.expected.clone())),
                    Value::Text(Some(e.measured.clone())),
                    Value::Int(e.turn.map(|t| t as i64)),
                ]
            })
            .collect()
    }
}

/// Whether `target` names a PostgreSQL database rather than a SQLite file.
pub(crate) fn is_postgres_url(target: &str) -> bool {
    target.starts_with("postgres://") || target.starts_with("postgresql://")
}

fn connect(target: &str, create: bool) -> Result<Box<dyn Store>, DbError> {
    if is_postgres_url(target) {
        return postgres(target);
    }
    let path = Path::new(target);
    if !create && !path.exists() {
        return Err(DbError::new(target, DbErrorKind::Missing));
    }
    sqlite(path)
}

#[cfg(feature = "postgres")]
fn postgres(url: &str) -> Result<Box<dyn Store>, DbError> {
    Ok(Box::new(super::postgres::PostgresStore::connect(url)?))
}

#[cfg(not(feature = "postgres"))]
fn postgres(url: &str) -> Result<Box<dyn Store>, DbError> {
    Err(DbError::new(
        url,
        DbErrorKind::Unsupported(
            "this leakloop was built without PostgreSQL (cargo feature `postgres`)".into(),
        ),
    ))
}

#[cfg(not(any(target_os = "android", target_vendor = "apple")))]
fn sqlite(path: &Path) -> Result<Box<dyn Store>, DbError> {
    Ok(Box::new(super::sqlite::SqliteStore::open(path)?))
}

#[cfg(any(target_os = "android", target_vendor = "apple"))]
fn sqlite(path: &Path) -> Result<Box<dyn Store>, DbError> {
    Err(DbError::new(
        &path.display().to_string(),
        DbErrorKind::Unsupported(
            "this build has no SQLite (Android and macOS builds): record into a postgres:// URL"
                .into(),
        ),
    ))
}

/// Opens (creating a SQLite file that is not there) the database `target` for recording, and
/// brings its schema to [`CURRENT_VERSION`].
pub fn open(target: &str) -> Result<Box<dyn Store>, DbError> {
    let mut store = connect(target, true)?;
    migrate(store.as_mut(), CURRENT_VERSION)?;
    Ok(store)
}

/// Opens an existing database for reading, as it is: any version up to [`CURRENT_VERSION`]
/// reads (history's queries use only version 1's columns); nothing is changed.
pub fn open_existing(target: &str) -> Result<Box<dyn Store>, DbError> {
    let mut store = connect(target, false)?;
    match store.version()? {
        Some(found) if found > CURRENT_VERSION => Err(DbError::new(
            target,
            DbErrorKind::NewerSchema {
                found,
                known: CURRENT_VERSION,
            },
        )),
        Some(_) => Ok(store),
        None => Err(DbError::new(target, DbErrorKind::NotOurs)),
    }
}

/// Applies every migration after the database's version, up to `target` (tests stop early to
/// build an old database).
pub(crate) fn migrate(store: &mut dyn Store, target: u32) -> Result<(), DbError> {
    let found = store.version()?.unwrap_or(0);
    if found > CURRENT_VERSION {
        return Err(DbError::new(
            store.target(),
            DbErrorKind::NewerSchema {
                found,
                known: CURRENT_VERSION,
            },
        ));
    }
    for m in MIGRATIONS
        .iter()
        .filter(|m| m.version > found && m.version <= target)
    {
        let sql = m.sql_for(store.dialect());
        store.apply(&sql, m.version)?;
    }
    Ok(())
}
