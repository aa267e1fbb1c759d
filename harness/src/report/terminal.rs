//! The terminal output of a run: a compact per-metric table, the ledger balance, each failed
//! expectation and the verdict line. It is rendered with ANSI styles; [`print_terminal`] writes
//! through `anstream`, which drops them when stdout is not a terminal or `NO_COLOR` is set.

use std::io::Write;

use anstyle::{AnsiColor, Style};

use crate::analyze::units::confidence_percent;
use crate::analyze::{Classification, Verdict, VerdictStatus};
use crate::input::printable;
use crate::report::facts::{
    backend_line, empty_ledger_text, engine_error_text, metric_passed, metric_result_word,
    stop_line, turns_line, verdict_line,
};
use crate::report::notes;
use crate::report::table::{render_table, Cell};
use crate::report::units::{format_rate_with_interval_of, format_value};
use crate::runner::RunRecord;

const HEADER: Style = Style::new().bold();
const DIM: Style = Style::new().dimmed();
const GOOD: Style = Style::new().fg_color(Some(anstyle::Color::Ansi(AnsiColor::Green)));
const BAD: Style = Style::new()
    .fg_color(Some(anstyle::Color::Ansi(AnsiColor::Red)))
    .bold();
const WARN: Style = Style::new().fg_color(Some(anstyle::Color::Ansi(AnsiColor::Yellow)));

fn classification_style(class: Classification) -> Style {
    match class {
        Classification::Clean => GOOD,
        Classification::Plateau => WARN,
        Classification::Growth => BAD,
        Classification::Inconclusive => DIM,
    }
}

fn pass_style(passed: Option<bool>) -> Style {
    match passed {
        Some(true) => GOOD,
        Some(false) => BAD,
        None => DIM,
    }
}

/// Renders the terminal report, with ANSI styles (strip them with `anstream` for plain text).
pub fn render_terminal(record: &RunRecord, verdict: &Verdict) -> String {
    let mut out = String::new();
    out.push_str(&format!(
        "{HEADER}{}{HEADER:#}  {}  {}\n",
        printable(&record.scenario.name),
        printable(&backend_line(record)),
        turns_line(record)
    ));
    if let Some(stop) = stop_line(record) {
        out.push_str(&format!("{DIM}{stop}{DIM:#}\n"));
    }
    out.push('\n');
    out.push_str(&metrics_table(verdict));
    out.push('\n');
    out.push_str(&ledger_section(record));
    out.push_str(&errors_section(record));
    out.push_str(&failures_section(verdict));
    out.push_str(&attribution_section(verdict));
    out.push_str(&cl_objects_section(verdict));
    out.push_str(&notes_section(verdict));
    let (status, line) = verdict_line(record, verdict);
    let style = if status == VerdictStatus::Pass {
        GOOD.bold()
    } else {
        BAD
    };
    // The line quotes the engine's error message.
    out.push_str(&format!("{style}{}{style:#}\n", printable(&line)));
    out
}

/// Live OpenCL objects by kind and creation site: the headline and one line per listed site.
fn cl_objects_section(verdict: &Verdict) -> String {
    let Some(c) = &verdict.cl_objects else {
        return String::new();
    };
    let mut out = format!(
        "{HEADER}OpenCL objects{HEADER:#}  {}\n",
        printable(&crate::attribution::cl_headline(c))
    );
    for line in crate::attribution::cl_site_lines(c) {
        out.push_str(&format!("  {}\n", printable(&line)));
    }
    out
}

/// Where the growth was allocated (`run --attribute`): the headline and one line per site.
fn attribution_section(verdict: &Verdict) -> String {
    verdict.attributions().map(attribution_block).collect()
}

/// One source's headline and sites.
fn attribution_block(a: &crate::attribution::Attribution) -> String {
    let mut out = format!(
        "{HEADER}Allocation sites{HEADER:#}  {}
",
        printable(&crate::attribution::headline(a))
    );
    for line in crate::attribution::site_lines(a) {
        out.push_str(&format!(
            "  {}
",
            printable(&line)
        ));
    }
    for note in &a.notes {
        out.push_str(&format!(
            "  {DIM}{}{DIM:#}
",
            printable(note)
        ));
    }
    out.push('\n');
    out
}

/// Writes the terminal report to stdout, honouring `NO_COLOR`, `CLICOLOR_FORCE` and whether stdout
/// is a terminal.
pub fn print_terminal(record: &RunRecord, verdict: &Verdict) -> std::io::Result<()> {
    let mut stdout = anstream::stdout().lock();
    stdout.write_all(render_terminal(record, verdict).as_bytes())?;
    stdout.flush()
}

