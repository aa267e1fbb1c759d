//! The merge of `leakloop run --partition K/N` outputs (one folder per CI machine) into the
//! folder a single run of the whole suite would have written: [`read_shares`] reads each share's
//! suite report, [`join`] checks that they are every partition of one suite, each once, and joins
//! their entries, [`plan_copies`] checks every scenario folder before anything is written, and
//! [`copy_into`] copies them into the claimed `--out`. The CLI (`cli/suite/merge.rs`) claims the
//! folder, prints and writes the suite's reports.
//!
//! A share is data, not trusted structure: its index's `folder` entries must be plain names
//! (`report::safe_path`, checked when the index is read), a scenario folder or anything in it
//! that is a symbolic link, a FIFO or a device is refused (naming it), and the copy walks each
//! folder with the one bounded walk (`crate::walk`). The only thing ever removed is a scenario
//! folder inside the claimed `--out` (`OutDir::clear_entry`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::input::open_regular;
use crate::report::{
    read_suite_report, OutDir, ReportError, SuiteEntry, SuiteReport, LOCK_FILE, REPORT_JSON,
};
use crate::suite::partition::share_of;
use crate::walk::{walk, Deep, Found, Kind, Limits, WalkError};

/// Why shares cannot be merged. Every kind but [`MergeError::Report`] and [`MergeError::Copy`]
/// is bad input; the messages are whole sentences (no field is a `source`).
#[derive(Debug, thiserror::Error)]
pub(crate) enum MergeError {
    /// A share's report.json could not be read (its own error decides the exit code).
    #[error(transparent)]
    Report(Box<ReportError>),
    /// A folder's report.json is a run's, not a suite's.
    #[error(
        "{} is not the report of a suite run (`leakloop run ... --partition K/N --out DIR` \
         writes one)",
        path.display()
    )]
    NotASuite {
        /// The report.json.
        path: PathBuf,
    },
    /// No folders were given.
    #[error("nothing to merge")]
    Nothing,
    /// Two shares of different suites.
    #[error(
        "{} and {} hold different suites ({} scenarios, fingerprint {}; {} scenarios, \
         fingerprint {}): merge partitions of one suite, run on the same files",
        first.dir.display(), other.dir.display(), first.scenarios, first.fingerprint,
        other.scenarios, other.fingerprint
    )]
    DifferentSuites {
        /// The first share.
        first: SuiteOf,
        /// The share that differs.
        other: SuiteOf,
    },
    /// A folder of a whole (unpartitioned) suite run.
    #[error("{} holds a whole suite, not a partition: it overlaps every other folder", dir.display())]
    WholeSuite {
        /// The folder.
        dir: PathBuf,
    },
    /// Shares that split the suite into different numbers of partitions.
    #[error(
        "{} is partition {index}/{count}, but {} splits the suite into {first_count} shares",
        dir.display(), first_dir.display()
    )]
    ShareCount {
        /// The folder that differs.
        dir: PathBuf,
        /// Its partition.
        index: u32,
        /// Its number of shares.
        count: u32,
        /// The first folder.
        first_dir: PathBuf,
        /// The first folder's number of shares.
        first_count: u32,
    },
    /// The same partition given twice.
    #[error(
        "partitions overlap: {} and {} are both partition {index}/{count}",
        first.display(), second.display()
    )]
    Overlap {
        /// The folder given first.
        first: PathBuf,
        /// The folder given again.
        second: PathBuf,
        /// The partition.
        index: u32,
        /// Its number of shares.
        count: u32,
    },
    /// A scenario in a share its path does not hash to.
    #[error(
        "{}: scenario {scenario} belongs to partition {belongs}/{count}, not {index}/{count}",
        dir.display()
    )]
    WrongShare {
        /// The share's folder.
        dir: PathBuf,
        /// The scenario's path in the suite.
        scenario: String,
        /// The share it belongs to.
        belongs: u32,
        /// The share it was found in.
        index: u32,
        /// The number of shares.
        count: u32,
    },
    /// Partitions not given (`K/N` each).
    #[error(
        "{} missing: a merge needs every share of the suite (given: {})",
        match missing.as_slice() {
            [one] => format!("partition {one} is"),
            more => format!("partitions {} are", more.join(", ")),
        },
        given.join(", ")
    )]
    Missing {
        /// The partitions missing, `K/N`.
        missing: Vec<String>,
        /// The partitions given, `K/N`.
        given: Vec<String>,
    },
    /// The shares hold fewer (or more) scenarios than the suite.
    #[error(
        "the partitions hold {held} scenarios, but the suite has {suite}: a partition's run did \
         not finish"
    )]
    Unfinished {
        /// Scenarios in the shares.
        held: usize,
        /// Scenarios in the suite.
        suite: usize,
    },
    /// `--out` is one of the shares.
    #[error("--out {} is one of the partitions being merged: choose a new folder", out.display())]
    OutIsAShare {
        /// The `--out` folder.
        out: PathBuf,
    },
    /// Something in a scenario folder that a run never writes.
    #[error(
        "{} is {what}: merge copies only the folders and regular files a run writes, and \
         follows no link",
        path.display()
    )]
    Refused {
        /// The entry.
        path: PathBuf,
        /// What it is (`a symbolic link`, ...).
        what: &'static str,
    },
    /// A scenario folder that cannot be looked at.
    #[error("cannot read {}: {error}", path.display())]
    Unreadable {
        /// The folder.
        path: PathBuf,
        /// The file system's error.
        error: std::io::Error,
    },
    /// The bounded walk refused a scenario folder.
    #[error("merge: {0}")]
    Walk(WalkError),
    /// A scenario folder could not be copied into the claimed `--out` (an output failure).
    #[error("cannot copy the folder of {scenario} into {}: {error}", out.display())]
    Copy {
        /// The scenario's path in the suite.
        scenario: String,
        /// The `--out` folder.
        out: PathBuf,
        /// What failed.
        error: Box<ReportError>,
    },
}

