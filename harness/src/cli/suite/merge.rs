//! `leakloop merge DIR... --out DIR`: joins the outputs of `leakloop run --partition K/N` (one
//! folder per CI machine) into the folder a single run of the whole suite would have written:
//! every scenario folder copied, and the suite's report.json, summary.md and junit.xml
//! rendered from the joined entries. It refuses partitions of different suites, partitions
//! given twice, and a missing partition, naming them.
//!
//! A share is data, not trusted structure: its index's `folder` entries must be plain names
//! (`report::safe_path`, checked when the index is read), a scenario folder or anything in it
//! that is a symbolic link, a FIFO or a device is refused (exit 2, naming it), and the copy walks
//! each folder with the one bounded walk (`crate::walk`). Everything is checked before `--out` is
//! claimed, and the only thing ever removed is a scenario folder inside the claimed `--out`
//! (`OutDir::clear_entry`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::anyhow;

use crate::cli::output;
use crate::cli::run::claim_out;
use crate::cli::suite::partition::share_of;
use crate::cli::suite::run::write_index;
use crate::cli::{CliError, Exit, Outcome};
use crate::input::open_regular;
use crate::report::{
    read_suite_report, render_suite_text, ReportError, SuiteReport, LOCK_FILE, REPORT_JSON,
};
use crate::walk::{walk, Deep, Found, Kind, Limits};

/// Arguments of `leakloop merge`.
///
/// Exits with the worst code of the merged scenarios, like the whole run would have; 2 when the
/// folders are not every partition of one suite, each once.
#[derive(Debug, clap::Args)]
pub(crate) struct MergeArgs {
    /// The `--out` folders of `leakloop run --partition K/N`, one per partition.
    #[arg(required = true, value_name = "DIR")]
    dirs: Vec<PathBuf>,
    /// Where the merged suite goes (claimed like `run --out`).
    #[arg(long, value_name = "DIR")]
    out: PathBuf,
    /// Print only the counts line, not the table.
    #[arg(long, short)]
    quiet: bool,
}

pub(crate) fn run(args: MergeArgs) -> Result<Outcome, CliError> {
    let parts = read_parts(&args.dirs)?;
    let merged = join(&parts)?;
    let exit = Exit::from_code(merged.exit_code).ok_or_else(|| {
        CliError::bad_input(format!(
            "a partition's suite report names exit code {}, which no leakloop gives",
            merged.exit_code
        ))
    })?;
    for dir in &args.dirs {
        if same_folder(dir, &args.out) {
            return Err(CliError::bad_input(format!(
                "--out {} is one of the partitions being merged: choose a new folder",
                args.out.display()
            )));
        }
    }
    // Every share's folders are checked before --out is claimed: a refusal changes nothing.
    let mut copies = Vec::new();
    for (dir, report) in &parts {
        for (i, entry) in report.scenarios.iter().enumerate() {
            if let Some(items) = plan_copy(&dir.join(&entry.folder))? {
                copies.push((dir, i, entry, items));
            }
        }
    }
    let out = claim_out(&args.out)?;
    for (dir, i, entry, items) in copies {
        let index = dir.join(REPORT_JSON);
        let copied = out
            .clear_entry(&entry.folder, &index, &format!("scenarios[{i}].folder"))
            .and_then(|target| copy_items(&dir.join(&entry.folder), &target, &items));
        copied.map_err(|e| {
            CliError::Output(anyhow!(e).context(format!(
                "cannot copy the folder of {} into {}",
                entry.path,
                out.dir().display()
            )))
        })?;
    }
    if args.quiet {
        output::println(&merged.counts_line());
    } else {
        output::print(&render_suite_text(&merged));
    }
    output::println(&format!("reports: {}", out.dir().display()));
    write_index(out, &merged);
    Ok(Outcome::Verdict(exit))
}

fn same_folder(a: &Path, b: &Path) -> bool {
    match (a.canonicalize(), b.canonicalize()) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    }
}

/// Reads each folder's suite report.
fn read_parts(dirs: &[PathBuf]) -> Result<Vec<(PathBuf, SuiteReport)>, CliError> {
    dirs.iter()
        .map(|dir| {
            let path = dir.join(REPORT_JSON);
            match read_suite_report(&path)? {
                Some(report) => Ok((dir.clone(), report)),
                None => Err(CliError::bad_input(format!(
                    "{} is not the report of a suite run (`leakloop run ... --partition K/N \
                     --out DIR` writes one)",
                    path.display()
                ))),
            }
        })
        .collect()
}

