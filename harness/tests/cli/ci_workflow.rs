//! ci/examples/github-nightly.yml, exercised here: its matrix agrees with its PARTITIONS, and its
//! two leakloop steps (each machine's share, then the merge of the downloaded artifacts) run as
//! written, with bash, on a simulator suite, one library version. What only GitHub can do
//! (checkout, caching, uploading and downloading artifacts, publishing JUnit) is stood in for by
//! copying each share's folder where download-artifact puts it (`parts/<artifact name>/`).

use std::path::Path;
use std::process::Command;

use leakloop::bench::write_sim_suite;
use leakloop::report::read_suite_report;
use serde_yaml::Value;

use crate::common::{workspace, LEAKLOOP};

fn workflow() -> Value {
    let path = workspace().join("ci/examples/github-nightly.yml");
    let text = std::fs::read_to_string(&path).unwrap();
    serde_yaml::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The `run:` text of the step named `name` in job `job`.
fn step(workflow: &Value, job: &str, name: &str) -> String {
    workflow["jobs"][job]["steps"]
        .as_sequence()
        .unwrap()
        .iter()
        .find(|s| s["name"].as_str() == Some(name))
        .and_then(|s| s["run"].as_str())
        .unwrap_or_else(|| panic!("job {job} has no step {name:?} with a run"))
        .to_owned()
}

/// Replaces the workflow expressions the two steps use.
fn substitute(script: &str, partition: Option<u64>, version: &str) -> String {
    let mut script = script.replace("${{ matrix.litert.version }}", version);
    if let Some(k) = partition {
        script = script.replace("${{ matrix.partition }}", &k.to_string());
    }
    assert!(
        !script.contains("${{"),
        "an expression left unreplaced: {script}"
    );
    script
}

fn bash(script: &str, cwd: &Path, env: &[(&str, &str)]) -> (Option<i32>, String) {
    let mut command = Command::new("bash");
    command
        .args(["-euo", "pipefail", "-c", script])
        .current_dir(cwd);
    for (k, v) in env {
        command.env(k, v);
    }
    let output = command.output().expect("bash runs");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    (output.status.code(), text)
}

#[test]
fn the_matrix_has_as_many_shares_as_partitions_says() {
    let workflow = workflow();
    let shares = workflow["jobs"]["suite"]["strategy"]["matrix"]["partition"]
        .as_sequence()
        .unwrap();
    let partitions: usize = workflow["env"]["PARTITIONS"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(shares.len(), partitions);
    let listed: Vec<u64> = shares.iter().map(|s| s.as_u64().unwrap()).collect();
    assert_eq!(listed, (1..=partitions as u64).collect::<Vec<_>>());
    let libs = |job: &str| -> Vec<String> {
        workflow["jobs"][job]["strategy"]["matrix"]["litert"]
            .as_sequence()
            .unwrap()
            .iter()
            .map(|l| l["version"].as_str().unwrap().to_owned())
            .collect()
    };
    assert_eq!(libs("suite"), libs("merge"), "a merge job per library");
}

#[test]
fn the_workflow_steps_split_and_merge_a_suite_locally() {
    let workflow = workflow();
    let shares: Vec<u64> = workflow["jobs"]["suite"]["strategy"]["matrix"]["partition"]
        .as_sequence()
        .unwrap()
        .iter()
        .map(|s| s.as_u64().unwrap())
        .collect();
    let partitions = workflow["env"]["PARTITIONS"].as_str().unwrap().to_owned();
    let run = step(&workflow, "suite", "Run this machine's share");
    let merge = step(&workflow, "merge", "Merge the partitions");

    let work = tempfile::tempdir().unwrap();
    write_sim_suite(&work.path().join("nightly"), 10).unwrap();
    let exe = LEAKLOOP;
    let env = [
        ("SUITE", "nightly/"),
        ("PARTITIONS", partitions.as_str()),
        ("LEAKLOOP", exe),
        ("NO_COLOR", "1"),
    ];
    let version = "local";
    for &k in &shares {
        let (code, text) = bash(&substitute(&run, Some(k), version), work.path(), &env);
        // The generated suite holds leaks: a share with one exits 1, a clean one 0.
        assert!(matches!(code, Some(0 | 1)), "share {k}: {text}");
        // upload-artifact of out/part-K, then download-artifact into parts/<artifact name>/.
        let artifact = format!("suite-{version}-part-{k}");
        std::fs::create_dir_all(work.path().join("parts")).unwrap();
        std::fs::rename(
            work.path().join(format!("out/part-{k}")),
            work.path().join("parts").join(artifact),
        )
        .unwrap();
    }
    let (code, text) = bash(&substitute(&merge, None, version), work.path(), &env);
    assert_eq!(code, Some(1), "the suite holds leaks: {text}");
    let merged = work.path().join("merged").join(version);
    let report = read_suite_report(&merged.join("report.json"))
        .unwrap()
        .unwrap();
    assert_eq!(report.scenarios.len(), 10);
    assert_eq!(report.partition, None);
    assert!(merged.join("junit.xml").is_file());
    assert!(merged.join("summary.md").is_file());

    // A share that never uploaded: the merge refuses, naming it.
    std::fs::remove_dir_all(work.path().join("merged")).unwrap();
    let last = format!("suite-{version}-part-{}", shares.last().unwrap());
    std::fs::remove_dir_all(work.path().join("parts").join(last)).unwrap();
    let (code, text) = bash(&substitute(&merge, None, version), work.path(), &env);
    assert_eq!(code, Some(2), "{text}");
    assert!(text.contains("is missing"), "{text}");
}
