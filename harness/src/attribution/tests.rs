use super::heaptrack::Stream;
use super::site::{is_trimmed, site_frames, Frame};

/// A stream in heaptrack_interpret's format: `leak` (in libengine.so, called from `main`) keeps
/// 0x400 bytes a turn through malloc; `churn` allocates and frees the same each turn.
fn turn_stream(turns: u32) -> (Stream, Vec<String>) {
    let mut lines: Vec<String> = [
        "v 10400 3",
        "s 1f /lib/x86_64-linux-gnu/libc.so.6",
        "s 13 /opt/libengine.so",
        "s 6 malloc",
        "s 4 leak",
        "s 8 engine.c",
        "s 5 churn",
        "s 4 main",
        "i 1000 1 3",
        "i 2000 2 4 5 2a",
        "i 3000 2 6 5 30",
        "i 4000 2 7",
        "t 4 0",
        "t 2 1",
        "t 1 2",
        "t 3 1",
        "t 1 4",
        "a 400 3",
        "a 400 5",
    ]
    .map(String::from)
    .to_vec();
    let mut stream = Stream::default();
    for line in &lines {
        stream.line(line);
    }
    stream.mark(0, 0);
    lines.clear();
    for turn in 1..=turns {
        let at = u64::from(turn) * 100;
        stream.mark(turn, at);
        for line in ["+ 0", "+ 1", "- 1"] {
            stream.line(line);
        }
        stream.line(&format!("c {at:x}"));
        lines.push(format!("turn {turn}"));
    }
    (stream, lines)
}

#[test]
fn the_stream_gives_live_bytes_per_trimmed_site_at_each_mark() {
    let (stream, _) = turn_stream(5);
    let recording = stream.end(None);
    assert_eq!(recording.snapshots.len(), 6);
    let leak = recording
        .sites
        .iter()
        .position(|s| s[0].function.as_deref() == Some("leak"))
        .expect("the leaking function is a site");
    assert_eq!(recording.sites[leak][0].line, Some(0x2a));
    assert_eq!(recording.sites[leak][1].function.as_deref(), Some("main"));
    let live: Vec<u64> = recording
        .snapshots
        .iter()
        .map(|s| s.live.get(&leak).copied().unwrap_or(0))
        .collect();
    assert_eq!(live, [0, 0x400, 0x800, 0xc00, 0x1000, 0x1400]);
    // The churning site holds nothing at any mark.
    let churn = recording
        .sites
        .iter()
        .position(|s| s[0].function.as_deref() == Some("churn"));
    if let Some(churn) = churn {
        assert!(recording
            .snapshots
            .iter()
            .all(|s| !s.live.contains_key(&churn)));
    }
}

#[test]
fn sample_points_past_the_streams_end_are_caught_up_or_named() {
    let (mut stream, _) = turn_stream(3);
    assert!(stream.caught_up());
    // Two sample points the stream never reached (its last block lost with the process).
    stream.mark(4, 400);
    stream.mark(5, 500);
    assert!(!stream.caught_up());
    // 0x190 ms = 400 ms reaches the first of them only.
    stream.line("+ 0");
    stream.line("c 190");
    assert!(!stream.caught_up());
    let recording = stream.end(None);
    assert_eq!(recording.snapshots.len(), 6);
    assert_eq!(recording.notes.len(), 1, "{:?}", recording.notes);
    assert!(
        recording.notes[0].contains("before the last 1 sample point(s)"),
        "{:?}",
        recording.notes
    );
}

#[test]
fn a_free_of_an_undefined_kind_stops_the_stream_with_a_note() {
    let mut stream = Stream::default();
    stream.line("- 7");
    stream.mark(0, 0);
    let recording = stream.end(None);
    assert_eq!(recording.notes.len(), 1, "{:?}", recording.notes);
    assert!(recording.notes[0].contains("allocation kind 7"));
}

#[test]
fn allocator_and_libc_frames_are_trimmed_from_the_top() {
    let frame = |f: &str, m: &str| Frame {
        function: Some(f.into()),
        module: m.into(),
        file: None,
        line: None,
        address: 0,
    };
    let stack = [
        frame("malloc", "libheaptrack_preload.so"),
        frame("_Znwm", "libstdc++.so.6"),
        frame("SaveCheckpoint", "libLiteRtLm.so"),
        frame("_ZN8leakloop6engine3run", "leakloop"),
        frame("main", "leakloop"),
    ];
    assert!(is_trimmed(&stack[0]) && is_trimmed(&stack[1]) && is_trimmed(&stack[3]));
    assert!(is_trimmed(&Frame {
        function: None,
        module: "??".into(),
        file: None,
        line: None,
        address: 0,
    }));
    let site = site_frames(&stack);
    assert_eq!(site[0].function.as_deref(), Some("SaveCheckpoint"));
    assert_eq!(site.len(), 2);
}

#[test]
fn a_frame_is_described_without_its_parameter_list() {
    let frame = Frame {
        function: Some(
            "litert::lm::Conversation::Create(Engine&, std::pair<int, int> (*)(int)) const".into(),
        ),
        module: "liblitert-lm.so".into(),
        file: Some("/src/conversation.cc".into()),
        line: Some(42),
        address: 0,
    };
    assert_eq!(
        frame.describe(),
        "litert::lm::Conversation::Create (conversation.cc:42) [liblitert-lm.so]"
    );
}

mod driver_sites {
    use serde_json::json;

    use super::super::driver::{offered_source, parse_sites, DriverSites, SiteFeed};
    use super::super::{AttributionSource, MAX_FRAMES_PER_SITE, MAX_SITES_PER_SNAPSHOT};

