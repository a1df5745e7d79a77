//! The last-level cache of Callgrind's `--simulate-wb=yes`: write-back, with
//! a dirty bit per line, in Valgrind 3.19's representation.
//!
//! Each way holds a word: the line's tag, which is the address with its low
//! `log2(line) + log2(sets)` bits cleared and, as Valgrind computes the mask
//! in 32 bits, its high 32 bits cleared too (addresses 4 GiB apart share a
//! tag), plus the dirty flag in bit 0. Every word starts as 0, so at the
//! start each set holds the line of tag 0 (the first `sets × line` bytes of
//! the address space), clean.
//!
//! A reference in this model is a read or a write: a write sets the dirty
//! bit of the line it touches (hit or freshly loaded); a miss that evicts a
//! dirty line is a dirty miss. An access straddling two sets references
//! both and reports the worst (dirty miss, then miss, then hit); with one
//! set it references only its first line, as Valgrind does.
//!
//! Callgrind's hardware prefetch references this same cache with its plain
//! reference, which compares and installs block numbers (`addr >> log2(line)`)
//! as whole words ([`WriteBackCache::prefetch`]); that mix is Valgrind's and
//! is kept.

use crate::config::{CacheConfig, GeometryError};

/// The dirty flag in a way's word.
const DIRTY: u64 = 1;

/// What one reference into the write-back cache found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LineResult {
    /// The line was resident.
    Hit,
    /// The line was loaded, evicting a clean line.
    Miss,
    /// The line was loaded, evicting a dirty line (a write-back to memory).
    MissDirty,
}

impl LineResult {
    /// The worse of two results of one straddling access.
    fn worst(self, other: LineResult) -> LineResult {
        match (self, other) {
            (LineResult::MissDirty, _) | (_, LineResult::MissDirty) => LineResult::MissDirty,
            (LineResult::Miss, _) | (_, LineResult::Miss) => LineResult::Miss,
            _ => LineResult::Hit,
        }
    }
}

/// A set-associative, true-LRU, write-allocate, write-back cache.
#[derive(Clone, Debug)]
pub struct WriteBackCache {
    config: CacheConfig,
    line_bits: u32,
    set_mask: u64,
    assoc: usize,
    tag_mask: u64,
    /// `sets × assoc` words (tag | dirty); each set's slice is MRU-first.
    words: Box<[u64]>,
}

impl WriteBackCache {
    /// An empty cache (every word 0) of the given geometry, which must pass
    /// [`CacheConfig::check`].
    pub fn new(config: CacheConfig) -> Result<WriteBackCache, GeometryError> {
        config.check()?;
        let sets = config.sets();
        let line_bits = config.line_size.trailing_zeros();
        let tag_shift = line_bits + sets.trailing_zeros();
        // Valgrind's `~((1u << shift) - 1)`: a 32-bit mask, widened with
        // zeros (x86 shifts by the count modulo 32).
        let tag_mask = u64::from(!(1u32.wrapping_shl(tag_shift).wrapping_sub(1)));
        let assoc = config.assoc as usize;
        Ok(WriteBackCache {
            config,
            line_bits,
            set_mask: u64::from(sets) - 1,
            assoc,
            tag_mask,
            words: vec![0; sets as usize * assoc].into_boxed_slice(),
        })
    }

    /// The geometry.
    pub fn config(&self) -> CacheConfig {
        self.config
    }

    /// Empties the cache (every word back to 0).
    pub fn clear(&mut self) {
        self.words.fill(0);
    }

    /// Reads (`write` false) or writes `size` bytes at `addr`.
    pub fn access(&mut self, addr: u64, size: u32, write: bool) -> LineResult {
        let last = addr.wrapping_add(u64::from(size.max(1)) - 1);
        let set1 = (addr >> self.line_bits) & self.set_mask;
        let set2 = (last >> self.line_bits) & self.set_mask;
        let flag = if write { DIRTY } else { 0 };
        let first = self.reference(set1, addr & self.tag_mask, flag);
        if set1 == set2 {
            return first;
        }
        first.worst(self.reference(set2, last & self.tag_mask, flag))
    }

    /// One line's reference: `tag` (without flag) in set `set`, `flag`
    /// ORed into its word.
    fn reference(&mut self, set: u64, tag: u64, flag: u64) -> LineResult {
        let start = set as usize * self.assoc;
        let Some(ways) = self.words.get_mut(start..start + self.assoc) else {
            return LineResult::Miss;
        };
        if let Some(way) = ways.iter().position(|&word| word & !DIRTY == tag) {
            let word = ways[way] | flag;
            ways.copy_within(0..way, 1);
            ways[0] = word;
            return LineResult::Hit;
        }
        let last = ways.len() - 1;
        let evicted = ways[last];
        ways.copy_within(0..last, 1);
        ways[0] = tag | flag;
        if evicted & DIRTY != 0 {
            LineResult::MissDirty
        } else {
            LineResult::Miss
        }
    }

    /// The hardware prefetch's reference of the line holding `addr`, as
    /// Callgrind makes it on this cache: the block number is looked up and,
    /// when absent, installed as a word of its own (evicting the LRU word
    /// without a write-back); nothing is reported.
    pub fn prefetch(&mut self, addr: u64) {
        let block = addr >> self.line_bits;
        let start = (block & self.set_mask) as usize * self.assoc;
        let Some(ways) = self.words.get_mut(start..start + self.assoc) else {
            return;
        };
        let way = ways
            .iter()
            .position(|&word| word == block)
            .unwrap_or(ways.len() - 1);
        ways.copy_within(0..way, 1);
        ways[0] = block;
    }

