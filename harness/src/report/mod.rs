//! Reports: the terminal table, report.json, junit.xml, summary.md and the memory plot.