impl From<ReportError> for MergeError {
    fn from(e: ReportError) -> Self {
        MergeError::Report(Box::new(e))
    }
}

/// A share's folder and the suite it says it belongs to (for [`MergeError::DifferentSuites`]).
#[derive(Debug, Clone)]
pub(crate) struct SuiteOf {
    /// The share's folder.
    pub dir: PathBuf,
    /// The suite's number of scenarios.
    pub scenarios: usize,
    /// The suite's fingerprint.
    pub fingerprint: String,
}

/// One share: its folder and its suite report.
pub(crate) type Share = (PathBuf, SuiteReport);

/// Reads each folder's suite report.
pub(crate) fn read_shares(dirs: &[PathBuf]) -> Result<Vec<Share>, MergeError> {
    dirs.iter()
        .map(|dir| {
            let path = dir.join(REPORT_JSON);
            match read_suite_report(&path)? {
                Some(report) => Ok((dir.clone(), report)),
                None => Err(MergeError::NotASuite { path }),
            }
        })
        .collect()
}

/// Checks that `parts` are every partition of one suite, each once, and joins their entries.
/// The joined report's exit code is the largest of its scenarios' (the documented codes grow
/// with how bad the outcome is); the CLI checks that each is a code leakloop gives.
pub(crate) fn join(parts: &[Share]) -> Result<SuiteReport, MergeError> {
    let Some((first_dir, first)) = parts.first() else {
        return Err(MergeError::Nothing);
    };
    let mut shares: BTreeMap<u32, &Path> = BTreeMap::new();
    let mut count = None;
    for (dir, report) in parts {
        if report.suite != first.suite {
            let of = |dir: &Path, report: &SuiteReport| SuiteOf {
                dir: dir.to_owned(),
                scenarios: report.suite.scenarios,
                fingerprint: report.suite.fingerprint.clone(),
            };
            return Err(MergeError::DifferentSuites {
                first: of(first_dir, first),
                other: of(dir, report),
            });
        }
        let Some(p) = report.partition else {
            return Err(MergeError::WholeSuite { dir: dir.clone() });
        };
        let first_count = *count.get_or_insert(p.count);
        if first_count != p.count {
            return Err(MergeError::ShareCount {
                dir: dir.clone(),
                index: p.index,
                count: p.count,
                first_dir: first_dir.clone(),
                first_count,
            });
        }
        if let Some(other) = shares.insert(p.index, dir) {
            return Err(MergeError::Overlap {
                first: other.to_owned(),
                second: dir.clone(),
                index: p.index,
                count: p.count,
            });
        }
        for entry in &report.scenarios {
            let belongs = share_of(&entry.path, p.count);
            if belongs != p.index {
                return Err(MergeError::WrongShare {
                    dir: dir.clone(),
                    scenario: entry.path.clone(),
                    belongs,
                    index: p.index,
                    count: p.count,
                });
            }
        }
    }
    let count = count.unwrap_or(1);
    let missing: Vec<String> = (1..=count)
        .filter(|k| !shares.contains_key(k))
        .map(|k| format!("{k}/{count}"))
        .collect();
    if !missing.is_empty() {
        let given = shares.keys().map(|k| format!("{k}/{count}")).collect();
        return Err(MergeError::Missing { missing, given });
    }
    let entries: Vec<SuiteEntry> = parts
        .iter()
        .flat_map(|(_, r)| r.scenarios.iter().cloned())
        .collect();
    if entries.len() != first.suite.scenarios {
        return Err(MergeError::Unfinished {
            held: entries.len(),
            suite: first.suite.scenarios,
        });
    }
    let worst = super::worst_exit_code(entries.iter().map(|e| e.exit_code));
    Ok(SuiteReport::new(first.suite.clone(), None, worst, entries))
}

