//! summary.md: a short Markdown summary of one run, sized for a pull-request comment.

use crate::analyze::units::confidence_percent;
use crate::analyze::{Verdict, VerdictStatus};
use crate::report::escape::{markdown, markdown_code};
use crate::report::facts::{
    backend_line, empty_ledger_text, metric_passed, stop_line, turns_line, verdict_line,
};
use crate::report::notes;
use crate::report::provenance::describe;
use crate::report::units::{format_rate_with_interval_of, format_value};
use crate::runner::RunRecord;

/// Renders summary.md. Every string from the run (names, versions, kinds, messages,
/// provenance) goes through [`markdown`] or [`markdown_code`]: a hostile backend name or
/// error message stays text.
pub fn render_summary_md(record: &RunRecord, verdict: &Verdict) -> String {
    let (status, line) = verdict_line(record, verdict);
    let mark = status_mark(status);
    let name = markdown_code(&record.scenario.name);
    let mut out = format!("### leakloop: {name} {mark}\n\n");
    out.push_str("| scenario | backend | turns | verdict |\n| --- | --- | --- | --- |\n");
    out.push_str(&format!(
        "| {name} | {} | {} | {mark} {} |\n\n",
        markdown(&backend_line(record)),
        turns_line(record),
        markdown(&line)
    ));
    if let Some(stop) = stop_line(record) {
        out.push_str(&format!("{}\n\n", markdown(&stop)));
    }
    out.push_str(&metrics_table(verdict));
    out.push_str(&ledger_line(record));
    let failed: Vec<_> = verdict.expectations.iter().filter(|e| !e.passed).collect();
    if !failed.is_empty() {
        out.push_str(if failed.iter().any(|e| e.failed()) {
            "\n**Failed expectations**\n\n"
        } else {
            "\n**Undecided expectations**\n\n"
        });
        for e in failed {
            let turn = e.turn.map_or(String::new(), |t| format!(" (turn {t})"));
            let undecided = if e.inconclusive { " (undecided)" } else { "" };
            out.push_str(&format!(
                "- {}{}{undecided}: expected {}; measured {}{turn}\n",
                markdown_code(&e.name),
                notes::default_mark(e.defaulted),
                markdown(&e.expected),
                markdown(&e.measured)
            ));
        }
    }
    out.push_str(&attribution_lines(verdict));
    out.push_str(&cl_objects_lines(verdict));
    out.push_str(&notes_lines(verdict));
    if let Some(p) = &record.provenance {
        out.push_str("\n<details><summary>Provenance</summary>\n\n");
        for (label, text) in describe(p) {
            out.push_str(&format!("- **{label}:** {}\n", markdown(&text)));
        }
        out.push_str("\n</details>\n");
    }
    out
}

/// Live OpenCL objects by kind and creation site: the headline, then one item per site.
fn cl_objects_lines(verdict: &Verdict) -> String {
    let Some(c) = &verdict.cl_objects else {
        return String::new();
    };
    let mut out = format!(
        "\n**OpenCL objects:** {}\n\n",
        markdown(&crate::attribution::cl_headline(c))
    );
    for line in crate::attribution::cl_site_lines(c) {
        out.push_str(&format!("- {}\n", markdown(&line)));
    }
    out
}

/// Where the growth was allocated (`run --attribute`): the headline, then one item per site.
fn attribution_lines(verdict: &Verdict) -> String {
    verdict.attributions().map(attribution_item).collect()
}

/// One source's headline and sites.
fn attribution_item(a: &crate::attribution::Attribution) -> String {
    let mut out = format!(
        "\n**Allocation sites:** {}\n\n",
        markdown(&crate::attribution::headline(a))
    );
    for line in crate::attribution::site_lines(a) {
        out.push_str(&format!("- {}\n", markdown(&line)));
    }
    for note in &a.notes {
        out.push_str(&format!("- {}\n", markdown(note)));
    }
    out
}

/// Growth below its limit, and which expectations were defaults.
fn notes_lines(verdict: &Verdict) -> String {
    let mut out = String::new();
    let keyed = notes::keyed_growth(verdict);
    if !keyed.is_empty() {
        out.push_str("\n**Caches or leaks**\n\n");
        for (metric, text) in keyed {
            out.push_str(&format!(
                "- {}: {}\n",
                markdown_code(metric),
                markdown(&text)
            ));
        }
    }
    let below = notes::growth_below_limit(verdict);
    if !below.is_empty() {
        out.push_str("\n**Growth below the limit**\n\n");
        for (metric, text) in below {
            out.push_str(&format!(
                "- {}: {}\n",
                markdown_code(metric),
                markdown(&text)
            ));
        }
    }
    let defaulted = notes::defaulted_names(verdict);
    if !defaulted.is_empty() {
        let names: Vec<String> = defaulted.iter().map(|n| markdown_code(n)).collect();
        out.push_str(&format!(
            "\n**Default expectations:** {} ({}).\n",
            names.join(", "),
            // Our own words, already Markdown.
            notes::OPT_OUT
        ));
    }
    out
}

