//! The `translate` backend (issue 6, first slice): a code cache inside the
//! tracee. The tracer maps a region into the tracee (`inject`, `layout`),
//! decodes each block as VEX cuts it (`blocks`), writes an instrumented
//! copy into the region (`translator`, `cache`) and runs the tracee there
//! with `PTRACE_CONT`. Each executed block appends a record (translation id,
//! stack pointer) to a buffer in the region; the tracer replays the records
//! into the sink as the same `block` and `instruction` events the step
//! backend reports (`buffer`). When the run feeds simulations
//! ([`RunOptions::simulations`]) the records also hold what the block's
//! execution did (`capture`: operand addresses, `jcc` outcomes, indirect
//! targets, REP counters), and the replay reports each instruction's data
//! accesses and conditional and indirect branches as the step backend does
//! (the rules are shared: `crate::semantics`). ptrace stops happen only to translate a
//! block the first time an exit reaches it (exits are then linked block to
//! block), on a miss of the in-tracee lookup of indirect targets, when the
//! buffer is full, before a system call that may change code mappings
//! (below), and at the end. Each time it translates a block the tracer
//! also translates ahead along its direct edges (exits through slots, and
//! the return continuation of a call, entered in the lookup table), up to
//! 32 blocks, in protected code only, and links them: most first arrivals
//! then need no stop.
//!
//! Regions: the first region is mapped near the first instruction (ld.so's
//! entry for a dynamically linked program); another one is mapped lazily
//! when execution first reaches code beyond ±2 GB of every region (the
//! main program, the vDSO, a far library). Each has its own scratch slots
//! and lookup routine; all share the first one's record buffer, cursor and
//! indirect-branch table (`layout`). The vDSO is translated like any other
//! code. A `syscall` is followed in its translation by a `lea` that puts
//! the original return address back in rcx.
//!
//! Escapes: the program's executable mappings lose PROT_EXEC (`protect`),
//! so a jump to original code faults and is redirected to its translation
//! ([`Outcome::faults`]). Signal handlers are entered by a single step that
//! delivers the signal and return through a landing pad (`signals`), with
//! `signal_handler_entered`/`returned` as the step backend reports them.
//!
//! What this slice does and does not do:
//! - single-threaded programs only; `clone`/`fork`/`vfork`/`execve` end the
//!   run with an error.
//! - reports blocks (address, stack pointer, arrival) and instructions,
//!   and with [`RunOptions::simulations`] data accesses and conditional and
//!   indirect branches (Callgrind's or, with [`RunOptions::superblocks`],
//!   Cachegrind's outcomes). A signal that interrupts the middle of a
//!   translated block has the whole block reported (see `signals`), its
//!   unrecorded words included (the addresses then are garbage).
//! - REP string instructions run one iteration per pass through their
//!   translation, each pass a record (one block of one instruction, as in
//!   Valgrind); a 32-bit counter (address-size prefix) is refused.
//! - refused blocks (`loop`/`jrcxz` side exits, the client-request marker,
//!   `cpuid` (answered by the tracer), `int`/`int3`/`ud2`/`hlt`/`iret`/far
//!   transfers, operands out of reach of the cache, and with simulations operands whose address `capture`
//!   cannot record: vector indexes, 32-bit addressing, `fs`/`gs` without
//!   FSGSBASE) are single-stepped from their original code, made
//!   executable for the steps ([`Outcome::stepped_blocks`]), with the
//!   step backend's events.
//! - invalidation (`invalidate`): the translation of `syscall` traps
//!   before `mmap`, `mprotect`, `pkey_mprotect`, `munmap`, `mremap`,
//!   `remap_file_pages` and discarding `madvise` (a flag-free check of the
//!   number in a table); the tracer runs the call, drops the translations
//!   of the changed range (links and lookup-table entries too) and takes
//!   PROT_EXEC again from what became executable (a program's own
//!   `mprotect(PROT_EXEC)`). So a JIT's write-then-mprotect and remapped
//!   code are seen. Not seen: stores into translated code with no watched
//!   call between the store and the next execution (self-modifying code in
//!   a writable and executable mapping), code rewritten by the kernel (`read`, `pwrite` into a shared mapping
//!   without remapping), `brk`, `shmat`/`shmdt`, system calls made by
//!   stepped (refused) blocks, and a signal arriving while the tracer runs
//!   a watched call (an error).
//! - a direct exit to a translation in another region out of rel32 reach
//!   is not linked (it traps each time).

mod blocks;
mod buffer;
mod cache;
mod capture;
mod inject;
mod invalidate;
mod layout;
mod memory;
mod protect;
mod signals;
mod stepper;
mod tracer;
mod translator;

use crate::auxv;
use crate::error::Result;
use crate::event::{EventSink, Exit};
use crate::launch::{self, Command, CpuPin, InterruptGuard};
use crate::ptrace;
use crate::step::RunOptions;

/// What a run of the translate backend reports besides the events.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Outcome {
    /// How the process ended.
    pub exit: Exit,
    /// Instructions reported to the sink (Valgrind's `Ir`).
    pub instructions: u64,
    /// ptrace stops of the tracee while it runs translated code (traps,
    /// buffer faults, events; the single-steps are in `steps`).
    pub stops: u64,
    /// Blocks translated.
    pub translations: u64,
    /// Executions of blocks the translator refused (single-stepped).
    pub stepped_blocks: u64,
    /// Single-steps taken for them.
    pub steps: u64,
    /// Times the record buffer was drained.
    pub drains: u64,
    /// Records (executed translated blocks) replayed.
    pub records: u64,
    /// Faults of the tracee on original code (an escape from the code
    /// cache, redirected to the translation).
    pub faults: u64,
    /// Executable mappings of the program made non-executable (see
    /// "Escapes" above).
    pub protected: u64,
    /// Translations dropped because their code may have changed (see
    /// `invalidate`).
    pub invalidated: u64,
    /// Code-cache regions mapped (one per group of code mappings within
    /// ±2 GB of each other).
    pub regions: u64,
}

/// Runs `command` to completion under the translate backend, reporting the
/// blocks and instructions it executes to `sink` (the same sequence as
/// [`crate::step::run`]; see the module documentation for what this first
/// slice covers). Of `options`, `simulations`, `superblocks` and
/// `valgrind_machine` are followed; `trace_children` does not matter (`execve` is not supported).
///
/// Like the step backend, the calling thread is pinned to its CPU while the
/// run lasts and the calling process ignores SIGINT and SIGQUIT.
pub fn run<S: EventSink + ?Sized>(
    command: &Command,
    options: &RunOptions,
    sink: &mut S,
) -> Result<Outcome> {
    let _pin = CpuPin::pin_current_thread();
    let _interrupts = InterruptGuard::ignore();
    let mut tracee = launch::spawn(command)?;
    if options.valgrind_machine {
        auxv::hide_vdso(tracee.pid, ptrace::regs(tracee.pid)?.rsp)?;
    }
    let result = tracer::Tracer::new(sink, tracee.pid, options).and_then(tracer::Tracer::run);
    if result.is_ok() {
        tracee.finished();
    }
    result
}
