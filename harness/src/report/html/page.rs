//! The page shell both pages share: the document head with the inlined style, and the SVG of a
//! plot made fit to sit inside HTML.

use crate::report::escape::html;

/// The style of both pages: readable without any asset from outside the file.
const STYLE: &str = "body{font-family:system-ui,sans-serif;margin:1.5em;color:#222;max-width:72em}\
table{border-collapse:collapse;margin:.5em 0 1em}\
th,td{border:1px solid #ccc;padding:.25em .6em;text-align:left}\
td.num{text-align:right;font-variant-numeric:tabular-nums}\
tr.fail td{background:#fde8e8}tr.pass td{background:#eef8ee}\
.plot svg{max-width:100%;height:auto}\
h1 .status{font-size:.8em;padding:.1em .4em;border-radius:.2em}\
.fail .status,.status.fail{background:#c62828;color:#fff}\
.status.pass{background:#2e7d32;color:#fff}.status.other{background:#777;color:#fff}\
details{margin:1em 0}";

/// A whole page: `title` (foreign text allowed) and the already rendered `body`.
pub(super) fn document(title: &str, body: &str) -> String {
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; \
         style-src 'unsafe-inline'; img-src data:\">\n\
         <title>{}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n{body}</body>\n</html>\n",
        html(title)
    )
}

/// An SVG document as an element of the page: the XML declaration (not allowed inside HTML)
/// dropped. The document was escaped for XML when it was rendered.
pub(super) fn inline_svg(svg: &str) -> &str {
    let start = svg.find("<svg").unwrap_or(0);
    &svg[start..]
}

/// The CSS class of a status word.
pub(super) fn status_class(passed: Option<bool>) -> &'static str {
    match passed {
        Some(true) => "pass",
        Some(false) => "fail",
        None => "other",
    }
}
