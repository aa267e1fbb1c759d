//! Hostile data stays data: index entries, scenario names and links planted in the folders that
//! `merge`, `history --out`, `bisect --out`, `run --out` and `report` read must never make them
//! write, remove or follow anything outside their `--out`. Each test snapshots the surrounding
//! temporary tree (paths, types, sizes, modification times, link targets) before and after, and
//! checks the exit code and message of each refusal.

use std::collections::BTreeMap;
use std::os::unix::fs::{symlink, MetadataExt};
use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::{Duration, Instant};

use crate::common::stdout_and_stderr as text;
use crate::history::leakloop;

/// What the snapshot keeps of one entry.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Seen {
    kind: &'static str,
    size: u64,
    mtime_ns: i128,
    link: Option<PathBuf>,
}

/// Every entry under `root` (links not followed), except what lies inside `allowed` (the
/// command's --out). A folder that holds an allowed path keeps its type only: creating --out
/// changes its parent's time and size.
fn snapshot(root: &Path, allowed: &[&Path]) -> BTreeMap<PathBuf, Seen> {
    let mut seen = BTreeMap::new();
    let mut pending = vec![root.to_owned()];
    while let Some(dir) = pending.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if allowed.iter().any(|a| path.starts_with(a)) {
                continue;
            }
            let meta = std::fs::symlink_metadata(&path).unwrap();
            let holds_allowed = allowed.iter().any(|a| a.starts_with(&path));
            let kind = if meta.file_type().is_symlink() {
                "link"
            } else if meta.is_dir() {
                "dir"
            } else {
                "file"
            };
            seen.insert(
                path.clone(),
                Seen {
                    kind,
                    size: if holds_allowed { 0 } else { meta.size() },
                    mtime_ns: if holds_allowed {
                        0
                    } else {
                        i128::from(meta.mtime()) * 1_000_000_000 + i128::from(meta.mtime_nsec())
                    },
                    link: std::fs::read_link(&path).ok(),
                },
            );
            if kind == "dir" {
                pending.push(path);
            }
        }
    }
    seen
}

/// A folder outside every --out with a precious file in it.
fn plant_victim(tmp: &Path) -> PathBuf {
    let victim = tmp.join("victim");
    std::fs::create_dir_all(&victim).unwrap();
    std::fs::write(victim.join("precious.txt"), "do not touch").unwrap();
    victim
}

fn arg(path: &Path) -> &str {
    path.to_str().unwrap()
}

/// A short sim scenario named `name` at `path`.
fn scenario(path: &Path, name: &str, leaky: bool) {
    let profile = if leaky {
        "{weights: 64MiB, native_base: 16MiB, kv_cache: 1MiB, activations: 1MiB, \
         leak_per_generation: 1MiB, leak_on: native}"
    } else {
        "{weights: 64MiB, native_base: 16MiB, kv_cache: 1MiB, activations: 1MiB}"
    };
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(
        path,
        format!(
            "name: {name}\nseed: 1\nengine: {{backend: sim, profile: p}}\nprofiles:\n  p: \
             {profile}\nwarmup_turns: 1\nturns: 6\nturn:\n  - open: {{}}\n  - send: {{prompt: \
             \"hi\"}}\n  - generate: {{max_output_tokens: 4}}\n  - close: {{}}\nsample: {{after: \
             [load, close]}}\nwatch: [native_heap]\nexpect:\n  native_heap: {{tolerance: 64MiB, \
             max_growth_per_turn: 64KiB}}\n"
        ),
    )
    .unwrap();
}

/// Rewrites one JSON file with `edit`.
fn edit_json(path: &Path, edit: impl FnOnce(&mut serde_json::Value)) {
    let mut value: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    edit(&mut value);
    std::fs::write(path, serde_json::to_string_pretty(&value).unwrap()).unwrap();
}

