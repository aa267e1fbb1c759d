//! `leakloop driver-check -- COMMAND...`: checks an engine driver against the worker protocol
//! (docs/protocol.md) with a short scripted session and lists every violation.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use crate::cli::output;
use crate::cli::{CliError, Exit, Outcome};
use crate::engine::{check_driver, DriverCheckPlan, DriverCheckReport, StepResult};

/// Arguments of `leakloop driver-check`.
#[derive(Debug, clap::Args)]
pub(crate) struct DriverCheckArgs {
    /// How long each call (the handshake too) may take before it counts as a hang.
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = parse_timeout)]
    call_timeout: Duration,
    /// The model path to send in the handshake (`engine.model`).
    #[arg(long, value_name = "PATH")]
    model: Option<PathBuf>,
    /// A backend option to send in the handshake (`engine.options`), as KEY=VALUE; VALUE is read
    /// as JSON when it parses (`64`, `true`, `"x"`), as a string otherwise. Repeatable.
    #[arg(long = "option", value_name = "KEY=VALUE", value_parser = parse_option)]
    options: Vec<(String, serde_json::Value)>,
    /// The driver's command line (after `--`).
    #[arg(last = true, required = true, value_name = "COMMAND")]
    command: Vec<String>,
}

pub(crate) fn run(args: DriverCheckArgs) -> Result<Outcome, CliError> {
    if args.command.first().is_none_or(String::is_empty) {
        return Err(CliError::bad_input("name the driver program after `--`"));
    }
    let plan = DriverCheckPlan {
        command: args.command,
        call_timeout: args.call_timeout,
        model: args.model,
        options: args.options.into_iter().collect::<BTreeMap<_, _>>(),
    };
    // The engine's error says whether the program could not be started or started and refused
    // its configuration; what was sent is named so that the refused option can be found.
    let report = check_driver(&plan).map_err(|e| {
        CliError::from(e).context(format!(
            "driver-check of `{}`{}",
            plan.command.join(" "),
            sent(&plan)
        ))
    })?;
    output::print(&render(&plan, &report));
    Ok(Outcome::Verdict(exit_of(&report)))
}

/// What the handshake carried besides the defaults, as the flags that set it, e.g.
/// ` (sent --model m.bin --option threads=2)`; empty when nothing was set.
fn sent(plan: &DriverCheckPlan) -> String {
    let mut flags: Vec<String> = Vec::new();
    if let Some(model) = &plan.model {
        flags.push(format!("--model {}", model.display()));
    }
    for (key, value) in &plan.options {
        flags.push(format!("--option {key}={value}"));
    }
    if flags.is_empty() {
        String::new()
    } else {
        format!(" (sent {})", flags.join(" "))
    }
}

/// 0 conforming, 1 any violation, 3 the engine failed a call before the check could finish.
fn exit_of(report: &DriverCheckReport) -> Exit {
    if report.violations() > 0 {
        Exit::ExpectationFailed
    } else if report.engine_failed() {
        Exit::EngineFailed
    } else {
        Exit::Pass
    }
}

fn render(plan: &DriverCheckPlan, report: &DriverCheckReport) -> String {
    let mut text = format!("driver-check: {}\n", plan.command.join(" "));
    for step in &report.steps {
        let (mark, what) = match &step.result {
            StepResult::Ok(what) => ("ok  ", what),
            StepResult::Violation(what) => ("FAIL", what),
            StepResult::EngineFailed(what) => ("ERR ", what),
        };
        let ms = step.elapsed.as_secs_f64() * 1000.0;
        let what = output::bounded(what).replace('\n', "\n        ");
        text.push_str(&format!(
            "  {mark}  {:<13} {ms:>8.1} ms  {what}\n",
            step.call
        ));
    }
    let violations = report.violations();
    text.push_str(&match (violations, report.engine_failed()) {
        (0, false) => format!(
            "conforming: {} steps answered as docs/protocol.md says\n",
            report.steps.len()
        ),
        (0, true) => "not finished: the engine failed a call (a valid `failed` reply, not a \
                      protocol violation); fix its setup (--model, --option) and check again\n"
            .to_owned(),
        (1, _) => "1 protocol violation\n".to_owned(),
        (n, _) => format!("{n} protocol violations\n"),
    });
    text
}

fn parse_timeout(text: &str) -> Result<Duration, String> {
    let duration =
        leakloop_units::parse_duration(text).map_err(|e| e.describe("duration", text))?;
    if duration.is_zero() {
        return Err("must be more than 0".into());
    }
    Ok(duration)
}

fn parse_option(text: &str) -> Result<(String, serde_json::Value), String> {
    let Some((key, value)) = text.split_once('=') else {
        return Err(format!("`{text}` is not KEY=VALUE"));
    };
    if key.is_empty() {
        return Err(format!("`{text}` has an empty KEY"));
    }
    let value =
        serde_json::from_str(value).unwrap_or_else(|_| serde_json::Value::String(value.to_owned()));
    Ok((key.to_owned(), value))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_are_json_when_they_parse_and_strings_otherwise() {
        assert_eq!(
            parse_option("grow_kib=64").unwrap(),
            ("grow_kib".into(), serde_json::json!(64))
        );
        assert_eq!(
            parse_option("name=tiny").unwrap(),
            ("name".into(), serde_json::json!("tiny"))
        );
        assert!(parse_option("novalue").is_err());
        assert!(parse_option("=1").is_err());
    }

    #[test]
    fn a_zero_timeout_is_refused() {
        assert!(parse_timeout("0s").is_err());
        assert_eq!(
            parse_timeout("1500ms").unwrap(),
            Duration::from_millis(1500)
        );
    }
}
