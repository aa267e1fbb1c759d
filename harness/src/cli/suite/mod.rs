//! Suites on the command line: `leakloop run` over many scenarios (files, folders, globs),
//! `--partition K/N` and `leakloop merge` of partition outputs. The work is the library's
//! (`crate::suite`); this module parses, runs each scenario and prints.

mod merge;
mod run;

pub(crate) use crate::suite::Partition;
pub(crate) use crate::suite::{default_jobs, plan};
pub(crate) use merge::{run as merge, MergeArgs};
pub(crate) use run::{is_suite, run_plan, run_suite, SuiteOptions};