fn metrics_table(verdict: &Verdict) -> String {
    if verdict.metrics.is_empty() {
        return format!("{DIM}no metrics were analysed{DIM:#}\n");
    }
    let confidence = verdict
        .metrics
        .values()
        .next()
        .map_or(0.95, |m| m.confidence);
    let growth = format!("growth/turn [{} CI]", confidence_percent(confidence));
    let mut rows = vec![[
        "metric",
        "baseline",
        "after warm-up",
        "last",
        growth.as_str(),
        "class",
        "result",
    ]
    .map(|h| Cell::styled(h, HEADER))
    .to_vec()];
    for (name, m) in &verdict.metrics {
        let passed = metric_passed(verdict, name);
        rows.push(vec![
            Cell::plain(name),
            Cell::plain(format_value(name, m.baseline)),
            Cell::plain(
                m.after_warmup
                    .map_or("-".to_owned(), |v| format_value(name, v)),
            ),
            Cell::plain(format_value(name, m.last)),
            Cell::plain(format_rate_with_interval_of(
                name,
                m.slope_bytes_per_turn,
                m.slope_interval,
            )),
            Cell::styled(
                m.classification.as_str(),
                classification_style(m.classification),
            ),
            Cell::styled(metric_result_word(verdict, name), pass_style(passed)),
        ]);
    }
    render_table(&rows, "")
}

fn ledger_section(record: &RunRecord) -> String {
    let totals = &record.ledger.totals;
    if totals.is_empty() {
        return format!(
            "{HEADER}ledger{HEADER:#}: {}\n\n",
            empty_ledger_text(record)
        );
    }
    let imbalances = record.ledger.imbalances();
    let summary = if imbalances.is_empty() {
        format!("{GOOD}balanced{GOOD:#}")
    } else {
        format!(
            "{BAD}{} of {} kinds unbalanced{BAD:#}",
            imbalances.len(),
            totals.len()
        )
    };
    let mut out = format!("{HEADER}ledger{HEADER:#}: {summary}\n");
    let mut rows = Vec::new();
    for (kind, counts) in totals {
        let imbalance = imbalances.iter().find(|i| &i.kind == kind);
        let note = match imbalance {
            None => Cell::plain(""),
            Some(i) => Cell::styled(
                match i.first_turn {
                    Some(turn) => format!("{:+} live, since turn {turn}", counts.live()),
                    None => format!("{:+} live", counts.live()),
                },
                BAD,
            ),
        };
        rows.push(vec![
            Cell::plain(kind),
            Cell::plain(format!("{} created", counts.created)),
            Cell::plain(format!("{} deleted", counts.deleted)),
            note,
        ]);
    }
    out.push_str(&render_table(&rows, "  "));
    out.push('\n');
    out
}

fn errors_section(record: &RunRecord) -> String {
    if record.engine_errors.is_empty() {
        return String::new();
    }
    let mut out = format!("{HEADER}engine errors the run survived{HEADER:#}\n");
    for (turn, step, error) in &record.engine_errors {
        out.push_str(&format!(
            "  turn {turn} ({step}): {}\n",
            printable(&engine_error_text(error))
        ));
    }
    out.push('\n');
    out
}

fn failures_section(verdict: &Verdict) -> String {
    let failed: Vec<_> = verdict.expectations.iter().filter(|e| !e.passed).collect();
    if failed.is_empty() {
        return String::new();
    }
    let heading = if failed.iter().any(|e| e.failed()) {
        "failed expectations"
    } else {
        "undecided expectations"
    };
    let mut out = format!("{HEADER}{heading}{HEADER:#}\n");
    for e in failed {
        let turn = e.turn.map_or(String::new(), |t| format!(" (turn {t})"));
        // Undecided is not shown broken: its own mark, so that a reader tells them apart.
        let mark = if e.inconclusive { "?" } else { "✗" };
        out.push_str(&format!(
            "  {BAD}{mark} {}{}{BAD:#}: expected {}; measured {}{turn}\n",
            printable(&e.name),
            notes::default_mark(e.defaulted),
            printable(&e.expected),
            printable(&e.measured)
        ));
    }
    out.push('\n');
    out
}

