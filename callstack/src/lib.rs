//! The collector of cgx: per-thread shadow call stacks of call arcs with inclusive
//! costs (the global-counter method of the back-dating paper).
//!
//! Nothing here yet: it arrives with issue 4 ("cgx run").
