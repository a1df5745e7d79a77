//! The data-access and branch events of one execution of an instruction
//! (see `accesses` and `branches` for Valgrind's rules), reported after its
//! `instruction` event in VEX's order: for a REP string instruction the
//! count check, the iteration's accesses, then the continue condition; for
//! other instructions the accesses, then the branch. What the execution
//! did (addresses, the guard, the target) comes from the backend
//! ([`Dynamic`]): registers around a step, or what a translation recorded.

use iced_x86::UsedMemory;

use crate::event::{BlockEvent, EventSink, Thread};

use super::accesses::address_in;
use super::branches::{Branch, RCX};
use super::decoded::Decoded;
use crate::ptrace::Regs;

/// What one execution of an instruction did, as far as its events need.
pub(crate) trait Dynamic {
    /// The address of memory operand number `index` (`memory`, see
    /// `Accesses::operands`); `None` when unknown.
    fn address(&self, index: usize, memory: &UsedMemory) -> Option<u64>;
    /// Whether the guard of its conditional branch `branch` held (see
    /// `Branch::guard`).
    fn guard(&self, branch: &Branch) -> bool;
    /// Where it went (asked of an indirect jump or call).
    fn target(&self) -> u64;
}

/// What an execution did, from the registers around it (a single step).
pub(crate) struct Registers<'a> {
    /// Before the execution.
    pub before: &'a Regs,
    /// After it.
    pub after: &'a Regs,
    /// How far the string pointers moved in earlier iterations of the
    /// same step.
    pub offset: u64,
}

impl Dynamic for Registers<'_> {
    fn address(&self, _index: usize, memory: &UsedMemory) -> Option<u64> {
        address_in(self.before, memory, self.offset)
    }

    fn guard(&self, branch: &Branch) -> bool {
        branch.guard(self.before)
    }

    fn target(&self) -> u64 {
        self.after.rip
    }
}

/// One execution (pass) of a REP string instruction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Pass {
    /// An iteration ran (not only the final count check).
    pub iteration: bool,
    /// For REPE/REPNE, the continue condition held after the iteration.
    pub condition_held: bool,
}

/// An instruction: its address and its decoding.
#[derive(Clone, Copy, Debug)]
pub(crate) struct InstructionAt<'a> {
    /// Its address.
    pub at: u64,
    /// What the backends know of it.
    pub decoded: &'a Decoded,
}

/// Which branch events an execution reports, and by whose rules.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct BranchRules {
    /// Report outcomes as Cachegrind does (see `branches`), else as
    /// Callgrind does.
    pub cachegrind: bool,
    /// Report branches; false to report the data accesses alone.
    pub with_branches: bool,
}

/// Reports the events of one execution of `instruction` by `thread` after
/// its `instruction` event: `pass` for a REP string instruction, `known`
/// the registers holding constants of the block before it, `rules` the
/// branch events to report.
pub(crate) fn report<S: EventSink + ?Sized>(
    sink: &mut S,
    thread: Thread,
    instruction: InstructionAt<'_>,
    pass: Option<Pass>,
    known: u16,
    rules: BranchRules,
    dynamic: &impl Dynamic,
) {
    let InstructionAt { at, decoded } = instruction;
    let BranchRules {
        cachegrind,
        with_branches,
    } = rules;
    let address = |index: usize, memory: &UsedMemory| dynamic.address(index, memory);
    let Some(pass) = pass else {
        decoded.accesses.for_each(address, |access| {
            sink.instruction_event(thread, at, BlockEvent::Access(access))
        });
        if decoded.bus {
            sink.instruction_event(thread, at, BlockEvent::Bus);
        }
        if !with_branches {
            return;
        }
        let guard = || dynamic.guard(&decoded.branch);
        if let Some(taken) = decoded.branch.conditional(guard, known, cachegrind) {
            sink.instruction_event(thread, at, BlockEvent::Conditional(taken));
        }
        if decoded.branch == Branch::Indirect {
            sink.instruction_event(thread, at, BlockEvent::Indirect(dynamic.target()));
        }
        return;
    };
    let conditional = decoded.rep.is_some_and(|rep| rep.while_zero_flag.is_some());
    // The count check; VEX folds it away when rcx is a constant of the
    // block. Its exit goes to the next instruction: Cachegrind always
    // inverts it, Callgrind only when it is the block's last exit (plain
    // `rep`).
    if known & RCX == 0 && with_branches {
        let inverted = cachegrind || !conditional;
        sink.instruction_event(
            thread,
            at,
            BlockEvent::Conditional(pass.iteration == inverted),
        );
    }
    if !pass.iteration {
        return;
    }
    decoded.accesses.for_each(address, |access| {
        sink.instruction_event(thread, at, BlockEvent::Access(access))
    });
    if conditional && with_branches {
        sink.instruction_event(thread, at, BlockEvent::Conditional(pass.condition_held));
    }
}
