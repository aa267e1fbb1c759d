//! The default store: an embedded SQLite file (rusqlite, SQLite compiled in: no system library).

use std::path::Path;
use std::time::Duration;

use rusqlite::types::Value as SqlValue;
use rusqlite::{params_from_iter, Connection, OptionalExtension};

use super::error::{DbError, DbErrorKind};
use super::row::RunRow;
use super::schema::Dialect;
use super::store::{
    history_queries, MetricFigure, RunHead, Store, Value, INSERT_EXPECTATION, INSERT_METRIC,
    INSERT_RUN, SELECT_VERSION, SET_VERSION,
};

/// A SQLite results database.
#[derive(Debug)]
pub(crate) struct SqliteStore {
    target: String,
    conn: Connection,
}

fn sql_value(v: &Value) -> SqlValue {
    match v {
        Value::Text(Some(s)) => SqlValue::Text(s.clone()),
        Value::Int(Some(i)) => SqlValue::Integer(*i),
        Value::Real(Some(r)) => SqlValue::Real(*r),
        Value::Text(None) | Value::Int(None) | Value::Real(None) => SqlValue::Null,
    }
}

impl SqliteStore {
    /// Opens (or creates) the file at `path`.
    pub(crate) fn open(path: &Path) -> Result<Self, DbError> {
        let target = path.display().to_string();
        let conn = Connection::open(path)
            .map_err(|e| DbError::new(&target, DbErrorKind::Open(e.to_string())))?;
        // The scenarios of a suite record from several threads, and several suites may share
        // one file: a writer waits for another's transaction instead of failing at once.
        conn.busy_timeout(Duration::from_secs(30))
            .map_err(|e| DbError::new(&target, DbErrorKind::Open(e.to_string())))?;
        Ok(SqliteStore { target, conn })
    }
}

impl Store for SqliteStore {
    fn target(&self) -> &str {
        &self.target
    }

    fn dialect(&self) -> Dialect {
        Dialect::Sqlite
    }

    fn version(&mut self) -> Result<Option<u32>, DbError> {
        let read = |e: rusqlite::Error| DbError::query(&self.target, "read its schema version", e);
        let tables: i64 = self
            .conn
            .query_row(
                "SELECT count(*) FROM sqlite_master WHERE type = 'table'",
                [],
                |r| r.get(0),
            )
            .map_err(read)?;
        let has_version: i64 = self
            .conn
            .query_row(
                "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'schema_version'",
                [],
                |r| r.get(0),
            )
            .map_err(read)?;
        match (tables, has_version) {
            (0, _) => Ok(None),
            (_, 0) => Err(DbError::new(&self.target, DbErrorKind::NotOurs)),
            _ => {
                let v: Option<i64> = self
                    .conn
                    .query_row(SELECT_VERSION, [], |r| r.get(0))
                    .optional()
                    .map_err(read)?;
                Ok(Some(v.unwrap_or(0) as u32))
            }
        }
    }

    fn apply(&mut self, sql: &str, version: u32) -> Result<(), DbError> {
        let target = self.target.clone();
        let what = format!("migrate it to schema version {version}");
        let fail = |e: rusqlite::Error| DbError::query(&target, what.clone(), e);
        let tx = self.conn.transaction().map_err(fail)?;
        tx.execute_batch(sql).map_err(fail)?;
        tx.execute(SET_VERSION, [i64::from(version)])
            .map_err(fail)?;
        tx.commit().map_err(fail)
    }

    fn insert(&mut self, rows: &[RunRow]) -> Result<(), DbError> {
        let target = self.target.clone();
        let fail = |e: rusqlite::Error| DbError::query(&target, "record the run", e);
        let tx = self.conn.transaction().map_err(fail)?;
        for row in rows {
            let id: i64 = tx
                .prepare_cached(INSERT_RUN)
                .map_err(fail)?
                .query_row(
                    params_from_iter(row.run_values().iter().map(sql_value)),
                    |r| r.get(0),
                )
                .map_err(fail)?;
            for (sql, rows) in [
                (INSERT_METRIC, row.metric_values(id)),
                (INSERT_EXPECTATION, row.expectation_values(id)),
            ] {
                let mut statement = tx.prepare_cached(sql).map_err(fail)?;
                for values in rows {
                    statement
                        .execute(params_from_iter(values.iter().map(sql_value)))
                        .map_err(fail)?;
                }
            }
        }
        tx.commit().map_err(fail)
    }

    fn history_rows(
        &mut self,
        scenario: Option<&str>,
    ) -> Result<(Vec<RunHead>, Vec<MetricFigure>), DbError> {
        let fail = |e: rusqlite::Error| DbError::query(&self.target, "read the runs", e);
        let (runs_sql, metrics_sql) = history_queries(scenario);
        let params: Vec<SqlValue> = scenario
            .map(|s| SqlValue::Text(s.to_owned()))
            .into_iter()
            .collect();
        let mut statement = self.conn.prepare(&runs_sql).map_err(fail)?;
        let runs = statement
            .query_map(params_from_iter(params.iter()), |r| {
                Ok(RunHead {
                    id: r.get(0)?,
                    scenario: r.get(1)?,
                    build_id: r.get(2)?,
                    build_date: r.get(3)?,
                    run_dir: r.get(4)?,
                    completed: r.get::<_, i64>(5)? != 0,
                    verdict: r.get(6)?,
                    provenance: r.get(7)?,
                })
            })
            .map_err(fail)?
            .collect::<Result<Vec<_>, _>>()
            .map_err(fail)?;
        let mut statement = self.conn.prepare(&metrics_sql).map_err(fail)?;
        let metrics = statement
            .query_map(params_from_iter(params.iter()), |r| {
                Ok(MetricFigure {
                    run_id: r.get(0)?,
                    metric: r.get(1)?,
                    growth_per_turn: r.get(2)?,
                    plateau_bytes: r.get(3)?,
                })
            })
            .map_err(fail)?
            .collect::<Result<Vec<_>, _>>()
            .map_err(fail)?;
        Ok((runs, metrics))
    }
}
