use super::*;

fn frame(function: &str) -> Frame {
    Frame {
        function: Some(function.to_owned()),
        module: "leakloop".to_owned(),
        file: None,
        line: None,
        address: 0,
    }
}

fn live(kind: &str, function: &str, live: u64, bytes: u64) -> ClSiteLive {
    ClSiteLive {
        kind: kind.to_owned(),
        frames: vec![frame("Runtime::buffer"), frame(function)],
        live,
        live_bytes: bytes,
    }
}

/// A run whose KV cache leaks one buffer per turn from turn 1 while the weights stay one buffer.
fn leaking(turns: u32) -> ClSiteRecorder {
    let mut r = ClSiteRecorder::default();
    for turn in 0..=turns {
        let mut sites = vec![live("cl_mem", "Weights::create", 1, 1 << 20)];
        if turn > 0 {
            sites.push(live(
                "cl_mem",
                "Cache::create",
                u64::from(turn),
                u64::from(turn) << 16,
            ));
        }
        sites.push(live("cl_kernel", "Runtime::create", 4, 0));
        r.record(turn, &ClSites { sites, unsited: 0 });
    }
    r
}

#[test]
fn a_site_that_keeps_one_more_buffer_each_turn_grows_and_comes_first() {
    let c = leaking(10).estimate(1).unwrap();
    assert_eq!(c.turns, 9);
    assert_eq!(c.growing_sites, 1);
    let top = &c.sites[0];
    assert_eq!(top.frames[1].function.as_deref(), Some("Cache::create"));
    assert_eq!((top.live, top.live_bytes), (10, 10 << 16));
    let g = top.objects_per_turn.unwrap();
    assert_eq!((g.per_turn, g.interval.0 > 0.0), (1.0, true));
    assert_eq!(top.bytes_per_turn.unwrap().per_turn, 65536.0);
    assert_eq!(c.live["cl_mem"], 11);
    // Load-time objects are listed, without growth.
    assert!(c.sites[1..].iter().all(|s| !s.grows()));
    let lines = cl_site_lines(&c);
    assert!(
        lines[0].starts_with("cl_mem 11 live: 10 (640.0 KiB) created at Runtime::buffer [leakloop] <- Cache::create [leakloop]  +1.0/turn"),
        "{lines:?}"
    );
    assert_eq!(cl_growing_lines(&c, None).len(), 1);
    assert_eq!(cl_growing_lines(&c, Some("cl_mem")).len(), 1);
    assert!(cl_growing_lines(&c, Some("cl_kernel")).is_empty());
    assert!(
        cl_headline(&c).contains("1 creation site grows per turn"),
        "{}",
        cl_headline(&c)
    );
}

#[test]
fn constant_live_objects_do_not_grow_and_a_warm_up_rise_is_not_growth() {
    let mut r = ClSiteRecorder::default();
    for turn in 0..=10u32 {
        // Two buffers made in the first turn and kept (a cache filled once).
        let n = if turn == 0 { 0 } else { 2 };
        r.record(
            turn,
            &ClSites {
                sites: vec![live("cl_mem", "Scratch::create", n, n * 64)],
                unsited: 0,
            },
        );
    }
    let c = r.estimate(1).unwrap();
    assert_eq!(c.growing_sites, 0);
    assert!(cl_growing_lines(&c, None).is_empty());
    assert!(cl_headline(&c).contains("no creation site grows"));
}

#[test]
fn sites_differing_only_in_trimmed_frames_are_merged_and_unsited_objects_are_said() {
    let mut r = ClSiteRecorder::default();
    r.record(
        3,
        &ClSites {
            sites: vec![
                live("cl_mem", "Cache::create", 2, 8),
                live("cl_mem", "Cache::create", 1, 4),
            ],
            unsited: 5,
        },
    );
    let c = r.estimate(0).unwrap();
    assert_eq!(c.sites.len(), 1);
    assert_eq!((c.sites[0].live, c.sites[0].live_bytes), (3, 12));
    assert!(cl_headline(&c).contains("5 objects counted without a site"));
    assert!(ClSiteRecorder::default().estimate(0).is_none());
}

#[test]
fn an_engine_that_made_no_opencl_object_reports_none() {
    let mut r = ClSiteRecorder::default();
    for turn in 0..=6 {
        r.record(turn, &ClSites::default());
    }
    assert!(r.estimate(1).is_none());
}
