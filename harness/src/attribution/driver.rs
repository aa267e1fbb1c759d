//! A driver-fed attribution source: an exec driver that offers the protocol's `sites` capability
//! (docs/protocol.md, "Allocation sites") records the live bytes per allocation site of its own
//! language's heap (Python: `tracemalloc`) and sends them with every `snapshot` reply once the
//! runner has asked it to start (`start_sites`).
//!
//! The worker's side of the pipe ([`crate::engine::WorkerEngine`]) hands each reply's `sites` to a
//! shared [`SiteFeed`]; the source ([`DriverSites`]) takes the latest ones at each sample point,
//! as heaptrack's source does with its stream, so trimming, the estimator and the reports are the
//! same for both. Everything the driver sends is checked against the caps below; a reply that
//! breaks one (or is not the documented shape) stops the feed with a message naming the field,
//! and the run's samples are kept: only this source's attribution is given up.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

use serde_json::Value;

use super::site::{Frame, SHOWN_DEPTH, SITE_DEPTH};
use super::{AttributionSource, Recording, SiteSnapshot};

/// Most sites one `snapshot` reply may carry (a driver sends its largest).
pub const MAX_SITES_PER_SNAPSHOT: usize = 4096;
/// Most frames one site may carry.
pub const MAX_FRAMES_PER_SITE: usize = 64;
/// Longest text (a file name, a function name) of a frame, in bytes.
pub const MAX_TEXT_BYTES: usize = 4096;
/// Longest source name a driver may announce.
pub const MAX_SOURCE_NAME_BYTES: usize = 32;
/// Most distinct sites followed over a run; past it the feed stops, with a note.
pub const MAX_DISTINCT_SITES: usize = 100_000;
/// How many frames of each allocation the runner asks a driver to keep (`start_sites`): enough
/// to show a site's path after the driver's own frames are left out.
pub const REQUESTED_FRAMES: u32 = SHOWN_DEPTH as u32;
/// The metrics a driver's heap is set against, in order of preference: an interpreter's heap
/// lives in anonymous memory (Python's small-object arenas are mapped, not `malloc`ed), which
/// `native_heap` does not see in full.
pub const DRIVER_METRICS: &[&str] = &["anon_rss", "rss", "pss", "native_heap", "heap"];
/// Files whose frames are the tracer's own (trimmed, as heaptrack's and the allocator's are).
const TRACER_FILES: &[&str] = &["tracemalloc.py"];

/// The source a driver's `hello` reply offers (`"sites": {"source": "tracemalloc"}`): its name,
/// or why the offer is not one.
pub(crate) fn offered_source(offer: &Value) -> Result<String, String> {
    let source = offer
        .get("source")
        .ok_or("`sites` has no `source` field (a string naming the recorder)")?;
    let Some(name) = source.as_str() else {
        return Err(format!("`sites.source`: {source} is not a string"));
    };
    let fits = !name.is_empty()
        && name.len() <= MAX_SOURCE_NAME_BYTES
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-');
    if !fits {
        return Err(format!(
            "`sites.source`: `{}` is not a name of 1 to {MAX_SOURCE_NAME_BYTES} lowercase \
             letters, digits, `_` or `-`",
            cut(name)
        ));
    }
    Ok(name.to_owned())
}

/// One site as a driver sent it: live bytes and frames, innermost first.
pub(crate) type WireSite = (u64, Vec<Frame>);

/// The `sites` of a `snapshot` reply, checked against the documented shape and caps; an error
/// names the field (`sites[3].frames[0].line`).
pub(crate) fn parse_sites(sites: &Value) -> Result<Vec<WireSite>, String> {
    let Some(list) = sites.as_array() else {
        return Err(format!("`sites`: {} is not an array", short(sites)));
    };
    if list.len() > MAX_SITES_PER_SNAPSHOT {
        return Err(format!(
            "`sites`: {} sites, over the cap of {MAX_SITES_PER_SNAPSHOT} per snapshot (send the \
             largest)",
            list.len()
        ));
    }
    list.iter()
        .enumerate()
        .map(|(i, site)| parse_site(site).map_err(|e| format!("`sites[{i}]{e}")))
        .collect()
}

/// One site; an error starts with the rest of the field's path (`.frames[0].line`: ...).
fn parse_site(site: &Value) -> Result<WireSite, String> {
    let Some(object) = site.as_object() else {
        return Err(format!("`: {} is not an object", short(site)));
    };
    let bytes = match object.get("bytes") {
        Some(b) => b
            .as_u64()
            .ok_or_else(|| format!(".bytes`: {} is not a whole number of bytes", short(b)))?,
        None => return Err(".bytes`: missing (the site's live bytes)".into()),
    };
    let frames = match object.get("frames") {
        Some(Value::Array(frames)) => frames,
        Some(other) => return Err(format!(".frames`: {} is not an array", short(other))),
        None => return Err(".frames`: missing (the site's traceback, innermost first)".into()),
    };
    if frames.len() > MAX_FRAMES_PER_SITE {
        return Err(format!(
            ".frames`: {} frames, over the cap of {MAX_FRAMES_PER_SITE}",
            frames.len()
        ));
    }
    let frames = frames
        .iter()
        .enumerate()
        .map(|(j, frame)| parse_frame(frame).map_err(|e| format!(".frames[{j}]{e}")))
        .collect::<Result<Vec<_>, _>>()?;
    Ok((bytes, frames))
}