/// The two partitions of a three-scenario suite, run into `tmp/share1` and `tmp/share2`.
fn two_shares(tmp: &Path) -> [PathBuf; 2] {
    let suite = tmp.join("suite");
    for (i, name) in ["a", "b", "c"].iter().enumerate() {
        scenario(&suite.join(format!("{name}.yaml")), name, i == 1);
    }
    [1, 2].map(|k| {
        let share = tmp.join(format!("share{k}"));
        let partition = format!("{k}/2");
        let out = leakloop(&[
            "run",
            arg(&suite),
            "--quiet",
            "--partition",
            &partition,
            "--out",
            arg(&share),
        ]);
        assert!(out.status.code().unwrap() <= 1, "{}", text(&out));
        share
    })
}

/// The share whose index has at least one entry that ran, and that entry's folder.
fn share_with_a_folder(shares: &[PathBuf; 2]) -> (PathBuf, String) {
    for share in shares {
        let index: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(share.join("report.json")).unwrap())
                .unwrap();
        if let Some(entry) = index["scenarios"].as_array().unwrap().first() {
            return (share.clone(), entry["folder"].as_str().unwrap().to_owned());
        }
    }
    panic!("no share ran a scenario");
}

fn merge(shares: &[PathBuf; 2], out: &Path) -> Output {
    leakloop(&["merge", arg(&shares[0]), arg(&shares[1]), "--out", arg(out)])
}

#[test]
fn merge_refuses_hostile_folder_entries_and_touches_nothing_outside_out() {
    let tmp = tempfile::tempdir().unwrap();
    let victim = plant_victim(tmp.path());
    let shares = two_shares(tmp.path());
    let (share, _) = share_with_a_folder(&shares);
    let index = share.join("report.json");
    let original = std::fs::read_to_string(&index).unwrap();
    let out = tmp.path().join("merged");
    let hostile = [
        "../victim".to_owned(),
        arg(&victim).to_owned(),
        "x/../../victim".to_owned(),
        ".leakloop.lock".to_owned(),
        String::new(),
        "a\u{1b}]0;owned\u{7}".to_owned(),
    ];
    for folder in hostile {
        std::fs::write(&index, &original).unwrap();
        edit_json(&index, |v| {
            v["scenarios"][0]["folder"] = folder.clone().into()
        });
        let before = snapshot(tmp.path(), &[&out]);
        let result = merge(&shares, &out);
        let message = text(&result);
        assert_eq!(result.status.code(), Some(2), "{folder:?}: {message}");
        assert!(
            message.contains("scenarios[0].folder") && message.contains(arg(&index)),
            "{folder:?}: {message}"
        );
        assert!(!message.contains('\u{1b}'), "{message}");
        assert_eq!(snapshot(tmp.path(), &[&out]), before, "{folder:?}");
        assert!(!out.exists(), "refused before --out is claimed");
    }
    // Two entries naming one folder: one would overwrite the other.
    std::fs::write(&index, &original).unwrap();
    edit_json(&index, |v| {
        let first = v["scenarios"][0].clone();
        v["scenarios"].as_array_mut().unwrap().push(first);
    });
    let result = merge(&shares, &out);
    assert_eq!(result.status.code(), Some(2), "{}", text(&result));
    assert!(
        text(&result).contains("another entry already names it"),
        "{}",
        text(&result)
    );
    assert_eq!(
        std::fs::read_to_string(victim.join("precious.txt")).unwrap(),
        "do not touch"
    );
}

