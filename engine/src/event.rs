//! The events a backend produces for the collector.
//!
//! A backend reports execution as a sequence of basic blocks, each followed by
//! its executed instructions, tagged with the thread that ran them. The blocks
//! are Valgrind's (VEX's, with block chasing off, as Callgrind runs it): a block
//! starts where control arrives and ends after the first instruction that may
//! transfer control (jump, conditional jump, call, return, system call,
//! `int`/`ud2`/`hlt`/`pause`, the client-request marker, a taken `loop`/`jrcxz`),
//! after each iteration of a REP string instruction, or after 60 instructions
//! (VEX's `guest_max_insns` in Valgrind 3.19). This is what the collector needs
//! to apply Callgrind's call/return rules at the same points as Callgrind.
//!
//! A block-based backend (the `translate` backend) produces the same
//! sequence: for each executed block one [`EventSink::block`] and then the
//! block's instructions (known from decoding it once) up to the one where the
//! block was left, so a sink cannot tell the backends apart.

use crate::translate::{FilteredAccesses, RunPlan, SimulatedBlocks, WholeBlocks};

/// A thread of a traced process.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Thread {
    /// The process (thread group) id.
    pub pid: i32,
    /// The thread id (equal to `pid` for the main thread).
    pub tid: i32,
}

impl Thread {
    /// Process `pid` itself: its main thread.
    pub fn of_process(pid: i32) -> Thread {
        Thread { pid, tid: pid }
    }
}

/// How control arrived at a block: the kind of the exit the thread's previous
/// block took (Callgrind's jump kinds).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Arrival {
    /// The thread's first block: a new process, a new thread, a new program
    /// after `execve`, or the first block of a signal handler.
    Start,
    /// Fall-through to the next instruction: a conditional jump not taken, or
    /// a block that ended without a transfer (system call, REP iteration, the
    /// block-length limit).
    FallThrough,
    /// A taken jump, direct or indirect.
    Jump {
        /// Whether the jump was conditional (`jcc`, `loop`, `jrcxz`).
        conditional: bool,
    },
    /// A call instruction; its return address is `from` plus its length.
    Call,
    /// A return instruction.
    Return,
}

/// Where a block is for a sink's rules of calls and contexts
/// ([`EventSink::place`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Place {
    /// The sink's number for the code the block is in: a fall-through or
    /// a jump between blocks of one region may keep the thread's context.
    pub region: u32,
    /// Whether the block starts a function: no jump to it keeps the
    /// context.
    pub starts_function: bool,
    /// Whether the block's function costs its caller (`--fn-skip`, a
    /// PLT stub): no call to it is reported as repeated with its caller
    /// ([`Repeat::Calls`]).
    pub skipped: bool,
}

impl Place {
    /// Whether a fall-through or a jump from a block at `self` to a block
    /// at `to` may keep the thread's context.
    pub fn continues_to(&self, to: &Place) -> bool {
        to.region == self.region && !to.starts_function
    }
}

/// The start of an executed block.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Block {
    /// Address of the block's first instruction.
    pub addr: u64,
    /// The stack pointer when the block starts (after the transfer that led
    /// here, e.g. after a call pushed its return address).
    pub sp: u64,
    /// How control arrived here.
    pub arrival: Arrival,
}

/// A whole block in a batch of blocks one thread ran
/// ([`EventSink::blocks_executed`]).
#[derive(Clone, Copy, Debug)]
pub struct WholeBlock<'a> {
    /// The backend's number for the block's code: within one process the
    /// same key always means the same address and instructions (a forked
    /// child inherits its parent's keys).
    pub key: u32,
    /// Its start.
    pub block: Block,
    /// All of its instructions (address, length), in order.
    pub instructions: &'a [(u64, u8)],
    /// How many more times it runs whole: right after, each time jumping
    /// back from its last instruction to its start (a loop of one block),
    /// or, with `RunOptions::quiet_runs`, later, each arriving by a jump or
    /// fall-through the sink said keeps the thread's context
    /// ([`EventSink::place`]) in the context of this run (see there).
    pub repeats: u64,
    /// The start of each of those runs (the same address and stack
    /// pointer, arriving as from the block's own end).
    pub again: Block,
    /// How those runs relate to this one.
    pub repeat: Repeat,
    /// With `RunOptions::filter`, the data accesses every run makes (their
    /// addresses are not known: 0).
    pub(crate) accesses: &'a [crate::translate::PlannedAccess],
    /// With `RunOptions::filter` and quiet runs, its record, which the
    /// [`FilteredAccess::record`] of its runs' fetches and accesses name,
    /// reported before it ([`EventSink::accesses_filtered`]); else 0.
    pub record: u64,
}

