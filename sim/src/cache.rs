//! One set-associative cache with true LRU replacement, as simulated by Cachegrind
//! (`cg_sim.c`) and by Callgrind without `--cacheuse` (`callgrind/sim.c`).
//!
//! Write-allocate, no dirty state. The tag of a line is its block number
//! (`addr >> log2(line)`), the set is `block & (sets − 1)`. Each set's tags are
//! kept in most-recently-used-first order. Like Valgrind, every tag starts as 0,
//! so block 0 (addresses `0..line`) is resident at the start.
//!
//! A set's tags lie side by side, or (a cache made with [`Cache::in_chunks`],
//! for a last level of hundreds of megabytes) in chunks of a few ways: the
//! first chunk of every set, then the second of every set, and so on. A set
//! only ever holds lines in its first ways (a miss puts its line first and
//! the ways that were empty stay at the end), so a program that leaves most
//! ways of its sets empty touches only the first chunks' memory.

use crate::config::{CacheConfig, GeometryError};

/// A set-associative, true-LRU, write-allocate cache of any valid geometry,
/// its lines' tags of type `T` ([`Tag`]): block numbers (`u64`) unless
/// said otherwise.
#[derive(Clone, Debug)]
pub struct Cache<T: Tag = u64> {
    config: CacheConfig,
    line_bits: u32,
    set_bits: u32,
    set_mask: u64,
    assoc: usize,
    /// Where each set's ways are in `tags`.
    layout: Layout,
    /// The tags, each set's in MRU-first order: the first chunk of every
    /// set, then the second, and so on.
    tags: Box<[T]>,
}

/// What a cache keeps of each line: equal for two blocks of one set
/// exactly when they are the same block. `Default` is an unused way,
/// never equal to a block's tag but in set 0, where it is block 0's.
pub trait Tag: Copy + PartialEq + Default {
    /// The tag of `block` in a cache of `2^set_bits` sets, if it has one.
    fn of_block(block: u64, set_bits: u32) -> Option<Self>;
}

/// The block number itself: every block has one, and 0 (unused ways) is
/// block 0, as in Valgrind, where every tag starts as 0.
impl Tag for u64 {
    #[inline(always)]
    fn of_block(block: u64, _: u32) -> Option<u64> {
        Some(block)
    }
}

/// One more than the block number above the set's bits (the set holds
/// the rest), when that fits: half the memory of `u64` tags; 0 is no
/// block, and set 0 starts with block 0 in every way, as with `u64`.
impl Tag for u32 {
    #[inline(always)]
    fn of_block(block: u64, set_bits: u32) -> Option<u32> {
        u32::try_from((block >> set_bits) + 1).ok()
    }
}

impl<T: Tag> Cache<T> {
    /// An empty cache (block 0 alone resident, in every way of set 0) of
    /// the given geometry, which must pass [`CacheConfig::check`].
    pub fn new(config: CacheConfig) -> Result<Cache<T>, GeometryError> {
        Cache::in_chunks(config, config.assoc as usize)
    }

    /// [`Cache::new`] with each set's tags in chunks of `chunk` ways (see
    /// the module's documentation): one chunk of all ways when `chunk` is
    /// not a power of two below the associativity.
    pub(crate) fn in_chunks(config: CacheConfig, chunk: usize) -> Result<Cache<T>, GeometryError> {
        config.check()?;
        let sets = u64::from(config.sets());
        let assoc = config.assoc as usize;
        let mut cache = Cache {
            config,
            line_bits: config.line_size.trailing_zeros(),
            set_bits: sets.trailing_zeros(),
            set_mask: sets - 1,
            assoc,
            layout: Layout::new(config.sets(), config.assoc, chunk),
            tags: Box::default(),
        };
        cache.clear();
        Ok(cache)
    }

    /// The geometry.
    pub fn config(&self) -> CacheConfig {
        self.config
    }

