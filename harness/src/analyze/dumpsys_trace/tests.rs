use std::path::Path;

use super::*;
use crate::analyze::test_support::words;
use crate::analyze::{classify, load_trace_with, Classification, ClassifyOptions};

const K: u64 = 1024;

const SEED_IDLE: &str = include_str!("../../../../fixtures/dumpsys/seed_idle.txt");
const SEED_AFTER_TURN1: &str = include_str!("../../../../fixtures/dumpsys/seed_after_turn1.txt");
const SEED_PEAK: &str = include_str!("../../../../fixtures/dumpsys/seed_peak.txt");

fn folder(files: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for (name, text) in files {
        std::fs::write(dir.path().join(name), text).unwrap();
    }
    dir
}

fn points(trace: &Trace, metric: &str) -> Vec<(u64, u64)> {
    trace.metrics[metric].points().collect()
}

/// One `** MEMINFO **` block with an App Summary, values in KB.
fn block(pid: u32, name: &str, native_kb: u64, graphics_kb: u64, total_kb: u64) -> String {
    format!(
        "** MEMINFO in pid {pid} [{name}] **\n\
         \x20App Summary\n\
         \x20                      Pss(KB)                        Rss(KB)\n\
         \x20        Native Heap: {native_kb:>8}                       {native_kb:>8}\n\
         \x20           Graphics: {graphics_kb:>8}                       {graphics_kb:>8}\n\
         \x20          TOTAL PSS: {total_kb:>8}            TOTAL RSS: {total_kb:>8}       TOTAL SWAP PSS:      0\n\n"
    )
}

fn error(path: &Path, process: Option<&ProcessSelector>) -> String {
    load_trace_with(path, process).unwrap_err().to_string()
}

/// The seed report's three App Summary excerpts (idle after load, at rest after the first
/// inference, the peak before the OOM kill) as a capture folder: every number arrives in bytes.
/// TOTAL PSS rises by almost the same amount twice (+2,170,215 KB, +2,139,158 KB), steady enough
/// for `growth` from three samples; Native Heap, Graphics, RSS and swap rise by unequal steps, and
/// three samples cannot tell those from noise: `inconclusive`, asking for more turns.
#[test]
fn the_seed_excerpts_analyse_as_a_folder() {
    let dir = folder(&[
        ("turn-0.txt", SEED_IDLE),
        ("turn-1.txt", SEED_AFTER_TURN1),
        ("turn-2.txt", SEED_PEAK),
        (".DS_Store", "ignored"),
    ]);
    let trace = load_trace_with(dir.path(), None).unwrap();
    let names: Vec<&str> = trace.metrics.keys().map(String::as_str).collect();
    assert_eq!(names, ["gpu", "native_heap", "pss", "rss", "swap_pss"]);
    let kb_by_turn: [(&str, [u64; 3]); 5] = [
        ("native_heap", [127_200, 672_436, 1_602_020]),
        ("gpu", [59_944, 1_767_024, 2_220_388]),
        ("pss", [705_053, 2_875_268, 5_014_426]),
        ("rss", [794_324, 2_955_368, 3_951_516]),
        ("swap_pss", [155, 153, 1_105_546]),
    ];
    for (metric, kb) in kb_by_turn {
        let expected: Vec<(u64, u64)> = (0..).zip(kb.iter().map(|v| v * K)).collect();
        assert_eq!(points(&trace, metric), expected, "{metric}");
    }
    for (name, series) in &trace.metrics {
        let analysis = classify(series, &ClassifyOptions::default());
        let expected = if name == "pss" {
            Classification::Growth
        } else {
            Classification::Inconclusive
        };
        assert_eq!(
            analysis.classification,
            expected,
            "{name}: {}",
            words(&analysis)
        );
        if expected == Classification::Inconclusive {
            assert!(
                analysis.turns_needed.is_some(),
                "{name}: {}",
                words(&analysis)
            );
        }
    }
}

#[test]
fn a_log_of_several_dumps_is_one_turn_per_block() {
    let mut text = String::from("Applications Memory Usage (in Kilobytes):\n");
    for (k, native) in [100_000u64, 110_000, 120_000, 130_000].iter().enumerate() {
        text.push_str(&format!("Uptime: {k} Realtime: {k}\n\n"));
        text.push_str(&block(
            4242,
            "com.example.chat",
            *native,
            50_000,
            native + 200_000,
        ));
    }
    let dir = folder(&[("capture.log", &text)]);
    let trace = load_trace_with(&dir.path().join("capture.log"), None).unwrap();
    assert_eq!(
        points(&trace, "native_heap"),
        [
            (0, 100_000 * K),
            (1, 110_000 * K),
            (2, 120_000 * K),
            (3, 130_000 * K)
        ]
    );
    assert_eq!(points(&trace, "gpu").len(), 4);
}

#[test]
fn a_detailed_dump_reads_the_summary_and_table_rows() {
    let text = include_str!("../../../../fixtures/dumpsys/launcher3_detailed.txt");
    let dir = folder(&[("000.txt", text), ("001.txt", text)]);
    let trace = load_trace_with(dir.path(), None).unwrap();
    let first = |m: &str| points(&trace, m)[0].1;
    assert_eq!(first("java_heap"), 5604 * K);
    assert_eq!(first("native_heap"), 24_380 * K);
    assert_eq!(first("code"), 880 * K);
    assert_eq!(first("stack"), 976 * K);
    assert_eq!(first("gpu"), 61_692 * K);
    assert_eq!(first("private_other"), 2364 * K);
    assert_eq!(first("system"), 9633 * K);
    assert_eq!(first("pss"), 105_529 * K);
    assert_eq!(first("rss"), 187_052 * K);
    assert!(!trace.metrics.contains_key("swap_pss"));
}

