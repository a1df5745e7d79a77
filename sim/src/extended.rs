//! The I1/D1/LL hierarchy of Callgrind's `--simulate-wb=yes` and
//! `--simulate-hwpref=yes` (each with `--cache-sim=yes`), as Valgrind 3.19
//! simulates them.
//!
//! I1 and D1 are the plain caches of [`crate::Hierarchy`]. With write-back
//! LL is a [`WriteBackCache`]: L1 is write-through, so every write reaches LL
//! (a D1 write hit makes the LL line dirty there and still counts as an L1
//! hit), and a miss evicting a dirty LL line is reported as
//! [`Outcome::LlMissDirty`]. Without write-back LL is a plain [`Cache`] and
//! a write is simulated like a read.
//!
//! With the prefetch, every access that misses L1 first shows its address
//! to the [`Prefetcher`], which may reference a line ahead in LL; with
//! write-back as well, a write shows its address before D1 is looked at,
//! hit or miss.

use crate::cache::Cache;
use crate::config::{CacheLevel, CachesConfig, GeometryError};
use crate::outcome::Outcome;
use crate::prefetch::Prefetcher;
use crate::writeback::{LineResult, WriteBackCache};

/// Which of Callgrind's extra cache behaviours a simulation has.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Extensions {
    /// `--simulate-wb=yes`: a write-back LL and dirty misses.
    pub write_back: bool,
    /// `--simulate-hwpref=yes`: the stream prefetcher into LL.
    pub prefetch: bool,
}

/// The last-level cache of a [`ExtendedHierarchy`].
#[derive(Clone, Debug)]
enum LastLevel {
    Plain(Cache),
    WriteBack(WriteBackCache),
}

impl LastLevel {
    /// References `size` bytes at `addr`, written or not.
    fn access(&mut self, addr: u64, size: u32, write: bool) -> Outcome {
        match self {
            LastLevel::Plain(cache) => match cache.access(addr, size) {
                false => Outcome::LlHit,
                true => Outcome::LlMiss,
            },
            LastLevel::WriteBack(cache) => match cache.access(addr, size, write) {
                LineResult::Hit => Outcome::LlHit,
                LineResult::Miss => Outcome::LlMiss,
                LineResult::MissDirty => Outcome::LlMissDirty,
            },
        }
    }

    /// The prefetch of the line holding `addr`.
    fn prefetch(&mut self, addr: u64) {
        match self {
            LastLevel::Plain(cache) => {
                cache.access(addr, 1);
            }
            LastLevel::WriteBack(cache) => cache.prefetch(addr),
        }
    }

    fn clear(&mut self) {
        match self {
            LastLevel::Plain(cache) => cache.clear(),
            LastLevel::WriteBack(cache) => cache.clear(),
        }
    }
}

/// I1, D1 and an LL with write-back, prefetch or both.
#[derive(Clone, Debug)]
pub struct ExtendedHierarchy {
    config: CachesConfig,
    extensions: Extensions,
    i1: Cache,
    d1: Cache,
    ll: LastLevel,
    prefetcher: Option<Prefetcher>,
    min_line: u32,
}

impl ExtendedHierarchy {
    /// Empty caches of the given geometry with `extensions`; the error names
    /// the first bad cache.
    pub fn new(
        config: &CachesConfig,
        extensions: Extensions,
    ) -> Result<ExtendedHierarchy, (CacheLevel, GeometryError)> {
        let make = |level| Cache::new(config.get(level)).map_err(|e| (level, e));
        let ll = if extensions.write_back {
            let ll = WriteBackCache::new(config.ll).map_err(|e| (CacheLevel::LL, e))?;
            LastLevel::WriteBack(ll)
        } else {
            LastLevel::Plain(make(CacheLevel::LL)?)
        };
        Ok(ExtendedHierarchy {
            config: *config,
            extensions,
            i1: make(CacheLevel::I1)?,
            d1: make(CacheLevel::D1)?,
            ll,
            prefetcher: extensions
                .prefetch
                .then(|| Prefetcher::new(config.ll.line_size)),
            min_line: config.min_line_size(),
        })
    }

    /// The geometry.
    pub fn config(&self) -> &CachesConfig {
        &self.config
    }

    /// The behaviours simulated.
    pub fn extensions(&self) -> Extensions {
        self.extensions
    }

    /// The prefetches made upward and downward (zeros without prefetch).
    pub fn prefetch_counts(&self) -> (u64, u64) {
        self.prefetcher.as_ref().map_or((0, 0), Prefetcher::counts)
    }

    /// Empties the caches and forgets the prefetch streams (as Callgrind
    /// does when instrumentation is switched on or off).
    pub fn clear(&mut self) {
        self.i1.clear();
        self.d1.clear();
        self.ll.clear();
        if let Some(prefetcher) = &mut self.prefetcher {
            prefetcher.clear();
        }
    }

    /// Shows `addr` to the prefetcher, which may prefetch into LL.
    fn observe(&mut self, addr: u64) {
        if let Some(prefetcher) = &mut self.prefetcher {
            if let Some(target) = prefetcher.observe(addr) {
                self.ll.prefetch(target);
            }
        }
    }

    /// Fetches the `len` bytes of one instruction at `addr`.
    pub fn fetch(&mut self, addr: u64, len: u32) -> Outcome {
        if !self.i1.access(addr, len) {
            return Outcome::L1Hit;
        }
        self.observe(addr);
        self.ll.access(addr, len, false)
    }