    /// Empties the cache: block 0 alone resident, in every way of set 0.
    /// The tags are allocated anew, so the memory of sets never used stays
    /// untouched.
    pub fn clear(&mut self) {
        let chunks = self.assoc.div_ceil(self.layout.chunk());
        let mut tags = vec![T::default(); chunks * self.layout.stride()];
        if let Some(zero) = T::of_block(0, self.set_bits) {
            for way in 0..self.assoc {
                tags[self.layout.slot(0, way)] = zero;
            }
        }
        self.tags = tags.into_boxed_slice();
    }

    /// The cache of `config` holding `tags` (`sets × assoc`, each set's
    /// most recently used first, as [`Cache::tags`] gives them); `None`
    /// when their number is not the geometry's.
    pub fn of_tags(config: CacheConfig, tags: Vec<T>) -> Result<Option<Cache<T>>, GeometryError> {
        let mut cache = Cache::new(config)?;
        if tags.len() != cache.tags.len() {
            return Ok(None);
        }
        cache.tags = tags.into_boxed_slice();
        Ok(Some(cache))
    }

    /// Every line's tag: `sets × assoc`, each set's most recently used
    /// first (for a cache made with [`Cache::new`] or [`Cache::of_tags`],
    /// whose sets' tags lie side by side).
    pub fn tags(&self) -> &[T] {
        &self.tags
    }

    /// The first tag of `block`'s set.
    #[inline(always)]
    fn set_start(&self, block: u64) -> usize {
        self.layout.slot((block & self.set_mask) as usize, 0)
    }

    /// [`Cache::access`], `None` (nothing done) when a block it references
    /// has no tag of type `T`.
    #[inline]
    pub fn try_access(&mut self, addr: u64, size: u32) -> Option<bool> {
        let block1 = addr >> self.line_bits;
        let last = addr.wrapping_add(u64::from(size.max(1)) - 1);
        let block2 = last >> self.line_bits;
        if block1 == block2 {
            // The most common case first, as in cg_sim.c: a hit on the most
            // recently used line of the set, which changes nothing.
            let tag = T::of_block(block1, self.set_bits)?;
            if self.tags.get(self.set_start(block1)) == Some(&tag) {
                return Some(false);
            }
            Some(self.access_tag(block1, tag))
        } else {
            // Both lines are always referenced: the state changes either way.
            let block2 = block1.wrapping_add(1);
            let tag1 = T::of_block(block1, self.set_bits)?;
            let tag2 = T::of_block(block2, self.set_bits)?;
            let miss1 = self.access_tag(block1, tag1);
            let miss2 = self.access_tag(block2, tag2);
            Some(miss1 | miss2)
        }
    }

    /// Whether `size` bytes at `addr` lie in the most recently used line of
    /// their set: a hit that changes nothing, so [`Cache::access`] need not
    /// be called.
    #[inline(always)]
    pub fn hits_most_recent(&self, addr: u64, size: u32) -> bool {
        let block = addr >> self.line_bits;
        let last = addr.wrapping_add(u64::from(size.max(1)) - 1);
        block == last >> self.line_bits
            && T::of_block(block, self.set_bits)
                .is_some_and(|tag| self.tags.get(self.set_start(block)) == Some(&tag))
    }

    /// [`Cache::access_block`], `None` (nothing done) when the block has no
    /// tag of type `T`.
    pub fn try_access_block(&mut self, block: u64) -> Option<bool> {
        let tag = T::of_block(block, self.set_bits)?;
        Some(self.access_tag(block, tag))
    }

    /// One reference to `block`, tagged `tag`: Cachegrind's true-LRU step
    /// in its set; true on a miss.
    fn access_tag(&mut self, block: u64, tag: T) -> bool {
        let set = (block & self.set_mask) as usize;
        let empty = Empty {
            in_set_zero: set == 0,
        };
        if self.layout.chunk() == self.assoc {
            let start = self.layout.slot(set, 0);
            match self.tags.get_mut(start..start + self.assoc) {
                Some(ways) => lru_step(ways, tag, empty),
                None => true,
            }
        } else {
            let mut ways = Chunked {
                tags: &mut self.tags,
                layout: self.layout,
                set,
                assoc: self.assoc,
            };
            lru_step(&mut ways, tag, empty)
        }
    }

