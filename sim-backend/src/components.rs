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
    /// The prefix-cache entry stored for this session.
    PrefixEntry(u64),
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
}

impl Memory {
    /// Adds a component (zero-sized ones are not tracked); replaces one with the same key.
    pub(crate) fn insert(&mut self, component: Component, region: Region, bytes: u64) {
        if bytes == 0 {
            self.blocks.remove(&component);
        } else {
            self.blocks.insert(component, (region, bytes));
        }
    }

    /// Frees a component; freeing one that is not there does nothing.
    pub(crate) fn remove(&mut self, component: Component) {
        self.blocks.remove(&component);
    }

    /// Whether a component is live.
    pub(crate) fn contains(&self, component: Component) -> bool {
        self.blocks.contains_key(&component)
    }

    /// Frees everything (engine teardown).
    pub(crate) fn clear(&mut self) {
        self.blocks.clear();
    }

    /// Totals per region.
    pub(crate) fn footprint(&self) -> Footprint {
        let mut total = Footprint::default();
        for (region, bytes) in self.blocks.values() {
            let slot = match region {
                Region::Mapped => &mut total.mapped,
                Region::Native => &mut total.native,
                Region::Gpu => &mut total.gpu,
            };
            *slot = slot.saturating_add(*bytes);
        }
        total
    }

    /// Total bytes of the pool's blocks (its reserved size).
    pub(crate) fn pool_reserved(&self) -> u64 {
        self.blocks
            .iter()
            .filter(|(c, _)| matches!(c, Component::PoolBlock(_)))
            .map(|(_, (_, bytes))| *bytes)
            .sum()
    }

    /// The native-heap components and their sizes.
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
}