/// One scenario folder to copy: its share, its entry (and index in the share's report) and the
/// files and folders found in it.
#[derive(Debug)]
pub(crate) struct Copy<'a> {
    share: &'a Path,
    index: usize,
    entry: &'a SuiteEntry,
    items: Vec<Found>,
}

/// Checks every share's scenario folders (and that `out` is none of the shares) before `out`
/// is claimed, so that a refusal changes nothing; returns what to copy.
pub(crate) fn plan_copies<'a>(parts: &'a [Share], out: &Path) -> Result<Vec<Copy<'a>>, MergeError> {
    for (dir, _) in parts {
        if same_folder(dir, out) {
            return Err(MergeError::OutIsAShare {
                out: out.to_owned(),
            });
        }
    }
    let mut copies = Vec::new();
    for (dir, report) in parts {
        for (index, entry) in report.scenarios.iter().enumerate() {
            if let Some(items) = plan_copy(&dir.join(&entry.folder))? {
                copies.push(Copy {
                    share: dir,
                    index,
                    entry,
                    items,
                });
            }
        }
    }
    Ok(copies)
}

/// Copies the planned scenario folders into the claimed `out`, each replacing what `out` held
/// under its name.
pub(crate) fn copy_into(copies: Vec<Copy<'_>>, out: &OutDir) -> Result<(), MergeError> {
    for copy in copies {
        let Copy {
            share,
            index,
            entry,
            items,
        } = copy;
        let report = share.join(REPORT_JSON);
        out.clear_entry(
            &entry.folder,
            &report,
            &format!("scenarios[{index}].folder"),
        )
        .and_then(|target| copy_items(&share.join(&entry.folder), &target, &items))
        .map_err(|error| MergeError::Copy {
            scenario: entry.path.clone(),
            out: out.dir().to_owned(),
            error: Box::new(error),
        })?;
    }
    Ok(())
}

fn same_folder(a: &Path, b: &Path) -> bool {
    match (a.canonicalize(), b.canonicalize()) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    }
}

/// How deep a scenario folder's own tree may go (a run writes one level).
const MAX_COPY_DEPTH: usize = 8;

