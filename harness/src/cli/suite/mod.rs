//! Suites: `leakloop run` over many scenarios (files, folders, globs), `--partition K/N` and
//! `leakloop merge` of partition outputs.

mod inputs;
mod merge;
mod partition;
mod run;
mod schedule;

pub(crate) use merge::{run as merge, MergeArgs};
pub(crate) use partition::Partition;
pub(crate) use run::{default_jobs, is_suite, plan, run_plan, run_suite, SuiteOptions};
