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