    /// Reads `size` bytes at `addr` (`size` clamped to the smallest line).
    pub fn read(&mut self, addr: u64, size: u32) -> Outcome {
        let size = size.min(self.min_line);
        if !self.d1.access(addr, size) {
            return Outcome::L1Hit;
        }
        self.observe(addr);
        self.ll.access(addr, size, false)
    }

    /// Writes `size` bytes at `addr` (`size` clamped to the smallest line).
    pub fn write(&mut self, addr: u64, size: u32) -> Outcome {
        if !self.extensions.write_back {
            return self.read(addr, size);
        }
        let size = size.min(self.min_line);
        self.observe(addr);
        let l1_hit = !self.d1.access(addr, size);
        let outcome = self.ll.access(addr, size, true);
        if l1_hit {
            Outcome::L1Hit
        } else {
            outcome
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::CacheConfig;
    use crate::Hierarchy;

    /// I1 and D1: 2 sets × 1 way × 16 B; LL: 2 sets × 2 ways × 16 B.
    fn config() -> CachesConfig {
        CachesConfig {
            i1: CacheConfig::new(32, 1, 16),
            d1: CacheConfig::new(32, 1, 16),
            ll: CacheConfig::new(64, 2, 16),
        }
    }

    fn with(write_back: bool, prefetch: bool) -> ExtendedHierarchy {
        let extensions = Extensions {
            write_back,
            prefetch,
        };
        ExtendedHierarchy::new(&config(), extensions).unwrap()
    }

    #[test]
    fn a_write_hit_in_d1_dirties_the_ll_line() {
        let mut h = with(true, false);
        assert_eq!(h.read(0x40, 4), Outcome::LlMiss); // LL set 0: [0x40, 0]
        assert_eq!(h.write(0x44, 4), Outcome::L1Hit); // LL: [0x40d, 0]
                                                      // Two more lines of LL set 0 (D1 set 0 too) evict 0x40, dirty.
        assert_eq!(h.read(0x80, 1), Outcome::LlMiss);
        assert_eq!(h.read(0xc0, 1), Outcome::LlMissDirty);
        assert!(h.read(0xc0, 1) == Outcome::L1Hit);
    }

    #[test]
    fn without_write_back_a_write_is_a_read() {
        let mut h = with(false, false);
        h.read(0x40, 4);
        assert_eq!(h.write(0x44, 4), Outcome::L1Hit);
        h.read(0x80, 1);
        assert_eq!(h.read(0xc0, 1), Outcome::LlMiss);
    }

    #[test]
    fn instruction_misses_can_evict_dirty_lines() {
        let mut h = with(true, false);
        assert_eq!(h.write(0x40, 1), Outcome::LlMiss); // LL set 0: [0x40d, 0]
        assert_eq!(h.fetch(0x80, 4), Outcome::LlMiss);
        assert_eq!(h.fetch(0xc0, 4), Outcome::LlMissDirty);
    }

    #[test]
    fn the_prefetch_loads_lines_ahead_of_an_upward_stream() {
        // LL of 64 KiB so that prefetched lines stay.
        let config = CachesConfig {
            ll: CacheConfig::new(65536, 4, 16),
            ..config()
        };
        let extensions = Extensions {
            write_back: false,
            prefetch: true,
        };
        let mut h = ExtendedHierarchy::new(&config, extensions).unwrap();
        let mut plain = Hierarchy::new(&config).unwrap();
        let base = 0x10_0000;
        // Blocks 0, 1, 2 of the stream: the third prefetches block 7.
        for block in 0..3 {
            assert_eq!(h.read(base + block * 16, 1), Outcome::LlMiss);
        }
        assert_eq!(h.prefetch_counts(), (1, 0));
        assert_eq!(h.read(base + 7 * 16, 1), Outcome::LlHit);
        assert_eq!(plain.read(base + 7 * 16, 1), Outcome::LlMiss);
        h.clear();
        assert_eq!(h.read(base + 7 * 16, 1), Outcome::LlMiss);
    }

    #[test]
    fn with_write_back_every_write_feeds_the_prefetcher() {
        let config = CachesConfig {
            ll: CacheConfig::new(65536, 4, 16),
            ..config()
        };
        let base = 0x10_0000;
        // The same accesses with prefetch, without and with write-back.
        let prefetches = |write_back| {
            let extensions = Extensions {
                write_back,
                prefetch: true,
            };
            let mut h = ExtendedHierarchy::new(&config, extensions).unwrap();
            h.read(base + 16, 1); // a D1 miss; stream at block 1, no run
            h.read(base, 1); // a D1 miss; run -1
            assert_eq!(h.write(base + 16, 1), Outcome::L1Hit);
            h.write(base + 32, 1); // a D1 miss
            h.write(base + 48, 1); // a D1 miss
            h.prefetch_counts()
        };
        // Without write-back the stream sees 1, 0, 2, 3: no run of 2.
        assert_eq!(prefetches(false), (0, 0));
        // With it the D1 hit is seen too: 1, 0, 1, 2, 3, a run of 2 at 3.
        assert_eq!(prefetches(true), (1, 0));
    }

    #[test]
    fn rejects_a_bad_ll() {
        let bad = CachesConfig {
            ll: CacheConfig::new(96, 2, 16),
            ..config()
        };
        let error = ExtendedHierarchy::new(&bad, Extensions::default()).unwrap_err();
        assert_eq!(error.0, CacheLevel::LL);
        assert!(ExtendedHierarchy::new(
            &bad,
            Extensions {
                write_back: true,
                prefetch: false
            }
        )
        .is_err());
    }
}
