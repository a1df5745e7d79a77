//! The tracing engine of cgx: starts and controls the tracee with ptrace, decodes
//! its code and turns execution into a stream of events for the collector.
//!
//! Nothing here yet: the step backend arrives with issue 4 ("cgx run"), the
//! translate backend with issue 6. See `shared/DESIGN.md`, "Architecture".
