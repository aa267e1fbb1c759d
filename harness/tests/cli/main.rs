//! Integration tests of the `leakloop` binary: one module per subcommand.

mod analyze;
mod bench;
mod bisect;
mod check;
mod ci_workflow;
mod compare;
mod exit_codes;
mod fixtures;
mod history;
mod interrupted;
mod library;
mod opencl;
mod out_dir;
mod real_traces;
mod report;
mod schema;
mod stop;
mod suite;
mod worker;
