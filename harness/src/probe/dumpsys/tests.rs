use super::*;

fn fixture(name: &str) -> ProcessMemInfo {
    let text = match name {
        "flutter_gallery_2019" => {
            include_str!("../../../../fixtures/dumpsys/flutter_gallery_2019.txt")
        }
        "launcher3_detailed" => include_str!("../../../../fixtures/dumpsys/launcher3_detailed.txt"),
        "devtools_gallery_summary" => {
            include_str!("../../../../fixtures/dumpsys/devtools_gallery_summary.txt")
        }
        "systemui_perfetto" => include_str!("../../../../fixtures/dumpsys/systemui_perfetto.txt"),
        "seed_idle" => include_str!("../../../../fixtures/dumpsys/seed_idle.txt"),
        "seed_after_turn1" => include_str!("../../../../fixtures/dumpsys/seed_after_turn1.txt"),
        "seed_peak" => include_str!("../../../../fixtures/dumpsys/seed_peak.txt"),
        "unity_pixel2_android11" => {
            include_str!("../../../../fixtures/dumpsys/unity_pixel2_android11.txt")
        }
        "solox_huawei_sandboxed" => {
            include_str!("../../../../fixtures/dumpsys/solox_huawei_sandboxed.txt")
        }
        "flutter_map_s23_summary" => {
            include_str!("../../../../fixtures/dumpsys/flutter_map_s23_summary.txt")
        }
        "rethink_summary" => include_str!("../../../../fixtures/dumpsys/rethink_summary.txt"),
        "systemui_pixel3_android12" => {
            include_str!("../../../../fixtures/dumpsys/systemui_pixel3_android12.txt")
        }
        "memorylab_dalvik_details" => {
            include_str!("../../../../fixtures/dumpsys/memorylab_dalvik_details.txt")
        }
        "oppo_launcher_swap_kb" => {
            include_str!("../../../../fixtures/dumpsys/oppo_launcher_swap_kb.txt")
        }
        other => panic!("no fixture {other}"),
    };
    let mut processes = parse(text).unwrap_or_else(|e| panic!("{name}: {e}"));
    assert_eq!(processes.len(), 1, "{name}");
    processes.remove(0)
}

const K: u64 = 1024;

fn pss(p: &ProcessMemInfo, name: &str) -> Option<u64> {
    p.summary_row(name).and_then(|r| r.pss)
}

fn rss(p: &ProcessMemInfo, name: &str) -> Option<u64> {
    p.summary_row(name).and_then(|r| r.rss)
}

#[test]
fn flutter_gallery_table_summary_and_old_total_line() {
    let p = fixture("flutter_gallery_2019");
    assert_eq!(p.pid, Some(16141));
    assert_eq!(p.process.as_deref(), Some("io.flutter.demo.gallery"));
    assert_eq!(p.table.len(), 17);
    assert_eq!(p.value("Native Heap", &Column::PssTotal), Some(8648 * K));
    assert_eq!(
        p.value("Native Heap", &Column::PrivateDirty),
        Some(8620 * K)
    );
    assert_eq!(p.value("Native Heap", &Column::SwapPssDirty), Some(16 * K));
    assert_eq!(p.value("Native Heap", &Column::HeapAlloc), Some(12403 * K));
    assert_eq!(p.value("Gfx dev", &Column::PssTotal), Some(212 * K));
    assert_eq!(p.value("GL mtrack", &Column::PrivateDirty), Some(2380 * K));
    assert_eq!(p.value("Unknown", &Column::PssTotal), Some(43971 * K));
    // Rows without Heap columns have none, and this Android has no Rss column.
    assert_eq!(p.value("Stack", &Column::HeapSize), None);
    assert_eq!(p.value("TOTAL", &Column::RssTotal), None);
    assert_eq!(p.value("TOTAL", &Column::HeapFree), Some(9612 * K));
    assert_eq!(pss(&p, "Java Heap"), Some(4296 * K));
    assert_eq!(pss(&p, "Graphics"), Some(2584 * K));
    assert_eq!(pss(&p, "Private Other"), Some(65228 * K));
    assert_eq!(pss(&p, "System"), Some(2573 * K));
    assert_eq!(rss(&p, "Native Heap"), None);
    assert_eq!(p.totals.pss, Some(95085 * K));
    assert_eq!(p.totals.swap_pss, Some(62 * K));
    assert_eq!(p.totals.rss, None);
    // Objects and SQL rows are not summary rows.
    assert!(p.summary_row("Views").is_none());
    assert!(p.summary_row("MEMORY_USED").is_none());
}

