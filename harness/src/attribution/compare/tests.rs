use super::*;
use crate::attribution::Frame;

fn frame(function: Option<&str>, module: &str, line: u32, address: u64) -> Frame {
    Frame {
        function: function.map(str::to_owned),
        module: module.into(),
        file: function.map(|_| "engine.cc".into()),
        line: function.map(|_| line),
        address,
    }
}

/// A growing site whose innermost frame is `function` in libengine.so, called from `caller`.
fn site(function: &str, caller: &str, slope: f64, line: u32) -> SiteGrowth {
    SiteGrowth {
        frames: vec![
            frame(
                Some(function),
                "libengine.so",
                line,
                0x1000 + u64::from(line),
            ),
            frame(Some(caller), "libengine.so", 7, 0x2000),
            frame(None, "libpython3.so", 0, 0x7f00 + u64::from(line)),
        ],
        slope_bytes_per_turn: slope,
        slope_interval: (slope * 0.8, slope * 1.1),
        live_bytes: 0,
    }
}

fn attribution(sites: Vec<SiteGrowth>, unlisted: Vec<SiteGrowth>) -> Attribution {
    Attribution {
        source: "heaptrack".into(),
        metric: Some("native_heap".into()),
        metric_slope_bytes_per_turn: Some(sites.iter().map(|s| s.slope_bytes_per_turn).sum()),
        explained: None,
        growing_sites: sites.len() + unlisted.len(),
        sites,
        sites_seen: 40,
        turns: 10,
        notes: vec![],
        unlisted,
    }
}

#[test]
fn sites_match_by_function_and_library_not_by_line_or_address() {
    // Another build: other lines and addresses, the same functions.
    let a = attribution(
        vec![site("KvCache::Grow", "Session::Run", 4096.0, 10)],
        vec![],
    );
    let b = attribution(
        vec![
            site("SaveCheckpoint", "SendMessageAsync", 524_288.0, 20),
            site("KvCache::Grow", "Session::Run", 4000.0, 99),
        ],
        vec![],
    );
    let sites = compare_sites(&a, &b);
    let names = |list: &[SiteGrowth]| -> Vec<String> {
        list.iter()
            .map(|s| s.frames[0].function.clone().unwrap())
            .collect()
    };
    assert_eq!(names(&sites.b_only), ["SaveCheckpoint"]);
    assert_eq!(sites.both.len(), 1);
    assert_eq!(sites.both[0].0.slope_bytes_per_turn, 4096.0);
    assert_eq!(sites.both[0].1.slope_bytes_per_turn, 4000.0);
    assert!(sites.a_only.is_empty());
    // The other way round, the checkpoint grows in A only.
    let back = compare_sites(&b, &a);
    assert!(back.b_only.is_empty());
    assert_eq!(names(&back.a_only), ["SaveCheckpoint"]);
}

#[test]
fn the_same_function_from_another_caller_is_another_site() {
    let a = attribution(vec![site("alloc_block", "Prefill", 2048.0, 1)], vec![]);
    let b = attribution(vec![site("alloc_block", "Decode", 2048.0, 1)], vec![]);
    let sites = compare_sites(&a, &b);
    assert_eq!(
        (sites.b_only.len(), sites.both.len(), sites.a_only.len()),
        (1, 0, 1)
    );
}

#[test]
fn a_site_growing_past_a_sides_listed_ten_still_grows_there() {
    let listed: Vec<SiteGrowth> = (0..10)
        .map(|i| site(&format!("f{i}"), "main", 10_000.0 - f64::from(i), i))
        .collect();
    let a = attribution(listed, vec![site("slow", "main", 300.0, 50)]);
    let b = attribution(vec![site("slow", "main", 9000.0, 50)], vec![]);
    let sites = compare_sites(&a, &b);
    assert!(sites.b_only.is_empty(), "{:?}", sites.b_only);
    assert_eq!(sites.both.len(), 1);
    assert_eq!(sites.a_only.len(), 10);
}

#[test]
fn the_lines_name_each_group_and_cut_it_at_the_limit() {
    let a = attribution(vec![], vec![]);
    let b = attribution(
        (0..4)
            .map(|i| site(&format!("grow{i}"), "Conversation::Send", 2048.0, i))
            .collect(),
        vec![],
    );
    let lines = lines_up_to(&a, &b, 3);
    assert_eq!(
        lines[0],
        "A: native_heap +0 B/turn: no allocation site grows per turn (heaptrack, 10 turns)"
    );
    assert!(
        lines[1].starts_with("B: native_heap +8.0 KiB/turn"),
        "{lines:#?}"
    );
    assert_eq!(lines[2], "growing in B, not in A: 4 sites");
    assert_eq!(
        lines[3],
        "  +2.0 KiB/turn [+1.6 KiB, +2.2 KiB]  grow0 (engine.cc:0) [libengine.so] <- \
         Conversation::Send (engine.cc:7) [libengine.so] <- ?? [libpython3.so]"
    );
    assert_eq!(lines[6], "  ... and 1 more");
    assert_eq!(lines[7], "growing in both (A, then B): none");
    assert_eq!(lines[8], "growing in A, not in B: none");
    assert_eq!(lines.len(), 9);
}

#[test]
fn sites_with_one_key_pair_up_one_to_one() {
    // Two sites told apart only by an unnamed frame's address: the same key across runs.
    let twin = |slope: f64, address: u64| {
        let mut s = site("clone", "Template::Clone", slope, 1);
        s.frames[1].function = None;
        s.frames[1].address = address;
        s
    };
    let a = attribution(vec![twin(800.0, 1), twin(400.0, 2)], vec![]);
    let b = attribution(vec![twin(790.0, 7), twin(390.0, 9)], vec![]);
    let sites = compare_sites(&a, &b);
    let slopes: Vec<(f64, f64)> = sites
        .both
        .iter()
        .map(|(a, b)| (a.slope_bytes_per_turn, b.slope_bytes_per_turn))
        .collect();
    assert_eq!(slopes, [(800.0, 790.0), (400.0, 390.0)]);
    assert!(sites.b_only.is_empty() && sites.a_only.is_empty());
}
