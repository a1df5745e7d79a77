//! Branch events: the conditional branches and indirect jumps Valgrind's
//! branch simulation sees for an instruction, and their outcomes.
//!
//! VEX turns a conditional transfer into a conditional exit of its block
//! (`IRStmt_Exit`); Cachegrind and Callgrind count one `Bc` per exit
//! evaluated and one `Bi` per block that ends with a computed jump or call
//! (not a return). Callgrind reports an exit's guard, inverted when the exit
//! is the last one of the block and goes to the next instruction (its
//! correction of VEX's inverted `jcc`s):
//!
//! - `jcc`: VEX exits on the positive form of the condition (`jz`, `jb`,
//!   ...) to the target, or for the negative form (`jnz`, ...) to the next
//!   instruction, so Callgrind reports the real outcome, except for a jump
//!   to the next instruction on a positive condition (reported inverted).
//! - `loop`, `loope`, `loopne`, `jrcxz`: the guard (count after the
//!   decrement non-zero, and ZF; rcx zero).
//! - A locked read-modify-write that VEX makes a load and a compare-and-swap
//!   of (`xchg` with memory, `lock add`, `lock inc`, `lock xadd`, ...; not
//!   `lock cmpxchg*`, a bare CAS): the CAS is followed by an exit that
//!   restarts the instruction when the location changed in between; it is
//!   never taken here (the tracee's threads run one step at a time).
//! - REP string instructions: every execution (iteration or the final check)
//!   evaluates `rcx == 0 → next` (plain `rep`: the block's last exit, so
//!   reported inverted: taken = an iteration follows); REPE/REPNE iterations
//!   then evaluate the continue condition `→ self`, and for them the count
//!   check is not the last exit (taken = rcx is zero).
//!
//! Cachegrind (`cg_main.c`, `Ist_Exit`) inverts every exit that goes to the
//! next instruction, wherever it is in the block: the same outcomes, except
//! for the count check of REPE/REPNE (taken = an iteration follows, as for
//! plain `rep`) and a `loop`/`jrcxz` whose target is the next instruction
//! (reported inverted).
//!
//! VEX folds constants within a block: an exit whose guard is constant is
//! removed, and is no branch for Valgrind. The backend follows which
//! general-purpose registers hold constants in the current block
//! ([`Effect`]) so that a count check on a constant rcx (`mov ecx, 8; rep
//! stosq` in one block) is left out, as Valgrind leaves it out. Its
//! folding is simpler than VEX's (moves, `xor r, r`, and flag-free
//! arithmetic on constants) and ignores constant flags (`jcc` after an
//! instruction on constants in the same block).

use iced_x86::{
    Code, ConditionCode, FlowControl, Instruction, InstructionInfoFactory, Mnemonic, OpAccess,
    OpKind, Register,
};

use crate::ptrace::Regs;

/// rcx's bit in a set of registers ([`Effect`]).
pub(crate) const RCX: u16 = 1 << 1;

/// The branch an instruction is for Valgrind.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Branch {
    /// None (REP string instructions are handled per iteration).
    None,
    /// `jcc`.
    Condition {
        /// The condition.
        condition: ConditionCode,
        /// The target is the next instruction.
        to_next: bool,
    },
    /// `loop`, `loope`, `loopne`.
    Loop {
        /// `Some(z)`: also requires ZF = z.
        zero_flag: Option<bool>,
        /// The counter is ecx.
        counter_32: bool,
        /// The target is the next instruction.
        to_next: bool,
    },
    /// `jrcxz`, `jecxz`.
    CounterZero {
        /// The counter is ecx.
        counter_32: bool,
        /// The target is the next instruction.
        to_next: bool,
    },
    /// A jump or call through a register or memory.
    Indirect,
    /// The restart check after a locked read-modify-write's compare-and-swap.
    CasRetry,
}

impl Branch {
    /// The branch `instruction` is.
    pub fn of(instruction: &Instruction) -> Branch {
        let counter_32 = matches!(
            instruction.code(),
            Code::Loop_rel8_64_ECX
                | Code::Loope_rel8_64_ECX
                | Code::Loopne_rel8_64_ECX
                | Code::Jecxz_rel8_64
        );
        let to_next = instruction.near_branch_target() == instruction.next_ip();
        match instruction.mnemonic() {
            Mnemonic::Loop => {
                return Branch::Loop {
                    zero_flag: None,
                    counter_32,
                    to_next,
                }
            }
            Mnemonic::Loope => {
                return Branch::Loop {
                    zero_flag: Some(true),
                    counter_32,
                    to_next,
                }
            }
            Mnemonic::Loopne => {
                return Branch::Loop {
                    zero_flag: Some(false),
                    counter_32,
                    to_next,
                }
            }
            Mnemonic::Jrcxz | Mnemonic::Jecxz => {
                return Branch::CounterZero {
                    counter_32,
                    to_next,
                }
            }
            _ => {}
        }
        let locked = instruction.has_lock_prefix()
            || (instruction.mnemonic() == Mnemonic::Xchg
                && (0..instruction.op_count())
                    .any(|operand| instruction.op_kind(operand) == OpKind::Memory));
        let bare_cas = matches!(
            instruction.mnemonic(),
            Mnemonic::Cmpxchg | Mnemonic::Cmpxchg8b | Mnemonic::Cmpxchg16b
        );
        if locked && !bare_cas {
            return Branch::CasRetry;
        }
        match instruction.flow_control() {
            FlowControl::ConditionalBranch => Branch::Condition {
                condition: instruction.condition_code(),
                to_next,
            },
            FlowControl::IndirectBranch | FlowControl::IndirectCall => Branch::Indirect,
            _ => Branch::None,
        }
    }