fn status_mark(status: VerdictStatus) -> &'static str {
    match status {
        VerdictStatus::Pass => "✅",
        VerdictStatus::Fail => "❌",
        VerdictStatus::Inconclusive => "❔",
        VerdictStatus::EngineFailed => "💥",
        VerdictStatus::Interrupted => "⏹️",
    }
}

fn metrics_table(verdict: &Verdict) -> String {
    if verdict.metrics.is_empty() {
        return "_No metrics were analysed._\n\n".to_owned();
    }
    let confidence = verdict
        .metrics
        .values()
        .next()
        .map_or(0.95, |m| m.confidence);
    let mut out = format!(
        "| metric | baseline | after warm-up | last | growth/turn [{} CI] | class | result |\n\
         | --- | ---: | ---: | ---: | ---: | --- | --- |\n",
        confidence_percent(confidence)
    );
    for (name, m) in &verdict.metrics {
        let result = match metric_passed(verdict, name) {
            Some(true) => "✅ pass",
            Some(false) => "❌ fail",
            None => "-",
        };
        out.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} | {result} |\n",
            markdown_code(name),
            format_value(name, m.baseline),
            m.after_warmup
                .map_or("-".to_owned(), |v| format_value(name, v)),
            format_value(name, m.last),
            format_rate_with_interval_of(name, m.slope_bytes_per_turn, m.slope_interval),
            m.classification.as_str(),
        ));
    }
    out.push('\n');
    out
}

fn ledger_line(record: &RunRecord) -> String {
    let totals = &record.ledger.totals;
    let imbalances = record.ledger.imbalances();
    if totals.is_empty() {
        return format!("**Ledger:** {}.\n", empty_ledger_text(record));
    }
    if imbalances.is_empty() {
        return format!("**Ledger:** balanced ({} kinds).\n", totals.len());
    }
    let mut out = format!(
        "**Ledger:** {} of {} kinds unbalanced:\n\n",
        imbalances.len(),
        totals.len()
    );
    for i in imbalances {
        let since = i
            .first_turn
            .map_or(String::new(), |t| format!(", since turn {t}"));
        out.push_str(&format!(
            "- {}: {} created, {} deleted{since}\n",
            markdown_code(&i.kind),
            i.created,
            i.deleted
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::examples::{clean_run, crashed_run, leak_run};
    use crate::report::redact::Redactor;

    fn redacted(record: &RunRecord, verdict: &Verdict) -> String {
        let redactor = Redactor::for_record(record);
        let (record, verdict) = redactor.redact_run(record, verdict);
        redactor.redact_text(&render_summary_md(&record, &verdict))
    }

    #[test]
    fn leak_run_summary() {
        let (record, verdict) = leak_run();
        let md = redacted(&record, &verdict);
        assert!(
            md.contains("`sim/scratch_buffer`: 9 created, 0 deleted, since turn 1"),
            "{md}"
        );
        crate::report::golden!(insta::assert_snapshot!("summary_leak", md));
    }

    #[test]
    fn clean_run_summary() {
        let (record, verdict) = clean_run();
        let md = redacted(&record, &verdict);
        assert!(md.contains("**Ledger:** balanced (3 kinds)."), "{md}");
        crate::report::golden!(insta::assert_snapshot!("summary_clean", md));
    }

    #[test]
    fn crashed_run_summary_names_the_failure() {
        let (record, verdict) = crashed_run();
        let md = redacted(&record, &verdict);
        assert!(md.contains("💥 ENGINE FAILED in turn 4 (generate)"), "{md}");
    }

    /// Regression (issue 20): a driver's names and messages reached summary.md as raw HTML,
    /// headings and table breaks.
    #[test]
    fn hostile_names_and_messages_stay_text() {
        let (record, verdict) = crate::report::test_support::hostile_run();
        let md = render_summary_md(&record, &verdict);
        let problems = crate::report::escape::check::markdown_problems(&md);
        assert!(problems.is_empty(), "{problems:#?}\n{md}");
        assert!(md.contains("sim&lt;script&gt;"), "{md}");
        assert!(md.contains("\\u{1b}") && md.contains("\\u{0}"), "{md}");
        assert!(md.contains("box&lt;img src=x&gt;"), "{md}");
        assert!(md.contains("at most \\`1 MiB\\`"), "{md}");
    }
}
