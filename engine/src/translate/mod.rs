//! The `translate` backend: a code cache inside the
//! tracee. The tracer maps a region into the tracee (`inject`, `layout`),
//! decodes each block as VEX cuts it (`blocks`), writes an instrumented
//! copy into the region (`translator`, `cache`) and runs the tracee there
//! with `PTRACE_CONT`. Each executed block appends a record (translation id,
//! stack pointer) to its thread's buffer (`area`); the tracer replays the records
//! into the sink as the same `block` and `instruction` events the step
//! backend reports (`buffer`). When the run feeds simulations
//! ([`RunOptions::simulations`]) the records also hold what the block's
//! execution did (`capture`: operand addresses, `jcc` outcomes, indirect
//! targets, REP counters), and the replay reports each instruction's data
//! accesses and conditional and indirect branches as the step backend does
//! (the rules are shared: `crate::semantics`). With Cachegrind's cache
//! simulation alone ([`RunOptions::filter`]) blocks count their runs
//! instead, and the program's threads check each fetch and data access
//! against tables of the lines most recently used in their sets: only
//! those that may miss or change the caches are recorded (`filter`); so
//! with Callgrind's cache simulation alone, whose runs are counted as
//! quiet runs (below) and whose filter records name the record of their
//! run, replayed before the blocks.
//! ptrace stops happen only to translate a
//! block the first time an exit reaches it (exits are then linked block to
//! block), on a miss of the in-tracee lookup of indirect targets, when a
//! buffer half is full (the thread goes on in the other half at once, and
//! the full one is replayed while it runs), before a system call that may change code mappings
//! (below), and at the end. Each time it translates a block the tracer
//! also translates ahead along its direct edges (exits through slots, and
//! the return continuation of a call, entered in the lookup table), up to
//! 32 blocks, in protected code only, and links them: most first arrivals
//! then need no stop.
//!
//! Regions: the first region is mapped near the first instruction (ld.so's
//! entry for a dynamically linked program); another one is mapped lazily
//! when execution first reaches code beyond ±2 GB of every region (the
//! main program, the vDSO, a far library). Each has its own lookup
//! routine; all share the first one's indirect-branch table (`table`).
//! The vDSO is translated like any other code. A `syscall` is followed in its translation by a `lea` that puts
//! the original return address back in rcx.
//!
//! Escapes: the program's executable mappings lose PROT_EXEC (`protect`),
//! so a jump to original code faults and is redirected to its translation
//! ([`Outcome::faults`]). Signal handlers are entered by a single step that
//! delivers the signal and return through a landing pad (`signals`), with
//! `signal_handler_entered`/`returned` as the step backend reports them.
//!
//! Threads and processes (`tracer`, `space`, `area`): each thread has its
//! own data area (scratch slots, record cursor, record buffer), which the
//! instrumentation reaches through the GS base the tracer gives the thread
//! (`gs:`-relative operands); threads run at the same time, each stopping
//! on its own (a full buffer half stops only its thread, briefly), and each
//! thread's records are replayed with its `Thread` in its own order when it stops
//! (so threads interleave in the events at those stops). The threads of a
//! process share its code cache; the tracer links exits and fills the
//! lookup table while other threads run (a table entry gets its original
//! address last). A thread's area is reused by the next new thread once it
//! has ended. A forked process is profiled on its own (`forked`, as the
//! step backend reports it) with a copy of the tracer's state of the cache
//! (its memory is a copy); a vforked one runs in its parent's address space
//! and cache (the parent suspended), with an area of its own, until it
//! calls `execve` or exits. `execve` is
//! trapped before the call, the thread's records replayed; then, with
//! [`RunOptions::trace_children`], the new program gets a code cache and
//! is traced on (`exec(pid, true)`), else it is detached (`exec(pid,
//! false)`).
//!
//! What it does and does not do:
//! - a program that uses the `gs` segment (runs a `gs:` operand, the
//!   selector, `rdgsbase`/`wrgsbase`, `arch_prctl(ARCH_SET_GS)`) ends the
//!   run with an error; so does a `clone` of a process sharing the memory
//!   without `vfork` (`CLONE_VM` without `CLONE_THREAD`/`CLONE_VFORK`), and
//!   a `clone`/`fork`/`execve` in a block the translator refuses (stepped).
//! - the tracer is pinned to its CPU; the thread it last resumed to wait
//!   for it runs on that CPU, every other thread (and one whose full
//!   buffer half the tracer replays) on its own CPUs (`placement`; the
//!   program reads and sets its own CPUs as without cgx).
//! - a thread's last records are replayed at its exit stop
//!   (`PTRACE_EVENT_EXIT`, which the kernel makes for every thread, those
//!   an `exit_group`, a fatal signal or an `execve` ends included).
//! - reports blocks (address, stack pointer, arrival) and instructions,
//!   and with [`RunOptions::simulations`] data accesses and conditional and
//!   indirect branches (Callgrind's or, with [`RunOptions::superblocks`],
//!   Cachegrind's outcomes). A signal that interrupts the middle of a
//!   translated block has the instructions that ran reported before the
//!   handler and the rest after it, as a block of its own (see
//!   `signals`), as the step backend reports them.
//! - REP string instructions run one iteration per pass through their
//!   translation, each pass a record (one block of one instruction, as in
//!   Valgrind); a 32-bit counter (address-size prefix) is refused.
//! - a `cpuid` the tracer answers (Valgrind's processor, see
//!   [`crate::cpuid`]) is an `int3` in its translation, answered at that
//!   trap; with the host's processor it runs as it is.
//! - refused blocks (`loop`/`jrcxz` side exits, the client-request marker,
//!   `int`/`int3`/`ud2`/`hlt`/`iret`/far
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
//!   code are seen. Code whose bytes may change with no such call
//!   (writable, shared, or memfd mappings: `protect`) is checked at each
//!   entry of its translations against the bytes they were made from
//!   (`translator`); a changed block traps, its translations are dropped
//!   and it is translated anew, in the same space when no thread can be in
//!   the old one (`Cache::retire`). Not seen: code rewritten by the kernel
//!   or another process in a read-only private file mapping, `brk`,
//!   `shmat`/`shmdt`, system calls made by stepped (refused) blocks, and a
//!   signal arriving while the tracer runs a watched call (an error).
//! - a direct exit to a translation in another region out of rel32 reach
//!   is not linked (it traps each time).

