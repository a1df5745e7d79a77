//! The tracing engine of cgx: starts and controls the tracee with ptrace, decodes
//! its code and turns execution into a stream of events for the collector.
//! See `shared/DESIGN.md`, "Architecture".
//!
//! What it has:
//! - [`step::run`], the `step` backend: start a program under ptrace
//!   ([`launch`]), single-step every thread of every traced process, decode
//!   each instruction with iced-x86 and report Valgrind's blocks and their
//!   instructions, threads, forks, execs, signal handlers, client requests
//!   and exits to an [`event::EventSink`], with each instruction's data
//!   accesses and conditional and indirect branches as Valgrind's cache and
//!   branch simulations see them. Decoded instructions are cached per
//!   address and dropped when code is rewritten (stores of the tracee),
//!   unmapped or remapped, and on `execve` (see [`step`], "Decoded code").
//!   The rules for accesses and branches are shared with the block-based
//!   [`translate`] backend, which produces the same events (see
//!   [`event::EventSink`]).
//! - [`symbols`]: addresses to object, function, source file and line, from
//!   /proc/PID/maps, ELF symbols and DWARF line tables.

mod auxv;
mod control;
pub mod cpuid;
pub mod error;
pub mod event;
mod flow;
mod jobs;
pub mod launch;
pub mod pattern;
mod prefetch;
mod preflight;
mod ptrace;
mod refusals;
mod relay;
mod resume;
mod semantics;
pub mod step;
pub mod symbols;
pub mod system_time;
pub mod translate;

pub use control::control_signal;
pub use error::{Error, Result};
pub use event::{
    AccessKind, Ahead, Arrival, Block, BlockEvent, DataAccess, EventSink, Exit, FilteredAccess,
    InstructionCounter, Lifecycle, NoAhead, Place, Repeat, SimulatedBlock, SystemCall, Thread,
    WholeBlock,
};
pub use launch::Command;
pub use prefetch::prefetch;
pub use step::{Outcome, RunOptions};
pub use system_time::SystemCallClocks;
pub use translate::{fetch_points, FilterGeometry, FilteredAccesses, L1Filter};
pub use translate::{Repeats, SimulatedBlocks, WholeBlocks};
