//! The data-access and branch events of one execution of an instruction in
//! a step (the rules are shared, see [`crate::semantics::report`]): what
//! the execution did is read from the registers before and after the step.

use crate::event::{AccessKind, DataAccess, EventSink, Thread};
use crate::semantics::{self, address_in, BranchRules, Decoded, InstructionAt, Pass, Registers};

use super::decode::Repetitions;
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
        let pass = self.repetitions.map(|rep| Pass {
            iteration: index < rep.iterations,
            // Earlier iterations of the step went on, so their condition held.
            condition_held: index + 1 < rep.iterations || rep.condition_held,
        });
        // Only the step's first execution can be in a block that started
        // before the instruction.
        let known = if index > 0 { 0 } else { known };
        let registers = Registers {
            before: self.before,
            after: self.after,
            offset: self.offset(index),
        };
        let instruction = InstructionAt {
            at: self.at,
            decoded: self.decoded,
        };
        let rules = BranchRules {
            cachegrind,
            with_branches: true,
        };
        semantics::report(
            sink,
            self.thread,
            instruction,
            pass,
            known,
            rules,
            &registers,
        );
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
        let iterations = match self.repetitions {
            None => executions.min(1),
            Some(rep) => rep.iterations.min(executions),
        };
        for index in 0..iterations {
            let offset = self.offset(index);
            self.decoded.accesses.for_each(
                |_, memory| address_in(self.before, memory, offset),
                &mut each,
            );
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