    /// Whether the guard of this conditional branch holds when it executes
    /// from `before`: a `jcc`'s condition, a `loop`'s "count after the
    /// decrement non-zero (and ZF as required)", a `jrcxz`'s "counter
    /// zero"; `false` for other branches.
    pub fn guard(&self, before: &Regs) -> bool {
        let counter = |counter_32: bool| {
            if counter_32 {
                before.rcx & u64::from(u32::MAX)
            } else {
                before.rcx
            }
        };
        match *self {
            Branch::Condition { condition, .. } => evaluate(condition, before.eflags).0,
            Branch::Loop {
                zero_flag,
                counter_32,
                ..
            } => {
                let left = counter(counter_32).wrapping_sub(1);
                let left = if counter_32 {
                    left & u64::from(u32::MAX)
                } else {
                    left
                };
                let zero = before.eflags & ZF != 0;
                left != 0 && zero_flag != Some(!zero)
            }
            Branch::CounterZero { counter_32, .. } => counter(counter_32) == 0,
            Branch::CasRetry | Branch::None | Branch::Indirect => false,
        }
    }

    /// The outcome Callgrind (or, with `cachegrind`, Cachegrind) reports
    /// for this conditional branch when its guard held or not (`guard`,
    /// asked only for a branch that has one, see [`Branch::guard`]), `None`
    /// when it is none (or VEX folded it away: the counter is a constant of
    /// the block, per `known`).
    pub fn conditional(
        &self,
        guard: impl FnOnce() -> bool,
        known: u16,
        cachegrind: bool,
    ) -> Option<bool> {
        match *self {
            Branch::Condition { condition, to_next } => {
                let positive = evaluate(condition, 0).1;
                Some(guard() != (positive && to_next))
            }
            Branch::Loop { .. } | Branch::CounterZero { .. } if known & RCX != 0 => None,
            Branch::Loop { to_next, .. } | Branch::CounterZero { to_next, .. } => {
                Some(guard() != (cachegrind && to_next))
            }
            Branch::CasRetry => Some(false),
            Branch::None | Branch::Indirect => None,
        }
    }
}

const CF: u64 = 1 << 0;
const PF: u64 = 1 << 2;
const ZF: u64 = 1 << 6;
const SF: u64 = 1 << 7;
const OF: u64 = 1 << 11;

/// Whether `condition` holds with `flags`, and whether it is one of VEX's
/// positive forms (o, b, z, be, s, p, l, le).
fn evaluate(condition: ConditionCode, flags: u64) -> (bool, bool) {
    let set = |flag: u64| flags & flag != 0;
    let less = set(SF) != set(OF);
    match condition {
        ConditionCode::o => (set(OF), true),
        ConditionCode::no => (!set(OF), false),
        ConditionCode::b => (set(CF), true),
        ConditionCode::ae => (!set(CF), false),
        ConditionCode::e => (set(ZF), true),
        ConditionCode::ne => (!set(ZF), false),
        ConditionCode::be => (set(CF) || set(ZF), true),
        ConditionCode::a => (!(set(CF) || set(ZF)), false),
        ConditionCode::s => (set(SF), true),
        ConditionCode::ns => (!set(SF), false),
        ConditionCode::p => (set(PF), true),
        ConditionCode::np => (!set(PF), false),
        ConditionCode::l => (less, true),
        ConditionCode::ge => (!less, false),
        ConditionCode::le => (less || set(ZF), true),
        ConditionCode::g => (!(less || set(ZF)), false),
        ConditionCode::None => (false, false),
    }
}

/// What an instruction does to the set of general-purpose registers that
/// hold constants of the current block (bit i: register i in encoding
/// order, rax = 0).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Effect {
    /// Registers written.
    writes: u16,
    /// Registers read, when the written values are a constant function of
    /// them (VEX folds them when these are constants).
    inputs: Option<u16>,
}

impl Effect {
    /// The general-purpose registers it writes (bits as [`bit`] numbers
    /// them).
    pub fn writes(&self) -> u16 {
        self.writes
    }

