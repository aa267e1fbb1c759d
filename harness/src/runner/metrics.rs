//! The metric values of one sample, stored compactly: a run keeps one [`Metrics`] per sample for
//! its whole length, so a sample must cost bytes, not a map of owned strings (a string-keyed map
//! cost ~1.8 KB per turn, and with `isolate: false` that memory lives in the measured process).
//!
//! Names are interned once per process ([`MetricName`] is an index into a table of leaked
//! `&'static str`), and up to [`INLINE`] values live inside the sample itself, so recording a
//! sample allocates nothing on the heap.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::sync::{LazyLock, OnceLock, RwLock};

use serde::de::{MapAccess, Visitor};
use serde::ser::SerializeMap;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Metrics one sample holds without a heap allocation; more spill to a vector.
pub const INLINE: usize = 10;

/// The most distinct metric names one process interns (a report naming more is refused).
const MAX_NAMES: usize = u16::MAX as usize;

/// Names whose text is read without the interner's lock: the first this many interned (every
/// name of the registry and what engines report; a run reads a sample's names millions of
/// times, and the lock, its hash and the lookups took about a sixth of a million-turn run's
/// profile).
const UNLOCKED_NAMES: usize = 1024;

/// The text of the first [`UNLOCKED_NAMES`] names, by id: set once, under the interner's write
/// lock, before the id is handed out.
static NAME_TEXT: [OnceLock<&'static str>; UNLOCKED_NAMES] =
    [const { OnceLock::new() }; UNLOCKED_NAMES];

/// Publishes `name` as the text of `id` for lock-free reads (see [`NAME_TEXT`]).
fn publish(id: u16, name: &'static str) {
    if let Some(slot) = NAME_TEXT.get(usize::from(id)) {
        // Set once per id: the id was just assigned to this name under the write lock.
        let _ = slot.set(name);
    }
}

/// An interned metric name.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct MetricName(u16);

impl MetricName {
    /// Interns `name`; `None` when the process already holds [`MAX_NAMES`] names.
    pub fn intern(name: &str) -> Option<Self> {
        if let Some(id) = recently_interned(name) {
            return Some(id);
        }
        if let Some(id) = Self::lookup(name) {
            remember_interned(id);
            return Some(id);
        }
        let mut table = INTERNER.write().unwrap_or_else(|e| e.into_inner());
        if let Some(&id) = table.ids.get(name) {
            return Some(MetricName(id));
        }
        let id = u16::try_from(table.names.len())
            .ok()
            .filter(|&id| usize::from(id) < MAX_NAMES)?;
        // Names are few (the DSL's metrics and what engines report), and live as long as the
        // process: leaking each distinct one once is what makes a name two bytes in a sample.
        let leaked: &'static str = Box::leak(name.to_owned().into_boxed_str());
        table.names.push(leaked);
        table.ids.insert(leaked, id);
        publish(id, leaked);
        Some(MetricName(id))
    }

    /// The interned name `name`, if any sample ever used it.
    pub fn lookup(name: &str) -> Option<Self> {
        let table = INTERNER.read().unwrap_or_else(|e| e.into_inner());
        table.ids.get(name).copied().map(MetricName)
    }

    /// The name as text.
    pub fn as_str(self) -> &'static str {
        if let Some(name) = NAME_TEXT.get(usize::from(self.0)).and_then(OnceLock::get) {
            return name;
        }
        let table = INTERNER.read().unwrap_or_else(|e| e.into_inner());
        table.names[usize::from(self.0)]
    }
}

/// Names this thread interned lately: a run interns its handful of metric names at every
/// sample, and comparing a few short names beats the interner's lock and hash (4 % of a
/// million-turn run's profile).
const RECENT_NAMES: usize = 16;

thread_local! {
    static RECENT: std::cell::RefCell<Vec<MetricName>> =
        const { std::cell::RefCell::new(Vec::new()) };
}

