//! The last-level cache of the I1/D1/LL hierarchy: the largest by far (a
//! host may report hundreds of megabytes), so while every block it sees
//! fits, its tags are narrow (`u32`, [`Cache<u32>`]: half the memory of
//! block numbers), and at the first block that does not (an address beyond
//! user space) they become block numbers for good. The misses are the same
//! either way. A cache whose tags would take more than [`CHUNKED_BYTES`]
//! keeps each set's tags in chunks of [`CHUNK_WAYS`] ways
//! ([`Cache::in_chunks`]): a program's lines then leave most ways of most
//! sets empty, and only the first chunks take memory.

use crate::cache::Cache;
use crate::config::{CacheConfig, GeometryError};

/// The fewest sets for narrow tags: then the block of any address in user
/// space (below 2^47) has one.
const NARROW_SETS: u32 = 1 << 10;

/// Bytes of narrow tags above which a set's tags are kept in chunks.
const CHUNKED_BYTES: u64 = 8 << 20;

/// Ways per chunk of a set's tags, in a cache whose tags are kept in chunks:
/// 16 bytes of narrow tags.
const CHUNK_WAYS: usize = 4;

/// Whether a cache of geometry `config` starts with narrow tags.
fn narrow(config: CacheConfig) -> bool {
    config.sets() >= NARROW_SETS
}

/// The ways per chunk of a set's tags in a cache of geometry `config`
/// ([`Cache::in_chunks`]).
fn chunk_ways(config: CacheConfig) -> usize {
    let lines = u64::from(config.sets()) * u64::from(config.assoc);
    match lines * 4 > CHUNKED_BYTES {
        true => CHUNK_WAYS,
        false => config.assoc as usize,
    }
}

/// A true-LRU cache whose tags are narrow while they can be.
#[derive(Clone, Debug)]
pub struct LastLevelCache {
    tags: Tags,
}

/// The cache, by the type of its tags (apart: the hierarchy holding it
/// stays small, and LL is only asked when L1 misses).
#[derive(Clone, Debug)]
enum Tags {
    Narrow(Box<Cache<u32>>),
    Wide(Box<Cache<u64>>),
}

impl LastLevelCache {
    /// An empty cache of the given geometry, which must pass
    /// [`CacheConfig::check`]; narrow tags when it has [`NARROW_SETS`] sets
    /// or more.
    pub fn new(config: CacheConfig) -> Result<LastLevelCache, GeometryError> {
        let chunk = chunk_ways(config);
        let tags = match narrow(config) {
            true => Tags::Narrow(Box::new(Cache::in_chunks(config, chunk)?)),
            false => Tags::Wide(Box::new(Cache::in_chunks(config, chunk)?)),
        };
        Ok(LastLevelCache { tags })
    }

    /// Empties the cache (narrow tags again when it had them at first).
    pub fn clear(&mut self) {
        let config = match &self.tags {
            Tags::Narrow(cache) => cache.config(),
            Tags::Wide(cache) => cache.config(),
        };
        self.tags = match (&self.tags, narrow(config)) {
            (Tags::Narrow(cache), true) => Tags::Narrow(Box::new(cache.emptied())),
            (Tags::Wide(cache), true) => Tags::Narrow(Box::new(cache.emptied())),
            (Tags::Narrow(cache), false) => Tags::Wide(Box::new(cache.emptied())),
            (Tags::Wide(cache), false) => Tags::Wide(Box::new(cache.emptied())),
        };
    }

    /// References `size` bytes at `addr`, as [`Cache::access`]; returns true
    /// on a miss.
    #[inline]
    pub fn access(&mut self, addr: u64, size: u32) -> bool {
        match &mut self.tags {
            Tags::Narrow(cache) => match cache.try_access(addr, size) {
                Some(miss) => miss,
                None => {
                    let (wide, miss) = widened_access(cache, addr, size);
                    self.tags = Tags::Wide(Box::new(wide));
                    miss
                }
            },
            Tags::Wide(cache) => cache.access(addr, size),
        }
    }

    /// Whether the line holding `addr` is resident (does not change LRU
    /// order).
    pub fn contains(&self, addr: u64) -> bool {
        match &self.tags {
            // A block without a narrow tag was never seen.
            Tags::Narrow(cache) => cache.try_contains(addr).unwrap_or(false),
            Tags::Wide(cache) => cache.contains(addr),
        }
    }

    /// Whether the tags are narrow.
    pub fn is_narrow(&self) -> bool {
        matches!(self.tags, Tags::Narrow(_))
    }
}