#[test]
fn several_processes_need_process_and_it_selects_one() {
    let mut text = String::new();
    for native in [100_000u64, 110_000, 120_000] {
        text.push_str(&block(10, "com.example.chat", native, 1, native + 10));
        text.push_str(&block(11, "com.example.chat:worker", 7, 1, 20));
    }
    let dir = folder(&[("mixed.txt", &text)]);
    let path = dir.path().join("mixed.txt");
    let message = error(&path, None);
    assert!(
        message.ends_with(
            "mixed.txt: dumps of several processes: com.example.chat (pid 10), \
             com.example.chat:worker (pid 11); choose one with --process NAME|PID"
        ),
        "{message}"
    );
    for selector in [
        ProcessSelector::parse("com.example.chat"),
        ProcessSelector::parse("10"),
    ] {
        let trace = load_trace_with(&path, Some(&selector)).unwrap();
        assert_eq!(
            points(&trace, "native_heap"),
            [(0, 100_000 * K), (1, 110_000 * K), (2, 120_000 * K)]
        );
    }
    let message = error(&path, Some(&ProcessSelector::parse("com.other")));
    assert!(
        message.contains("no dump of the process given by --process; it holds com.example.chat (pid 10), com.example.chat:worker (pid 11)"),
        "{message}"
    );
}

#[test]
fn a_folder_of_different_processes_is_refused() {
    let dir = folder(&[
        ("turn-0.txt", &block(10, "com.a", 1, 1, 2)),
        ("turn-1.txt", &block(12, "com.b", 1, 1, 2)),
    ]);
    let message = error(dir.path(), None);
    assert!(
        message.contains(
            "turn-1.txt (turn 1) is a dump of com.b (pid 12), turn 0 of com.a (pid 10); \
             choose one with --process NAME|PID"
        ),
        "{message}"
    );
}

#[rstest::rstest]
#[case::no_digits(&[("turn-0.txt", "x"), ("baseline.txt", "x")], "baseline.txt: the name holds no turn number: a capture folder holds files named by turn")]
#[case::two_numbers(&[("pixel4a-turn-3.txt", "x")], "pixel4a-turn-3.txt: the name holds 2 numbers (4, 3); it must hold exactly one, the turn")]
#[case::same_turn(&[("1.txt", "x"), ("01.txt", "x"), ("0.txt", "x")], "turn 1 again, after")]
#[case::no_baseline(&[("turn-1.txt", "x")], "no turn-0 file: turn 0 is the baseline")]
#[case::empty(&[], "no dump files: expected files named by turn")]
#[case::not_a_dump(&[("turn-0.txt", "hello\n")], "turn-0.txt: no dumpsys meminfo table or App Summary found in the output")]
#[case::missing_row(&[("turn-0.txt", SEED_IDLE), ("turn-1.txt", " App Summary\n                       Pss(KB)                        Rss(KB)\n         Native Heap:   1                         1\n           TOTAL PSS:   2            TOTAL RSS:   2       TOTAL SWAP PSS:      1\n")], "turn-1.txt (turn 1) has no value for `gpu`, which turn-0.txt (turn 0) has")]
#[case::bad_value(&[("turn-0.txt", SEED_IDLE), ("turn-1.txt", " App Summary\n                       Pss(KB)                        Rss(KB)\n         Native Heap:   12x                         1\n")], "turn-1.txt: dumpsys output, line 3: \"12x\" is not a size in KB")]
fn bad_folders_are_refused(#[case] files: &[(&str, &str)], #[case] fragment: &str) {
    let dir = folder(files);
    let message = error(dir.path(), None);
    assert!(message.contains(fragment), "{message}");
}

#[test]
fn summaries_without_meminfo_lines_cannot_be_told_apart() {
    let text = format!("{SEED_IDLE}\n{SEED_AFTER_TURN1}");
    let dir = folder(&[("log.txt", &text)]);
    let message = error(&dir.path().join("log.txt"), None);
    assert!(
        message.ends_with(
            "log.txt: 2 App Summary blocks in 1 dump(s): a log of several dumps needs the \
             `** MEMINFO in pid N [name] **` line before each"
        ),
        "{message}"
    );
}

#[rstest::rstest]
#[case("turn-0.txt", Ok(0))]
#[case("003.txt", Ok(3))]
#[case("dump_12", Ok(12))]
#[case("turn-7.meminfo.txt", Ok(7))]
fn turn_numbers_come_from_the_name(#[case] name: &str, #[case] turn: Result<u64, String>) {
    assert_eq!(turn_of(name), turn);
}

#[test]
fn a_subfolder_named_by_turn_is_not_a_dump_file() {
    let dir = folder(&[("turn-0.txt", SEED_IDLE)]);
    std::fs::create_dir(dir.path().join("turn-1")).unwrap();
    let message = error(dir.path(), None);
    assert!(
        message.ends_with("turn-1: a folder, not a regular file"),
        "{message}"
    );
}
