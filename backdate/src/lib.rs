//! The back-dating tree of cgx: exact inclusive attribution of cache-use metrics
//! that are only known when a cache line is evicted.
//!
//! Nothing here yet: it arrives with issue 5 (cache-use simulation).
