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

/// How bad a scenario's exit code is, for a suite's worst code: the number itself, except that
/// an inconclusive run (5, added after the other codes) ranks just above a pass and below a leak
/// shown. The command line's `Exit` orders its codes by this.
pub(crate) fn exit_severity(code: u8) -> u16 {
    match code {
        0 => 0,
        5 => 1,
        other => 1 + u16::from(other),
    }
}

/// The worst of several exit codes by [`exit_severity`]; 0 for none.
pub(crate) fn worst_exit_code(codes: impl IntoIterator<Item = u8>) -> u8 {
    codes
        .into_iter()
        .max_by_key(|&c| exit_severity(c))
        .unwrap_or(0)
}
pub(crate) use merge::{copy_into, join, plan_copies, read_shares, MergeError};
pub(crate) use partition::Partition;
pub(crate) use run::{
    default_jobs, plan, run_plan, Failed, Plan, Ran, RunOptions, ScenarioRunner, SuiteEvent,
};