    fn frame(file: &str, line: u32, function: &str) -> serde_json::Value {
        json!({"file": file, "line": line, "function": function})
    }

    #[test]
    fn a_drivers_sites_become_innermost_first_frames_without_a_module() {
        let sites = json!([{"bytes": 4096, "frames": [
            frame("/d/driver.py", 470, "Driver.generate"),
            frame("/d/driver.py", 300, "Driver.turn"),
        ]}]);
        let parsed = parse_sites(&sites).unwrap();
        assert_eq!(parsed.len(), 1);
        let (bytes, frames) = &parsed[0];
        assert_eq!(*bytes, 4096);
        assert_eq!(frames[0].describe(), "Driver.generate (driver.py:470)");
        assert_eq!(frames[1].line, Some(300));
    }

    #[test]
    fn garbage_and_broken_caps_name_the_field() {
        let too_many_frames: Vec<_> = (0..=MAX_FRAMES_PER_SITE as u32)
            .map(|i| frame("/a.py", i, "f"))
            .collect();
        let too_many_sites: Vec<_> = (0..=MAX_SITES_PER_SNAPSHOT)
            .map(|_| json!({"bytes": 1, "frames": []}))
            .collect();
        let cases = [
            (
                json!({"bytes": 1}),
                "`sites`: {\"bytes\":1} is not an array",
            ),
            (json!([{"frames": []}]), "`sites[0].bytes`: missing"),
            (
                json!([{"bytes": -3, "frames": []}]),
                "`sites[0].bytes`: -3 is not",
            ),
            (
                json!([{"bytes": 1, "frames": []}, {"bytes": 1, "frames": "x"}]),
                "`sites[1].frames`: \"x\" is not an array",
            ),
            (
                json!([{"bytes": 1, "frames": [{"file": "a.py", "line": "12"}]}]),
                "`sites[0].frames[0].line`: \"12\" is not a line number",
            ),
            (
                json!([{"bytes": 1, "frames": [{"line": 1}]}]),
                "`sites[0].frames[0].file`: missing",
            ),
            (
                json!([{"bytes": 1, "frames": [{"file": "a".repeat(5000), "line": 1}]}]),
                "`sites[0].frames[0].file`: 5000 bytes, over the cap of 4096",
            ),
            (
                json!([{"bytes": 1, "frames": too_many_frames}]),
                "`sites[0].frames`: 65 frames, over the cap of 64",
            ),
            (
                json!(too_many_sites),
                "`sites`: 4097 sites, over the cap of 4096",
            ),
        ];
        for (sites, says) in cases {
            let why = parse_sites(&sites).unwrap_err();
            assert!(why.contains(says), "{why}\nwanted: {says}");
        }
    }

    #[test]
    fn an_offer_names_a_short_lowercase_source() {
        assert_eq!(
            offered_source(&json!({"source": "tracemalloc"})).unwrap(),
            "tracemalloc"
        );
        for (offer, says) in [
            (json!({}), "no `source`"),
            (json!({"source": 3}), "`sites.source`: 3 is not a string"),
            (json!({"source": "Trace Malloc"}), "is not a name"),
            (json!({"source": "x".repeat(33)}), "is not a name"),
        ] {
            let why = offered_source(&offer).unwrap_err();
            assert!(why.contains(says), "{why}");
        }
    }

    /// The feed keys sites by their frames across snapshots, sums tracebacks that share them,
    /// trims tracemalloc's own frames, and a malformed reply gives the source up with the field
    /// named (the samples are the run's, untouched).
    #[test]
    fn the_feed_follows_sites_across_marks_and_stops_at_garbage() {
        let feed = std::sync::Arc::new(std::sync::Mutex::new(SiteFeed::default()));
        let mut source = Box::new(DriverSites::new("tracemalloc".into(), feed.clone()));
        for turn in 0..4u32 {
            let grows = u64::from(turn) * 1000;
            let sites = json!([
                {"bytes": grows, "frames": [frame("/d/x.py", 7, "keep")]},
                {"bytes": 5, "frames": [frame("/d/x.py", 7, "keep")]},
                {"bytes": 64, "frames": [
                    frame("/usr/lib/python3.11/tracemalloc.py", 500, "take_snapshot"),
                    frame("/d/x.py", 9, "measure"),
                ]},
                {"bytes": 99, "frames": [frame("/usr/lib/python3.11/tracemalloc.py", 1, "f")]},
            ]);
            feed.lock().unwrap().take(Some(&sites));
            source.mark(turn);
        }
        assert_eq!(source.name(), "tracemalloc");
        let recording = source.finish().unwrap();
        assert_eq!(recording.sites.len(), 2, "{:?}", recording.sites);
        assert_eq!(recording.sites[1][0].function.as_deref(), Some("measure"));
        let live: Vec<u64> = recording.snapshots.iter().map(|s| s.live[&0]).collect();
        assert_eq!(live, [5, 1005, 2005, 3005]);

        let feed = std::sync::Arc::new(std::sync::Mutex::new(SiteFeed::default()));
        let mut source = Box::new(DriverSites::new("tracemalloc".into(), feed.clone()));
        feed.lock()
            .unwrap()
            .take(Some(&json!([{"bytes": "many", "frames": []}])));
        source.mark(1);
        let why = source.finish().unwrap_err();
        assert!(why.contains("`sites[0].bytes`"), "{why}");
        let feed = std::sync::Arc::new(std::sync::Mutex::new(SiteFeed::default()));
        let source = Box::new(DriverSites::new("tracemalloc".into(), feed.clone()));
        feed.lock().unwrap().take(None);
        assert!(source.finish().unwrap_err().contains("no `sites` field"));
    }
}