fn recently_interned(name: &str) -> Option<MetricName> {
    RECENT.with(|recent| {
        recent
            .borrow()
            .iter()
            .find(|id| id.as_str() == name)
            .copied()
    })
}

fn remember_interned(id: MetricName) {
    RECENT.with(|recent| {
        let mut recent = recent.borrow_mut();
        // Only names whose text reads without the lock.
        if recent.len() < RECENT_NAMES && usize::from(id.0) < UNLOCKED_NAMES {
            recent.push(id);
        }
    });
}

#[derive(Default)]
struct Interner {
    names: Vec<&'static str>,
    ids: HashMap<&'static str, u16>,
}

static INTERNER: LazyLock<RwLock<Interner>> = LazyLock::new(|| {
    let mut table = Interner::default();
    for (id, name) in leakloop_metrics::NAMES.iter().enumerate() {
        table.names.push(name);
        table.ids.insert(name, id as u16);
        publish(id as u16, name);
    }
    RwLock::new(table)
});

/// Every metric of one sample, in bytes, ordered by name.
#[derive(Clone, Default)]
pub struct Metrics {
    /// Entries held inline (the first `len` of `names` and `values`), ordered by name.
    len: u8,
    names: [MetricName; INLINE],
    values: [u64; INLINE],
    /// Every entry, ordered by name, once there are more than [`INLINE`] (then `len` is 0).
    spill: Vec<(MetricName, u64)>,
}

impl Metrics {
    /// No metrics.
    pub fn new() -> Self {
        Self::default()
    }

    /// How many metrics this sample has.
    pub fn len(&self) -> usize {
        usize::from(self.len) + self.spill.len()
    }

    /// Whether this sample has no metric.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The value of `name`, if this sample has it.
    pub fn get(&self, name: &str) -> Option<&u64> {
        // A sample holds a handful of names: comparing their text beats the interner's lock and
        // hash, which every sample's every read paid.
        self.entries()
            .find(|(n, _)| n.as_str() == name)
            .map(|(_, v)| v)
    }

    /// Whether this sample has `name`.
    pub fn contains_key(&self, name: &str) -> bool {
        self.get(name).is_some()
    }

    /// Sets `name` to `value`, replacing a value it had.
    ///
    /// # Panics
    /// When the process already interned [`MAX_NAMES`] distinct names (engines report a handful).
    pub fn insert(&mut self, name: &str, value: u64) {
        let id = MetricName::intern(name).expect("fewer than 65,535 distinct metric names");
        self.insert_id(id, value);
    }

    /// Appends `name`, which sorts after every name held (the caller reads names in order).
    pub(crate) fn push_in_order(&mut self, id: MetricName, value: u64) {
        let inline = usize::from(self.len);
        if self.spill.is_empty() && inline < INLINE {
            self.names[inline] = id;
            self.values[inline] = value;
            self.len += 1;
        } else {
            self.insert_id(id, value);
        }
    }

    fn insert_id(&mut self, id: MetricName, value: u64) {
        let inline = usize::from(self.len);
        if let Some(i) = self.names[..inline].iter().position(|n| *n == id) {
            self.values[i] = value;
            return;
        }
        if let Some(entry) = self.spill.iter_mut().find(|(n, _)| *n == id) {
            entry.1 = value;
            return;
        }
        let name = id.as_str();
        if self.spill.is_empty() && inline < INLINE {
            let at = self.names[..inline]
                .iter()
                .position(|n| n.as_str() > name)
                .unwrap_or(inline);
            self.names.copy_within(at..inline, at + 1);
            self.values.copy_within(at..inline, at + 1);
            self.names[at] = id;
            self.values[at] = value;
            self.len += 1;
            return;
        }
        if self.spill.is_empty() {
            self.spill = self.names[..inline]
                .iter()
                .copied()
                .zip(self.values[..inline].iter().copied())
                .collect();
            self.len = 0;
        }
        let at = self.spill.partition_point(|(n, _)| n.as_str() < name);
        self.spill.insert(at, (id, value));
    }