#[test]
fn merge_refuses_a_symlinked_scenario_folder_or_file() {
    let tmp = tempfile::tempdir().unwrap();
    let victim = plant_victim(tmp.path());
    let shares = two_shares(tmp.path());
    let (share, folder) = share_with_a_folder(&shares);
    let out = tmp.path().join("merged");
    let scenario_folder = share.join(&folder);

    // A file inside the scenario folder that is a link to the victim.
    symlink(
        victim.join("precious.txt"),
        scenario_folder.join("extra.txt"),
    )
    .unwrap();
    let before = snapshot(tmp.path(), &[&out]);
    let result = merge(&shares, &out);
    assert_eq!(result.status.code(), Some(2), "{}", text(&result));
    assert!(
        text(&result).contains("extra.txt is a symbolic link"),
        "{}",
        text(&result)
    );
    assert_eq!(snapshot(tmp.path(), &[&out]), before);
    std::fs::remove_file(scenario_folder.join("extra.txt")).unwrap();

    // The scenario folder itself replaced by a link to the victim.
    std::fs::rename(&scenario_folder, tmp.path().join("moved")).unwrap();
    symlink(&victim, &scenario_folder).unwrap();
    let before = snapshot(tmp.path(), &[&out]);
    let result = merge(&shares, &out);
    assert_eq!(result.status.code(), Some(2), "{}", text(&result));
    assert!(
        text(&result).contains(&format!("{folder} is a symbolic link")),
        "{}",
        text(&result)
    );
    assert_eq!(snapshot(tmp.path(), &[&out]), before);

    // Put back, the merge works and writes only inside --out.
    std::fs::remove_file(&scenario_folder).unwrap();
    std::fs::rename(tmp.path().join("moved"), &scenario_folder).unwrap();
    let before = snapshot(tmp.path(), &[&out]);
    let result = merge(&shares, &out);
    assert_eq!(result.status.code(), Some(1), "{}", text(&result));
    assert_eq!(snapshot(tmp.path(), &[&out]), before);
    assert!(out.join(&folder).join("report.json").is_file());
}

#[test]
fn history_out_keeps_a_hostile_scenario_name_inside_out() {
    let tmp = tempfile::tempdir().unwrap();
    plant_victim(tmp.path());
    let file = tmp.path().join("s.yaml");
    scenario(&file, "s", false);
    let builds: Vec<PathBuf> = (0..2).map(|i| tmp.path().join(format!("b{i}"))).collect();
    for (i, build) in builds.iter().enumerate() {
        let seed = (i + 1).to_string();
        let out = leakloop(&[
            "run",
            arg(&file),
            "--quiet",
            "--seed",
            &seed,
            "--out",
            arg(build),
        ]);
        assert_eq!(out.status.code(), Some(0), "{}", text(&out));
        edit_json(&build.join("report.json"), |v| {
            v["record"]["scenario"]["name"] = "../../escaped".into();
        });
    }
    let out = tmp.path().join("deep/hist");
    std::fs::create_dir_all(&out).unwrap();
    let before = snapshot(tmp.path(), &[&out]);
    let result = leakloop(&[
        "history",
        arg(&builds[0]),
        arg(&builds[1]),
        "--out",
        arg(&out),
    ]);
    assert!(result.status.code().unwrap() <= 1, "{}", text(&result));
    assert_eq!(snapshot(tmp.path(), &[&out]), before);
    let mut written: Vec<String> = std::fs::read_dir(&out)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    written.sort();
    assert_eq!(
        written,
        ["_._.._escaped.svg", "history.html", "history.txt"]
    );
}

#[test]
fn bisect_out_writes_only_inside_out() {
    let tmp = tempfile::tempdir().unwrap();
    plant_victim(tmp.path());
    let out = tmp.path().join("bisect");
    let before = snapshot(tmp.path(), &[&out]);
    let result = leakloop(&[
        "bisect",
        "fixtures/scenarios/bisect-sim-builds.yaml",
        "--versions",
        "build-4..build-5",
        "--runs",
        "1",
        "--turns",
        "6",
        "--out",
        arg(&out),
    ]);
    assert_eq!(result.status.code(), Some(0), "{}", text(&result));
    assert_eq!(snapshot(tmp.path(), &[&out]), before);
    assert!(out.join("build-5/run-1/report.json").is_file());
}

#[test]
fn a_suite_folder_with_link_loops_runs_each_scenario_once_inside_out() {
    let tmp = tempfile::tempdir().unwrap();
    let suite = tmp.path().join("suite");
    scenario(&suite.join("a.yaml"), "a", false);
    scenario(&suite.join("sub/b.yaml"), "b", false);
    symlink(".", suite.join("self")).unwrap();
    symlink("..", suite.join("sub/up")).unwrap();
    symlink("loop2", suite.join("loop1")).unwrap();
    symlink("loop1", suite.join("loop2")).unwrap();
    symlink("/", suite.join("root")).unwrap();
    symlink("a.yaml", suite.join("again.yaml")).unwrap();
    let out = tmp.path().join("out");
    let before = snapshot(tmp.path(), &[&out]);
    let result = leakloop(&[
        "run",
        arg(&suite),
        arg(&suite.join("self/a.yaml")),
        arg(&suite.join("*/*.yaml")),
        "--quiet",
        "--out",
        arg(&out),
    ]);
    assert_eq!(result.status.code(), Some(0), "{}", text(&result));
    assert_eq!(snapshot(tmp.path(), &[&out]), before);
    let index: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("report.json")).unwrap()).unwrap();
    let paths: Vec<&str> = index["scenarios"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["path"].as_str().unwrap())
        .collect();
    assert_eq!(paths, ["a.yaml", "sub/b.yaml"]);
}

