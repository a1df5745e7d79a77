//! The simulators of cgx, reproducing Valgrind 3.19's numbers exactly:
//!
//! - [`Cache`]: one set-associative true-LRU cache; [`Hierarchy`]: I1, D1 and a
//!   shared LL ([`LastLevelCache`], narrow tags while they can be) as in
//!   Cachegrind and Callgrind's `--cache-sim=yes`.
//! - [`ExtendedHierarchy`]: the same with Callgrind's `--simulate-wb=yes`
//!   (a [`WriteBackCache`] LL and dirty misses) and `--simulate-hwpref=yes`
//!   (the stream [`Prefetcher`] into LL).
//! - [`UseHierarchy`]: Callgrind's `--cacheuse=yes` model, producing
//!   `AcCost1/SpLoss1/AcCost2/SpLoss2` [`Charge`]s for the owner that loaded each
//!   evicted line.
//! - [`CondPredictor`] and [`IndirectPredictor`]: the branch predictors of
//!   `--branch-sim=yes`.
//! - [`CacheConfig`] and [`CachesConfig`]: geometry, `--I1/--D1/--LL` parsing and the
//!   `desc:` header lines; [`cpuid::detect`]: Valgrind's CPUID auto-detection.
//!
//! Everything is per process: a traced program gets its own hierarchy and
//! predictors.

mod branch;
mod cache;
mod caches;
mod cacheuse;
mod config;
pub mod cpuid;
mod extended;
mod last_level;
mod outcome;
mod prefetch;
mod writeback;

pub use branch::{BranchPredictors, CondPredictor, IndirectPredictor};
pub use cache::{Cache, Tag};
pub use caches::Hierarchy;
pub use cacheuse::{
    fetch_mask_of, CacheUseError, Charge, LineChange, Owner, UseEvent, UseHierarchy, NO_OWNER,
};
pub use config::{
    CacheConfig, CacheLevel, CachesConfig, ConfigError, DescStyle, GeometryError, MIN_LINE_SIZE,
};
pub use extended::{ExtendedHierarchy, Extensions};
pub use last_level::LastLevelCache;
pub use outcome::Outcome;
pub use prefetch::Prefetcher;
pub use writeback::{LineResult, WriteBackCache};