    /// [`Cache::contains`], `None` when the block has no tag of type `T`.
    pub fn try_contains(&self, addr: u64) -> Option<bool> {
        let block = addr >> self.line_bits;
        let tag = T::of_block(block, self.set_bits)?;
        let set = (block & self.set_mask) as usize;
        Some((0..self.assoc).any(|way| self.tags.get(self.layout.slot(set, way)) == Some(&tag)))
    }

    /// An empty cache of the same geometry, with tags of type `U`.
    pub fn emptied<U: Tag>(&self) -> Cache<U> {
        let mut cache = self.with_tags(Box::default());
        cache.clear();
        cache
    }

    /// A cache of the same geometry holding `tags`.
    fn with_tags<U: Tag>(&self, tags: Box<[U]>) -> Cache<U> {
        Cache {
            config: self.config,
            line_bits: self.line_bits,
            set_bits: self.set_bits,
            set_mask: self.set_mask,
            assoc: self.assoc,
            layout: self.layout,
            tags,
        }
    }
}

impl Cache<u32> {
    /// The same cache with block numbers for tags.
    pub fn widened(&self) -> Cache<u64> {
        let mut tags = vec![0u64; self.tags.len()];
        for set in 0..=self.set_mask as usize {
            for way in 0..self.assoc {
                let slot = self.layout.slot(set, way);
                tags[slot] = match self.tags[slot] {
                    // No block: only set 0 is ever asked for block 0, and
                    // set 0 never holds this.
                    0 => 0,
                    tag => (u64::from(tag - 1) << self.set_bits) | set as u64,
                };
            }
        }
        self.with_tags(tags.into_boxed_slice())
    }
}

impl Cache<u64> {
    /// References `size` bytes at `addr`; returns true on a miss. An access that
    /// straddles two lines references both and misses if either misses. A `size`
    /// of 0 counts as 1; an access longer than a line references only its first two
    /// lines (callers clamp sizes to the line size, as Valgrind does).
    #[inline]
    pub fn access(&mut self, addr: u64, size: u32) -> bool {
        // Every block has a `u64` tag.
        self.try_access(addr, size).unwrap_or(true)
    }

    /// References one whole line by block number (`addr >> log2(line)`); returns
    /// true on a miss.
    pub fn access_block(&mut self, block: u64) -> bool {
        self.try_access_block(block).unwrap_or(true)
    }

    /// Whether the line holding `addr` is resident (does not change LRU order).
    pub fn contains(&self, addr: u64) -> bool {
        self.try_contains(addr).unwrap_or(false)
    }
}

/// Which tags are empty ways: the default tag, but in set 0, where every
/// way starts as block 0 (whose `u64` tag is the default).
#[derive(Clone, Copy)]
struct Empty {
    in_set_zero: bool,
}

impl Empty {
    #[inline(always)]
    fn is<T: Tag>(self, tag: T) -> bool {
        !self.in_set_zero && tag == T::default()
    }
}

/// The ways of one set, most recently used first.
trait Ways<T> {
    /// How many.
    fn len(&self) -> usize;
    /// Way `way`'s tag.
    fn get(&self, way: usize) -> T;
    /// Sets way `way`'s tag.
    fn set(&mut self, way: usize, tag: T);
}

impl<T: Copy> Ways<T> for [T] {
    #[inline(always)]
    fn len(&self) -> usize {
        <[T]>::len(self)
    }
    #[inline(always)]
    fn get(&self, way: usize) -> T {
        self[way]
    }
    #[inline(always)]
    fn set(&mut self, way: usize, tag: T) {
        self[way] = tag;
    }
}

/// Where the ways of each set are among a cache's tags: in chunks of
/// `chunk` ways side by side, chunk `i` of every set after chunk `i - 1`
/// of every set (one chunk of all ways: each set's tags side by side).
/// Narrow fields keep [`Cache`] small: a cache of `u32` bytes has fewer
/// tags than `u32::MAX`.
#[derive(Clone, Copy, Debug)]
struct Layout {
    /// Ways per chunk: all of them, or a power of two below that.
    chunk: u32,
    /// Tags from one chunk of a set to its next: a chunk of every set.
    stride: u32,
    /// A way's chunk is `way >> shift`, its place in the chunk the bits
    /// below.
    shift: u32,
}

