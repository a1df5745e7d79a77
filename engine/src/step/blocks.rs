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

use crate::event::Arrival;

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
}

impl BlockCursor {
    /// A thread that has executed nothing yet.
    pub fn start() -> BlockCursor {
        BlockCursor {
            open: false,
            count: 0,
            arrival: Arrival::Start,
            known: 0,
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
