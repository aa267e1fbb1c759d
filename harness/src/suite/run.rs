//! A suite run: [`plan`] expands the arguments into the suite's files and keeps a partition's
//! share; [`run_plan`] loads every scenario of the share and runs them on `-j` threads
//! (exclusive ones one at a time per device, `schedule.rs`), each through the caller's
//! [`ScenarioRunner`] into its own folder under the suite's root, and sums them up in the suite
//! report. Progress goes to a [`SuiteEvent`] callback: the library prints nothing.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use crate::analyze::Verdict;
use crate::report::{
    EntryStatus, SuiteEntry, SuiteIdentity, SuitePartition, SuiteReport, WorstMetric,
};
use crate::scenario::{load_scenario_with, Overrides, Scenario, ScenarioError};
use crate::suite::inputs::{expand, InputsError, SuiteFile};
use crate::suite::partition::{fnv1a64, Partition};
use crate::suite::schedule::{run_jobs, Device};

/// The suite's files and identity, before a partition takes its share.
#[derive(Debug)]
pub(crate) struct Plan {
    /// The files of this share, sorted by relative path.
    pub files: Vec<SuiteFile>,
    /// The whole suite.
    pub identity: SuiteIdentity,
}

/// Expands the arguments and keeps `partition`'s share.
pub(crate) fn plan(args: &[PathBuf], partition: Option<Partition>) -> Result<Plan, InputsError> {
    let all = expand(args)?;
    let listing: Vec<&str> = all.iter().map(|f| f.relative.as_str()).collect();
    let identity = SuiteIdentity {
        scenarios: all.len(),
        fingerprint: format!("{:016x}", fnv1a64(listing.join("\n").as_bytes())),
    };
    let files = all
        .into_iter()
        .filter(|f| partition.is_none_or(|p| p.holds(&f.relative)))
        .collect();
    Ok(Plan { files, identity })
}

/// The default `-j`: the cores this process may use.
pub(crate) fn default_jobs() -> usize {
    std::thread::available_parallelism().map_or(1, usize::from)
}

/// How a suite runs, besides what each scenario's run needs (the [`ScenarioRunner`]'s part).
#[derive(Debug, Clone, Default)]
pub(crate) struct RunOptions {
    /// The command line's overrides, applied to every scenario as it loads.
    pub overrides: Overrides,
    /// Scenarios at once (`-j`).
    pub jobs: usize,
    /// The share being run.
    pub partition: Option<Partition>,
}

/// A scenario of the suite that ran to a verdict.
#[derive(Debug)]
pub(crate) struct Ran {
    /// Its verdict (with any baseline checks).
    pub verdict: Verdict,
    /// Its exit code, as `leakloop run` would give it.
    pub exit_code: u8,
}

/// Why a scenario of the suite has no verdict: the text of its error and its exit code.
#[derive(Debug, Clone)]
pub(crate) struct Failed {
    /// The error, whole (`{:#}`).
    pub text: String,
    /// The exit code `leakloop run` would give it.
    pub exit_code: u8,
    /// Whether the engine failed (the entry then reads ENGINE FAILED, else ERROR).
    pub engine_failed: bool,
}

/// Runs one scenario of a suite: what `leakloop run FILE --out FOLDER --quiet` does, without
/// printing. The caller decides exit codes (the documented codes grow with how bad the outcome
/// is, so the suite's is the largest of its scenarios').
pub(crate) trait ScenarioRunner: Sync {
    /// What a scenario file that does not load becomes.
    fn load_failed(&self, error: ScenarioError) -> Failed;

    /// Runs `scenario`, writing its reports into `folder` when there is one (the caller claims
    /// it).
    fn run(&self, scenario: &Scenario, folder: Option<PathBuf>) -> Result<Ran, Failed>;
}

/// What a suite run tells its caller while it runs.
#[derive(Debug)]
pub(crate) enum SuiteEvent<'a> {
    /// Before anything runs, when a partition is being run.
    Partition {
        /// The share.
        partition: Partition,
        /// Its scenarios.
        running: usize,
        /// The whole suite's scenarios.
        suite: usize,
    },
    /// A scenario ended (one call at a time, in the order they end).
    Finished {
        /// How many have ended, this one included.
        done: usize,
        /// How many there are in all.
        total: usize,
        /// Its entry in the suite report.
        entry: &'a SuiteEntry,
    },
}

