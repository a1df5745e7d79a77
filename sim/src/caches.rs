//! The I1/D1/LL hierarchy of Cachegrind and of Callgrind's `--cache-sim=yes`.
//!
//! An instruction fetch is one I1 access of `(addr, len)`; a read or write is one D1
//! access. LL is consulted only when L1 misses, with the same `(addr, size)`; I1 and
//! D1 share it and nothing is invalidated in L1 when LL evicts a line. Reads and
//! writes behave the same (write-allocate, no dirty state).

use crate::cache::Cache;
use crate::config::{CacheLevel, CachesConfig, GeometryError};
use crate::last_level::LastLevelCache;
use crate::outcome::Outcome;

/// The three caches of a simulation, with the data-size clamp Valgrind applies.
#[derive(Clone, Debug)]
pub struct Hierarchy {
    config: CachesConfig,
    i1: Cache,
    d1: Cache,
    ll: LastLevelCache,
    min_line: u32,
    /// log2 of I1's line size.
    i1_line_bits: u32,
    /// The I1 line the last fetch touched last (`u64::MAX`: none): it is
    /// the most recently used of its set, so a fetch within it is a hit
    /// that changes nothing (only fetches touch I1).
    last_fetched: u64,
}

impl Hierarchy {
    /// Empty caches of the given geometry; the error names the first bad cache.
    pub fn new(config: &CachesConfig) -> Result<Hierarchy, (CacheLevel, GeometryError)> {
        let make = |level| Cache::new(config.get(level)).map_err(|e| (level, e));
        Ok(Hierarchy {
            config: *config,
            i1: make(CacheLevel::I1)?,
            d1: make(CacheLevel::D1)?,
            ll: LastLevelCache::new(config.ll).map_err(|e| (CacheLevel::LL, e))?,
            min_line: config.min_line_size(),
            i1_line_bits: config.i1.line_size.trailing_zeros(),
            last_fetched: u64::MAX,
        })
    }

    /// The geometry.
    pub fn config(&self) -> &CachesConfig {
        &self.config
    }

    /// Empties all three caches (as Callgrind does when instrumentation is
    /// switched on or off).
    pub fn clear(&mut self) {
        self.i1.clear();
        self.d1.clear();
        self.ll.clear();
        self.last_fetched = u64::MAX;
    }

    /// Clamps a data access size to the smallest line size of the three caches, as
    /// Valgrind does for large accesses (`fxsave`, `xsave`, …). [`Hierarchy::read`]
    /// and [`Hierarchy::write`] apply it themselves.
    #[inline]
    pub fn clamp(&self, size: u32) -> u32 {
        size.min(self.min_line)
    }

    /// Fetches the `len` bytes of one instruction at `addr` (one I1 access):
    /// a fetch within the line fetched last, or within the most recently
    /// used line of its set (a hit that changes nothing), is decided
    /// inline, anything else out of line.
    #[inline(always)]
    pub fn fetch(&mut self, addr: u64, len: u32) -> Outcome {
        let first = addr >> self.i1_line_bits;
        let last = addr.wrapping_add(u64::from(len.max(1)) - 1) >> self.i1_line_bits;
        if first == last && first == self.last_fetched {
            return Outcome::L1Hit;
        }
        if self.i1.hits_most_recent(addr, len) {
            self.last_fetched = last;
            return Outcome::L1Hit;
        }
        self.fetch_beyond_last_line(addr, len, last)
    }

    /// [`Hierarchy::fetch`] past its inline checks; `last` is the line the
    /// fetch ends in.
    #[inline(never)]
    fn fetch_beyond_last_line(&mut self, addr: u64, len: u32, last: u64) -> Outcome {
        self.last_fetched = last;
        if !self.i1.access(addr, len) {
            Outcome::L1Hit
        } else if !self.ll.access(addr, len) {
            Outcome::LlHit
        } else {
            Outcome::LlMiss
        }
    }

    /// A fetch or data access of `size` bytes at `addr` (already clamped,
    /// for data) that missed its first-level cache, kept elsewhere (in the
    /// program's threads): LL alone sees it.
    #[inline]
    pub fn beyond_first_level(&mut self, addr: u64, size: u32) -> Outcome {
        match self.ll.access(addr, size) {
            false => Outcome::LlHit,
            true => Outcome::LlMiss,
        }
    }

    /// Reads `size` bytes at `addr` (one D1 access; `size` is clamped).
    #[inline(always)]
    pub fn read(&mut self, addr: u64, size: u32) -> Outcome {
        self.data(addr, size)
    }

    /// Writes `size` bytes at `addr`; simulated exactly like a read.
    #[inline(always)]
    pub fn write(&mut self, addr: u64, size: u32) -> Outcome {
        self.data(addr, size)
    }

    /// A data access: a hit on D1's most recently used line of its set is
    /// decided inline, anything else out of line.
    #[inline(always)]
    fn data(&mut self, addr: u64, size: u32) -> Outcome {
        let size = self.clamp(size);
        if self.d1.hits_most_recent(addr, size) {
            return Outcome::L1Hit;
        }
        self.data_beyond_most_recent(addr, size)
    }