#[test]
fn launcher3_detailed_columns_rss_and_swap_kb() {
    let p = fixture("launcher3_detailed");
    assert_eq!(p.pid, Some(21936));
    assert_eq!(p.value("Native Heap", &Column::PssClean), Some(0));
    assert_eq!(p.value("Native Heap", &Column::SharedDirty), Some(2692 * K));
    assert_eq!(p.value("Native Heap", &Column::RssTotal), Some(27072 * K));
    assert_eq!(p.value("Native Heap", &Column::HeapFree), Some(11037 * K));
    assert_eq!(p.value(".so mmap", &Column::SharedClean), Some(22656 * K));
    assert_eq!(p.value("EGL mtrack", &Column::PssTotal), Some(51348 * K));
    assert_eq!(p.value("GL mtrack", &Column::RssTotal), Some(4460 * K));
    assert_eq!(p.value("Unknown", &Column::PrivateDirty), Some(784 * K));
    assert_eq!(p.value("TOTAL", &Column::SwapDirty), Some(0));
    assert_eq!(p.value("TOTAL", &Column::RssTotal), Some(187052 * K));
    assert_eq!(pss(&p, "Graphics"), Some(61692 * K));
    assert_eq!(rss(&p, "Code"), Some(65056 * K));
    assert_eq!(rss(&p, "Private Other"), None);
    assert_eq!(pss(&p, "System"), Some(9633 * K));
    // `Unknown` prints only an RSS value, under the Rss(KB) header.
    assert_eq!(
        p.summary_row("Unknown"),
        Some(SummaryRow {
            pss: None,
            rss: Some(5752 * K)
        })
    );
    assert_eq!(p.totals.pss, Some(105529 * K));
    assert_eq!(p.totals.rss, Some(187052 * K));
    assert_eq!(p.totals.swap, Some(0));
    assert_eq!(p.totals.swap_pss, None);
}

#[test]
fn systemui_rss_column_without_summary() {
    let p = fixture("systemui_perfetto");
    assert_eq!(p.pid, Some(1974));
    assert_eq!(p.process.as_deref(), Some("com.android.systemui"));
    assert_eq!(p.table.len(), 2);
    assert_eq!(
        p.value("Native Heap", &Column::SwapPssDirty),
        Some(6764 * K)
    );
    assert_eq!(p.value("Native Heap", &Column::RssTotal), Some(19428 * K));
    assert_eq!(p.value("Native Heap", &Column::HeapAlloc), Some(25037 * K));
    assert_eq!(
        p.value("Dalvik Heap", &Column::PrivateDirty),
        Some(9032 * K)
    );
    assert_eq!(p.value("Dalvik Heap", &Column::HeapFree), Some(27333 * K));
    assert!(p.summary.is_empty());
    assert_eq!(p.totals, SummaryTotals::default());
}

#[test]
fn devtools_summary_alone() {
    let p = fixture("devtools_gallery_summary");
    assert_eq!(p.pid, None);
    assert!(p.table.is_empty());
    assert_eq!(pss(&p, "Native Heap"), Some(11992 * K));
    assert_eq!(pss(&p, "Graphics"), Some(53700 * K));
    assert_eq!(pss(&p, "System"), Some(84493 * K));
    assert_eq!(p.totals.pss, Some(200369 * K));
    assert_eq!(p.totals.swap_pss, Some(82168 * K));
}

#[test]
fn seed_report_excerpts() {
    let cases = [
        ("seed_idle", 127200, 128208, 59944, 705053, 794324, 155),
        (
            "seed_after_turn1",
            672436,
            673444,
            1767024,
            2875268,
            2955368,
            153,
        ),
        (
            "seed_peak",
            1602020,
            1602252,
            2220388,
            5014426,
            3951516,
            1105546,
        ),
    ];
    for (name, native_pss, native_rss, graphics, total_pss, total_rss, swap) in cases {
        let p = fixture(name);
        assert_eq!(pss(&p, "Native Heap"), Some(native_pss * K), "{name}");
        assert_eq!(rss(&p, "Native Heap"), Some(native_rss * K), "{name}");
        assert_eq!(
            p.summary_row("Graphics"),
            Some(SummaryRow {
                pss: Some(graphics * K),
                rss: Some(graphics * K)
            }),
            "{name}"
        );
        assert_eq!(p.totals.pss, Some(total_pss * K), "{name}");
        assert_eq!(p.totals.rss, Some(total_rss * K), "{name}");
        assert_eq!(p.totals.swap_pss, Some(swap * K), "{name}");
    }
}

