//! The self-contained HTML pages: report.html (one run, written by `leakloop report DIR`) and
//! history.html (written by `leakloop history --out DIR`). Each page is one file that a browser
//! opens from disk: the style and the SVG plots are inlined, nothing is fetched and no script is
//! needed. Every foreign string goes through `escape::html`; the plots are the same SVG
//! documents plot.svg and the trend plots hold.

mod history;
mod page;
mod run;

pub(crate) use history::render_history_html;
pub(crate) use run::render_run_html;

/// The run page's file name.
pub const REPORT_HTML: &str = "report.html";
/// The history page's file name.
pub const HISTORY_HTML: &str = "history.html";

#[cfg(test)]
mod tests;
