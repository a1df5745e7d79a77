//! The live translations by where their original code is: the numbers of
//! those whose block starts in each 64 KiB of the address space, so that
//! an invalidation finds the translations of a range without looking at
//! every translation (a JIT's program invalidates thousands of times).

use rustc_hash::FxHashMap;

/// Bytes of the address space per entry, as a shift.
const SHIFT: u32 = 16;

/// The translations whose block starts in each 64 KiB, by its number.
#[derive(Clone, Debug, Default)]
pub(super) struct ByCode {
    starts: FxHashMap<u64, Vec<u32>>,
    /// The most bytes a block entered spans.
    longest: u64,
}

impl ByCode {
    /// Translation `id` of the block at `addr`, `len` bytes long, is live.
    pub fn insert(&mut self, addr: u64, len: u64, id: u32) {
        self.starts.entry(addr >> SHIFT).or_default().push(id);
        self.longest = self.longest.max(len);
    }

    /// Translation `id` of the block at `addr` is no longer live.
    pub fn remove(&mut self, addr: u64, id: u32) {
        let key = addr >> SHIFT;
        let Some(ids) = self.starts.get_mut(&key) else {
            return;
        };
        if let Some(at) = ids.iter().position(|&other| other == id) {
            ids.swap_remove(at);
        }
        if ids.is_empty() {
            self.starts.remove(&key);
        }
    }

    /// The live translations whose block may have bytes in `start..end`
    /// (those that start from the longest block's length before `start`
    /// up to `end`), ascending.
    pub fn near(&self, start: u64, end: u64) -> Vec<u32> {
        if end <= start {
            return Vec::new();
        }
        let (first, last) = (
            start.saturating_sub(self.longest) >> SHIFT,
            (end - 1) >> SHIFT,
        );
        let mut near: Vec<u32> = if last - first < self.starts.len() as u64 {
            (first..=last)
                .filter_map(|key| self.starts.get(&key))
                .flatten()
                .copied()
                .collect()
        } else {
            self.starts
                .iter()
                .filter(|(&key, _)| (first..=last).contains(&key))
                .flat_map(|(_, ids)| ids.iter().copied())
                .collect()
        };
        near.sort_unstable();
        near
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_blocks_that_may_overlap_a_range_and_forgets_removed_ones() {
        let mut by = ByCode::default();
        let far = 5 << SHIFT;
        by.insert(0x1000, 16, 3);
        by.insert(0x1010, 40, 1);
        by.insert(far + 8, 4, 2);
        // A block starting before the range may reach into it.
        assert_eq!(by.near(0x1020, 0x1021), [1, 3]);
        assert_eq!(by.near(far, far + 1), [2]);
        assert_eq!(by.near(0, u64::MAX), [1, 2, 3]);
        assert_eq!(by.near(far, far), Vec::<u32>::new());
        by.remove(0x1010, 1);
        by.remove(0x1010, 7);
        assert_eq!(by.near(0, u64::MAX), [2, 3]);
        by.remove(far + 8, 2);
        assert_eq!(by.near(far, far + 1), Vec::<u32>::new());
        assert_eq!(by.starts.len(), 1);
    }

    #[test]
    fn a_range_wider_than_the_entries_looks_at_the_entries() {
        let mut by = ByCode::default();
        assert_eq!(by.near(1 << SHIFT, 1 << SHIFT), Vec::<u32>::new());
        by.insert(1 << 47, 8, 9);
        by.insert(0x400000, 8, 4);
        // 2^47 bytes: too many 64 KiB steps to look each one up.
        assert_eq!(by.near(1 << 46, (1 << 47) + 1), [9]);
        assert_eq!(by.near(0, 1 << 47), [4]);
    }
}