/// Loads and runs every file of `plan`, each into `root/<folder>` when there is a root; returns
/// the suite report (not yet written).
pub(crate) fn run_plan(
    options: &RunOptions,
    plan: &Plan,
    root: Option<&Path>,
    runner: &dyn ScenarioRunner,
    progress: &(dyn Fn(SuiteEvent<'_>) + Sync),
) -> SuiteReport {
    let total = plan.files.len();
    if let Some(partition) = options.partition {
        progress(SuiteEvent::Partition {
            partition,
            running: total,
            suite: plan.identity.scenarios,
        });
    }
    let loaded: Vec<Result<Scenario, Failed>> = plan
        .files
        .iter()
        .map(|f| load_scenario_with(&f.path, &options.overrides).map_err(|e| runner.load_failed(e)))
        .collect();
    let devices: Vec<Device> = loaded
        .iter()
        .map(|s| s.as_ref().ok().and_then(Scenario::exclusive_device))
        .collect();
    let done = AtomicUsize::new(0);
    let entries = run_jobs(
        &devices,
        options.jobs,
        |i| run_one(&plan.files[i], &loaded[i], root, runner),
        |_, entry: &SuiteEntry| {
            let done = done.fetch_add(1, Ordering::SeqCst) + 1;
            progress(SuiteEvent::Finished { done, total, entry });
        },
    );
    let worst = super::worst_exit_code(entries.iter().map(|e| e.exit_code));
    let partition = options.partition.map(|p| SuitePartition {
        index: p.index,
        count: p.count,
    });
    SuiteReport::new(plan.identity.clone(), partition, worst, entries)
}

/// Runs one scenario of the suite into its folder and sums it up for the suite.
fn run_one(
    file: &SuiteFile,
    loaded: &Result<Scenario, Failed>,
    root: Option<&Path>,
    runner: &dyn ScenarioRunner,
) -> SuiteEntry {
    let started = Instant::now();
    let mut entry = SuiteEntry {
        path: file.relative.clone(),
        folder: file.folder.clone(),
        name: None,
        status: EntryStatus::Error,
        exit_code: 0,
        error: None,
        worst_metric: None,
        expectations: 0,
        expectations_failed: 0,
        duration_s: 0.0,
    };
    let result = match loaded {
        Err(failed) => Err(failed.clone()),
        Ok(scenario) => {
            entry.name = Some(scenario.name.clone());
            runner.run(scenario, root.map(|root| root.join(&file.folder)))
        }
    };
    match result {
        Ok(Ran { verdict, exit_code }) => {
            entry.status = EntryStatus::of_verdict(verdict.status);
            entry.worst_metric = WorstMetric::of(&verdict);
            entry.expectations = verdict.expectations.len();
            entry.expectations_failed = verdict.expectations.iter().filter(|e| !e.passed).count();
            entry.exit_code = exit_code;
        }
        Err(failed) => {
            if failed.engine_failed {
                entry.status = EntryStatus::EngineFailed;
            }
            entry.error = Some(failed.text);
            entry.exit_code = failed.exit_code;
        }
    }
    entry.duration_s = started.elapsed().as_secs_f64();
    entry
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::sync::Mutex;

    use super::*;
    use crate::analyze::VerdictStatus;

    /// Runs nothing: gives each scenario the verdict its name asks for, and remembers the
    /// folders it was handed.
    #[derive(Default)]
    struct Fake {
        folders: Mutex<Vec<Option<PathBuf>>>,
    }

    impl ScenarioRunner for Fake {
        fn load_failed(&self, error: ScenarioError) -> Failed {
            Failed {
                text: error.to_string(),
                exit_code: 2,
                engine_failed: false,
            }
        }

        fn run(&self, scenario: &Scenario, folder: Option<PathBuf>) -> Result<Ran, Failed> {
            self.folders.lock().unwrap().push(folder);
            match scenario.name.as_str() {
                "crash" => Err(Failed {
                    text: "engine gone".into(),
                    exit_code: 3,
                    engine_failed: true,
                }),
                name => Ok(Ran {
                    verdict: Verdict {
                        attribution: None,
                        driver_attribution: None,
                        cl_objects: None,
                        status: if name == "leak" {
                            VerdictStatus::Fail
                        } else {
                            VerdictStatus::Pass
                        },
                        metrics: BTreeMap::new(),
                        expectations: Vec::new(),
                    },
                    exit_code: u8::from(name == "leak"),
                }),
            }
        }
    }

    /// A fixture scenario under another name.
    fn scenario(name: &str) -> String {
        let fixture = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../fixtures/scenarios/forgets-delete.yaml"
        );
        std::fs::read_to_string(fixture)
            .unwrap()
            .replace("name: forgets-delete", &format!("name: {name}"))
    }

    #[test]
    fn every_file_becomes_an_entry_with_the_worst_code_and_progress_per_scenario() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a.yaml"), scenario("flat")).unwrap();
        std::fs::write(dir.path().join("b.yaml"), scenario("leak")).unwrap();
        std::fs::write(dir.path().join("c.yaml"), scenario("crash")).unwrap();
        std::fs::write(dir.path().join("d.yaml"), "name: [\n").unwrap();
        let plan = plan(&[dir.path().to_owned()], None).unwrap();
        let runner = Fake::default();
        let events = Mutex::new(Vec::new());
        let progress = |event: SuiteEvent<'_>| match event {
            SuiteEvent::Finished { done, total, entry } => {
                events
                    .lock()
                    .unwrap()
                    .push((done, total, entry.path.clone()));
            }
            SuiteEvent::Partition { .. } => panic!("no partition was asked for"),
        };
        let options = RunOptions {
            jobs: 2,
            ..RunOptions::default()
        };
        let root = dir.path().join("out");
        let report = run_plan(&options, &plan, Some(&root), &runner, &progress);
        let entries: Vec<(&str, EntryStatus, u8)> = report
            .scenarios
            .iter()
            .map(|e| (e.path.as_str(), e.status, e.exit_code))
            .collect();
        assert_eq!(
            entries,
            [
                ("a.yaml", EntryStatus::Pass, 0),
                ("b.yaml", EntryStatus::Fail, 1),
                ("c.yaml", EntryStatus::EngineFailed, 3),
                ("d.yaml", EntryStatus::Error, 2),
            ]
        );
        assert_eq!(report.exit_code, 3);
        assert_eq!(report.scenarios[2].error.as_deref(), Some("engine gone"));
        assert!(report.scenarios[3].error.is_some());
        let mut done: Vec<usize> = events.lock().unwrap().iter().map(|e| e.0).collect();
        done.sort_unstable();
        assert_eq!(done, [1, 2, 3, 4]);
        let mut folders = runner.folders.into_inner().unwrap();
        folders.sort();
        assert_eq!(
            folders,
            [
                Some(root.join("a")),
                Some(root.join("b")),
                Some(root.join("c"))
            ]
        );
    }
}