impl Layout {
    /// The layout of `sets` sets of `assoc` ways in chunks of `chunk`
    /// ways, or of all of them when `chunk` is not a power of two below
    /// `assoc`.
    fn new(sets: u32, assoc: u32, chunk: usize) -> Layout {
        match u32::try_from(chunk) {
            Ok(chunk) if chunk.is_power_of_two() && chunk < assoc => Layout {
                chunk,
                stride: sets.saturating_mul(chunk),
                shift: chunk.trailing_zeros(),
            },
            _ => Layout {
                chunk: assoc,
                stride: sets.saturating_mul(assoc),
                shift: usize::BITS - 1,
            },
        }
    }

    /// Ways per chunk.
    #[inline(always)]
    fn chunk(self) -> usize {
        self.chunk as usize
    }

    /// Tags in one chunk of every set.
    #[inline(always)]
    fn stride(self) -> usize {
        self.stride as usize
    }

    /// Where way `way` of set `set` is.
    #[inline(always)]
    fn slot(self, set: usize, way: usize) -> usize {
        let within = (1usize << self.shift) - 1;
        set * self.chunk() + (way >> self.shift) * self.stride() + (way & within)
    }
}

/// The ways of set `set` of tags laid out in chunks.
struct Chunked<'a, T> {
    tags: &'a mut [T],
    layout: Layout,
    set: usize,
    assoc: usize,
}

impl<T: Copy> Ways<T> for Chunked<'_, T> {
    #[inline(always)]
    fn len(&self) -> usize {
        self.assoc
    }
    #[inline(always)]
    fn get(&self, way: usize) -> T {
        self.tags[self.layout.slot(self.set, way)]
    }
    #[inline(always)]
    fn set(&mut self, way: usize, tag: T) {
        let slot = self.layout.slot(self.set, way);
        self.tags[slot] = tag;
    }
}