#[test]
fn run_on_proc_self_ends_promptly_with_a_clear_error() {
    let started = Instant::now();
    let result = leakloop(&["run", "/proc/self", "--quiet"]);
    assert_eq!(result.status.code(), Some(2), "{}", text(&result));
    assert!(
        text(&result).contains("holds no scenario file")
            || text(&result).contains("leakloop searches no"),
        "{}",
        text(&result)
    );
    // A hang guard, not a timing assertion: the old walk never ended.
    assert!(started.elapsed() < Duration::from_secs(120));
}

#[test]
fn report_on_a_suite_derives_its_code_and_refuses_hostile_folders() {
    let tmp = tempfile::tempdir().unwrap();
    let victim = plant_victim(tmp.path());
    let suite = tmp.path().join("suite");
    scenario(&suite.join("clean.yaml"), "clean", false);
    scenario(&suite.join("leak.yaml"), "leak", true);
    let out = tmp.path().join("out");
    let result = leakloop(&["run", arg(&suite), "--quiet", "--out", arg(&out)]);
    assert_eq!(result.status.code(), Some(1), "{}", text(&result));
    let index = out.join("report.json");
    let original = std::fs::read_to_string(&index).unwrap();

    // The stored code says pass; the scenarios' own reports say a leak.
    edit_json(&index, |v| {
        v["exit_code"] = 0.into();
        for e in v["scenarios"].as_array_mut().unwrap() {
            e["exit_code"] = 0.into();
            e["status"] = "pass".into();
        }
    });
    let result = leakloop(&["report", arg(&out), "--no-write"]);
    assert_eq!(result.status.code(), Some(2), "{}", text(&result));
    assert!(
        text(&result).contains("says `pass`, but its report")
            && text(&result).contains("contradicts the scenarios' verdicts"),
        "{}",
        text(&result)
    );

    // A folder entry that points outside the suite folder is refused, and nothing changes.
    std::fs::write(&index, &original).unwrap();
    edit_json(&index, |v| v["scenarios"][0]["folder"] = "../victim".into());
    let before = snapshot(tmp.path(), &[]);
    let result = leakloop(&["report", arg(&out)]);
    assert_eq!(result.status.code(), Some(2), "{}", text(&result));
    assert!(
        text(&result).contains("scenarios[0].folder is `../victim`"),
        "{}",
        text(&result)
    );
    assert_eq!(snapshot(tmp.path(), &[]), before);
    assert!(victim.join("precious.txt").is_file());
}

#[test]
fn a_run_into_a_folder_a_suite_is_writing_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let suite_out = tmp.path().join("suite-out");
    std::fs::create_dir_all(&suite_out).unwrap();
    // What a suite in another process holds while it writes: the lock of its folder.
    let lock = std::fs::File::create(suite_out.join(".leakloop.lock")).unwrap();
    lock.try_lock().unwrap();
    let file = tmp.path().join("s.yaml");
    scenario(&file, "s", false);
    let inner = suite_out.join("x");
    let before = snapshot(tmp.path(), &[]);
    let result = leakloop(&["run", arg(&file), "--quiet", "--out", arg(&inner)]);
    assert_eq!(result.status.code(), Some(2), "{}", text(&result));
    assert!(
        text(&result).contains(&format!(
            "{} is in use by another leakloop",
            arg(&suite_out)
        )),
        "{}",
        text(&result)
    );
    assert_eq!(snapshot(tmp.path(), &[]), before);
}