    /// Whether the line holding `addr` is resident (LRU order unchanged).
    pub fn contains(&self, addr: u64) -> bool {
        let (ways, tag) = self.ways_of(addr);
        ways.iter().any(|&word| word & !DIRTY == tag)
    }

    /// Whether the line holding `addr` is resident and dirty.
    pub fn is_dirty(&self, addr: u64) -> bool {
        let (ways, tag) = self.ways_of(addr);
        ways.contains(&(tag | DIRTY))
    }

    /// The words of the set the line holding `addr` maps to, and its tag.
    fn ways_of(&self, addr: u64) -> (&[u64], u64) {
        let set = (addr >> self.line_bits) & self.set_mask;
        let start = set as usize * self.assoc;
        let ways = self
            .words
            .get(start..start + self.assoc)
            .unwrap_or_default();
        (ways, addr & self.tag_mask)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 2 sets × 2 ways × 16-byte lines: tags are the address above bit 5.
    fn tiny() -> WriteBackCache {
        WriteBackCache::new(CacheConfig::new(64, 2, 16)).unwrap()
    }

    #[test]
    fn rejects_bad_geometry() {
        assert!(WriteBackCache::new(CacheConfig::new(96, 2, 16)).is_err());
    }

    #[test]
    fn a_write_makes_its_line_dirty_and_a_read_does_not() {
        let mut c = tiny();
        assert_eq!(c.access(0x40, 4, false), LineResult::Miss);
        assert!(c.contains(0x40) && !c.is_dirty(0x40));
        assert_eq!(c.access(0x44, 4, true), LineResult::Hit);
        assert!(c.is_dirty(0x40));
        // A write miss loads the line dirty.
        assert_eq!(c.access(0x80, 1, true), LineResult::Miss);
        assert!(c.is_dirty(0x80));
        // A later read keeps it dirty.
        assert_eq!(c.access(0x80, 1, false), LineResult::Hit);
        assert!(c.is_dirty(0x80));
    }

    #[test]
    fn evicting_a_dirty_line_is_a_dirty_miss() {
        let mut c = tiny();
        // Set 0 holds tag 0 at the start; 0x40, 0x80, 0xc0 map to set 0 too.
        assert_eq!(c.access(0x40, 1, true), LineResult::Miss); // [0x40d, 0]
        assert_eq!(c.access(0x80, 1, false), LineResult::Miss); // [0x80, 0x40d]
        assert_eq!(c.access(0xc0, 1, false), LineResult::MissDirty); // evicts 0x40d
        assert!(!c.contains(0x40));
        assert_eq!(c.access(0x40, 1, false), LineResult::Miss); // evicts clean 0x80
                                                                // A clean eviction after a dirty line was reloaded clean.
        assert_eq!(c.access(0x80, 1, false), LineResult::Miss);
    }

    #[test]
    fn the_first_lines_start_resident_and_clean() {
        let mut c = tiny();
        assert_eq!(c.access(0x00, 1, false), LineResult::Hit);
        assert_eq!(c.access(0x10, 1, true), LineResult::Hit); // set 1, tag 0
        assert!(c.is_dirty(0x10));
        assert_eq!(c.access(0x20, 1, false), LineResult::Miss);
    }

    #[test]
    fn tags_ignore_the_high_32_bits() {
        let mut c = tiny();
        assert_eq!(c.access(0x40, 1, false), LineResult::Miss);
        assert_eq!(c.access(0x1_0000_0040, 1, false), LineResult::Hit);
    }

    #[test]
    fn a_straddling_access_reports_the_worst_of_its_lines() {
        let mut c = tiny();
        c.access(0x40, 1, true); // set 0: [0x40d, 0]
        c.access(0x80, 1, false); // set 0: [0x80, 0x40d]
                                  // 0xce..0xd1: 0xc0 (set 0, evicts dirty 0x40) and 0xd0 (set 1, miss).
        assert_eq!(c.access(0xce, 4, false), LineResult::MissDirty);
        assert!(c.contains(0xc0) && c.contains(0xd0));
        assert_eq!(c.access(0xce, 4, true), LineResult::Hit);
        assert!(c.is_dirty(0xc0) && c.is_dirty(0xd0));
        // With one set only the first line is referenced.
        let mut one = WriteBackCache::new(CacheConfig::new(32, 2, 16)).unwrap();
        assert_eq!(one.access(0x4e, 4, false), LineResult::Miss);
        assert!(one.contains(0x40) && !one.contains(0x50));
    }

    #[test]
    fn a_prefetch_installs_a_block_number_word() {
        let mut c = tiny();
        c.access(0x40, 1, true); // set 0: [0x40d, 0]
                                 // Block 8 (0x80) goes to set 0 as the word 8, evicting tag 0.
        c.prefetch(0x80); // set 0: [8, 0x40d]
        assert!(!c.contains(0x80), "the word 8 is not the tag 0x80");
        assert!(c.is_dirty(0x40));
        c.prefetch(0x80); // found: unchanged
        assert!(c.is_dirty(0x40));
        // Another block of set 0 pushes the dirty line out, silently.
        c.prefetch(0xc0); // set 0: [12, 8]
        assert!(!c.contains(0x40));
        assert_eq!(c.access(0x40, 1, false), LineResult::Miss); // [0x40, 12]
                                                                // Block 0x40 (address 0x400) is the word 0x40: the tag of 0x40.
        let mut c = tiny();
        c.prefetch(0x400);
        assert_eq!(c.access(0x40, 1, false), LineResult::Hit);
    }

    #[test]
    fn clear_empties_and_cleans() {
        let mut c = tiny();
        c.access(0x40, 1, true);
        c.clear();
        assert!(!c.contains(0x40));
        assert!(c.contains(0x00) && !c.is_dirty(0x00));
        assert_eq!(c.config().size, 64);
    }
}
