//! One metric's values, bit-packed by blocks ([`Packed`]).
//!
//! A byte count takes 8 bytes as a `u64`, but the values of one metric over a few hundred turns
//! sit close together: a flat metric does not move, and one that leaks 110 MiB a turn spans 14
//! GB over [`BLOCK`] turns, 34 bits. Each block keeps its smallest value and the offsets of its
//! values from it in as many bits as the largest offset needs (frame of reference). A value is
//! read back in constant time; the values of the block being filled are kept as they are.

/// Values per packed block.
pub(crate) const BLOCK: usize = 128;

/// Where a packed block's values are.
#[derive(Clone, Copy, Debug)]
struct Block {
    /// The smallest value of the block.
    base: u64,
    /// The first bit of its offsets in [`Packed::bits`].
    start: u64,
    /// Bits per offset (0 to 64).
    width: u32,
}

/// A column of `u64` values, packed by blocks of [`BLOCK`].
#[derive(Clone, Debug, Default)]
pub(crate) struct Packed {
    blocks: Vec<Block>,
    bits: Vec<u64>,
    /// Bits used in `bits`.
    used: u64,
    /// The values after the last full block.
    tail: Vec<u64>,
}

impl Packed {
    /// An empty column whose packed bits go into `buffer` (emptied; its capacity is kept, so a
    /// buffer reserved and touched beforehand is filled without the process growing).
    pub(crate) fn in_buffer(mut buffer: Vec<u64>, blocks: usize) -> Self {
        buffer.clear();
        Self {
            blocks: Vec::with_capacity(blocks),
            bits: buffer,
            used: 0,
            tail: Vec::with_capacity(BLOCK),
        }
    }

    /// How many values.
    pub(crate) fn len(&self) -> usize {
        self.blocks.len() * BLOCK + self.tail.len()
    }

    /// Appends a value.
    pub(crate) fn push(&mut self, value: u64) {
        self.tail.push(value);
        if self.tail.len() == BLOCK {
            self.pack_tail();
        }
    }

    fn pack_tail(&mut self) {
        let base = self.tail.iter().copied().min().unwrap_or(0);
        let span = self.tail.iter().map(|v| v - base).max().unwrap_or(0);
        let width = u64::BITS - span.leading_zeros();
        let start = self.used;
        let total = start + u64::from(width) * BLOCK as u64;
        let words = usize::try_from(total.div_ceil(64)).unwrap_or(usize::MAX);
        if self.bits.len() < words {
            // A large buffer is moved by the kernel (mremap), not copied, when it grows.
            if self.bits.capacity() < words {
                // An eighth more each time: the columns are most of a long run's memory, and
                // doubling would hold up to twice what they need. (An estimate from the first
                // blocks misleads: a one-time step there makes them wide.)
                let target = (words + words / 8).max(64);
                self.bits.reserve_exact(target - self.bits.len());
            }
            self.bits.resize(words, 0);
        }
        if width > 0 {
            for (i, value) in self.tail.iter().enumerate() {
                let at = start + u64::from(width) * i as u64;
                let (word, shift) = ((at / 64) as usize, (at % 64) as u32);
                let offset = value - base;
                self.bits[word] |= offset << shift;
                if shift + width > 64 {
                    self.bits[word + 1] |= offset >> (64 - shift);
                }
            }
        }
        self.used = total;
        self.blocks.push(Block { base, start, width });
        self.tail.clear();
    }

    /// Value `row`.
    pub(crate) fn get(&self, row: usize) -> Option<u64> {
        let (block, index) = (row / BLOCK, row % BLOCK);
        let Some(block) = self.blocks.get(block) else {
            return self.tail.get(row - self.blocks.len() * BLOCK).copied();
        };
        if block.width == 0 {
            return Some(block.base);
        }
        let at = block.start + u64::from(block.width) * index as u64;
        let (word, shift) = ((at / 64) as usize, (at % 64) as u32);
        let mut offset = self.bits[word] >> shift;
        if shift + block.width > 64 {
            offset |= self.bits[word + 1] << (64 - shift);
        }
        let mask = if block.width == 64 {
            u64::MAX
        } else {
            (1 << block.width) - 1
        };
        Some(block.base + (offset & mask))
    }

    /// Gives back the buffer of the packed bits, for another column.
    pub(crate) fn into_buffer(self) -> Vec<u64> {
        self.bits
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_value_reads_back_whatever_its_block_spans() {
        let mut seed = 99u64;
        let mut next = || {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            seed
        };
        let mut values: Vec<u64> = Vec::new();
        // Flat blocks, a leak with noise, full-range values, and a partial last block.
        values.extend(std::iter::repeat_n(4096, BLOCK * 2 + 3));
        values.extend((0..BLOCK as u64 * 5).map(|t| 130_000_000 + t * 115_343_360 + next() % 4096));
        values.extend((0..BLOCK * 2).map(|_| next()));
        values.extend([0, u64::MAX, 0, u64::MAX - 1]);
        values.extend((0..77).map(|t| 1 << (t % 64)));
        let mut packed = Packed::default();
        for v in &values {
            packed.push(*v);
        }
        assert_eq!(packed.len(), values.len());
        for (row, v) in values.iter().enumerate() {
            assert_eq!(packed.get(row), Some(*v), "row {row}");
        }
        assert_eq!(packed.get(values.len()), None);
    }

    #[test]
    fn a_flat_column_takes_no_bits_and_a_leak_about_half_its_width() {
        let mut flat = Packed::default();
        let mut leak = Packed::default();
        for t in 0..BLOCK as u64 * 100 {
            flat.push(1 << 30);
            leak.push(130_000_000 + t * 115_343_360 + t % 7);
        }
        assert!(flat.bits.is_empty());
        // 127 turns of 110 MiB: 34 bits a value instead of 64.
        assert_eq!(leak.bits.len(), 100 * BLOCK * 34 / 64);
    }
}
