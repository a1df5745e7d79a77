//! Block cutting: where VEX (as Callgrind runs it, without chasing) ends a
//! basic block, and how the next block is arrived at (Callgrind's jump kinds,
//! see `callgrind/main.c`, "Info for final exit from BB", and `bbcc.c`,
//! `setup_bbcc`).
//!
//! - A block ends after a `jmp`, `jcc`, `call`, `ret`, `syscall`,
//!   `int`/`int3`/`ud2`/`hlt`/`pause`/`clflush`, the client-request marker, a
//!   REP string instruction, a taken `loop`/`jrcxz` (VEX's side exit; when not
//!   taken the block goes on), or after [`MAX_BLOCK_INSTRUCTIONS`].
//! - A jump (or side exit) whose target is the next instruction counts as a
//!   fall-through (`jk_None`); an indirect jump is always a jump.
//! - A REP string instruction is a VEX block of its own kind: `if rcx == 0
//!   goto next; one iteration; goto self` (REPE/REPNE: `if cond goto self;
//!   goto next`). Callgrind's inversion heuristic (the last side exit goes to
//!   the next instruction) swaps the exits of plain `rep`, so in both cases a
//!   further iteration arrives as a conditional jump to the same address
//!   ([`Arrival::Jump`] `{ conditional: true }`) and leaving the instruction is
//!   a fall-through.
//!
//! Cachegrind's superblocks ([`Superblock`]): Cachegrind runs VEX with
//! chasing on, so its translations differ; only its conditional-branch
//! counts tell (VEX folds more exits), the blocks reported stay Callgrind's.
//! VEX 3.19 (`guest_generic_bb_to_IR.c`, `bb_to_IR`) disassembles a first
//! basic block of at most `guest_max_insns` (60) instructions, then extends
//! it at most once (its extension loop breaks after any extension, so a
//! second chase never happens; checked with `--trace-flags=10000000`):
//!
//! - when the block ends with a direct `jmp` or `call` (`Ijk_Boring` or
//!   `Ijk_Call` to a constant, the instruction having no other exit) and at
//!   least 3 instructions of the budget are left, the block at the target
//!   is appended, with the remaining budget as its instruction limit;
//! - when it ends with a `jcc`, the "&&-idiom" recovery may append the
//!   3-instruction-or-shorter block one arm leads to, guarded (not
//!   modelled here, see [`Superblock`]).
//!
//! Constants flow through the whole superblock, so a `rep stos` whose count
//! was set before a chased `call` or `jmp` loses its first count check.

use crate::event::Arrival;

use super::branches::Branch;
use super::decode::{Decoded, Flow};

/// VEX's `guest_max_insns` default (60 in Valgrind 3.19; checked with lackey:
/// a straight run of 120 instructions is 2 blocks).
pub(super) const MAX_BLOCK_INSTRUCTIONS: u32 = 60;

/// Where a thread is in block terms.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct BlockCursor {
    /// A block has been reported and not yet left.
    pub open: bool,
    /// Instructions executed in the open block.
    pub count: u32,
    /// How the next block will be arrived at (when no block is open).
    pub arrival: Arrival,
    /// The general-purpose registers that hold constants of the open block
    /// (see `branches`): set by its instructions, unknown at its start.
    pub known: u16,
    /// Where the thread is in Cachegrind's superblocks.
    pub superblock: Superblock,
}

impl BlockCursor {
    /// A thread that has executed nothing yet.
    pub fn start() -> BlockCursor {
        BlockCursor {
            open: false,
            count: 0,
            arrival: Arrival::Start,
            known: 0,
            superblock: Superblock::start(),
        }
    }

    /// Reports the open block's end; the next block arrives by `arrival`.
    pub fn leave(&mut self, arrival: Arrival) {
        self.open = false;
        self.count = 0;
        self.arrival = arrival;
        self.known = 0;
    }

    /// The arrival a block would have if the thread went on from here: a
    /// fall-through inside a block, else the pending arrival.
    pub fn resumption(&self) -> Arrival {
        if self.open {
            Arrival::FallThrough
        } else {
            self.arrival
        }
    }
}

/// How the block is left after `decoded` at `at` executed and the thread is
/// now at `now`: `None` when the block goes on.
pub(super) fn exit(decoded: &Decoded, at: u64, now: u64, count: u32) -> Option<Arrival> {
    let next = at.wrapping_add(u64::from(decoded.len));
    if decoded.rep.is_some() {
        return Some(if now == at {
            Arrival::Jump { conditional: true }
        } else {
            Arrival::FallThrough
        });
    }
    let jump_unless_next = |conditional| {
        if now == next {
            Arrival::FallThrough
        } else {
            Arrival::Jump { conditional }
        }
    };
    let arrival = match decoded.flow {
        Flow::Next => None,
        Flow::SideExit => (now != next).then_some(Arrival::Jump { conditional: true }),
        Flow::ConditionalJump => Some(jump_unless_next(true)),
        Flow::Jump { direct: true } => Some(jump_unless_next(false)),
        Flow::Jump { direct: false } => Some(Arrival::Jump { conditional: false }),
        Flow::Call => Some(Arrival::Call),
        Flow::Return => Some(Arrival::Return),
        Flow::SystemCall | Flow::Stop | Flow::ClientRequest => Some(Arrival::FallThrough),
    };
    arrival.or((count >= MAX_BLOCK_INSTRUCTIONS).then_some(Arrival::FallThrough))
}

/// Where a thread is in Cachegrind's VEX superblocks (see the module
/// documentation): the basic block being executed, whether it was reached
/// by the superblock's chase, and the registers holding constants of the
/// superblock.
///
/// Not modelled: the "&&-idiom" extension after a `jcc` (Cachegrind then
/// drops the first `jcc`'s branch, evaluates the second one on every pass
/// through the superblock, and counts the guarded block's instructions
/// even when it does not run); instructions VEX flags as verbose (some AVX
/// ones), which halve the budget; targets VEX may not chase into
/// (redirected functions, outside the client's code).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Superblock {
    /// Instructions executed in the current basic block.
    count: u32,
    /// The current basic block's instruction limit.
    limit: u32,
    /// The current basic block is the superblock's chased extension.
    chased: bool,
    /// The general-purpose registers that hold constants of the superblock.
    pub known: u16,
}

impl Superblock {
    /// At the start of a superblock.
    pub fn start() -> Superblock {
        Superblock {
            count: 0,
            limit: MAX_BLOCK_INSTRUCTIONS,
            chased: false,
            known: 0,
        }
    }

    /// Follows the execution of `decoded` at `at` that went to `now`
    /// (`known`: the registers holding constants after it).
    pub fn executed(&mut self, decoded: &Decoded, at: u64, now: u64, known: u16) {
        self.count += 1;
        self.known = known;
        let next = at.wrapping_add(u64::from(decoded.len));
        let ends = match decoded.flow {
            _ if decoded.rep.is_some() => true,
            Flow::Next => false,
            // A taken side exit leaves the superblock; its IR goes on.
            Flow::SideExit => now != next,
            _ => true,
        };
        let direct = decoded.branch != Branch::Indirect
            && matches!(decoded.flow, Flow::Jump { direct: true } | Flow::Call);
        if ends && direct && decoded.rep.is_none() && !self.chased {
            let left = self.limit.saturating_sub(self.count);
            if left >= 3 {
                *self = Superblock {
                    count: 0,
                    limit: left,
                    chased: true,
                    known: self.known,
                };
                return;
            }
        }
        if ends || self.count >= self.limit {
            *self = Superblock::start();
        }
    }
}
