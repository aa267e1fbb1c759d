//! Integration tests of the `leakloop` binary: one module per subcommand.

mod analyze;
mod bench;
mod check;
mod compare;
mod fixtures;
mod interrupted;
mod opencl;
mod real_traces;
mod report;
mod schema;
mod worker;