impl<'a> WholeBlock<'a> {
    /// With `RunOptions::filter`, the data accesses each run makes, each
    /// with the number of the instruction it follows, in order (their
    /// addresses are not known: 0); none otherwise.
    pub fn accesses(&self) -> impl Iterator<Item = (usize, DataAccess)> + 'a {
        self.accesses
            .iter()
            .map(|access| (access.position(), access.at(0)))
    }
}

/// A fetch or data access that missed I1 or D1, which the backend keeps
/// (`RunOptions::filter`), for the cache simulation to take to LL.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FilteredAccess {
    /// The instruction (address, length).
    pub instruction: (u64, u8),
    /// Its data access, or `None` for its fetch.
    pub access: Option<DataAccess>,
    /// With quiet runs, the record of the run it belongs to, reported
    /// after it ([`WholeBlock::record`]); 0 when the run is the thread's
    /// last block reported (or Cachegrind's, which has no runs).
    pub record: u64,
}

/// How the repeats of a [`WholeBlock`] ran.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Repeat {
    /// Each arriving as [`WholeBlock::again`] says: by the block's jump
    /// back to its start, or by a jump or fall-through that keeps the
    /// thread's context.
    Again,
    /// With `RunOptions::quiet_runs`, each in the context of this run,
    /// however it arrived (by a call to the block's function, a return
    /// into it): one more run of the block there, adding its cost and
    /// nothing else.
    InContext,
    /// [`Repeat::InContext`] for a block ending in a call, each run
    /// followed by the same call, whole: the same callee in the same
    /// context, returning to the same place, its costs counted in the
    /// records of this run's call. The call this run makes (the arrival
    /// of the next block reported) counts these calls too.
    Calls,
}

impl WholeBlock<'_> {
    /// The start of each of its runs: its first, then `repeats` times
    /// `again` (meaningful for [`Repeat::Again`] alone).
    pub fn starts(&self) -> impl Iterator<Item = Block> {
        std::iter::once(self.block).chain(std::iter::repeat_n(self.again, self.repeats as usize))
    }
}

/// A data access or branch of an instruction ([`EventSink::instruction_event`],
/// and in batches of a [`SimulatedBlock`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BlockEvent {
    /// A data access.
    Access(DataAccess),
    /// A conditional branch was evaluated: a `jcc`, `loop`, `jrcxz`, or the
    /// per-iteration checks of a REP string instruction; its outcome as
    /// Callgrind feeds it to its predictor (for a `jcc`, whether it jumped;
    /// for the count check of plain `rep`, whether an iteration follows; of
    /// REPE/REPNE, whether rcx was zero; see the step backend's `branches`),
    /// or as Cachegrind sees them with `RunOptions::superblocks`.
    Conditional(bool),
    /// The indirect jump or call (not return) went to this target.
    Indirect(u64),
    /// An atomic read-modify-write of memory ran (a `lock`-prefixed
    /// instruction, or `xchg` with a memory operand): one of Callgrind's
    /// global bus events (`Ge`).
    Bus,
}

/// One system call the program made, timed ([`EventSink::system_call`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SystemCall {
    /// Its number (rax at the `syscall`).
    pub number: u64,
    /// `CLOCK_MONOTONIC` when it started, in nanoseconds; 0 when it was
    /// not measured: by the translate backend, a call whose record was
    /// replayed before it returned (`fork`, `vfork` and `clone`, replayed
    /// at their event stop) or that does not return to its block
    /// (`rt_sigreturn`, `exit`; a successful `execve` is not reported).
    pub wall_start_ns: u64,
    /// `CLOCK_MONOTONIC` when it ended, in nanoseconds; 0 when it was not
    /// measured.
    pub wall_end_ns: u64,
    /// The CPU time the thread ran during it, in nanoseconds (0 unless the
    /// run reads it, `SystemCallClocks::WallAndCpu`).
    pub cpu_ns: u64,
}

impl SystemCall {
    /// The call `number` between two readings of the clocks (the end's
    /// earlier than the start's, as a thread's CPU time read from two
    /// sources may be, counts as no time).
    pub(crate) fn between(
        number: u64,
        start: crate::system_time::Reading,
        end: crate::system_time::Reading,
    ) -> SystemCall {
        SystemCall {
            number,
            wall_start_ns: start.wall_ns,
            wall_end_ns: end.wall_ns.max(start.wall_ns),
            cpu_ns: end.cpu_ns.saturating_sub(start.cpu_ns),
        }
    }
}

