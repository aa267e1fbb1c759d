//! The memory a simulated engine holds right now, as a map of live components (weights, engine
//! context, one KV cache per conversation, ...), each with its size and where it lives.
//!
//! Every engine call changes this map; metrics are sums over it. Keeping the components apart
//! (rather than a few running totals) is what lets a close free exactly what belongs to its
//! session and lets the real-allocation mode mirror each native block.

use std::collections::BTreeMap;

use crate::profile::Place;

/// One live component of the simulated footprint.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) enum Component {
    /// Model weights mapped from the model file.
    Weights,
    /// Native heap the loaded engine holds at rest.
    NativeBase,
    /// GPU memory the loaded engine holds at rest.
    GpuBase,
    /// The one-time engine context built by the first inference.
    Context,
    /// The KV cache of the conversation opened with this session id.
    KvCache(u64),
    /// Activations held by this session's responses.
    Activations(u64),
    /// Scratch left behind by the n-th generation since load.
    Leaked(u64),
    /// A caching-allocator block of this size class (in tokens).
    PoolBlock(u32),
    /// A prefix-cache entry.
    PrefixEntry(PrefixKey),
}

/// What a prefix-cache entry is stored under.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) enum PrefixKey {
    /// The session id of an unnamed session: every open is a new entry.
    Session(u64),
    /// A session named by the caller (interned): a session opened again under the same name
    /// finds its entry.
    Named(u64),
}

/// Where a component's bytes are counted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Region {
    /// A mapped file (counted in `rss` and `pss`, not in the heap or the GPU).
    Mapped,
    /// The native heap.
    Native,
    /// GPU memory.
    Gpu,
}

impl From<Place> for Region {
    fn from(place: Place) -> Self {
        match place {
            Place::Native => Region::Native,
            Place::Gpu => Region::Gpu,
        }
    }
}

/// Byte totals per region.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Footprint {
    pub(crate) mapped: u64,
    pub(crate) native: u64,
    pub(crate) gpu: u64,
}

/// The live components.
#[derive(Debug, Clone, Default)]
pub(crate) struct Memory {
    blocks: BTreeMap<Component, (Region, u64)>,
    /// Per-region sums of `blocks`, kept as blocks come and go: a leak adds a block every turn,
    /// and summing them at every sample made a long leaky run quadratic.
    totals: Footprint,
    /// The sum of the pool blocks, kept likewise.
    pool: u64,
}

impl Memory {
    /// Adds a component (zero-sized ones are not tracked); replaces one with the same key.
    pub(crate) fn insert(&mut self, component: Component, region: Region, bytes: u64) {
        self.remove(component);
        if bytes > 0 {
            self.blocks.insert(component, (region, bytes));
            self.account(component, region, bytes, true);
        }
    }

    /// Adds `bytes` to a component (creating it in `region` when absent).
    pub(crate) fn grow(&mut self, component: Component, region: Region, bytes: u64) {
        let (region, held) = self.blocks.get(&component).copied().unwrap_or((region, 0));
        self.insert(component, region, held.saturating_add(bytes));
    }

    pub(crate) fn remove(&mut self, component: Component) {
        if let Some((region, bytes)) = self.blocks.remove(&component) {
            self.account(component, region, bytes, false);
        }
    }

    fn account(&mut self, component: Component, region: Region, bytes: u64, add: bool) {
        let slot = match region {
            Region::Mapped => &mut self.totals.mapped,
            Region::Native => &mut self.totals.native,
            Region::Gpu => &mut self.totals.gpu,
        };
        let slots = [
            Some(slot),
            matches!(component, Component::PoolBlock(_)).then_some(&mut self.pool),
        ];
        for slot in slots.into_iter().flatten() {
            *slot = if add {
                slot.saturating_add(bytes)
            } else {
                slot.saturating_sub(bytes)
            };
        }
    }

    pub(crate) fn contains(&self, component: Component) -> bool {
        self.blocks.contains_key(&component)
    }

    pub(crate) fn clear(&mut self) {
        *self = Self::default();
    }

    pub(crate) fn footprint(&self) -> Footprint {
        self.totals
    }

    pub(crate) fn pool_reserved(&self) -> u64 {
        self.pool
    }

    pub(crate) fn native_blocks(&self) -> impl Iterator<Item = (Component, u64)> + '_ {
        self.blocks
            .iter()
            .filter(|(_, (region, _))| *region == Region::Native)
            .map(|(c, (_, bytes))| (*c, *bytes))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_grown_component_counts_what_was_added_once_in_its_region() {
        let mut memory = Memory::default();
        memory.grow(Component::Leaked(0), Region::Gpu, 10);
        memory.grow(Component::Leaked(0), Region::Native, 5);
        assert_eq!(memory.footprint().gpu, 15);
        assert_eq!(memory.footprint().native, 0);
        memory.remove(Component::Leaked(0));
        assert_eq!(memory.footprint().gpu, 0);
    }

    #[test]
    fn footprint_sums_per_region_and_removal_frees_exactly_one_component() {
        let mut memory = Memory::default();
        memory.insert(Component::Weights, Region::Mapped, 100);
        memory.insert(Component::KvCache(1), Region::Native, 10);
        memory.insert(Component::KvCache(2), Region::Native, 10);
        memory.insert(Component::Context, Region::Gpu, 7);
        memory.insert(Component::PoolBlock(64), Region::Gpu, 3);
        assert_eq!(
            memory.footprint(),
            Footprint {
                mapped: 100,
                native: 20,
                gpu: 10
            }
        );
        memory.remove(Component::KvCache(1));
        assert_eq!(memory.footprint().native, 10);
        assert_eq!(memory.pool_reserved(), 3);
        assert_eq!(memory.native_blocks().count(), 1);
    }

    #[test]
    fn zero_sized_components_are_not_tracked() {
        let mut memory = Memory::default();
        memory.insert(Component::Context, Region::Gpu, 0);
        assert!(!memory.contains(Component::Context));
    }

    /// The sums are kept as blocks come and go (issue 15: summing every leaked block at each
    /// sample made a leaky run quadratic); they must equal a fresh sum after any sequence.
    #[test]
    fn running_sums_match_a_fresh_sum_after_replacing_and_removing() {
        let mut memory = Memory::default();
        let regions = [Region::Mapped, Region::Native, Region::Gpu];
        for i in 0..200u64 {
            let component = if i % 3 == 0 {
                Component::PoolBlock((i % 7) as u32)
            } else {
                Component::Leaked(i % 11)
            };
            if i % 5 == 0 {
                memory.remove(component);
            } else {
                memory.insert(component, regions[(i % 3) as usize], i * 13 % 17);
            }
            let mut fresh = Footprint::default();
            let mut pool = 0;
            for (c, (region, bytes)) in &memory.blocks {
                match region {
                    Region::Mapped => fresh.mapped += bytes,
                    Region::Native => fresh.native += bytes,
                    Region::Gpu => fresh.gpu += bytes,
                }
                if matches!(c, Component::PoolBlock(_)) {
                    pool += bytes;
                }
            }
            assert_eq!(memory.footprint(), fresh, "step {i}");
            assert_eq!(memory.pool_reserved(), pool, "step {i}");
        }
    }
}