    /// [`Hierarchy::data`] past its inline check.
    #[inline(never)]
    fn data_beyond_most_recent(&mut self, addr: u64, size: u32) -> Outcome {
        if !self.d1.access(addr, size) {
            Outcome::L1Hit
        } else if !self.ll.access(addr, size) {
            Outcome::LlHit
        } else {
            Outcome::LlMiss
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::CacheConfig;

    /// I1 and D1: 2 sets × 1 way × 16 B; LL: 4 sets × 1 way × 16 B.
    fn small() -> Hierarchy {
        Hierarchy::new(&CachesConfig {
            i1: CacheConfig::new(32, 1, 16),
            d1: CacheConfig::new(32, 1, 16),
            ll: CacheConfig::new(64, 1, 16),
        })
        .unwrap()
    }

    #[test]
    fn ll_is_shared_and_consulted_only_on_l1_miss() {
        let mut h = small();
        assert_eq!(h.fetch(0x100, 4), Outcome::LlMiss);
        assert_eq!(h.fetch(0x104, 4), Outcome::L1Hit);
        // D1 misses, LL has the line from the instruction fetch.
        assert_eq!(h.read(0x108, 8), Outcome::LlHit);
        assert_eq!(h.write(0x108, 8), Outcome::L1Hit);
        // 0x140 maps to LL set 0 like 0x100, so it evicts 0x100 from LL, but the
        // fetch hits I1 and never reaches LL: no back-invalidation.
        assert_eq!(h.read(0x140, 1), Outcome::LlMiss);
        assert_eq!(h.fetch(0x100, 4), Outcome::L1Hit);
        // D1 set 0 now holds 0x140; 0x100 misses D1 and LL.
        assert_eq!(h.read(0x100, 1), Outcome::LlMiss);
    }

    #[test]
    fn a_fetch_within_the_last_fetched_line_hits_only_while_it_is_resident() {
        let mut h = small();
        assert_eq!(h.fetch(0x100, 4), Outcome::LlMiss);
        assert_eq!(h.fetch(0x104, 4), Outcome::L1Hit);
        // 0x120 maps to the same I1 set (one way): it evicts 0x100's line.
        assert_eq!(h.fetch(0x120, 4), Outcome::LlMiss);
        assert_eq!(h.fetch(0x108, 4), Outcome::LlHit);
        // A straddling fetch leaves its second line the last fetched.
        assert_eq!(h.fetch(0x11e, 4), Outcome::LlMiss);
        assert_eq!(h.fetch(0x104, 4), Outcome::LlHit);
        h.clear();
        assert_eq!(h.fetch(0x104, 4), Outcome::LlMiss);
    }

    #[test]
    fn refetching_a_block_hits_exactly_when_its_lines_fit_in_the_sets() {
        // Blocks of 4-byte instructions at 0x100 over one to three 16-byte
        // lines; I1 has two sets of one way.
        for lines in 1..=3 {
            let mut h = small();
            let end = 0x100 + 16 * lines;
            let mut fetch_all = || {
                let fetches = (0x100..end).step_by(4).map(|addr| h.fetch(addr, 4));
                fetches.filter(|&outcome| outcome != Outcome::L1Hit).count()
            };
            fetch_all();
            let missed_again = fetch_all();
            assert_eq!(h.config().i1.refetch_hits(0x100, end - 1), lines <= 2);
            assert_eq!(missed_again == 0, lines <= 2, "{lines} lines");
        }
    }

    #[test]
    fn clamps_large_data_accesses_to_the_smallest_line() {
        let mut h = small();
        assert_eq!(h.clamp(512), 16);
        assert_eq!(h.clamp(8), 8);
        // A 512-byte fxsave at 0x208 touches lines 0x200 and 0x210 only.
        assert_eq!(h.write(0x208, 512), Outcome::LlMiss);
        assert_eq!(h.read(0x210, 16), Outcome::L1Hit);
        assert_eq!(h.read(0x200, 16), Outcome::L1Hit);
        assert_eq!(h.read(0x220, 1), Outcome::LlMiss);
    }

    #[test]
    fn straddle_goes_to_ll_with_both_lines() {
        let mut h = small();
        // Load line 0x10 into D1 set 1 and LL set 1.
        h.read(0x10, 1);
        // Straddles 0x0 (set 0, resident from the start: block 0) and 0x10: hit.
        assert_eq!(h.read(0x0c, 8), Outcome::L1Hit);
        // Straddles 0x30 (D1 set 1, LL set 3) and 0x40 (D1 set 0, LL set 0): both
        // miss D1; LL misses on both.
        assert_eq!(h.read(0x3c, 8), Outcome::LlMiss);
        // Straddles 0x20 (D1 set 0, miss) and 0x30 (D1 set 1, hit): one L1 miss;
        // LL gets (0x2c, 8) — 0x20 misses LL, 0x30 hits — so an LL miss.
        assert_eq!(h.read(0x2c, 8), Outcome::LlMiss);
        assert_eq!(h.read(0x2c, 8), Outcome::L1Hit);
    }

    #[test]
    fn beyond_the_first_level_only_ll_sees_an_access() {
        let (mut whole, mut beyond) = (small(), small());
        // The same misses in LL, whichever first-level cache missed.
        for (addr, size) in [(0x100, 4), (0x140, 1), (0x108, 8), (0x100, 4)] {
            let outcome = whole.read(addr, size);
            if outcome != Outcome::L1Hit {
                assert_eq!(beyond.beyond_first_level(addr, size), outcome);
            }
        }
        // L1 untouched: 0x100's line is still in LL alone.
        assert_eq!(beyond.beyond_first_level(0x100, 4), Outcome::LlHit);
        assert_eq!(beyond.fetch(0x100, 4), Outcome::LlHit);
    }

    #[test]
    fn clear_empties_everything() {
        let mut h = small();
        h.fetch(0x100, 4);
        h.clear();
        assert_eq!(h.fetch(0x100, 4), Outcome::LlMiss);
        assert_eq!(h.config().ll.size, 64);
    }
}
