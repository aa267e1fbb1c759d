//! Integration tests of the `leakloop` binary: one module per subcommand.

mod analyze;
mod check;
mod fixtures;
mod opencl;
mod report;
mod worker;