/// Checks that `parts` are every partition of one suite, each once, and joins their entries.
pub(crate) fn join(parts: &[(PathBuf, SuiteReport)]) -> Result<SuiteReport, CliError> {
    let Some((first_dir, first)) = parts.first() else {
        return Err(CliError::bad_input("nothing to merge"));
    };
    let mut shares: BTreeMap<u32, &Path> = BTreeMap::new();
    let mut count = None;
    for (dir, report) in parts {
        if report.suite != first.suite {
            return Err(CliError::bad_input(format!(
                "{} and {} hold different suites ({} scenarios, fingerprint {}; {} scenarios, \
                 fingerprint {}): merge partitions of one suite, run on the same files",
                first_dir.display(),
                dir.display(),
                first.suite.scenarios,
                first.suite.fingerprint,
                report.suite.scenarios,
                report.suite.fingerprint
            )));
        }
        let Some(p) = report.partition else {
            return Err(CliError::bad_input(format!(
                "{} holds a whole suite, not a partition: it overlaps every other folder",
                dir.display()
            )));
        };
        if *count.get_or_insert(p.count) != p.count {
            return Err(CliError::bad_input(format!(
                "{} is partition {}/{}, but {} splits the suite into {} shares",
                dir.display(),
                p.index,
                p.count,
                first_dir.display(),
                count.unwrap_or_default()
            )));
        }
        if let Some(other) = shares.insert(p.index, dir) {
            return Err(CliError::bad_input(format!(
                "partitions overlap: {} and {} are both partition {}/{}",
                other.display(),
                dir.display(),
                p.index,
                p.count
            )));
        }
        for entry in &report.scenarios {
            if share_of(&entry.path, p.count) != p.index {
                return Err(CliError::bad_input(format!(
                    "{}: scenario {} belongs to partition {}/{}, not {}/{}",
                    dir.display(),
                    entry.path,
                    share_of(&entry.path, p.count),
                    p.count,
                    p.index,
                    p.count
                )));
            }
        }
    }
    let count = count.unwrap_or(1);
    let missing: Vec<String> = (1..=count)
        .filter(|k| !shares.contains_key(k))
        .map(|k| format!("{k}/{count}"))
        .collect();
    if !missing.is_empty() {
        let have: Vec<String> = shares.keys().map(|k| format!("{k}/{count}")).collect();
        return Err(CliError::bad_input(format!(
            "{} missing: a merge needs every share of the suite (given: {})",
            if missing.len() == 1 {
                format!("partition {} is", missing[0])
            } else {
                format!("partitions {} are", missing.join(", "))
            },
            have.join(", ")
        )));
    }
    let entries: Vec<_> = parts
        .iter()
        .flat_map(|(_, r)| r.scenarios.iter().cloned())
        .collect();
    if entries.len() != first.suite.scenarios {
        return Err(CliError::bad_input(format!(
            "the partitions hold {} scenarios, but the suite has {}: a partition's run did not \
             finish",
            entries.len(),
            first.suite.scenarios
        )));
    }
    let mut exits = Vec::with_capacity(entries.len());
    for e in &entries {
        exits.push(Exit::from_code(e.exit_code).ok_or_else(|| {
            CliError::bad_input(format!(
                "scenario {} has exit code {}, which no leakloop gives",
                e.path, e.exit_code
            ))
        })?);
    }
    Ok(SuiteReport::new(
        first.suite.clone(),
        None,
        Exit::worst(exits) as u8,
        entries,
    ))
}

/// How deep a scenario folder's own tree may go (a run writes one level).
const MAX_COPY_DEPTH: usize = 8;

/// How many files and folders one scenario folder may hold.
const MAX_COPY_ENTRIES: usize = 10_000;

/// What to copy of a share's scenario folder `from`: its files and subfolders (never its lock),
/// found by the bounded walk; `None` when the scenario never ran (no folder). A folder that is a
/// link, or that holds a link, a FIFO or a device, is refused (bad input, naming it).
fn plan_copy(from: &Path) -> Result<Option<Vec<Found>>, CliError> {
    let refuse = |path: &Path, what: &str| {
        CliError::bad_input(format!(
            "{} is {what}: merge copies only the folders and regular files a run writes, and \
             follows no link",
            path.display()
        ))
    };
    let meta = match std::fs::symlink_metadata(from) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => {
            return Err(CliError::bad_input(format!(
                "cannot read {}: {e}",
                from.display()
            )))
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
    let items = walk(from, limits, |name| name == LOCK_FILE)
        .map_err(|e| CliError::bad_input(format!("merge: {e}")))?;
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
    use crate::report::{EntryStatus, SuiteEntry, SuiteIdentity, SuitePartition};

    fn part(paths: &[&str], index: u32, count: u32) -> (PathBuf, SuiteReport) {
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
    fn two_parts() -> Vec<(PathBuf, SuiteReport)> {
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
        assert_eq!(err.exit(), Exit::BadInput);
        assert!(
            err.to_string().contains("partition 1/2 is missing"),
            "{err}"
        );
    }

    #[test]
    fn a_partition_given_twice_overlaps() {
        let mut parts = two_parts();
        parts.push(parts[0].clone());
        let err = join(&parts).unwrap_err();
        assert!(err.to_string().contains("partitions overlap"), "{err}");
        assert!(err.to_string().contains("both partition 1/2"), "{err}");
    }

    #[test]
    fn a_whole_run_or_another_suite_is_refused() {
        let mut parts = two_parts();
        parts[0].1.partition = None;
        let err = join(&parts).unwrap_err();
        assert!(err.to_string().contains("not a partition"), "{err}");
        let mut parts = two_parts();
        parts[1].1.suite.fingerprint = "other".into();
        let err = join(&parts).unwrap_err();
        assert!(err.to_string().contains("different suites"), "{err}");
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
        assert!(err.to_string().contains("belongs to partition"), "{err}");
    }
}
