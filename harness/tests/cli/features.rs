//! Features switch dependencies on, not only modules: a crate that uses leakloop without its
//! command line (`default-features = false`, as `examples/user-crate` does) must not compile
//! the crates only the command line and its plot, junit and progress-bar reports need.

use std::process::Command;

/// Crates only `cli` (and `reports`, which it turns on) may bring in.
const CLI_ONLY: &[&str] = &[
    "clap",
    "indicatif",
    "plotters",
    "quick-junit",
    "rusqlite",
    "tokio",
];

#[test]
fn the_library_without_default_features_compiles_no_cli_crates() {
    // Cargo sets CARGO for the processes it runs, tests included: the same cargo that built us.
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let out = Command::new(&cargo)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .args([
            "tree",
            "--locked",
            "-p",
            "leakloop",
            "--no-default-features",
        ])
        .args(["-e", "normal", "--prefix", "none", "--format", "{p}"])
        .output()
        .expect("cargo runs");
    assert!(
        out.status.success(),
        "cargo tree failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let tree = String::from_utf8(out.stdout).unwrap();
    let names: Vec<&str> = tree
        .lines()
        .filter_map(|line| line.split_whitespace().next())
        .collect();
    assert!(names.contains(&"serde"), "not a dependency tree:\n{tree}");
    let found: Vec<&&str> = CLI_ONLY.iter().filter(|c| names.contains(c)).collect();
    assert!(
        found.is_empty(),
        "`cargo tree -p leakloop --no-default-features -e normal` lists {found:?}: make them \
         optional dependencies that `cli` or `reports` turns on (harness/Cargo.toml)"
    );
}