/// Cachegrind's true-LRU step for a reference to the line tagged `tag` in
/// a set: a hit moves the line to the front, a miss puts it there and
/// drops the least recently used. Lines fill a set from its first way, so
/// the first empty way (`empty`) ends the search, and only the ways before
/// it move; true on a miss.
#[inline(always)]
fn lru_step<T: Tag, W: Ways<T> + ?Sized>(ways: &mut W, tag: T, empty: Empty) -> bool {
    let assoc = ways.len();
    if assoc == 0 || ways.get(0) == tag {
        return assoc == 0;
    }
    let mut way = 1;
    let hit = loop {
        if way == assoc {
            break false;
        }
        let held = ways.get(way);
        if held == tag {
            break true;
        }
        if empty.is(held) {
            break false;
        }
        way += 1;
    };
    // The ways up to the hit, the first empty way or the last move back one.
    let end = way.min(assoc - 1);
    for moved in (1..=end).rev() {
        let before = ways.get(moved - 1);
        ways.set(moved, before);
    }
    ways.set(0, tag);
    !hit
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
        assert!(Cache::<u64>::new(CacheConfig::new(96, 2, 16)).is_err());
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
    fn narrow_tags_are_the_same_lru_and_widen_to_the_same_lines() {
        // 2 sets: a block's narrow tag is one more than block >> 1.
        let config = CacheConfig::new(64, 2, 16);
        let (mut narrow, mut wide) = (Cache::<u32>::new(config).unwrap(), tiny());
        for addr in [0x0, 0x20, 0x40, 0x24, 0x60, 0x30, 0x2e, 0x40, 0x10, 0x0] {
            assert_eq!(
                narrow.try_access(addr, 4),
                Some(wide.access(addr, 4)),
                "{addr:#x}"
            );
        }
        let widened = narrow.widened();
        for addr in (0..0x100).step_by(16) {
            let resident = wide.contains(addr);
            assert_eq!(narrow.try_contains(addr), Some(resident), "{addr:#x}");
            assert_eq!(widened.contains(addr), resident, "{addr:#x}");
        }
        // Block 2^33 has no narrow tag here: nothing is done.
        let far = 1u64 << 37;
        assert_eq!(narrow.try_access(far, 1), None);
        assert_eq!(narrow.try_access_block(far >> 4), None);
        assert_eq!(narrow.try_contains(far), None);
        assert!(!narrow.hits_most_recent(far, 1));
    }

    #[test]
    fn a_cache_made_from_its_tags_goes_on_as_it_would() {
        let mut c = tiny();
        for addr in [0x20, 0x40, 0x24, 0x30] {
            c.access(addr, 4);
        }
        let mut copy = Cache::of_tags(c.config(), c.tags().to_vec())
            .unwrap()
            .unwrap();
        assert_eq!(c.tags(), [2, 4, 3, 0]);
        for addr in [0x60, 0x20, 0x40, 0x50, 0x30] {
            assert_eq!(copy.access(addr, 4), c.access(addr, 4), "{addr:#x}");
        }
        assert_eq!(copy.tags(), c.tags());
        assert!(Cache::of_tags(c.config(), vec![0u64; 3]).unwrap().is_none());
    }

    /// Addresses from a fixed pseudo-random sequence: mostly a few lines
    /// per set, some sets filled past their ways, block 0 and its set.
    fn addresses(seed: u64, count: usize) -> Vec<(u64, u32)> {
        let mut state = seed;
        (0..count)
            .map(|step| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                let addr = match state % 5 {
                    0 => state % 64,
                    1 => (state % 24) << 13,
                    2 => state % (1 << 12),
                    _ => state % (1 << 22),
                };
                (addr, 1 + (step % 20) as u32)
            })
            .collect()
    }

    #[test]
    fn tags_in_chunks_are_the_same_lru_as_tags_side_by_side() {
        // 6 ways in chunks of 4 (the last chunk half used), 8 in chunks of
        // 2, 16 in chunks of 4; block numbers and narrow tags.
        for (assoc, chunk) in [(6, 4), (8, 2), (16, 4), (3, 2)] {
            let config = CacheConfig::new(128 * assoc * 64, assoc, 64);
            let mut whole = Cache::<u64>::new(config).unwrap();
            let mut chunked = Cache::<u64>::in_chunks(config, chunk).unwrap();
            let mut narrow = Cache::<u32>::in_chunks(config, chunk).unwrap();
            assert_eq!(chunked.layout.chunk(), chunk, "{assoc} ways");
            for (step, (addr, size)) in addresses(0x9e37_79b9_7f4a_7c15, 30_000)
                .into_iter()
                .enumerate()
            {
                let miss = whole.access(addr, size);
                assert_eq!(
                    chunked.access(addr, size),
                    miss,
                    "{assoc} ways, step {step}"
                );
                assert_eq!(
                    narrow.try_access(addr, size),
                    Some(miss),
                    "{assoc} ways, step {step}"
                );
                let probe = addr.wrapping_mul(7) % (1 << 22);
                let resident = whole.contains(probe);
                assert_eq!(chunked.contains(probe), resident, "step {step}");
                assert_eq!(narrow.try_contains(probe), Some(resident), "step {step}");
                assert_eq!(
                    chunked.hits_most_recent(probe, 1),
                    whole.hits_most_recent(probe, 1)
                );
            }
            // Widened, the narrow tags name the same lines, in chunks still.
            let widened = narrow.widened();
            assert_eq!(widened.layout.chunk(), chunk);
            for addr in (0..1u64 << 22).step_by(64 * 37) {
                assert_eq!(widened.contains(addr), whole.contains(addr), "{addr:#x}");
            }
            // Emptied: block 0 alone, in every way of set 0.
            let mut emptied = chunked.emptied::<u64>();
            assert!(emptied.contains(0) && !emptied.contains(64));
            for way in 1..assoc as u64 {
                // Set 0's other blocks push block 0 out only after every way.
                assert!(emptied.access(way * 128 * 64, 1));
            }
            assert!(emptied.contains(0));
            assert!(emptied.access(assoc as u64 * 128 * 64, 1));
        }
    }

    #[test]
    fn chunked_tags_lie_chunk_after_chunk_and_fill_a_set_from_its_first_way() {
        // One set of 4 ways in chunks of 2, every way block 0 at first.
        let config = CacheConfig::new(4 * 16, 4, 16);
        let mut c = Cache::<u64>::in_chunks(config, 2).unwrap();
        // Set 0 starts with block 0 in every way: they are lines, not empty.
        c.access_block(5);
        c.access_block(9);
        assert_eq!(&c.tags[..], [9, 5, 0, 0]);
        // Ways 2 and 3 still hold block 0: the miss drops one of them.
        c.access_block(7);
        assert_eq!(&c.tags[..], [7, 9, 5, 0]);
        // Another set's empty ways stay empty, untouched.
        let config = CacheConfig::new(2 * 4 * 16, 4, 16);
        let mut two = Cache::<u64>::in_chunks(config, 2).unwrap();
        two.access_block(3);
        two.access_block(5);
        // Chunks: set 0's first, set 1's first, set 0's second, set 1's second.
        assert_eq!(&two.tags[..], [0, 0, 5, 3, 0, 0, 0, 0]);
        assert!(!two.access_block(3));
        assert_eq!(&two.tags[..], [0, 0, 3, 5, 0, 0, 0, 0]);
        two.access_block(7);
        assert_eq!(&two.tags[..], [0, 0, 7, 3, 0, 0, 5, 0]);
    }

    /// A set's ways that log which ways are written.
    struct Logged {
        tags: Vec<u64>,
        written: Vec<usize>,
    }

    impl Ways<u64> for Logged {
        fn len(&self) -> usize {
            self.tags.len()
        }
        fn get(&self, way: usize) -> u64 {
            self.tags[way]
        }
        fn set(&mut self, way: usize, tag: u64) {
            self.written.push(way);
            self.tags[way] = tag;
        }
    }

    #[test]
    fn the_lru_step_writes_only_the_ways_before_the_first_empty_one() {
        let set = |tags: &[u64]| Logged {
            tags: tags.to_vec(),
            written: Vec::new(),
        };
        let other_set = Empty { in_set_zero: false };
        // A miss in a set holding two lines: ways 2, 1 and 0 move, way 3
        // (empty, as are those after the first empty one) is not written.
        let mut ways = set(&[9, 5, 0, 0]);
        assert!(lru_step(&mut ways, 7, other_set));
        assert_eq!(
            (ways.tags.as_slice(), ways.written.as_slice()),
            ([7, 9, 5, 0].as_slice(), [2, 1, 0].as_slice())
        );
        // A hit on way 1: ways 1 and 0.
        let mut ways = set(&[9, 5, 0, 0]);
        assert!(!lru_step(&mut ways, 5, other_set));
        assert_eq!(
            (ways.tags.as_slice(), ways.written.as_slice()),
            ([5, 9, 0, 0].as_slice(), [1, 0].as_slice())
        );
        // A full set: every way moves, the last line drops.
        let mut ways = set(&[9, 5, 3, 1]);
        assert!(lru_step(&mut ways, 7, other_set));
        assert_eq!(
            (ways.tags.as_slice(), ways.written.as_slice()),
            ([7, 9, 5, 3].as_slice(), [3, 2, 1, 0].as_slice())
        );
        // Set 0: its zero tags are block 0's lines, not empty ways.
        let mut ways = set(&[9, 5, 0, 0]);
        assert!(lru_step(&mut ways, 7, Empty { in_set_zero: true }));
        assert_eq!(
            (ways.tags.as_slice(), ways.written.as_slice()),
            ([7, 9, 5, 0].as_slice(), [3, 2, 1, 0].as_slice())
        );
        // A hit on the most recently used line writes nothing.
        let mut ways = set(&[9, 5, 0, 0]);
        assert!(!lru_step(&mut ways, 9, other_set));
        assert!(ways.written.is_empty());
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
