//! Integration tests of the `leakloop` command line: one module per subcommand.

mod report;