    /// Sets every `(name, value)` of `entries`.
    pub fn extend<K: AsRef<str>>(&mut self, entries: impl IntoIterator<Item = (K, u64)>) {
        for (name, value) in entries {
            self.insert(name.as_ref(), value);
        }
    }

    /// Every `(name id, value)`, ordered by name.
    pub(crate) fn entries(&self) -> impl Iterator<Item = (MetricName, &u64)> + '_ {
        let inline = usize::from(self.len);
        self.names[..inline]
            .iter()
            .copied()
            .zip(&self.values[..inline])
            .chain(self.spill.iter().map(|(n, v)| (*n, v)))
    }

    /// Every `(name, value)`, ordered by name.
    pub fn iter(&self) -> impl Iterator<Item = (&'static str, &u64)> + '_ {
        self.entries().map(|(n, v)| (n.as_str(), v))
    }

    /// Every name, ordered.
    pub fn keys(&self) -> impl Iterator<Item = &'static str> + '_ {
        self.iter().map(|(name, _)| name)
    }

    /// Removes every metric for which `keep` is false.
    pub fn retain(&mut self, mut keep: impl FnMut(&str, u64) -> bool) {
        let kept: Vec<(MetricName, u64)> = self
            .entries()
            .filter(|(n, v)| keep(n.as_str(), **v))
            .map(|(n, v)| (n, *v))
            .collect();
        *self = Self::default();
        for (id, value) in kept {
            self.insert_id(id, value);
        }
    }
}

impl std::ops::Index<&str> for Metrics {
    type Output = u64;

    fn index(&self, name: &str) -> &u64 {
        self.get(name)
            .unwrap_or_else(|| panic!("the sample has no metric `{name}`"))
    }
}

impl<'a> IntoIterator for &'a Metrics {
    type Item = (&'static str, &'a u64);
    type IntoIter = Box<dyn Iterator<Item = (&'static str, &'a u64)> + 'a>;

    fn into_iter(self) -> Self::IntoIter {
        Box::new(self.iter())
    }
}

impl PartialEq for Metrics {
    fn eq(&self, other: &Self) -> bool {
        self.len() == other.len() && self.iter().eq(other.iter())
    }
}

impl fmt::Debug for Metrics {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

impl<K: AsRef<str>> FromIterator<(K, u64)> for Metrics {
    fn from_iter<I: IntoIterator<Item = (K, u64)>>(iter: I) -> Self {
        let mut metrics = Metrics::new();
        metrics.extend(iter);
        metrics
    }
}

impl From<BTreeMap<String, u64>> for Metrics {
    fn from(map: BTreeMap<String, u64>) -> Self {
        map.into_iter().collect()
    }
}

impl<const N: usize> From<[(&str, u64); N]> for Metrics {
    fn from(entries: [(&str, u64); N]) -> Self {
        entries.into_iter().collect()
    }
}

impl Serialize for Metrics {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(self.len()))?;
        for (name, value) in self.iter() {
            map.serialize_entry(name, value)?;
        }
        map.end()
    }
}

impl<'de> Deserialize<'de> for Metrics {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct MetricsVisitor;
        impl<'de> Visitor<'de> for MetricsVisitor {
            type Value = Metrics;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a map of metric names to byte counts")
            }

