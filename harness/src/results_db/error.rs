//! What can go wrong with a results database, with the database it concerns.

/// A results database that could not be opened, migrated, written or read.
#[derive(Debug, thiserror::Error)]
#[error("results database {target}: {kind}")]
pub struct DbError {
    /// The database as the user named it (a PostgreSQL URL without its password).
    pub target: String,
    /// What went wrong.
    pub kind: DbErrorKind,
}

/// What went wrong with a results database.
#[derive(Debug, thiserror::Error)]
pub enum DbErrorKind {
    /// It could not be opened or connected to.
    #[error("cannot open it: {0}")]
    Open(String),
    /// `history --db` was given a file that does not exist.
    #[error("no such file (record runs into it with `--record`)")]
    Missing,
    /// It was written by a newer leakloop, whose schema this one does not know.
    #[error(
        "its schema is version {found}, this leakloop knows up to {known}: use a newer leakloop"
    )]
    NewerSchema {
        /// The version found.
        found: u32,
        /// The newest this leakloop knows.
        known: u32,
    },
    /// It holds no leakloop schema (another program's database).
    #[error("it is not a leakloop results database (no `schema_version` table)")]
    NotOurs,
    /// A statement failed.
    #[error("cannot {what}: {message}")]
    Query {
        /// What was being done (`record the run`, `migrate to version 2`).
        what: String,
        /// The database's own message.
        message: String,
    },
    /// A URL scheme this build cannot use.
    #[error("{0}")]
    Unsupported(String),
}

impl DbError {
    pub(crate) fn new(target: &str, kind: DbErrorKind) -> Self {
        DbError {
            target: shown_target(target),
            kind,
        }
    }

    pub(crate) fn query(target: &str, what: impl Into<String>, e: impl std::fmt::Display) -> Self {
        DbError::new(
            target,
            DbErrorKind::Query {
                what: what.into(),
                message: e.to_string(),
            },
        )
    }
}

/// The database as messages show it: a URL's password is replaced by `***`.
pub(crate) fn shown_target(target: &str) -> String {
    let Some((scheme, rest)) = target.split_once("://") else {
        return target.to_owned();
    };
    let (authority, tail) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    match authority.rsplit_once('@') {
        Some((user, host)) => {
            let user = match user.split_once(':') {
                Some((name, _)) => format!("{name}:***"),
                None => user.to_owned(),
            };
            format!("{scheme}://{user}@{host}{tail}")
        }
        None => target.to_owned(),
    }
}
