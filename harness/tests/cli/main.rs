//! Integration tests of the `leakloop` binary: one module per subcommand.

mod worker;
mod check;
//! Integration tests of the `leakloop` command line: one module per subcommand.

mod report;
