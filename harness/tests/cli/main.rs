//! Integration tests of the `leakloop` binary: one module per subcommand.

mod analyze;
mod bench;
mod check;
mod fixtures;
mod interrupted;
mod report;
mod schema;
mod worker;
