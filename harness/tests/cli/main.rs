//! Integration tests of the `leakloop` binary: one module per subcommand.

mod analyze;