fn parse_frame(frame: &Value) -> Result<Frame, String> {
    let Some(object) = frame.as_object() else {
        return Err(format!("`: {} is not an object", short(frame)));
    };
    let text = |name: &str, required: bool| -> Result<Option<String>, String> {
        match object.get(name) {
            None | Some(Value::Null) if !required => Ok(None),
            None | Some(Value::Null) => Err(format!(".{name}`: missing")),
            Some(Value::String(s)) if s.len() > MAX_TEXT_BYTES => Err(format!(
                ".{name}`: {} bytes, over the cap of {MAX_TEXT_BYTES}",
                s.len()
            )),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(other) => Err(format!(".{name}`: {} is not a string", short(other))),
        }
    };
    let file = text("file", true)?;
    let function = text("function", false)?;
    let line = match object.get("line") {
        Some(l) => l
            .as_u64()
            .and_then(|l| u32::try_from(l).ok())
            .ok_or_else(|| format!(".line`: {} is not a line number", short(l)))?,
        None => return Err(".line`: missing".into()),
    };
    Ok(Frame {
        function,
        // An interpreted frame has no library: its file says where it is.
        module: String::new(),
        file,
        line: Some(line),
        address: 0,
    })
}

/// A JSON value cut short for a message.
fn short(value: &Value) -> String {
    cut(&value.to_string())
}

/// The first 80 characters of `text`, for a message.
fn cut(text: &str) -> String {
    match text.char_indices().nth(80) {
        Some((at, _)) => format!("{}...", &text[..at]),
        None => text.to_owned(),
    }
}

/// Whether `frame` is the tracer's own.
fn is_tracer_frame(frame: &Frame) -> bool {
    frame.file.as_deref().is_some_and(|f| {
        TRACER_FILES
            .iter()
            .any(|t| f.rsplit('/').next() == Some(*t))
    })
}

/// What the worker's pipe hands to the source: the sites seen so far and the latest live bytes
/// per site.
#[derive(Debug, Default)]
pub struct SiteFeed {
    /// Sites by their identifying frames (the first [`SITE_DEPTH`] after trimming).
    index: HashMap<Vec<Frame>, usize>,
    recording: Recording,
    /// Live bytes per site of the latest `snapshot` reply.
    latest: BTreeMap<usize, u64>,
    /// Why the feed stopped (a cap, a malformed reply); nothing is taken after it.
    stopped: Option<String>,
}

/// The feed as the pipe and the source share it.
pub type SharedFeed = Arc<Mutex<SiteFeed>>;

impl SiteFeed {
    /// Takes the `sites` of one `snapshot` reply (`None`: the reply had none, which after
    /// `start_sites` is a fault of the driver's).
    pub(crate) fn take(&mut self, sites: Option<&Value>) {
        if self.stopped.is_some() {
            return;
        }
        let parsed = match sites {
            Some(sites) => parse_sites(sites),
            None => Err("a `snapshot` reply after `start_sites` has no `sites` field".into()),
        };
        match parsed.and_then(|sites| self.live(sites)) {
            Ok(live) => self.latest = live,
            Err(why) => self.stopped = Some(why),
        }
    }

    /// Live bytes per site key, interning new sites.
    fn live(&mut self, sites: Vec<WireSite>) -> Result<BTreeMap<usize, u64>, String> {
        let mut live = BTreeMap::new();
        for (bytes, frames) in sites {
            let first = frames.iter().position(|f| !is_tracer_frame(f));
            let frames: Vec<Frame> = match first {
                Some(i) => frames[i..].iter().take(SHOWN_DEPTH).cloned().collect(),
                // The tracer's own memory: not the code under test.
                None => continue,
            };
            let key: Vec<Frame> = frames.iter().take(SITE_DEPTH).cloned().collect();
            let next = self.recording.sites.len();
            let site = *self.index.entry(key).or_insert(next);
            if site == next {
                if next >= MAX_DISTINCT_SITES {
                    return Err(format!(
                        "over {MAX_DISTINCT_SITES} distinct sites over the run"
                    ));
                }
                self.recording.sites.push(frames);
            }
            let total: &mut u64 = live.entry(site).or_default();
            *total = total.saturating_add(bytes);
        }
        Ok(live)
    }

    /// A sample point of `turn`: the latest live bytes stand for it.
    fn mark(&mut self, turn: u32) {
        if self.stopped.is_none() {
            let live = self.latest.clone();
            self.recording.snapshots.push(SiteSnapshot { turn, live });
        }
    }
}

/// The driver's sites as an [`AttributionSource`]: started by the worker once the driver has
/// agreed to record (`Engine::start_sites`), fed by its `snapshot` replies.
#[derive(Debug)]
pub struct DriverSites {
    name: String,
    feed: SharedFeed,
}

impl DriverSites {
    /// A source named `name` (as the driver offered it) reading `feed`.
    pub(crate) fn new(name: String, feed: SharedFeed) -> Self {
        Self { name, feed }
    }
}

impl AttributionSource for DriverSites {
    fn name(&self) -> &str {
        &self.name
    }

    /// Nothing: the driver records inside its own process, started by a protocol call.
    fn env(&self) -> Vec<(String, String)> {
        Vec::new()
    }

    fn mark(&mut self, turn: u32) {
        self.feed
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .mark(turn);
    }

    /// The marks recorded; an error naming the field when the driver broke a cap or the shape.
    fn finish(self: Box<Self>) -> Result<Recording, String> {
        let mut feed = self.feed.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(why) = feed.stopped.take() {
            return Err(format!("the driver's sites were given up: {why}"));
        }
        Ok(std::mem::take(&mut feed.recording))
    }

    fn metrics(&self) -> &'static [&'static str] {
        DRIVER_METRICS
    }
}