#[test]
fn unity_pixel2_android11_table_summary_and_totals() {
    let p = fixture("unity_pixel2_android11");
    assert_eq!(p.pid, Some(14978));
    assert_eq!(p.process.as_deref(), Some("com.DefaultCompany.MemoryTests"));
    assert_eq!(p.table.len(), 17);
    assert_eq!(p.value("Native Heap", &Column::PssTotal), Some(396846 * K));
    assert_eq!(p.value("Native Heap", &Column::RssTotal), Some(399380 * K));
    assert_eq!(p.value("Native Heap", &Column::HeapAlloc), Some(504803 * K));
    assert_eq!(p.value("EGL mtrack", &Column::PssTotal), Some(49956 * K));
    assert_eq!(p.value("Gfx dev", &Column::PrivateClean), Some(128 * K));
    assert_eq!(p.value("Unknown", &Column::RssTotal), Some(141484 * K));
    assert_eq!(p.value("TOTAL", &Column::SwapPssDirty), Some(15 * K));
    assert_eq!(pss(&p, "Native Heap"), Some(396792 * K));
    assert_eq!(rss(&p, "Native Heap"), Some(399380 * K));
    assert_eq!(pss(&p, "Graphics"), Some(85032 * K));
    assert_eq!(rss(&p, "Private Other"), None);
    assert_eq!(
        p.summary_row("Unknown"),
        Some(SummaryRow {
            pss: None,
            rss: Some(144960 * K)
        })
    );
    assert_eq!(p.totals.pss, Some(688561 * K));
    assert_eq!(p.totals.rss, Some(746132 * K));
    assert_eq!(p.totals.swap_pss, Some(15 * K));
}

/// A sandboxed renderer process (name with colons), the table and App Summary with no blank line
/// between them, and the summary's total line `TOTAL:` of Android 10 and earlier.
#[test]
fn solox_sandboxed_process_without_blank_lines() {
    let p = fixture("solox_huawei_sandboxed");
    assert_eq!(p.pid, Some(23178));
    assert_eq!(
        p.process.as_deref(),
        Some("com.huawei.browser:sandboxed_process0:com.huawei.browser.sandbox.SandboxedProcessService0:6")
    );
    assert_eq!(p.table.len(), 14);
    assert_eq!(
        p.value("Native Heap", &Column::SwapPssDirty),
        Some(2028 * K)
    );
    assert_eq!(p.value("TOTAL", &Column::PssTotal), Some(10856 * K));
    assert_eq!(p.value("TOTAL", &Column::HeapFree), Some(4376 * K));
    assert_eq!(pss(&p, "Native Heap"), Some(96 * K));
    assert_eq!(pss(&p, "System"), Some(10692 * K));
    assert_eq!(p.totals.pss, Some(10856 * K));
    assert_eq!(p.totals.swap_pss, Some(8754 * K));
    assert_eq!(p.totals.rss, None);
}

/// App Summary excerpts quoted in issue threads, with PSS and RSS columns and the three totals
/// on one line.
#[test]
fn summaries_quoted_in_issue_threads() {
    let p = fixture("flutter_map_s23_summary");
    assert_eq!(pss(&p, "Graphics"), Some(923372 * K));
    assert_eq!(rss(&p, "Graphics"), Some(923376 * K));
    assert_eq!(pss(&p, "Private Other"), Some(681788 * K));
    assert_eq!(rss(&p, "Unknown"), Some(837324 * K));
    assert_eq!(p.totals.pss, Some(1843678 * K));
    assert_eq!(p.totals.rss, Some(2011800 * K));
    assert_eq!(p.totals.swap_pss, Some(144 * K));

    let p = fixture("rethink_summary");
    assert_eq!(pss(&p, "System"), Some(1147686 * K));
    assert_eq!(rss(&p, "System"), None);
    assert_eq!(rss(&p, "Stack"), Some(732 * K));
    assert_eq!(p.totals.pss, Some(1287534 * K));
    assert_eq!(p.totals.rss, Some(187488 * K));
    assert_eq!(p.totals.swap_pss, Some(1145221 * K));
}