/// How many files and folders one scenario folder may hold.
const MAX_COPY_ENTRIES: usize = 10_000;

/// What to copy of a share's scenario folder `from`: its files and subfolders (never its lock),
/// found by the bounded walk; `None` when the scenario never ran (no folder). A folder that is a
/// link, or that holds a link, a FIFO or a device, is refused (naming it).
fn plan_copy(from: &Path) -> Result<Option<Vec<Found>>, MergeError> {
    let refuse = |path: &Path, what| MergeError::Refused {
        path: path.to_owned(),
        what,
    };
    let meta = match std::fs::symlink_metadata(from) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(error) => {
            return Err(MergeError::Unreadable {
                path: from.to_owned(),
                error,
            })
        }
        Ok(meta) => meta,
    };
    if meta.file_type().is_symlink() {
        return Err(refuse(from, "a symbolic link"));
    }
    if !meta.is_dir() {
        return Err(refuse(from, "not a folder"));
    }
    let limits = Limits {
        max_depth: MAX_COPY_DEPTH,
        max_entries: MAX_COPY_ENTRIES,
        deep: Deep::Refuse,
    };
    let items = walk(from, limits, |name| name == LOCK_FILE).map_err(MergeError::Walk)?;
    for item in &items {
        match item.kind {
            Kind::File | Kind::Dir => {}
            Kind::Symlink => return Err(refuse(&item.path, "a symbolic link")),
            Kind::Other => return Err(refuse(&item.path, "a FIFO, socket or device")),
        }
    }
    Ok(Some(items))
}

