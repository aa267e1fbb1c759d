//! Suites: many scenarios (files, folders, globs) run as one, `--partition K/N` shares of them,
//! and the merge of the shares' outputs. The library expands, schedules, runs and merges, and
//! returns typed outcomes and errors; `cli/suite/` parses the flags, runs each scenario and
//! prints.

mod inputs;
mod merge;
mod partition;
mod run;
mod schedule;

pub(crate) use inputs::{is_pattern, InputsError};
pub(crate) use merge::{copy_into, join, plan_copies, read_shares, MergeError};
pub(crate) use partition::Partition;
pub(crate) use run::{
    default_jobs, plan, run_plan, Failed, Plan, Ran, RunOptions, ScenarioRunner, SuiteEvent,
};
