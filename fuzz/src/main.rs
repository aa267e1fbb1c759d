//! `leakloop-fuzz`: runs the fuzz targets for a while (the CI step), prints what it did and
//! exits 1 when an input broke a rule, with the inputs written out.
//!
//! Usage: `leakloop-fuzz [--seconds N] [--seed N] [--target scenario|trace|report|dumpsys|suite|markers|replies]... [--out DIR]`

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use leakloop_fuzz::{fuzz, seed_corpus, workspace_root, FuzzSettings, Target};

fn main() -> ExitCode {
    let mut seconds = 30.0_f64;
    let mut seed = None;
    let mut targets = Vec::new();
    let mut out = workspace_root().join("target/fuzz-findings");
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = |name: &str| {
            args.next()
                .unwrap_or_else(|| usage(&format!("{name} needs a value")))
        };
        match arg.as_str() {
            "--seconds" => {
                seconds = value("--seconds")
                    .parse()
                    .ok()
                    .filter(|s: &f64| s.is_finite() && *s > 0.0)
                    .unwrap_or_else(|| usage("--seconds takes a positive number"))
            }
            "--seed" => {
                seed = Some(
                    value("--seed")
                        .parse()
                        .unwrap_or_else(|_| usage("--seed takes a whole number")),
                )
            }
            "--target" => {
                let name = value("--target");
                targets.push(
                    Target::from_name(&name)
                        .unwrap_or_else(|| usage(&format!("no target `{name}`"))),
                );
            }
            "--out" => out = PathBuf::from(value("--out")),
            other => usage(&format!("unknown argument `{other}`")),
        }
    }
    if targets.is_empty() {
        targets = Target::ALL.to_vec();
    }
    // A new seed each run finds new inputs; printed, so that a finding can be repeated.
    let seed = seed.unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs())
    });
    let per_target = Duration::from_secs_f64(seconds / targets.len() as f64);
    let root = workspace_root();
    println!("leakloop-fuzz: seed {seed}, {per_target:.1?} per target");
    let mut broken = 0;
    for target in targets {
        let seeds: Vec<Vec<u8>> = seed_corpus(&root, target)
            .into_iter()
            .map(|(_, bytes)| bytes)
            .collect();
        let settings = FuzzSettings {
            target,
            seed,
            duration: per_target,
            max_inputs: None,
            findings_dir: Some(out.clone()),
        };
        let report = fuzz(&settings, &seeds);
        println!(
            "{:<9} {} seeds, {} inputs in {:.1?} ({:.0}/s): {} accepted, {} refused with a \
             located error, {} findings",
            target.name(),
            seeds.len(),
            report.inputs,
            report.elapsed,
            report.inputs as f64 / report.elapsed.as_secs_f64().max(1e-9),
            report.accepted,
            report.refused,
            report.findings.len()
        );
        for (finding, input) in &report.findings {
            println!(
                "  {} ({} bytes; written under {})",
                finding.describe(),
                input.len(),
                out.join(target.name()).display()
            );
        }
        broken += report.findings.len();
    }
    if broken > 0 {
        println!(
            "{broken} findings: keep each input under fixtures/fuzz/<target>/ once fixed, so \
             that `cargo test -p leakloop-fuzz` replays it"
        );
        return ExitCode::FAILURE;
    }
    ExitCode::SUCCESS
}

fn usage(problem: &str) -> ! {
    eprintln!(
        "leakloop-fuzz: {problem}\nusage: leakloop-fuzz [--seconds N] [--seed N] \
         [--target scenario|trace|report|dumpsys|suite|markers|replies]... [--out DIR]"
    );
    std::process::exit(2)
}
