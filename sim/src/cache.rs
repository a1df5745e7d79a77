//! One set-associative cache with true LRU replacement, as simulated by Cachegrind
//! (`cg_sim.c`) and by Callgrind without `--cacheuse` (`callgrind/sim.c`).
//!
//! Write-allocate, no dirty state. The tag of a line is its block number
//! (`addr >> log2(line)`), the set is `block & (sets − 1)`. Each set is a slice of
//! tags kept in most-recently-used-first order. Like Valgrind, every tag starts as 0,
//! so block 0 (addresses `0..line`) is resident at the start.

use crate::config::{CacheConfig, GeometryError};

/// A set-associative, true-LRU, write-allocate cache of any valid geometry.
#[derive(Clone, Debug)]
pub struct Cache {
    config: CacheConfig,
    line_bits: u32,
    set_mask: u64,
    assoc: usize,
    /// `sets × assoc` block numbers; each set's slice is in MRU-first order.
    tags: Box<[u64]>,
}

impl Cache {
    /// An empty cache (all tags 0) of the given geometry, which must pass
    /// [`CacheConfig::check`].
    pub fn new(config: CacheConfig) -> Result<Cache, GeometryError> {
        config.check()?;
        let sets = config.sets() as usize;
        let assoc = config.assoc as usize;
        Ok(Cache {
            config,
            line_bits: config.line_size.trailing_zeros(),
            set_mask: sets as u64 - 1,
            assoc,
            tags: vec![0; sets * assoc].into_boxed_slice(),
        })
    }

    /// The geometry.
    pub fn config(&self) -> CacheConfig {
        self.config
    }

    /// Empties the cache (every tag back to 0).
    pub fn clear(&mut self) {
        self.tags.fill(0);
    }

    /// References `size` bytes at `addr`; returns true on a miss. An access that
    /// straddles two lines references both and misses if either misses. A `size`
    /// of 0 counts as 1; an access longer than a line references only its first two
    /// lines (callers clamp sizes to the line size, as Valgrind does).
    #[inline]
    pub fn access(&mut self, addr: u64, size: u32) -> bool {
        let block1 = addr >> self.line_bits;
        let last = addr.wrapping_add(u64::from(size.max(1)) - 1);
        let block2 = last >> self.line_bits;
        if block1 == block2 {
            // The most common case first, as in cg_sim.c: a hit on the most
            // recently used line of the set, which changes nothing.
            let start = (block1 & self.set_mask) as usize * self.assoc;
            if self.tags.get(start) == Some(&block1) {
                return false;
            }
            self.access_block(block1)
        } else {
            // Both lines are always referenced: the state changes either way.
            let miss1 = self.access_block(block1);
            let miss2 = self.access_block(block1.wrapping_add(1));
            miss1 | miss2
        }
    }

    /// Whether `size` bytes at `addr` lie in the most recently used line of
    /// their set: a hit that changes nothing, so [`Cache::access`] need not
    /// be called.
    #[inline(always)]
    pub fn hits_most_recent(&self, addr: u64, size: u32) -> bool {
        let block = addr >> self.line_bits;
        let last = addr.wrapping_add(u64::from(size.max(1)) - 1);
        let start = (block & self.set_mask) as usize * self.assoc;
        block == last >> self.line_bits && self.tags.get(start) == Some(&block)
    }

    /// References one whole line by block number (`addr >> log2(line)`); returns
    /// true on a miss.
    pub fn access_block(&mut self, block: u64) -> bool {
        let start = (block & self.set_mask) as usize * self.assoc;
        let Some(ways) = self.tags.get_mut(start..start + self.assoc) else {
            return true;
        };
        if ways[0] == block {
            return false;
        }
        match ways[1..].iter().position(|&t| t == block) {
            Some(found) => {
                let way = found + 1;
                ways.copy_within(0..way, 1);
                ways[0] = block;
                false
            }
            None => {
                let last = ways.len() - 1;
                ways.copy_within(0..last, 1);
                ways[0] = block;
                true
            }
        }
    }

