use std::path::Path;

use super::*;
use crate::runner::NoObserver;
use crate::scenario::parse_scenario;

#[test]
fn the_expected_verdict_is_read_from_the_fixtures_header() {
    let pass = "# A clean engine.\n# Expected: PASS (exit 0) on the real CPU engine.\nname: a\n";
    let fail = "# Expected: FAIL (exit 1) on balance and cl_mem_bytes growth.\nname: b\n";
    let after_stop = "# Expected: PASS, after stopping early.\nname: c\n";
    assert_eq!(
        ExpectedVerdict::from_header(pass),
        Some(ExpectedVerdict::Pass)
    );
    assert_eq!(
        ExpectedVerdict::from_header(fail),
        Some(ExpectedVerdict::Fail)
    );
    assert_eq!(
        ExpectedVerdict::from_header(after_stop),
        Some(ExpectedVerdict::Pass)
    );
    // Only the header counts: a comment inside the YAML says nothing about the verdict.
    assert_eq!(
        ExpectedVerdict::from_header("name: d\n# Expected: FAIL (exit 1)\n"),
        None
    );
    assert_eq!(
        ExpectedVerdict::from_header("# Expected: exit 3\nname: e\n"),
        None
    );
}

fn run(
    verdict: &'static str,
    class: Classification,
    slope: f64,
    upper: Option<f64>,
) -> StabilityRun {
    StabilityRun {
        verdict,
        metrics: BTreeMap::from([(
            "anon_rss".to_owned(),
            MetricRun {
                class,
                slope,
                upper,
            },
        )]),
        seconds: 1.0,
    }
}

fn row(expected: ExpectedVerdict) -> StabilityRow {
    StabilityRow {
        name: "server".to_owned(),
        expected,
        runs: vec![
            run("pass", Classification::Clean, 0.0, Some(13_516.8)),
            run("fail", Classification::Inconclusive, 0.0, Some(61_440.0)),
            run("pass", Classification::Plateau, 512.0, None),
            run("pass", Classification::Clean, -1024.0, Some(2048.0)),
        ],
    }
}

#[test]
fn a_row_counts_verdicts_false_fails_and_classes() {
    let row = row(ExpectedVerdict::Pass);
    assert_eq!(row.verdicts(), BTreeMap::from([("fail", 1), ("pass", 3)]));
    assert_eq!(row.wrong(), 1);
    assert_eq!(row.false_fails(), Some(1));
    assert_eq!(
        row.classes("anon_rss"),
        BTreeMap::from([("clean", 2), ("inconclusive", 1), ("plateau", 1)])
    );
    assert!(row.classes("rss").is_empty());
    let expected_fail = StabilityRow {
        expected: ExpectedVerdict::Fail,
        ..row
    };
    assert_eq!(expected_fail.wrong(), 3, "the passes are the wrong ones");
    assert_eq!(expected_fail.false_fails(), None);
}

#[test]
fn the_spread_is_the_min_median_and_max_of_the_runs_that_have_the_figure() {
    let row = row(ExpectedVerdict::Pass);
    let slope = row.slope_spread("anon_rss").unwrap();
    assert_eq!((slope.min, slope.median, slope.max), (-1024.0, 0.0, 512.0));
    // Three runs have an upper bound (the plateau has none): the median is the middle one.
    let upper = row.upper_spread("anon_rss").unwrap();
    assert_eq!(
        (upper.min, upper.median, upper.max),
        (2048.0, 13_516.8, 61_440.0)
    );
    assert_eq!(row.slope_spread("rss"), None);
}

#[test]
fn the_table_has_a_verdict_row_per_scenario_and_a_row_per_metric() {
    let table = render_stability(&[row(ExpectedVerdict::Pass)], 2);
    assert!(table.starts_with("Busy threads: 2."), "{table}");
    assert!(
        table.contains("| server | 4 | pass | pass 3, fail 1 | 1 | 1 |"),
        "{table}"
    );
    assert!(
        table.contains(
            "| server | anon_rss | clean 2, inconclusive 1, plateau 1 | -1.0 KiB/turn | 0 B/turn | +512 B/turn | +2.0 KiB/turn | +13.2 KiB/turn | +60.0 KiB/turn |"
        ),
        "{table}"
    );
}

#[test]
fn busy_threads_spin_until_dropped() {
    let load = BusyThreads::start(2).unwrap();
    assert_eq!(load.threads(), 2);
    // Dropping sets the flag and joins: a thread that ignored it would hang here.
    drop(load);
    assert_eq!(BusyThreads::start(0).unwrap().threads(), 0);
    assert_eq!(
        BusyThreads::start(MAX_LOAD_THREADS + 5).unwrap().threads(),
        MAX_LOAD_THREADS as usize
    );
}

fn sim(name: &str, profile: &str) -> Scenario {
    let text = format!(
        "name: {name}\n\
         engine: {{backend: sim, profile: {profile}}}\n\
         warmup_turns: 1\n\
         turns: 10\n\
         turn:\n  - open: {{}}\n  - send: {{prompt: \"Summarize the notes.\"}}\n  - generate: {{max_output_tokens: 16}}\n  - close: {{}}\n\
         sample: {{after: [load, close]}}\n\
         watch: [native_heap]\n\
         expect:\n  balanced: true\n  native_heap: {{tolerance: 16MiB, warmup_budget: 128MiB, max_growth_per_turn: 1MiB}}\n"
    );
    parse_scenario(&text, Path::new("<stability test>")).unwrap()
}

#[test]
fn every_run_gets_its_own_folder_and_a_leak_expected_to_pass_is_a_false_fail() {
    let dir = tempfile::tempdir().unwrap();
    let scenarios = [
        StabilityScenario {
            scenario: sim("flat", "cpu-flat"),
            expected: ExpectedVerdict::Pass,
        },
        StabilityScenario {
            scenario: sim("leak", "android-opencl-leak"),
            expected: ExpectedVerdict::Pass,
        },
    ];
    let mut seen = Vec::new();
    let rows = run_stability(
        &scenarios,
        2,
        1,
        dir.path(),
        &mut NoObserver,
        |name, n, r| seen.push(format!("{name} {n} {}", r.verdict)),
    )
    .unwrap();
    assert_eq!(
        seen,
        ["flat 1 pass", "flat 2 pass", "leak 1 fail", "leak 2 fail"]
    );
    assert_eq!(rows[0].false_fails(), Some(0));
    assert_eq!(rows[1].false_fails(), Some(2));
    assert_eq!(
        rows[1].classes("native_heap"),
        BTreeMap::from([("growth", 2)])
    );
    for folder in ["flat/run-01", "flat/run-02", "leak/run-01", "leak/run-02"] {
        assert!(
            dir.path().join(folder).join("report.json").is_file(),
            "{folder}"
        );
    }
}
