//! One dump's rows as leakloop's metric names: the one place that says which `dumpsys meminfo`
//! row is which metric, for captures read by `analyze` and for samples taken on a device.

use std::collections::BTreeMap;

use super::{Column, ProcessMemInfo};

impl ProcessMemInfo {
    /// The metrics of this dump by name, in bytes: the App Summary rows where the dump has them,
    /// else the detailed table's (`analyze`'s `METRIC_ROWS` says which row feeds which metric).
    pub fn metrics(&self) -> BTreeMap<&'static str, u64> {
        let info = self;
        let summary = |row: &str| info.summary_row(row).and_then(|r| r.pss);
        let table_total = |column: &Column| info.value("TOTAL", column);
        let candidates: [(&'static str, Option<u64>); 10] = [
            (
                "native_heap",
                summary("Native Heap").or_else(|| info.value("Native Heap", &Column::PssTotal)),
            ),
            ("gpu", summary("Graphics")),
            ("java_heap", summary("Java Heap")),
            ("code", summary("Code")),
            ("stack", summary("Stack")),
            ("private_other", summary("Private Other")),
            ("system", summary("System")),
            (
                "pss",
                info.totals.pss.or_else(|| table_total(&Column::PssTotal)),
            ),
            (
                "rss",
                info.totals.rss.or_else(|| table_total(&Column::RssTotal)),
            ),
            ("swap_pss", info.totals.swap_pss),
        ];
        candidates
            .into_iter()
            .filter_map(|(name, value)| value.map(|v| (name, v)))
            .collect()
    }
}