/// Growth below its limit, and which expectations were defaults.
fn notes_section(verdict: &Verdict) -> String {
    let mut out = String::new();
    for (metric, text) in notes::keyed_growth(verdict) {
        out.push_str(&format!("{}: {text}\n", printable(metric)));
    }
    for (metric, text) in notes::growth_below_limit(verdict) {
        out.push_str(&format!("{WARN}{}: {text}{WARN:#}\n", printable(metric)));
    }
    let defaulted = notes::defaulted_names(verdict);
    if !defaulted.is_empty() {
        let names: Vec<String> = defaulted
            .iter()
            .map(|n| printable(n).into_owned())
            .collect();
        out.push_str(&format!(
            "{DIM}default expectations: {} ({}){DIM:#}\n",
            names.join(", "),
            notes::OPT_OUT
        ));
    }
    if !out.is_empty() {
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::examples::{clean_run, crashed_run, leak_run};
    use crate::report::redact::Redactor;

    fn plain(record: &RunRecord, verdict: &Verdict) -> String {
        let text = anstream::adapter::strip_str(&render_terminal(record, verdict)).to_string();
        Redactor::for_record(record).redact_text(&text)
    }

    #[test]
    fn leak_run_terminal() {
        let (record, verdict) = leak_run();
        let text = plain(&record, &verdict);
        assert!(text.contains("FAIL: 3 of 4 expectations failed"), "{text}");
        crate::report::golden!(insta::assert_snapshot!("terminal_leak", text));
    }

    #[test]
    fn clean_run_terminal() {
        let (record, verdict) = clean_run();
        let text = plain(&record, &verdict);
        assert!(text.contains("PASS: all 3 expectations held"), "{text}");
        assert!(!text.contains("failed expectations"), "{text}");
        crate::report::golden!(insta::assert_snapshot!("terminal_clean", text));
    }

    #[test]
    fn crashed_run_terminal() {
        let (record, verdict) = crashed_run();
        let text = plain(&record, &verdict);
        assert!(
            text.contains("ENGINE FAILED in turn 4 (generate): crashed"),
            "{text}"
        );
        crate::report::golden!(insta::assert_snapshot!("terminal_crashed", text));
    }

    /// A report.json from elsewhere may carry escapes in its names; the terminal shows them.
    #[test]
    fn control_characters_from_a_report_are_shown_not_obeyed() {
        let (mut record, mut verdict) = leak_run();
        let hostile = "rss\u{1b}[2J".to_owned();
        let analysis = verdict.metrics.values().next().unwrap().clone();
        verdict.metrics.insert(hostile.clone(), analysis);
        verdict.expectations[0].name = hostile.clone();
        record.scenario.name = hostile.clone();
        record.scenario.stop = crate::scenario::StopMode::Decided;
        record.early_stop = Some(crate::runner::EarlyStop {
            turn: 9,
            max_turns: 101,
            reason: format!("{hostile} growth{}", "x".repeat(5000)),
        });
        let text = render_terminal(&record, &verdict);
        let stripped = anstream::adapter::strip_str(&text).to_string();
        assert!(!stripped.contains('\u{1b}'), "{stripped}");
        assert!(stripped.contains("rss\\u{1b}[2J"), "{stripped}");
        assert!(
            stripped.contains("(stop: decided): rss\\u{1b}[2J growth"),
            "{stripped}"
        );
        assert!(stripped.contains("characters left out"), "{stripped}");
    }

    /// Regression: an interrupted or crashed `stop: decided` run was said to have found no turn
    /// at which every metric was decided, as if it had run to its last turn.
    #[test]
    fn a_decided_run_that_did_not_finish_makes_no_claim_about_its_looks() {
        for (mut record, verdict) in [crate::report::examples::interrupted_run(), crashed_run()] {
            record.scenario.stop = crate::scenario::StopMode::Decided;
            let text = plain(&record, &verdict);
            assert!(!text.contains("no look before turn"), "{text}");
        }
        let (mut record, verdict) = leak_run();
        record.scenario.stop = crate::scenario::StopMode::Decided;
        let text = plain(&record, &verdict);
        assert!(text.contains("no look before turn"), "{text}");
    }

    #[test]
    fn interrupted_run_terminal_names_the_signal_and_turn() {
        let (record, verdict) = crate::report::examples::interrupted_run();
        let text = plain(&record, &verdict);
        assert!(
            text.contains("INTERRUPTED by SIGTERM in turn 5: "),
            "{text}"
        );
        assert!(
            text.contains("not evaluated: the run was interrupted"),
            "{text}"
        );
        assert!(
            text.contains("ledger: not recorded (the run was interrupted)"),
            "{text}"
        );
    }

    #[test]
    fn colour_marks_growth_red_and_clean_green() {
        let (record, verdict) = leak_run();
        let text = render_terminal(&record, &verdict);
        assert!(
            text.contains(&format!("{BAD}growth")),
            "growth is styled as bad"
        );
        let (record, verdict) = clean_run();
        let text = render_terminal(&record, &verdict);
        assert!(
            text.contains(&format!("{GOOD}clean")),
            "clean is styled as good"
        );
    }

    /// Regression (issue 20): an engine's error message reached the terminal with its ESC.
    #[test]
    fn hostile_names_and_messages_reach_the_terminal_escaped() {
        let (mut record, verdict) = crate::report::test_support::hostile_run();
        let text = render_terminal(&record, &verdict);
        let plain = anstream::adapter::strip_str(&text).to_string();
        // leakloop's own styles are the only escape sequences left.
        assert!(!plain.contains(['\u{1b}', '\u{0}']), "{plain}");
        assert!(plain.contains("\\u{1b}[2J"), "{plain}");
        let (crashed, _) = crashed_run();
        record.outcome = crashed.outcome;
        let verdict = Verdict {
            status: VerdictStatus::EngineFailed,
            ..verdict
        };
        if let crate::runner::RunOutcome::EngineFailed { error, .. } = &mut record.outcome {
            error.message = crate::report::test_support::HOSTILE.to_owned();
        }
        let plain = anstream::adapter::strip_str(&render_terminal(&record, &verdict)).to_string();
        assert!(!plain.contains(['\u{1b}', '\u{0}']), "{plain}");
        assert!(plain.contains("ENGINE FAILED in turn 4"), "{plain}");
    }
}
