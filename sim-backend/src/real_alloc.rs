//! Real allocation mode: mirrors every simulated native-heap component with a real, touched heap
//! block of `bytes / divisor`, so that the process's own probes (RSS, glibc's heap statistics)
//! can be checked against a known truth.

use std::collections::BTreeMap;

use crate::components::Component;
use crate::error::SimError;

/// The most real bytes the mode may hold at once.
pub const REAL_ALLOCATION_LIMIT: u64 = 1 << 30;

/// Real heap blocks, one per simulated native component.
#[derive(Debug)]
pub(crate) struct RealHeap {
    divisor: u64,
    blocks: BTreeMap<Component, Vec<u8>>,
}

impl RealHeap {
    pub(crate) fn new(divisor: u32) -> Self {
        Self {
            divisor: u64::from(divisor.max(1)),
            blocks: BTreeMap::new(),
        }
    }

    /// Allocates blocks for new components, frees those of components that are gone, and
    /// reallocates any whose size changed. Fails, holding nothing new, past the limit.
    pub(crate) fn sync(
        &mut self,
        target: impl Iterator<Item = (Component, u64)>,
    ) -> Result<(), SimError> {
        let target: BTreeMap<Component, usize> = target
            .map(|(c, bytes)| {
                (
                    c,
                    usize::try_from(bytes / self.divisor).unwrap_or(usize::MAX),
                )
            })
            .collect();
        let wanted: u64 = target.values().map(|b| *b as u64).sum();
        if wanted > REAL_ALLOCATION_LIMIT {
            return Err(SimError::RealAllocationLimit {
                wanted,
                limit: REAL_ALLOCATION_LIMIT,
            });
        }
        self.blocks
            .retain(|c, block| target.get(c) == Some(&block.len()));
        for (component, len) in target {
            // A non-zero fill writes every page, so the block is resident, not just reserved.
            self.blocks
                .entry(component)
                .or_insert_with(|| vec![0xA5; len]);
        }
        Ok(())
    }

    /// Real bytes held now.
    pub(crate) fn held(&self) -> u64 {
        self.blocks.values().map(|b| b.len() as u64).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn follows_the_simulated_components_scaled_down() {
        let mut heap = RealHeap::new(64);
        heap.sync(
            [
                (Component::NativeBase, 64 << 10),
                (Component::Leaked(0), 128 << 10),
            ]
            .into_iter(),
        )
        .unwrap();
        assert_eq!(heap.held(), 3 << 10);
        heap.sync([(Component::NativeBase, 64 << 10)].into_iter())
            .unwrap();
        assert_eq!(heap.held(), 1 << 10);
    }

    #[test]
    fn refuses_more_than_the_limit() {
        let mut heap = RealHeap::new(1);
        let err = heap
            .sync([(Component::NativeBase, REAL_ALLOCATION_LIMIT + 1)].into_iter())
            .unwrap_err();
        assert!(matches!(err, SimError::RealAllocationLimit { .. }));
        assert_eq!(heap.held(), 0);
    }
}