            fn visit_map<A: MapAccess<'de>>(self, mut access: A) -> Result<Metrics, A::Error> {
                let mut metrics = Metrics::new();
                while let Some(name) = access.next_key::<std::borrow::Cow<'de, str>>()? {
                    let value: u64 = access.next_value()?;
                    let id = MetricName::intern(&name).ok_or_else(|| {
                        serde::de::Error::custom("more than 65,535 distinct metric names")
                    })?;
                    metrics.insert_id(id, value);
                }
                Ok(metrics)
            }
        }
        deserializer.deserialize_map(MetricsVisitor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_values_by_name_in_name_order_and_replaces_on_reinsert() {
        let mut m = Metrics::new();
        m.insert("rss", 3);
        m.insert("native_heap", 1);
        m.insert("anon_rss", 2);
        m.insert("rss", 4);
        assert_eq!(m.len(), 3);
        assert_eq!(m.get("rss"), Some(&4));
        assert_eq!(m["anon_rss"], 2);
        assert_eq!(m.get("never-seen-metric"), None);
        let keys: Vec<_> = m.keys().collect();
        assert_eq!(keys, ["anon_rss", "native_heap", "rss"]);
    }

    /// Names past the lock-free table still read back, through the interner's lock.
    #[test]
    fn names_past_the_unlocked_table_read_back_through_the_lock() {
        let names: Vec<String> = (0..UNLOCKED_NAMES + 5)
            .map(|i| format!("test-unlocked-{i}"))
            .collect();
        let ids: Vec<MetricName> = names
            .iter()
            .map(|n| MetricName::intern(n).expect("room for the names"))
            .collect();
        assert!(ids.iter().any(|id| usize::from(id.0) >= UNLOCKED_NAMES));
        for (id, name) in ids.iter().zip(&names) {
            assert_eq!(id.as_str(), name);
            assert_eq!(MetricName::lookup(name), Some(*id));
        }
        let mut m = Metrics::new();
        m.insert(&names[names.len() - 1], 9);
        m.insert(&names[0], 1);
        assert_eq!(m.get(&names[names.len() - 1]), Some(&9));
        assert_eq!(m.keys().next(), Some(names[0].as_str()));
    }

    #[test]
    fn more_metrics_than_fit_inline_spill_and_still_iterate_in_order() {
        let names: Vec<String> = (0..INLINE + 3).rev().map(|i| format!("m{i:02}")).collect();
        let m: Metrics = names.iter().map(|n| (n.as_str(), 7)).collect();
        assert_eq!(m.len(), INLINE + 3);
        let mut sorted = names.clone();
        sorted.sort();
        assert_eq!(m.keys().collect::<Vec<_>>(), sorted);
        assert_eq!(m.get("m00"), Some(&7));
    }

    #[test]
    fn serializes_as_the_map_report_json_always_had() {
        let m = Metrics::from([("rss", 5), ("gpu", 9)]);
        let text = serde_json::to_string(&m).unwrap();
        assert_eq!(text, r#"{"gpu":9,"rss":5}"#);
        let back: Metrics = serde_json::from_str(&text).unwrap();
        assert_eq!(back, m);
        assert!(serde_json::from_str::<Metrics>(r#"{"rss":-1}"#).is_err());
    }

    /// A sample is recorded for every turn of a run: it must stay a fixed, small size. One sample
    /// holds what one engine reports plus what the target's probe reads; the richest pairings of
    /// the registry must fit inline.
    #[test]
    fn a_sample_of_the_usual_metrics_is_small_and_does_not_allocate() {
        use leakloop_metrics::ProbeKind::*;
        let pairings: [(&[leakloop_metrics::ProbeKind], &str); 4] = [
            (&[Simulator, Proc], "simulator in a worker on Linux"),
            (
                &[EngineHeap, Interposer, OpenClEngine, Proc],
                "OpenCL engine on Linux",
            ),
            (&[EngineHeap, TaskInfo], "a real engine on macOS"),
            (&[Dumpsys], "an Android app"),
        ];
        for (sources, what) in pairings {
            let mut m = Metrics::new();
            for metric in leakloop_metrics::REGISTRY {
                if sources.iter().any(|&s| metric.provided_by(s)) {
                    m.insert(metric.name, 1);
                }
            }
            assert_eq!(m.spill.capacity(), 0, "{what}: {} metrics", m.len());
        }
        assert!(std::mem::size_of::<Metrics>() <= 136);
    }
}