/// What happens to a thread or a process besides running code
/// ([`EventSink::lifecycle`]).
#[derive(Clone, Copy, Debug)]
pub enum Lifecycle<'a> {
    /// The kernel delivered this signal and the thread enters the handler;
    /// its next block (arrival [`Arrival::Start`]) is the handler's first.
    SignalEntered(i32),
    /// The thread returned from its innermost signal handler
    /// (`rt_sigreturn`); its next block continues the interrupted code.
    SignalReturned,
    /// The thread is new (its first block follows): a thread the program
    /// made, or the program's first when the run starts.
    ThreadStarted,
    /// The thread ended (the process goes on, unless it was its last).
    ThreadExited,
    /// The thread forked (or vforked): the new process with this pid
    /// continues with a copy of its state, and its events follow with that
    /// pid.
    Forked(i32),
    /// The process replaced its program with `execve` of `program` (empty
    /// if unknown); it is traced on only if the engine was asked to trace
    /// children (`traced`).
    Exec {
        /// The new program.
        program: &'a std::path::Path,
        /// The name `execve` was given (the translate backend) or the
        /// program's file (the step backend).
        name: &'a str,
        /// Its arguments after the first.
        args: &'a [String],
        /// Whether the engine traces it.
        traced: bool,
    },
    /// The process ended.
    ProcessExited(Exit),
    /// A request from outside the run reached the thread (see
    /// [`crate::control_signal`]): it is stopped with all its events
    /// reported, the moment to serve the request.
    Control,
}

/// A whole block run in a batch of blocks one thread ran, with what its
/// instructions did for the simulations ([`EventSink::blocks_simulated`]).
#[derive(Clone, Copy, Debug)]
pub struct SimulatedBlock<'a> {
    /// The backend's number for the block's code and the events of its
    /// runs (as [`WholeBlock::key`]; the same key also means the same
    /// kinds of events in the same order, so the last pass of a REP
    /// string instruction, which only finds its counter zero, has a key
    /// of its own).
    pub key: u32,
    /// Its start.
    pub block: Block,
    /// All of its instructions (address, length), in order.
    pub instructions: &'a [(u64, u8)],
    /// Its events, the same for every run of the block.
    pub(crate) plan: &'a RunPlan,
    /// What this run recorded.
    pub(crate) words: &'a [u64],
    /// Whether its branches are reported (`RunOptions::branches`).
    pub(crate) branches: bool,
}

impl<'a> SimulatedBlock<'a> {
    /// Its data accesses, atomic read-modify-writes and branches (only
    /// with `RunOptions::branches`),
    /// each with the number of the instruction (in
    /// [`SimulatedBlock::instructions`]) it follows, in the order
    /// [`EventSink`] reports them.
    #[inline]
    pub fn events(&self) -> impl Iterator<Item = (usize, BlockEvent)> + 'a {
        let (words, branches) = (self.words, self.branches);
        self.plan
            .events
            .iter()
            .filter(move |planned| branches || !planned.is_branch())
            .map(move |planned| (planned.instruction as usize, planned.event(words)))
    }

    /// Its data accesses alone, each with the number of the instruction it
    /// follows, in order (the accesses of [`SimulatedBlock::events`]).
    #[inline]
    pub fn accesses(&self) -> impl Iterator<Item = (usize, DataAccess)> + 'a {
        let words = self.words;
        self.plan
            .accesses
            .iter()
            .map(move |planned| (planned.instruction as usize, planned.access(words)))
    }
}

/// What a data access does (Valgrind's `Dr`, `Dw` and modify).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AccessKind {
    /// A load.
    Read,
    /// A store.
    Write,
    /// A load and a store of the same bytes by one instruction
    /// (read-modify-write: `add [m], r`, `inc [m]`, `xchg`, `cmpxchg`,
    /// lock-prefixed instructions). Cachegrind counts it as `Dr`, Callgrind
    /// as `Dw`.
    Modify,
}

/// One data access of an instruction.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct DataAccess {
    /// The first byte accessed.
    pub addr: u64,
    /// Bytes accessed (the simulator clamps sizes above its smallest line).
    pub size: u32,
    /// Load, store or both.
    pub kind: AccessKind,
}

/// How a traced process ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Exit {
    /// It exited with this status (0–255).
    Code(i32),
    /// It was killed by this signal.
    Signal {
        /// The signal number.
        signal: i32,
        /// Whether it dumped core.
        core_dumped: bool,
    },
}

