//! Integration tests of the `leakloop` binary: one module per subcommand.

mod analyze;
mod check;
mod compare;
mod fixtures;
mod report;
mod worker;
