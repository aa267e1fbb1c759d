//! Integration tests of the `leakloop` binary: one module per subcommand.

mod adb;
mod analyze;
mod attach;
mod bench;
mod bisect;
mod check;
mod ci_workflow;
mod common;
mod compare;
mod drivers;
mod exit_codes;
mod fixtures;
mod history;
mod init;
mod interrupted;
mod library;
mod opencl;
mod out_dir;
mod python_driver;
mod real_traces;
mod remote;
mod report;
mod schema;
mod stop;
mod suite;
mod worker;
