//! Which registry metric is read from which row of a dump: the one mapping, shared by `leakloop
//! analyze` (captures) and the sampling of an Android app (the remote target's dumpsys probe).

use std::collections::BTreeMap;

use leakloop_metrics::names::{
    CODE, GPU, JAVA_HEAP, NATIVE_HEAP, PRIVATE_OTHER, PSS, RSS, STACK, SWAP_PSS, SYSTEM,
};

use super::{Column, ProcessMemInfo};

/// Each metric and where it is read: the App Summary row (PSS column) or total, else the detailed
/// table's row (Pss Total, or Rss Total for `rss`).
pub const METRIC_ROWS: &[(&str, &str)] = &[
    (
        NATIVE_HEAP,
        "Native Heap (App Summary, else the table's Native Heap Pss Total)",
    ),
    (GPU, "Graphics (App Summary)"),
    (JAVA_HEAP, "Java Heap (App Summary)"),
    (CODE, "Code (App Summary)"),
    (STACK, "Stack (App Summary)"),
    (PRIVATE_OTHER, "Private Other (App Summary)"),
    (SYSTEM, "System (App Summary)"),
    (
        PSS,
        "TOTAL PSS (App Summary, else the table's TOTAL Pss Total)",
    ),
    (
        RSS,
        "TOTAL RSS (App Summary, else the table's TOTAL Rss Total)",
    ),
    (SWAP_PSS, "TOTAL SWAP PSS (App Summary)"),
];

impl ProcessMemInfo {
    /// The registry metrics of this dump, by name, in bytes (where each is read:
    /// [`METRIC_ROWS`]).
    pub fn metrics(&self) -> BTreeMap<&'static str, u64> {
        let info = self;
        let summary = |row: &str| info.summary_row(row).and_then(|r| r.pss);
        let table_total = |column: &Column| info.value("TOTAL", column);
        let candidates: [(&'static str, Option<u64>); 10] = [
            (
                NATIVE_HEAP,
                summary("Native Heap").or_else(|| info.value("Native Heap", &Column::PssTotal)),
            ),
            (GPU, summary("Graphics")),
            (JAVA_HEAP, summary("Java Heap")),
            (CODE, summary("Code")),
            (STACK, summary("Stack")),
            (PRIVATE_OTHER, summary("Private Other")),
            (SYSTEM, summary("System")),
            (
                PSS,
                info.totals.pss.or_else(|| table_total(&Column::PssTotal)),
            ),
            (
                RSS,
                info.totals.rss.or_else(|| table_total(&Column::RssTotal)),
            ),
            (SWAP_PSS, info.totals.swap_pss),
        ];
        candidates
            .into_iter()
            .filter_map(|(name, value)| value.map(|v| (name, v)))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use leakloop_metrics::ProbeKind;

    #[test]
    fn rows_are_the_registry_metrics_dumpsys_provides() {
        let rows: Vec<&str> = METRIC_ROWS.iter().map(|(name, _)| *name).collect();
        let mut registered: Vec<&str> = leakloop_metrics::provided_by(ProbeKind::Dumpsys)
            .map(|m| m.name)
            .collect();
        let mut sorted_rows = rows.clone();
        sorted_rows.sort_unstable();
        registered.sort_unstable();
        assert_eq!(sorted_rows, registered);
    }

    /// An Android 11 dump with every row gives exactly the documented metrics.
    #[test]
    fn a_full_dump_gives_every_documented_metric() {
        let text = include_str!("../../../../fixtures/dumpsys/unity_pixel2_android11.txt");
        let info = super::super::parse(text).unwrap().remove(0);
        let mut read: Vec<&str> = info.metrics().into_keys().collect();
        let mut rows: Vec<&str> = METRIC_ROWS.iter().map(|(name, _)| *name).collect();
        read.sort_unstable();
        rows.sort_unstable();
        assert_eq!(read, rows);
    }
}
