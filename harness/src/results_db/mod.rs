//! The results database: every run, suite and merge can record its outcome (`--record DB`), and
//! `history --db DB` reads the builds back. One schema (docs/results-db.md), versioned by a
//! `schema_version` table and brought up to date by the migrations in `schema.rs`, is kept in
//! an embedded SQLite file by default (`sqlite.rs`) or in PostgreSQL (`postgres.rs`, a
//! `postgres://` URL) through the one [`Store`] trait; what a row holds is built in `row.rs`
//! from the run's own record and verdict, and read back for history in `read.rs`.
//!
//! Recording never costs a run: the run's folder is written first, and a database that cannot
//! be written is reported next to the verdict (`cli/error.rs` decides the exit code).
// Android and macOS builds have no SQLite (see Cargo.toml), and without the `postgres` feature the
// shared row and value types have no store to feed: unused there, not dead.
#![cfg_attr(any(target_os = "android", target_vendor = "apple"), allow(dead_code))]

mod error;
#[cfg(feature = "postgres")]
mod postgres;
mod read;
mod row;
mod schema;
#[cfg(not(any(target_os = "android", target_vendor = "apple")))]
mod sqlite;
mod store;

pub use error::DbError;
pub use read::read_builds;
pub use row::{timestamp, RunRow, RunSource};
pub use store::{open, open_existing, Store};

#[cfg(all(test, not(any(target_os = "android", target_vendor = "apple"))))]
mod tests;