/// Android 12 on a Pixel 3: `Swap Dirty` (no SwapPss) beside `Rss Total`, and the summary's swap
/// as `TOTAL SWAP (KB):`.
#[test]
fn systemui_pixel3_android12_swap_without_pss() {
    let p = fixture("systemui_pixel3_android12");
    assert_eq!(p.pid, Some(2084));
    assert_eq!(p.table.len(), 19);
    assert_eq!(p.value("GL mtrack", &Column::PssTotal), Some(10163 * K));
    assert_eq!(p.value("EGL mtrack", &Column::RssTotal), Some(12912 * K));
    assert_eq!(p.value("TOTAL", &Column::SwapDirty), Some(0));
    assert_eq!(p.value("TOTAL", &Column::SwapPssDirty), None);
    assert_eq!(p.value("TOTAL", &Column::RssTotal), Some(182691 * K));
    assert_eq!(pss(&p, "Graphics"), Some(27095 * K));
    assert_eq!(rss(&p, "Unknown"), Some(8732 * K));
    assert_eq!(p.totals.pss, Some(96932 * K));
    assert_eq!(p.totals.rss, Some(182691 * K));
    assert_eq!(p.totals.swap, Some(0));
    assert_eq!(p.totals.swap_pss, None);
    let metrics = p.metrics();
    assert_eq!(metrics["gpu"], 27095 * K);
    assert!(!metrics.contains_key("swap_pss"));
}

/// The `Dalvik Details` table after the main one (its `.Heap`, `.LOS` rows are not table rows).
#[test]
fn memorylab_dalvik_details_are_not_rows() {
    let p = fixture("memorylab_dalvik_details");
    assert_eq!(p.pid, Some(20602));
    assert_eq!(p.value("Native Heap", &Column::HeapSize), Some(139028 * K));
    assert_eq!(p.value("TOTAL", &Column::PssTotal), Some(337790 * K));
    assert!(p.row(".Heap").is_none() && p.row(".Boot art").is_none());
    assert_eq!(pss(&p, "Java Heap"), Some(69716 * K));
    assert_eq!(rss(&p, "Graphics"), Some(57176 * K));
    assert_eq!(p.totals.pss, Some(337790 * K));
    assert_eq!(p.totals.rss, Some(421296 * K));
    assert_eq!(p.totals.swap_pss, Some(162 * K));
}

/// `TOTAL:` with `TOTAL SWAP (KB):`, and the DATABASES and Asset Allocations sections after it.
#[test]
fn oppo_launcher_old_total_with_swap_kb() {
    let p = fixture("oppo_launcher_swap_kb");
    assert_eq!(p.process.as_deref(), Some("com.oppo.launcher"));
    assert_eq!(p.value("GL mtrack", &Column::PssTotal), Some(23004 * K));
    assert_eq!(p.value("TOTAL", &Column::HeapAlloc), Some(79016 * K));
    assert_eq!(pss(&p, "Graphics"), Some(43532 * K));
    assert_eq!(p.totals.pss, Some(148046 * K));
    assert_eq!(p.totals.swap, Some(0));
    assert_eq!(p.totals.rss, None);
    assert!(p.summary_row("MEMORY_USED").is_none());
}

/// Every fixture under fixtures/dumpsys/ has its source in SOURCES.md, parses, and yields the
/// registry metrics (at least a total PSS).
#[test]
fn every_fixture_is_sourced_parsed_and_gives_metrics() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/dumpsys");
    let sources = std::fs::read_to_string(dir.join("SOURCES.md")).unwrap();
    let mut count = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "txt") {
            continue;
        }
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        assert!(
            sources.contains(&format!("`{name}`")),
            "{name} is not in SOURCES.md"
        );
        let text = std::fs::read_to_string(&path).unwrap();
        let processes = parse(&text).unwrap_or_else(|e| panic!("{name}: {e}"));
        for p in &processes {
            let metrics = p.metrics();
            assert!(
                metrics.contains_key("pss") || p.summary.is_empty(),
                "{name}: {metrics:?}"
            );
        }
        count += 1;
    }
    assert!(count >= 14, "{count} fixtures");
}

