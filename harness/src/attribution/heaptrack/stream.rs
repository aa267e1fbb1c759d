//! Heaptrack's interpreted stream (what `heaptrack_interpret` writes), read line by line into the
//! live bytes per allocation site.
//!
//! Every number is hexadecimal. The lines used: `s <len> <text>` (a string, numbered from 1),
//! `i <ip> <module> [<function> <file> <line>]...` (an instruction pointer, numbered from 1; 0
//! means no string), `t <ip> <parent>` (a node of the stack tree, numbered from 1; parent 0 is
//! the root), `a <size> <trace>` (an allocation kind, numbered from 0), `+ <kind>` and `- <kind>`
//! (one allocation made or freed), `c <ms>` (milliseconds since the process started). Other lines
//! (`v`, `X`, `I`, `R`, `#`, ...) carry nothing needed here.
//!
//! Every table is capped: past a cap the stream is no longer followed, and the recording says so.

use std::collections::HashMap;

use super::super::site::{site_frames, site_key, Frame};
use super::super::{Recording, SiteSnapshot};

/// The most strings, instruction pointers, stack nodes or allocation kinds followed (each costs
/// a few dozen bytes here: 16M is about a GiB at worst, far beyond an engine's few hundred
/// thousand).
pub(crate) const MAX_TABLE: usize = 16 << 20;
/// The most distinct sites kept; allocations of later sites count under the last one.
pub(crate) const MAX_SITES: usize = 100_000;
/// The most snapshots (sample points) kept.
pub(crate) const MAX_SNAPSHOTS: usize = 100_000;

/// One instruction pointer: its library and its frames (inlined ones first).
#[derive(Debug, Clone)]
struct Ip {
    address: u64,
    module: u32,
    frames: Vec<(u32, u32, u32)>,
}

/// The state of one stream: its tables, the live bytes per allocation kind, the snapshots.
#[derive(Debug, Default)]
pub(crate) struct Stream {
    strings: Vec<String>,
    ips: Vec<Ip>,
    /// `(ip, parent)` per stack node.
    traces: Vec<(u32, u32)>,
    /// `(size, trace)` per allocation kind.
    kinds: Vec<(u64, u32)>,
    /// Live allocations per kind.
    live: Vec<u64>,
    /// The site of each stack node once resolved.
    trace_site: HashMap<u32, usize>,
    site_index: HashMap<Vec<(Option<String>, String)>, usize>,
    recording: Recording,
    /// The latest timestamp seen, in ms since the process started.
    pub now_ms: u64,
    /// How far heaptrack's clock runs behind the source's (the process's start-up before the
    /// preload runs), from the first timestamp read; `None` before it.
    pub offset_ms: Option<u64>,
    /// Sample points not yet reached by the stream: `(turn, ms)`.
    pending: std::collections::VecDeque<(u32, u64)>,
    /// Set once the stream is no longer followed.
    stopped: Option<String>,
}

impl Stream {
    /// A sample point of `turn` at `at_ms` since the process started: snapshot now when the
    /// stream is there already, else when it gets there.
    pub fn mark(&mut self, turn: u32, at_ms: u64) {
        if self.pending.is_empty() && at_ms <= self.now_ms {
            self.snapshot(turn);
        } else {
            self.pending.push_back((turn, at_ms));
        }
    }

    /// Whether every sample point has been reached (or the stream is no longer followed).
    pub fn caught_up(&self) -> bool {
        self.pending.is_empty() || self.stopped.is_some()
    }

    /// Reads one line of the stream.
    pub fn line(&mut self, line: &str) {
        if self.stopped.is_some() {
            return;
        }
        if let Err(problem) = self.parse(line) {
            let excerpt: String = line.chars().take(80).collect();
            self.stop(format!(
                "{problem} in the line `{}`",
                excerpt.escape_debug()
            ));
        }
    }

    /// The stream ended: every pending sample point gets the final state.
    pub fn end(mut self, why: Option<String>) -> Recording {
        if let Some(why) = why {
            self.stop(why);
        }
        if !self.pending.is_empty() && self.stopped.is_none() {
            self.recording.notes.push(format!(
                "heaptrack's stream ended at {} ms, before the last {} sample point(s): they \
                 show the state at its end",
                self.now_ms,
                self.pending.len()
            ));
        }
        while let Some((turn, _)) = self.pending.pop_front() {
            self.snapshot(turn);
        }
        self.recording
    }

    fn stop(&mut self, why: String) {
        if self.stopped.is_none() {
            self.recording.notes.push(why.clone());
            self.stopped = Some(why);
        }
    }

