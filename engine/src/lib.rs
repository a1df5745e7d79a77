//! The tracing engine of cgx: starts and controls the tracee with ptrace, decodes
//! its code and turns execution into a stream of events for the collector.
//! See `shared/DESIGN.md`, "Architecture".
//!
//! What exists (issue 4, in progress):
//! - [`step::run`], the first slice of the `step` backend: start a program under
//!   ptrace ([`launch`]), single-step it, decode each instruction with iced-x86
//!   and report it to an [`event::EventSink`], with Valgrind's counting of REP
//!   string instructions. One thread only so far; a block-based backend (issue 6)
//!   will produce the same events (see [`event::EventSink`]).
//! - [`symbols`]: addresses to object, function, source file, line and inlined
//!   frames, from /proc/PID/maps, ELF symbols and DWARF.

pub mod error;
pub mod event;
pub mod launch;
pub mod step;
pub mod symbols;

pub use error::{Error, Result};
pub use event::{EventSink, InstructionCounter};
pub use launch::Command;
pub use step::{Exit, Outcome};
