//! The data-access and branch events of one execution of an instruction
//! (see `accesses` and `branches` for Valgrind's rules), reported after its
//! `instruction` event in VEX's order: for a REP string instruction the
//! count check, the iteration's accesses, then the continue condition; for
//! other instructions the accesses, then the branch.

use crate::event::{EventSink, Thread};

use super::branches::{Branch, RCX};
use super::decode::{Decoded, Repetitions};
use super::ptrace::Regs;

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
    /// `known`: the registers holding constants of the block before it.
    pub fn report<S: EventSink + ?Sized>(&self, sink: &mut S, index: u64, known: u16) {
        let (thread, at) = (self.thread, self.at);
        let Some(rep) = self.repetitions else {
            self.decoded
                .accesses
                .for_each(self.before, 0, |access| sink.data_access(thread, access));
            if let Some(taken) = self.decoded.branch.conditional(self.before, known) {
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
        if index > 0 || known & RCX == 0 {
            sink.conditional_branch(thread, at, iteration != conditional);
        }
        if !iteration {
            return;
        }
        let moved = index.wrapping_mul(u64::from(self.decoded.element));
        let offset = if self.before.eflags & DF != 0 {
            moved.wrapping_neg()
        } else {
            moved
        };
        self.decoded
            .accesses
            .for_each(self.before, offset, |access| {
                sink.data_access(thread, access)
            });
        if conditional {
            // Earlier iterations of the step went on, so their condition held.
            let held = index + 1 < rep.iterations || rep.condition_held;
            sink.conditional_branch(thread, at, held);
        }
    }
}
