//! The simulators of cgx: I1/D1/LL caches, branch predictors and cache-use metrics.
//!
//! Nothing here yet: it arrives with issue 5 (cache and branch simulation).
