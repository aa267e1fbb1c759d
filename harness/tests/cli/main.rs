//! Integration tests of the `leakloop` binary: one module per subcommand.

mod check;
mod report;
mod worker;
