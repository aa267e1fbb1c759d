//! PostgreSQL as a results database (feature `postgres`): the same schema and statements as the
//! SQLite file, through the `postgres` crate's blocking client, for nightlies that record from
//! several machines into one server. No TLS: a server across an untrusted network is reached
//! through a tunnel or a local proxy.

use postgres::types::ToSql;
use postgres::{Client, NoTls};

use super::error::{DbError, DbErrorKind};
use super::row::RunRow;
use super::schema::Dialect;
use super::store::{
    history_queries, MetricFigure, RunHead, Store, Value, INSERT_EXPECTATION, INSERT_METRIC,
    INSERT_RUN, SELECT_VERSION, SET_VERSION,
};

/// A PostgreSQL results database.
pub(crate) struct PostgresStore {
    target: String,
    client: Client,
}

impl std::fmt::Debug for PostgresStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PostgresStore")
            .field("target", &self.target)
            .finish_non_exhaustive()
    }
}

type Param = Box<dyn ToSql + Sync>;

/// PostgreSQL's text cannot hold NUL, which a scenario's foreign text may: it is stored as
/// U+FFFD.
fn pg_value(v: &Value) -> Param {
    match v {
        Value::Text(s) => Box::new(s.as_ref().map(|s| s.replace('\0', "\u{FFFD}"))),
        Value::Int(i) => Box::new(*i),
        Value::Real(r) => Box::new(*r),
    }
}

fn refs(params: &[Param]) -> Vec<&(dyn ToSql + Sync)> {
    params
        .iter()
        .map(|p| p.as_ref() as &(dyn ToSql + Sync))
        .collect()
}

impl PostgresStore {
    /// Connects to the database at `url` (`postgres://user:password@host:port/name`, or with
    /// `?host=/socket/folder`).
    pub(crate) fn connect(url: &str) -> Result<Self, DbError> {
        let client = Client::connect(url, NoTls)
            .map_err(|e| DbError::new(url, DbErrorKind::Open(e.to_string())))?;
        Ok(PostgresStore {
            target: super::error::shown_target(url),
            client,
        })
    }
}

impl Store for PostgresStore {
    fn target(&self) -> &str {
        &self.target
    }

    fn dialect(&self) -> Dialect {
        Dialect::Postgres
    }

    fn version(&mut self) -> Result<Option<u32>, DbError> {
        let target = self.target.clone();
        let read = |e: postgres::Error| DbError::query(&target, "read its schema version", e);
        let row = self
            .client
            .query_one(
                "SELECT count(*), count(*) FILTER (WHERE table_name = 'schema_version') \
                 FROM information_schema.tables WHERE table_schema = current_schema()",
                &[],
            )
            .map_err(read)?;
        let (tables, has_version): (i64, i64) = (row.get(0), row.get(1));
        match (tables, has_version) {
            (0, _) => Ok(None),
            (_, 0) => Err(DbError::new(&self.target, DbErrorKind::NotOurs)),
            _ => {
                let v = self.client.query_opt(SELECT_VERSION, &[]).map_err(read)?;
                Ok(Some(v.map_or(0, |r| r.get::<_, i64>(0)) as u32))
            }
        }
    }

    fn apply(&mut self, sql: &str, version: u32) -> Result<(), DbError> {
        let target = self.target.clone();
        let what = format!("migrate it to schema version {version}");
        let fail = |e: postgres::Error| DbError::query(&target, what.clone(), e);
        let mut tx = self.client.transaction().map_err(fail)?;
        tx.batch_execute(sql).map_err(fail)?;
        tx.execute(SET_VERSION, &[&i64::from(version)])
            .map_err(fail)?;
        tx.commit().map_err(fail)
    }

    fn insert(&mut self, rows: &[RunRow]) -> Result<(), DbError> {
        let target = self.target.clone();
        let fail = |e: postgres::Error| DbError::query(&target, "record the run", e);
        let mut tx = self.client.transaction().map_err(fail)?;
        let statements = [INSERT_RUN, INSERT_METRIC, INSERT_EXPECTATION]
            .map(|sql| tx.prepare(sql))
            .into_iter()
            .collect::<Result<Vec<_>, _>>()
            .map_err(fail)?;
        for row in rows {
            let params: Vec<Param> = row.run_values().iter().map(pg_value).collect();
            let id: i64 = tx
                .query_one(&statements[0], &refs(&params))
                .map_err(fail)?
                .get(0);
            for (statement, rows) in [
                (&statements[1], row.metric_values(id)),
                (&statements[2], row.expectation_values(id)),
            ] {
                for values in rows {
                    let params: Vec<Param> = values.iter().map(pg_value).collect();
                    tx.execute(statement, &refs(&params)).map_err(fail)?;
                }
            }
        }
        tx.commit().map_err(fail)
    }

    fn history_rows(
        &mut self,
        scenario: Option<&str>,
    ) -> Result<(Vec<RunHead>, Vec<MetricFigure>), DbError> {
        let target = self.target.clone();
        let fail = |e: postgres::Error| DbError::query(&target, "read the runs", e);
        let (runs_sql, metrics_sql) = history_queries(scenario);
        let params: Vec<&(dyn ToSql + Sync)> = match &scenario {
            Some(s) => vec![s],
            None => Vec::new(),
        };
        let runs = self
            .client
            .query(&runs_sql, &params)
            .map_err(fail)?
            .iter()
            .map(|r| RunHead {
                id: r.get(0),
                scenario: r.get(1),
                build_id: r.get(2),
                build_date: r.get(3),
                run_dir: r.get(4),
                completed: r.get::<_, i64>(5) != 0,
                verdict: r.get(6),
                provenance: r.get(7),
            })
            .collect();
        let metrics = self
            .client
            .query(&metrics_sql, &params)
            .map_err(fail)?
            .iter()
            .map(|r| MetricFigure {
                run_id: r.get(0),
                metric: r.get(1),
                growth_per_turn: r.get(2),
                plateau_bytes: r.get(3),
            })
            .collect();
        Ok((runs, metrics))
    }
}