/// Receives the execution events of all traced processes and threads, in the
/// order they happened (threads are traced one step at a time).
///
/// Only [`EventSink::block`], [`EventSink::instruction`] and the type of its
/// [`EventSink::ahead`] sink are required ([`NoAhead`] for a sink that never
/// makes one); the other events have empty defaults.
pub trait EventSink {
    /// The sink [`EventSink::ahead`] makes.
    type Ahead: Ahead;

    /// `thread` starts executing a block.
    fn block(&mut self, thread: Thread, block: Block);

    /// One execution of the instruction of `len` bytes at `addr`, in the block
    /// last started by `thread`.
    ///
    /// A REP string instruction is reported once per iteration plus once for
    /// the final `rcx == 0` check, as Valgrind counts it (`rep movsb` with
    /// rcx = N: N + 1 events; rcx = 0: one event); each iteration is its own
    /// block, as in Valgrind.
    fn instruction(&mut self, thread: Thread, addr: u64, len: u8);

    /// `thread` runs a whole block: `block` starts and all of `instructions`
    /// (address, length) execute in order, with no other event between them.
    /// A backend that knows whole blocks (translate) reports them this way,
    /// so a sink can take them in one call; the default reports
    /// [`EventSink::block`] and then each [`EventSink::instruction`].
    fn block_executed(&mut self, thread: Thread, block: Block, instructions: &[(u64, u8)]) {
        self.block(thread, block);
        for &(addr, len) in instructions {
            self.instruction(thread, addr, len);
        }
    }

    /// `thread` runs the whole blocks of `blocks`, one after another, with
    /// no other event between them: what a block-based backend reads from
    /// a buffer of records. The default reports each with
    /// [`EventSink::block_executed`].
    fn blocks_executed(&mut self, thread: Thread, blocks: &mut WholeBlocks<'_>) {
        for whole in blocks {
            for block in whole.starts() {
                self.block_executed(thread, block, whole.instructions);
            }
        }
    }

    /// `thread` runs the whole blocks of `blocks`, one after another, with
    /// no other event between them, reporting their data accesses and
    /// branches: what a block-based backend reads from a buffer of records
    /// when the run feeds simulations with Callgrind's rules. The default
    /// reports them one event at a time ([`report_simulated`]).
    fn blocks_simulated(&mut self, thread: Thread, blocks: &mut SimulatedBlocks<'_>) {
        report_simulated(self, thread, blocks);
    }

    /// Where the block at `addr` of `thread`'s process is for the sink's
    /// rules of calls and contexts ([`Place`]): a run of it that arrives by
    /// a fall-through or a jump from a block of its region, when it starts
    /// no function and the stack pointer is not above where it was at the
    /// start of the last block reported in order (no frame left), leaves
    /// the sink as it was but for one more run of it in the thread's
    /// context. With
    /// `RunOptions::quiet_runs` a backend may report such a run as a
    /// repeat ([`WholeBlock::repeats`]), not in the order it ran, of an
    /// earlier run of the block reported in the same context: since the
    /// context last changed, or in an earlier call made by the same call
    /// instruction in the same run of the caller's context (the sink's
    /// sums are the same; a call's cost may go to an earlier call of the
    /// same arc). `None`, the default: every run in order.
    fn place(&mut self, _thread: Thread, _addr: u64) -> Option<Place> {
        None
    }

    /// A sink that replays the records of one drain of `thread`'s buffer
    /// first, on another thread, while this one replays them after it (to
    /// run a simulation beside the collector); `None`, the default, to
    /// replay them here alone. It comes back through
    /// [`EventSink::ahead_done`] when the drain ends.
    fn ahead(&mut self, _thread: Thread) -> Option<Self::Ahead> {
        None
    }

    /// The sink [`EventSink::ahead`] made for a drain of `thread`'s
    /// buffer, back when the drain ends.
    fn ahead_done(&mut self, _thread: Thread, _ahead: Self::Ahead) {}

    /// What the instruction at `addr` last reported by
    /// [`EventSink::instruction`] on `thread` did for the simulations: a
    /// data access (loads before stores, in the order Valgrind's
    /// instrumentation sees them), a conditional branch's outcome or an
    /// indirect jump's target (see [`BlockEvent`]).
    fn instruction_event(&mut self, _thread: Thread, _addr: u64, _event: BlockEvent) {}