/// `cache` with block numbers for tags, and whether `size` bytes at `addr`
/// miss there, referenced then.
#[cold]
fn widened_access(cache: &Cache<u32>, addr: u64, size: u32) -> (Cache<u64>, bool) {
    let mut wide = cache.widened();
    let miss = wide.access(addr, size);
    (wide, miss)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Cachegrind's LRU over block numbers, one list per set, every way
    /// starting as block 0: what any [`Cache`] must do.
    struct Reference {
        sets: Vec<Vec<u64>>,
        line_bits: u32,
    }

    impl Reference {
        fn new(config: CacheConfig) -> Reference {
            let ways = vec![0; config.assoc as usize];
            Reference {
                sets: vec![ways; config.sets() as usize],
                line_bits: config.line_size.trailing_zeros(),
            }
        }

        fn access_block(&mut self, block: u64) -> bool {
            let count = self.sets.len() as u64;
            let ways = &mut self.sets[(block % count) as usize];
            let hit = ways.iter().position(|&tag| tag == block);
            let at = hit.unwrap_or(ways.len() - 1);
            ways.remove(at);
            ways.insert(0, block);
            hit.is_none()
        }

        fn access(&mut self, addr: u64, size: u32) -> bool {
            let first = addr >> self.line_bits;
            let last = addr.wrapping_add(u64::from(size.max(1)) - 1) >> self.line_bits;
            let miss = self.access_block(first);
            match last == first {
                true => miss,
                false => self.access_block(first.wrapping_add(1)) | miss,
            }
        }
    }

    #[test]
    fn narrow_tags_are_the_same_lru_also_once_widened() {
        // 2048 sets of 4 ways: narrow tags until a kernel address comes.
        let config = CacheConfig::new(2048 * 4 * 64, 4, 64);
        let mut cache = LastLevelCache::new(config).unwrap();
        assert!(cache.is_narrow());
        let mut reference = Reference::new(config);
        // Addresses that share sets, block 0, the top of user space.
        let mut state = 0x2545_f491_4f6c_dd1d_u64;
        let mut next = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            match state % 4 {
                0 => state % 64,
                1 => (state % 16) << 17,
                2 => (1 << 47) - 1 - (state % (1 << 20)),
                _ => state % (1 << 24),
            }
        };
        for step in 0..40_000 {
            let (addr, size) = match step {
                // A vsyscall-page address: the tags widen.
                20_000 => (0xffff_ffff_ff60_0000, 8),
                _ => (next(), 1 + (step % 16) as u32),
            };
            assert_eq!(
                cache.access(addr, size),
                reference.access(addr, size),
                "{step}"
            );
            let probe = next();
            let resident = reference.sets[((probe >> 6) % 2048) as usize].contains(&(probe >> 6));
            assert_eq!(cache.contains(probe), resident, "{step}");
        }
        assert!(!cache.is_narrow());
        // Emptied: narrow again.
        cache.clear();
        assert!(cache.is_narrow() && cache.contains(0) && !cache.contains(0x40));
    }

    #[test]
    fn only_tags_of_hundreds_of_megabytes_are_kept_in_chunks() {
        // A host reporting a 480 MB, 30-way L3 (as simulated: 262,144 sets):
        // 31 MB of narrow tags.
        let huge = CacheConfig::new(262_144 * 30 * 64, 30, 64);
        assert_eq!(chunk_ways(huge), CHUNK_WAYS);
        // A 32 MB, 16-way L3: 2 MB of tags, each set's side by side.
        let large = CacheConfig::new(32 << 20, 16, 64);
        assert_eq!(chunk_ways(large), 16);
        // Valgrind's default LL.
        let default = CacheConfig::new(262_144, 8, 64);
        assert_eq!(chunk_ways(default), 8);
        // Just above the limit: chunks.
        let above = CacheConfig::new((2 * CHUNKED_BYTES * 16) as u32, 8, 64);
        assert_eq!(chunk_ways(above), CHUNK_WAYS);
        let at = CacheConfig::new((CHUNKED_BYTES * 16) as u32, 8, 64);
        assert_eq!(chunk_ways(at), 8);
    }

    #[test]
    fn a_large_cache_starts_with_block_zero_alone() {
        let mut cache = LastLevelCache::new(CacheConfig::new(1024 * 2 * 64, 2, 64)).unwrap();
        assert!(!cache.access(0x3f, 1));
        // Block 1 (set 1) is not resident, as with tags of block numbers.
        assert!(cache.access(0x40, 1));
        // Emptied again: the same.
        cache.clear();
        assert!(!cache.contains(0x40) && cache.contains(0));
        // Fewer sets: tags of block numbers.
        let small = LastLevelCache::new(CacheConfig::new(512 * 2 * 64, 2, 64)).unwrap();
        assert!(!small.is_narrow());
    }
}
