//! Seed inputs: the project's own fixtures, and the inputs kept from earlier findings.

use std::path::{Path, PathBuf};

use crate::Target;

/// Where inputs kept from fuzzing findings live, one folder per target.
pub const FUZZ_FIXTURES: &str = "fixtures/fuzz";

/// The repository root.
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the fuzz crate sits in the workspace")
        .to_owned()
}

/// The seed files of `target`, sorted by path: fixtures of its kind and its kept findings.
pub fn seed_corpus(root: &Path, target: Target) -> Vec<(PathBuf, Vec<u8>)> {
    let (folders, wanted): (&[&str], fn(&Path) -> bool) = match target {
        Target::Scenario => (&["fixtures/scenarios", "fixtures/bad"], |p| {
            has_extension(p, "yaml")
        }),
        Target::Trace => (&["fixtures/traces", "fixtures/bad"], |p| {
            has_extension(p, "csv") || has_extension(p, "json")
        }),
        Target::Report => (&["fixtures/traces"], |p| has_extension(p, "json")),
        Target::Dumpsys => (&["fixtures/dumpsys"], |p| has_extension(p, "txt")),
        Target::Suite => (&["fixtures/suite-index"], |p| has_extension(p, "json")),
        Target::Markers => (&["fixtures/attach/streams"], |p| has_extension(p, "txt")),
        Target::Replies => (&["fixtures/drivers/replies"], |p| has_extension(p, "jsonl")),
    };
    let kept = format!("{FUZZ_FIXTURES}/{}", target.name());
    let mut files: Vec<PathBuf> = folders
        .iter()
        .copied()
        .chain([kept.as_str()])
        .flat_map(|folder| list(&root.join(folder)))
        .filter(|p| wanted(p) || p.starts_with(root.join(&kept)))
        .collect();
    files.sort();
    files
        .into_iter()
        .filter_map(|p| std::fs::read(&p).ok().map(|bytes| (p, bytes)))
        .collect()
}

fn list(folder: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(folder)
        .map(|entries| {
            entries
                .filter_map(Result::ok)
                .map(|e| e.path())
                .filter(|p| p.is_file())
                .collect()
        })
        .unwrap_or_default()
}

fn has_extension(path: &Path, ext: &str) -> bool {
    path.extension().is_some_and(|e| e == ext)
}