    /// With `RunOptions::filter`, the fetches and data accesses that
    /// missed I1 or D1, which the backend keeps, in the order they ran
    /// (their instructions' runs and events are reported apart, and
    /// counted only). With quiet runs too, a drain's are reported before its
    /// blocks, each naming the record of its run
    /// ([`FilteredAccess::record`]).
    fn accesses_filtered(&mut self, _thread: Thread, accesses: &mut FilteredAccesses<'_>) {
        accesses.for_each(drop);
    }

    /// `thread` made the system call `call` with the `syscall` instruction
    /// last reported (the last of its block), with the times the run's
    /// `RunOptions::system_calls` asks for; reported after that
    /// instruction's events and before what the call makes happen
    /// ([`EventSink::lifecycle`]). Only when the run asks for them.
    fn system_call(&mut self, _thread: Thread, _call: SystemCall) {}

    /// A Valgrind client request (the special instruction sequence): `args` are
    /// the six words rax points to (`[request, arg1..arg5]`), `default` the
    /// value of rdx. The returned value is written to rdx.
    fn client_request(&mut self, _thread: Thread, _args: [u64; 6], default: u64) -> u64 {
        default
    }

    /// Whether the simulation of `thread`'s process emptied its caches
    /// since the backend last asked (instrumentation switched on or off
    /// by a client request or a control request): with
    /// `RunOptions::filter`, the backend then empties the I1 and D1 it
    /// keeps. Asked after each.
    fn caches_emptied(&mut self, _thread: Thread) -> bool {
        false
    }

    /// What happened to `thread` or its process besides running code (for
    /// [`Lifecycle::Exec`] and [`Lifecycle::ProcessExited`], `thread` is
    /// the process's: its `tid` is its `pid`).
    fn lifecycle(&mut self, _thread: Thread, _event: Lifecycle<'_>) {}
}

/// A sink that sees the records of a drain before the sink that made it
/// ([`EventSink::ahead`]), on another thread: the same events in the same
/// order, a chunk of records at a time, while the other sink follows.
pub trait Ahead: EventSink + Send {
    /// The events of a chunk of records are all reported: what the sink
    /// made of them must reach the sink behind it now; with `last`, no
    /// more come in this drain (not even after an error).
    fn chunk_done(&mut self, last: bool);
}

/// The [`EventSink::Ahead`] of a sink that never replays ahead: no value
/// of it exists.
#[derive(Clone, Copy, Debug)]
pub enum NoAhead {}

impl EventSink for NoAhead {
    type Ahead = NoAhead;

    fn block(&mut self, _thread: Thread, _block: Block) {
        match *self {}
    }

    fn instruction(&mut self, _thread: Thread, _addr: u64, _len: u8) {
        match *self {}
    }
}

impl Ahead for NoAhead {
    fn chunk_done(&mut self, _last: bool) {
        match *self {}
    }
}

/// An [`EventSink`] that only counts instructions.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct InstructionCounter {
    /// Instructions executed so far (Valgrind's `Ir`).
    pub instructions: u64,
}

impl EventSink for InstructionCounter {
    type Ahead = NoAhead;

    fn block(&mut self, _thread: Thread, _block: Block) {}

    fn instruction(&mut self, _thread: Thread, _addr: u64, _len: u8) {
        self.instructions += 1;
    }
}

/// Reports the blocks of `blocks` to `sink` one event at a time: each
/// block's [`EventSink::block`], then each instruction followed by its data
/// accesses and branches (the default of [`EventSink::blocks_simulated`]).
pub fn report_simulated<S: EventSink + ?Sized>(
    sink: &mut S,
    thread: Thread,
    blocks: &mut SimulatedBlocks<'_>,
) {
    for simulated in blocks {
        sink.block(thread, simulated.block);
        let mut events = simulated.events().peekable();
        for (index, &(addr, len)) in simulated.instructions.iter().enumerate() {
            sink.instruction(thread, addr, len);
            while let Some((_, event)) = events.next_if(|&(of, _)| of == index) {
                sink.instruction_event(thread, addr, event);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Place;

    #[test]
    fn a_jump_continues_within_a_region_to_a_block_that_starts_no_function() {
        let place = |region, starts_function| Place {
            region,
            starts_function,
            skipped: false,
        };
        let from = place(3, true);
        assert!(from.continues_to(&place(3, false)));
        // To a function's first instruction: a call by Callgrind's rules.
        assert!(!from.continues_to(&place(3, true)));
        // Into another object or section kind.
        assert!(!from.continues_to(&place(4, false)));
        // The region the jump leaves decides, whatever it starts.
        assert!(place(3, false).continues_to(&place(3, false)));
    }
}