    /// Whether the line holding `addr` is resident (does not change LRU order).
    pub fn contains(&self, addr: u64) -> bool {
        let block = addr >> self.line_bits;
        let start = (block & self.set_mask) as usize * self.assoc;
        self.tags
            .get(start..start + self.assoc)
            .is_some_and(|ways| ways.contains(&block))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 2 sets × 2 ways × 16-byte lines.
    fn tiny() -> Cache {
        Cache::new(CacheConfig::new(64, 2, 16)).unwrap()
    }

    #[test]
    fn rejects_bad_geometry() {
        assert!(Cache::new(CacheConfig::new(96, 2, 16)).is_err());
    }

    #[test]
    fn lru_order_within_a_set() {
        let mut c = tiny();
        // Blocks 2, 4, 6 all map to set 0 (block & 1 == 0).
        assert!(c.access(0x20, 4)); // block 2: miss
        assert!(c.access(0x40, 4)); // block 4: miss; set = [4, 2]
        assert!(!c.access(0x24, 4)); // block 2: hit; set = [2, 4]
        assert!(c.access(0x60, 4)); // block 6: miss, evicts LRU 4; set = [6, 2]
        assert!(c.contains(0x20) && c.contains(0x60) && !c.contains(0x40));
        assert!(c.access(0x40, 1)); // block 4 again: miss, evicts 2
        assert!(!c.contains(0x20));
        // Set 1 was untouched.
        assert!(c.access(0x30, 1));
    }

    #[test]
    fn only_the_most_recent_line_of_a_set_hits_without_a_look_up() {
        let mut c = tiny();
        c.access(0x20, 4); // set 0 = [2]
        c.access(0x40, 4); // set 0 = [4, 2]
        assert!(c.hits_most_recent(0x48, 8));
        assert!(!c.hits_most_recent(0x20, 4)); // resident, but not the most recent
        assert!(!c.hits_most_recent(0x4c, 8)); // straddles into block 5
        assert!(!c.hits_most_recent(0x30, 1)); // set 1: block 0 is its most recent
    }

    #[test]
    fn block_zero_starts_resident() {
        let mut c = tiny();
        assert!(!c.access(0x0, 8));
        assert!(c.access(0x10, 8));
    }

    #[test]
    fn straddling_access_is_one_access_touching_both_lines() {
        let mut c = tiny();
        assert!(c.access(0x2e, 4)); // blocks 2 and 3 both miss: one miss
        assert!(c.contains(0x20) && c.contains(0x30));
        assert!(!c.access(0x2e, 4)); // both hit
                                     // Evict block 3 from set 1 (blocks 5 and 7 map there too).
        c.access(0x50, 1);
        c.access(0x70, 1);
        assert!(!c.contains(0x30));
        // Block 2 hits, block 3 misses: still one miss, and block 3 is reloaded.
        assert!(c.access(0x2f, 2));
        assert!(c.contains(0x30));
    }

    #[test]
    fn direct_mapped_and_fully_associative() {
        let mut d = Cache::new(CacheConfig::new(64, 1, 16)).unwrap();
        assert!(d.access(0x40, 1)); // block 4 → set 0
        assert!(d.access(0x80, 1)); // block 8 → set 0, evicts 4
        assert!(d.access(0x40, 1));
        let mut f = Cache::new(CacheConfig::new(64, 4, 16)).unwrap();
        for a in [0x10, 0x20, 0x30, 0x40] {
            assert!(f.access(a, 1));
        }
        for a in [0x10, 0x20, 0x30, 0x40] {
            assert!(!f.access(a, 1));
        }
        assert!(f.access(0x50, 1)); // evicts 0x10, the LRU
        assert!(!f.contains(0x10));
    }

    #[test]
    fn zero_and_oversized_sizes_do_not_panic() {
        let mut c = tiny();
        assert!(c.access(0x20, 0));
        assert!(c.access(0x28, 100)); // blocks 2 and 3 only
        assert!(c.contains(0x30));
        c.access(u64::MAX, 8); // wraps around the address space
    }
}
