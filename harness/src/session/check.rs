//! What `leakloop check` asks of one scenario file without running it: that it loads and is
//! valid, and that the LiteRT-LM library it would run on can run every step it names.

use std::path::Path;

use crate::analyze::planned_expectations;
use crate::engine::litert_lm::check_library;
use crate::scenario::{load_scenario, Scenario, StopMode};

/// Loads and validates the scenario at `path` and checks it against `lib` (or the library it
/// would find itself). The error is the full text to show, naming the file.
pub fn check_scenario_file(path: &Path, lib: Option<&Path>) -> Result<Scenario, String> {
    let scenario = load_scenario(path).map_err(|e| e.to_string())?;
    check_library(&scenario, lib).map_err(|why| format!("{}: {why}", path.display()))?;
    Ok(scenario)
}

/// The lines that say a file is valid: `ok <file>: <name> (<backend>, <turns>)`, then one
/// indented line per expectation it will be judged on, defaults marked `(default)`.
pub fn render_checked(path: &Path, scenario: &Scenario) -> String {
    let mut out = format!(
        "ok {}: {} ({}, {})",
        path.display(),
        scenario.name,
        scenario.engine.backend.as_str(),
        turns_label(scenario)
    );
    for planned in planned_expectations(scenario) {
        let mark = if planned.defaulted { " (default)" } else { "" };
        out.push_str(&format!("\n  {}{mark}: {}", planned.name, planned.rule));
    }
    out
}

/// How many turns a scenario runs: `12 turns`, or `at most 100 turns` when it stops once decided.
fn turns_label(scenario: &Scenario) -> String {
    match scenario.stop {
        StopMode::Turns => format!("{} turns", scenario.turns),
        StopMode::Decided => format!("at most {} turns, stops once decided", scenario.turns),
    }
}
