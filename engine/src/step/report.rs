//! The data-access and branch events of one execution of an instruction
//! (see `accesses` and `branches` for Valgrind's rules), reported after its
//! `instruction` event in VEX's order: for a REP string instruction the
//! count check, the iteration's accesses, then the continue condition; for
//! other instructions the accesses, then the branch.

use crate::event::{AccessKind, DataAccess, EventSink, Thread};

use super::branches::{Branch, RCX};
use super::decode::{Decoded, Repetitions};
use crate::ptrace::Regs;

/// The direction flag: string pointers move down.
const DF: u64 = 1 << 10;

/// One execution of `decoded` at `at` in a step from `before` to `after`.
pub(super) struct Execution<'a> {
    /// The executing thread.
    pub thread: Thread,
    /// The instruction's address.
    pub at: u64,
    /// The instruction.
    pub decoded: &'a Decoded,
    /// Registers before the step.
    pub before: &'a Regs,
    /// Registers after the step.
    pub after: &'a Regs,
    /// For a REP string instruction, what the step did.
    pub repetitions: Option<Repetitions>,
}

impl Execution<'_> {
    /// Reports the events of the step's execution number `index` (a REP
    /// string instruction's iterations come first, then its count check);
    /// `known`: the registers holding constants of the block before it;
    /// `cachegrind`: report outcomes as Cachegrind does (see `branches`).
    pub fn report<S: EventSink + ?Sized>(
        &self,
        sink: &mut S,
        index: u64,
        known: u16,
        cachegrind: bool,
    ) {
        let (thread, at) = (self.thread, self.at);
        let Some(rep) = self.repetitions else {
            self.decoded
                .accesses
                .for_each(self.before, 0, |access| sink.data_access(thread, access));
            if let Some(taken) = self
                .decoded
                .branch
                .conditional(self.before, known, cachegrind)
            {
                sink.conditional_branch(thread, at, taken);
            }
            if self.decoded.branch == Branch::Indirect {
                sink.indirect_branch(thread, at, self.after.rip);
            }
            return;
        };
        let iteration = index < rep.iterations;
        let conditional = self
            .decoded
            .rep
            .is_some_and(|rep| rep.while_zero_flag.is_some());
        // The count check; VEX folds it away when rcx is a constant of the
        // block (only the step's first execution can be in a block that
        // started before the instruction).
        // Its exit goes to the next instruction: Cachegrind always inverts
        // it, Callgrind only when it is the block's last exit (plain `rep`).
        if index > 0 || known & RCX == 0 {
            let inverted = cachegrind || !conditional;
            sink.conditional_branch(thread, at, iteration == inverted);
        }
        if !iteration {
            return;
        }
        self.decoded
            .accesses
            .for_each(self.before, self.offset(index), |access| {
                sink.data_access(thread, access)
            });
        if conditional {
            // Earlier iterations of the step went on, so their condition held.
            let held = index + 1 < rep.iterations || rep.condition_held;
            sink.conditional_branch(thread, at, held);
        }
    }

    /// Calls `store` with the address and size of each store (`Write` or
    /// `Modify` access) of the step's first `executions` executions: every
    /// iteration's of a REP string instruction.
    pub fn for_each_store(&self, executions: u64, mut store: impl FnMut(u64, u32)) {
        let mut each = |access: DataAccess| {
            if access.kind != AccessKind::Read {
                store(access.addr, access.size);
            }
        };
        match self.repetitions {
            None if executions > 0 => self.decoded.accesses.for_each(self.before, 0, &mut each),
            None => {}
            Some(rep) => {
                for index in 0..rep.iterations.min(executions) {
                    self.decoded
                        .accesses
                        .for_each(self.before, self.offset(index), &mut each);
                }
            }
        }
    }

    /// How far a string instruction's pointers moved before its iteration
    /// number `index` of the step.
    fn offset(&self, index: u64) -> u64 {
        let moved = index.wrapping_mul(u64::from(self.decoded.element));
        if self.before.eflags & DF != 0 {
            moved.wrapping_neg()
        } else {
            moved
        }
    }
}