    /// The effect of `instruction`, whose information `factory` gives.
    pub fn of(instruction: &Instruction, factory: &mut InstructionInfoFactory) -> Effect {
        let info = factory.info(instruction);
        let mut writes = 0;
        let mut reads = 0;
        for used in info.used_registers() {
            let Some(bit) = bit(used.register()) else {
                continue;
            };
            match used.access() {
                OpAccess::Write | OpAccess::CondWrite => writes |= bit,
                OpAccess::ReadWrite | OpAccess::ReadCondWrite => {
                    writes |= bit;
                    reads |= bit;
                }
                OpAccess::Read | OpAccess::CondRead => reads |= bit,
                _ => {}
            }
        }
        let register_operands = |count| {
            instruction.op_count() == count
                && (0..count).all(|operand| instruction.op_kind(operand) == OpKind::Register)
        };
        let zeroing = matches!(instruction.mnemonic(), Mnemonic::Xor | Mnemonic::Sub)
            && register_operands(2)
            && instruction.op0_register() == instruction.op1_register()
            && instruction.op0_register().size() >= 4;
        let operands_foldable = (0..instruction.op_count()).all(|operand| {
            matches!(
                instruction.op_kind(operand),
                OpKind::Register
                    | OpKind::Immediate8
                    | OpKind::Immediate16
                    | OpKind::Immediate32
                    | OpKind::Immediate64
                    | OpKind::Immediate8to16
                    | OpKind::Immediate8to32
                    | OpKind::Immediate8to64
                    | OpKind::Immediate32to64
            )
        }) || instruction.mnemonic() == Mnemonic::Lea;
        let arithmetic = matches!(
            instruction.mnemonic(),
            Mnemonic::Mov
                | Mnemonic::Movzx
                | Mnemonic::Movsx
                | Mnemonic::Movsxd
                | Mnemonic::Lea
                | Mnemonic::Add
                | Mnemonic::Sub
                | Mnemonic::And
                | Mnemonic::Or
                | Mnemonic::Xor
                | Mnemonic::Shl
                | Mnemonic::Shr
                | Mnemonic::Sar
                | Mnemonic::Inc
                | Mnemonic::Dec
                | Mnemonic::Neg
                | Mnemonic::Not
                | Mnemonic::Imul
                | Mnemonic::Xchg
        ) && operands_foldable
            && !instruction.has_lock_prefix();
        let inputs = if zeroing {
            Some(0)
        } else if arithmetic {
            Some(reads)
        } else {
            None
        };
        Effect { writes, inputs }
    }

    /// An instruction that may write any register with unknown values.
    pub fn unknown() -> Effect {
        Effect {
            writes: u16::MAX,
            inputs: None,
        }
    }

    /// The registers holding constants after the instruction, given those
    /// before it.
    pub fn apply(&self, known: u16) -> u16 {
        match self.inputs {
            Some(inputs) if inputs & !known == 0 => known | self.writes,
            _ => known & !self.writes,
        }
    }
}

/// A general-purpose register's bit (any width), `None` for other registers.
pub(crate) fn bit(register: Register) -> Option<u16> {
    let full = register.full_register();
    let index = (full as u32).checked_sub(Register::RAX as u32)?;
    (index < 16).then(|| 1 << index)
}

#[cfg(test)]
mod tests {
    use iced_x86::{Decoder, DecoderOptions};

    use super::*;

    fn effect(bytes: &[u8]) -> Effect {
        let instruction = Decoder::with_ip(64, bytes, 0x1000, DecoderOptions::NONE).decode();
        Effect::of(&instruction, &mut InstructionInfoFactory::new())
    }

    #[test]
    fn constants_flow_through_moves() {
        // mov ecx, 100
        assert_eq!(effect(&[0xB9, 100, 0, 0, 0]).apply(0), RCX);
        // xor ecx, ecx
        assert_eq!(effect(&[0x31, 0xC9]).apply(0), RCX);
        // mov rcx, r11: constant only if r11 is
        let copy = effect(&[0x4C, 0x89, 0xD9]);
        assert_eq!(copy.apply(0), 0);
        assert_eq!(copy.apply(1 << 11), (1 << 11) | RCX);
        // mov rcx, [rax]: not a constant
        assert_eq!(effect(&[0x48, 0x8B, 0x08]).apply(RCX), 0);
        // lea ecx, [rip+8]: a constant
        assert_eq!(effect(&[0x8D, 0x0D, 8, 0, 0, 0]).apply(0), RCX);
    }

    #[test]
    fn conditions() {
        assert_eq!(evaluate(ConditionCode::e, ZF), (true, true));
        assert_eq!(evaluate(ConditionCode::ne, ZF), (false, false));
        assert_eq!(evaluate(ConditionCode::l, SF), (true, true));
        assert_eq!(evaluate(ConditionCode::g, SF | OF), (true, false));
    }
}