    fn parse(&mut self, line: &str) -> Result<(), String> {
        let (tag, rest) = line.split_at(line.len().min(1));
        let rest = rest.strip_prefix(' ').unwrap_or(rest);
        match tag {
            "s" => {
                let (_, text) = rest.split_once(' ').unwrap_or((rest, ""));
                push(&mut self.strings, text.to_owned(), "strings")?;
            }
            "i" => {
                let mut fields = rest.split(' ').map(hex);
                let address = fields.next().ok_or("no address")??;
                let module = fields.next().ok_or("no module")?? as u32;
                let numbers: Vec<u64> = fields.collect::<Result<_, _>>()?;
                // A function alone (no debug info), or function, file and line; inlined frames
                // follow as further triples.
                let frames = numbers
                    .chunks(3)
                    .map(|c| match *c {
                        [function, file, line] => (function as u32, file as u32, line as u32),
                        [function, ..] => (function as u32, 0, 0),
                        [] => (0, 0, 0),
                    })
                    .collect();
                push(
                    &mut self.ips,
                    Ip {
                        address,
                        module,
                        frames,
                    },
                    "addresses",
                )?;
            }
            "t" => {
                let (ip, parent) = two(rest)?;
                push(&mut self.traces, (ip as u32, parent as u32), "stack nodes")?;
            }
            "a" => {
                let (size, trace) = two(rest)?;
                push(&mut self.kinds, (size, trace as u32), "allocation kinds")?;
                self.live.push(0);
            }
            "+" | "-" => {
                let kind = hex(rest)? as usize;
                let count = self
                    .live
                    .get_mut(kind)
                    .ok_or_else(|| format!("allocation kind {kind} not defined"))?;
                *count = if tag == "+" {
                    count.saturating_add(1)
                } else {
                    count.saturating_sub(1)
                };
            }
            "c" => {
                self.now_ms = hex(rest)?;
                while let Some(&(turn, at)) = self.pending.front() {
                    if at > self.now_ms {
                        break;
                    }
                    self.pending.pop_front();
                    self.snapshot(turn);
                }
            }
            _ => {}
        }
        Ok(())
    }

    /// Records the live bytes per site now, for `turn`.
    fn snapshot(&mut self, turn: u32) {
        if self.recording.snapshots.len() >= MAX_SNAPSHOTS {
            self.stop(format!("more than {MAX_SNAPSHOTS} sample points"));
            return;
        }
        let mut live = std::collections::BTreeMap::new();
        for kind in 0..self.kinds.len() {
            let count = self.live[kind];
            if count == 0 {
                continue;
            }
            let (size, trace) = self.kinds[kind];
            let site = self.site_of(trace);
            *live.entry(site).or_insert(0u64) += size.saturating_mul(count);
        }
        self.recording.snapshots.push(SiteSnapshot { turn, live });
    }

    /// The site of stack node `trace` (resolved once).
    fn site_of(&mut self, trace: u32) -> usize {
        if let Some(&site) = self.trace_site.get(&trace) {
            return site;
        }
        let frames = site_frames(&self.stack(trace));
        let key = site_key(&frames);
        let site = match self.site_index.get(&key) {
            Some(&site) => site,
            None if self.recording.sites.len() >= MAX_SITES => MAX_SITES - 1,
            None => {
                self.recording.sites.push(frames);
                self.site_index.insert(key, self.recording.sites.len() - 1);
                self.recording.sites.len() - 1
            }
        };
        self.trace_site.insert(trace, site);
        site
    }

    /// The frames of stack node `trace`, innermost first (bounded by the tree's size, so a
    /// malformed cycle cannot loop).
    fn stack(&self, mut trace: u32) -> Vec<Frame> {
        let mut frames = Vec::new();
        let mut steps = 0;
        while trace != 0 && steps < 256 {
            steps += 1;
            let Some(&(ip, parent)) = self.traces.get(trace as usize - 1) else {
                break;
            };
            if let Some(ip) = (ip as usize).checked_sub(1).and_then(|i| self.ips.get(i)) {
                let module = self.string(ip.module).unwrap_or("??");
                let module = module.rsplit('/').next().unwrap_or(module).to_owned();
                if ip.frames.is_empty() {
                    frames.push(Frame {
                        function: None,
                        module: module.clone(),
                        file: None,
                        line: None,
                        address: ip.address,
                    });
                }
                for &(function, file, line) in &ip.frames {
                    frames.push(Frame {
                        function: self.string(function).map(str::to_owned),
                        module: module.clone(),
                        file: self.string(file).map(str::to_owned),
                        line: (line != 0).then_some(line),
                        address: ip.address,
                    });
                }
            }
            trace = parent;
        }
        frames
    }

    fn string(&self, index: u32) -> Option<&str> {
        (index as usize)
            .checked_sub(1)
            .and_then(|i| self.strings.get(i))
            .map(String::as_str)
    }
}

fn push<T>(table: &mut Vec<T>, item: T, what: &str) -> Result<(), String> {
    if table.len() >= MAX_TABLE {
        return Err(format!("more than {MAX_TABLE} {what}"));
    }
    table.push(item);
    Ok(())
}

fn hex(text: &str) -> Result<u64, String> {
    u64::from_str_radix(text.trim(), 16)
        .map_err(|_| format!("`{}` is not a hex number", text.trim()))
}

fn two(text: &str) -> Result<(u64, u64), String> {
    let (a, b) = text.split_once(' ').ok_or("two numbers expected")?;
    Ok((hex(a)?, hex(b)?))
}