mod ahead;
mod area;
mod blocks;
mod buffer;
mod by_code;
pub use buffer::{FilteredAccesses, Repeats, SimulatedBlocks, WholeBlocks};
mod cache;
mod capture;
mod dead;
mod deferred;
mod emit;
mod encode;
mod filter;
pub use filter::{fetch_points, FilterGeometry, L1Filter};
mod flags;
mod inject;
mod interned;
mod invalidate;
mod layout;
mod memory;
mod parts;
mod pending;
mod placement;
mod plan;
pub(crate) use plan::PlannedAccess;
pub(crate) use plan::RunPlan;
mod protect;
mod quiet;
mod records;
mod retire;
#[cfg(test)]
mod running;
mod signals;
mod space;
mod stepper;
mod stops;
mod table;
mod timing;
mod tracer;
mod translator;
mod writes;

use crate::error::Result;
use crate::event::{EventSink, Exit};
use crate::launch::{self, Command, CpuPin};
use crate::relay::Relay;
use crate::step::RunOptions;

/// What a run of the translate backend reports besides the events.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Outcome {
    /// How the initial process ended.
    pub exit: Exit,
    /// Instructions reported to the sink (Valgrind's `Ir`).
    pub instructions: u64,
    /// ptrace stops of the tracee while it runs translated code (traps,
    /// buffer faults, events; the single-steps are in `steps`).
    pub stops: u64,
    /// Blocks translated (in all address spaces).
    pub translations: u64,
    /// Executions of blocks the translator refused (single-stepped).
    pub stepped_blocks: u64,
    /// Single-steps taken for them.
    pub steps: u64,
    /// Times a thread's record buffer was drained.
    pub drains: u64,
    /// Executed translated blocks replayed (records, and runs counted in
    /// the tracee).
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
    /// Threads' data areas mapped (a thread that leaves its address space
    /// gives its area back for the next new thread).
    pub areas: u64,
}

/// Runs `command` to completion under the translate backend, reporting the
/// blocks and instructions it executes to `sink` (the same sequence as
/// [`crate::step::run`] per thread; see the module documentation for what
/// it covers). All of `options` are followed.
///
/// Like the step backend, the calling thread is pinned to its CPU while the
/// run lasts and signals sent to the calling process are relayed to the
/// program. The program is started before the pin, with the caller's CPUs
/// as its own (`placement` says where its threads run).
pub fn run<S: EventSink + ?Sized>(
    command: &Command,
    options: &RunOptions,
    sink: &mut S,
) -> Result<Outcome> {
    let mut relay = Relay::install();
    let mut tracee = launch::spawn(command)?;
    relay.target(tracee.pid);
    let _pin = CpuPin::pin_current_thread();
    let tracer = tracer::Tracer::new(sink, tracee.pid, options);
    // After the tracer took the program: nothing comes between its start
    // and its tracing options, so a program killed at once ends the run.
    if let (Ok(_), Ok(program)) = (&tracer, launch::resolve(command.program())) {
        crate::symbols::prefetch_needed(&program);
    }
    let result = tracer.and_then(tracer::Tracer::run);
    if result.is_ok() {
        tracee.finished();
    }
    result
}