#[test]
fn several_processes_of_one_package() {
    let one = include_str!("../../../../fixtures/dumpsys/flutter_gallery_2019.txt");
    let two = one.replace(
        "pid 16141 [io.flutter.demo.gallery]",
        "pid 7 [io.flutter.demo.gallery:remote]",
    );
    let processes = parse(&format!("{one}\n{two}")).unwrap();
    assert_eq!(processes.len(), 2);
    assert_eq!(processes[1].pid, Some(7));
    assert_eq!(
        processes[1].process.as_deref(),
        Some("io.flutter.demo.gallery:remote")
    );
    assert_eq!(processes[1].totals.pss, Some(95085 * K));
}

#[test]
fn dalvik_details_after_the_table_are_skipped() {
    let text = "\
                   Pss  Private
                 Total    Dirty
                ------   ------
  Native Heap      100       90
        TOTAL      100       90

 Dalvik Details
        .Heap       10        9
         .LOS        5        5
";
    let p = parse(text).unwrap().remove(0);
    assert_eq!(p.table.len(), 2);
    assert!(p.row(".Heap").is_none());
}

fn error_line(text: &str) -> (usize, String) {
    match parse(text) {
        Err(DumpsysError::Malformed { line, what }) => (line, what),
        other => panic!("expected a malformed-line error, got {other:?}"),
    }
}

#[test]
fn malformed_inputs_name_their_line() {
    let header = "        Pss  Private\n      Total    Dirty\n";
    let (line, what) = error_line(&format!("{header}  Native Heap  1  2  3\n"));
    assert_eq!(line, 3);
    assert!(what.contains("3 values in a table of 2 columns"), "{what}");

    let (line, what) = error_line(&format!("{header}  Native Heap\n"));
    assert_eq!(line, 3);
    assert!(what.contains("without values"), "{what}");

    let (line, _) = error_line(&format!("{header}  12  13\n"));
    assert_eq!(line, 3);

    let (line, what) = error_line(" App Summary\n    Java Heap   12\n");
    assert_eq!(line, 2);
    assert!(what.contains("without a colon"), "{what}");

    let (line, what) = error_line(" App Summary\n    Java Heap:  12x\n");
    assert_eq!(line, 2);
    assert!(what.contains("\"12x\" is not a size in KB"), "{what}");

    let (line, what) = error_line(" App Summary\n    Java Heap:  1 2 3\n");
    assert_eq!(line, 2);
    assert!(what.contains("one or two values, not 3"), "{what}");

    let (line, _) = error_line(" App Summary\n    TOTAL PSS:   lots\n");
    assert_eq!(line, 2);

    let (line, what) = error_line("        Pss  Private\n      Total\n");
    assert_eq!(line, 2);
    assert!(what.contains("2 and 1 words"), "{what}");
}

#[test]
fn a_size_too_large_for_bytes_is_an_error_not_an_overflow() {
    let (line, what) = error_line(&format!(" App Summary\n  Java Heap:  {}\n", u64::MAX / 2));
    assert_eq!(line, 2);
    assert!(what.contains("not a size in KB"), "{what}");
}

#[test]
fn control_characters_in_errors_are_escaped_and_long_lines_shortened() {
    let long = "x".repeat(500);
    let (_, what) = error_line(&format!(" App Summary\n  Java\u{1b}[31m {long}\n"));
    assert!(!what.contains('\u{1b}'), "{what}");
    assert!(what.contains("\\u{1b}"), "{what}");
    assert!(what.len() < 300, "{what}");
}

#[test]
fn empty_unrelated_and_oversized_inputs() {
    assert_eq!(parse(""), Err(DumpsysError::NothingFound));
    assert_eq!(
        parse("Applications Memory Usage (in Kilobytes):\nUptime: 1\n"),
        Err(DumpsysError::NothingFound)
    );
    let big = " ".repeat(MAX_INPUT_BYTES + 1);
    assert_eq!(
        parse(&big),
        Err(DumpsysError::TooLarge {
            len: MAX_INPUT_BYTES + 1,
            max: MAX_INPUT_BYTES
        })
    );
}