/// Copies the planned `items` of `from` into the fresh folder `to` (inside the claimed --out).
/// Each file is opened without blocking and checked to be a regular file on its descriptor, so
/// a file swapped for a FIFO after the check cannot hang the merge.
fn copy_items(from: &Path, to: &Path, items: &[Found]) -> Result<(), ReportError> {
    let write_error = |path: &Path, source| ReportError::Write {
        path: path.to_owned(),
        source,
    };
    std::fs::create_dir(to).map_err(|e| write_error(to, e))?;
    for item in items {
        let Ok(relative) = item.path.strip_prefix(from) else {
            continue;
        };
        let target = to.join(relative);
        if item.kind == Kind::Dir {
            std::fs::create_dir(&target).map_err(|e| write_error(&target, e))?;
            continue;
        }
        let mut source = open_regular(&item.path)?;
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&target)
            .map_err(|e| write_error(&target, e))?;
        std::io::copy(&mut source, &mut file).map_err(|e| write_error(&target, e))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::{EntryStatus, SuiteIdentity, SuitePartition};

    fn part(paths: &[&str], index: u32, count: u32) -> Share {
        let entries = paths
            .iter()
            .map(|p| SuiteEntry {
                path: (*p).to_owned(),
                folder: p.trim_end_matches(".yaml").to_owned(),
                name: None,
                status: EntryStatus::Pass,
                exit_code: if p.starts_with('b') { 1 } else { 0 },
                error: None,
                worst_metric: None,
                expectations: 1,
                expectations_failed: 0,
                duration_s: 0.1,
            })
            .collect();
        (
            PathBuf::from(format!("part{index}")),
            SuiteReport::new(
                SuiteIdentity {
                    scenarios: 3,
                    fingerprint: "f".into(),
                },
                Some(SuitePartition { index, count }),
                0,
                entries,
            ),
        )
    }

    /// Three scenarios split into the two shares their paths hash to.
    fn two_parts() -> Vec<Share> {
        let mut by_share: BTreeMap<u32, Vec<&str>> = BTreeMap::new();
        for p in ["a.yaml", "b.yaml", "c.yaml"] {
            by_share.entry(share_of(p, 2)).or_default().push(p);
        }
        (1..=2)
            .map(|k| part(by_share.get(&k).map_or(&[][..], Vec::as_slice), k, 2))
            .collect()
    }

    #[test]
    fn every_share_once_joins_in_path_order_with_the_worst_code() {
        let merged = join(&two_parts()).unwrap();
        let paths: Vec<&str> = merged.scenarios.iter().map(|e| e.path.as_str()).collect();
        assert_eq!(paths, ["a.yaml", "b.yaml", "c.yaml"]);
        assert_eq!(merged.partition, None);
        assert_eq!(merged.exit_code, 1);
    }

    #[test]
    fn a_missing_partition_is_named() {
        let parts = two_parts();
        let err = join(&parts[1..]).unwrap_err();
        assert!(matches!(err, MergeError::Missing { .. }), "{err:?}");
        assert!(
            err.to_string().contains("partition 1/2 is missing"),
            "{err}"
        );
        assert!(err.to_string().ends_with("(given: 2/2)"), "{err}");
    }

    #[test]
    fn a_partition_given_twice_overlaps() {
        let mut parts = two_parts();
        parts.push(parts[0].clone());
        let err = join(&parts).unwrap_err();
        assert!(
            matches!(err, MergeError::Overlap { index: 1, .. }),
            "{err:?}"
        );
        assert!(err.to_string().contains("partitions overlap"), "{err}");
        assert!(err.to_string().contains("both partition 1/2"), "{err}");
    }

    #[test]
    fn a_whole_run_or_another_suite_is_refused() {
        let mut parts = two_parts();
        parts[0].1.partition = None;
        let err = join(&parts).unwrap_err();
        assert!(matches!(err, MergeError::WholeSuite { .. }), "{err:?}");
        assert!(err.to_string().contains("not a partition"), "{err}");
        let mut parts = two_parts();
        parts[1].1.suite.fingerprint = "other".into();
        let err = join(&parts).unwrap_err();
        assert!(err.to_string().contains("different suites"), "{err}");
        assert!(
            err.to_string()
                .contains("fingerprint f; 3 scenarios, fingerprint other"),
            "{err}"
        );
        let mut parts = two_parts();
        parts[1].1.partition = Some(SuitePartition { index: 2, count: 3 });
        let err = join(&parts).unwrap_err();
        assert!(err.to_string().contains("2 shares"), "{err}");
    }

    #[test]
    fn a_scenario_in_the_wrong_share_is_refused() {
        let mut parts = two_parts();
        let moved = parts[1].1.scenarios.pop().unwrap();
        parts[0].1.scenarios.push(moved);
        let err = join(&parts).unwrap_err();
        assert!(matches!(err, MergeError::WrongShare { .. }), "{err:?}");
        assert!(err.to_string().contains("belongs to partition"), "{err}");
    }

    #[test]
    fn a_share_that_did_not_finish_is_refused() {
        let mut parts = two_parts();
        let share = parts
            .iter_mut()
            .find(|(_, r)| !r.scenarios.is_empty())
            .unwrap();
        share.1.scenarios.pop();
        let err = join(&parts).unwrap_err();
        assert!(
            matches!(err, MergeError::Unfinished { held: 2, suite: 3 }),
            "{err:?}"
        );
        assert_eq!(join(&[]).unwrap_err().to_string(), "nothing to merge");
    }

    #[test]
    fn a_linked_scenario_folder_is_refused_before_anything_is_written() {
        let dir = tempfile::tempdir().unwrap();
        let share = dir.path().join("share");
        std::fs::create_dir_all(share.join("real")).unwrap();
        std::os::unix::fs::symlink("real", share.join("a")).unwrap();
        let (_, mut report) = part(&["a.yaml"], 1, 1);
        report.suite.scenarios = 1;
        let parts = vec![(share.clone(), report)];
        let out = dir.path().join("out");
        let err = plan_copies(&parts, &out).unwrap_err();
        assert!(
            matches!(
                err,
                MergeError::Refused {
                    what: "a symbolic link",
                    ..
                }
            ),
            "{err:?}"
        );
        assert!(!out.exists());
        let err = plan_copies(&parts, &share).unwrap_err();
        assert!(matches!(err, MergeError::OutIsAShare { .. }), "{err:?}");
    }
}
