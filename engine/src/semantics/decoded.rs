//! What the backends know of a decoded instruction ([`Decoded`]): its
//! length, how it may transfer control, its REP behaviour, its data
//! accesses, the branch it is for Valgrind and what it does to the
//! registers holding constants of its block.

use std::cell::RefCell;

use iced_x86::{Instruction, InstructionInfoFactory, Mnemonic, OpKind};

use crate::flow::{is_rep_string, rep_counter_32, rep_while_zero_flag, End, Flow};

use super::accesses::Accesses;
use super::branches::{Branch, Effect};

/// The REP behaviour of a string instruction.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Rep {
    /// `Some(true)`: repeat while ZF = 1 (REPE cmps/scas); `Some(false)`: while
    /// ZF = 0 (REPNE); `None`: only the count ends it.
    pub while_zero_flag: Option<bool>,
    /// The counter is `ecx` (address-size prefix), not `rcx`.
    pub counter_32: bool,
}

/// What the backend keeps of a decoded instruction.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Decoded {
    /// Length in bytes.
    pub len: u8,
    /// How it may transfer control.
    pub flow: Flow,
    /// `Some` for a REP-prefixed string instruction (which ends its block).
    pub rep: Option<Rep>,
    /// Its data accesses (of one iteration, for a REP string instruction).
    pub accesses: Accesses,
    /// The element size of a string instruction (its pointers move by it).
    pub element: u8,
    /// The branch it is for Valgrind's branch simulation.
    pub branch: Branch,
    /// What it does to the registers holding constants of the block.
    pub effect: Effect,
    /// It is `cpuid` (answered by the tracer, see [`crate::cpuid`]).
    pub cpuid: bool,
    /// It is an atomic read-modify-write of memory ([`is_bus_locked`]).
    pub bus: bool,
    /// It is `syscall` (timed when the run reports system calls,
    /// `RunOptions::system_calls`).
    pub syscall: bool,
}

/// Whether `instruction` locks the bus for an atomic read-modify-write of
/// memory, as VEX translates it to a compare-and-swap: a `lock`-prefixed
/// instruction, or `xchg` with a memory operand (locked without the
/// prefix).
pub(crate) fn is_bus_locked(instruction: &Instruction) -> bool {
    let memory = (0..instruction.op_count()).any(|op| instruction.op_kind(op) == OpKind::Memory);
    memory && (instruction.has_lock_prefix() || instruction.mnemonic() == Mnemonic::Xchg)
}

thread_local! {
    /// The thread's factory of instruction information: a new one
    /// allocates its lists at its first use.
    static FACTORY: RefCell<InstructionInfoFactory> = RefCell::new(InstructionInfoFactory::new());
}

/// Calls `with` with the thread's factory of instruction information (a
/// new one when `with` itself asks for the thread's).
pub(crate) fn with_info_factory<T>(with: impl FnOnce(&mut InstructionInfoFactory) -> T) -> T {
    FACTORY.with(|factory| match factory.try_borrow_mut() {
        Ok(mut factory) => with(&mut factory),
        Err(_) => with(&mut InstructionInfoFactory::new()),
    })
}

impl Decoded {
    /// What the backends need to know of `instruction`.
    pub fn of(instruction: &Instruction) -> Decoded {
        with_info_factory(|factory| Decoded::with(instruction, factory))
    }

    /// [`Decoded::of`] with the information of `factory`.
    fn with(instruction: &Instruction, factory: &mut InstructionInfoFactory) -> Decoded {
        let rep = is_rep_string(instruction).then(|| Rep {
            while_zero_flag: rep_while_zero_flag(instruction),
            counter_32: rep_counter_32(instruction),
        });
        Decoded {
            len: instruction.len() as u8,
            flow: Flow::of(instruction),
            rep,
            accesses: Accesses::of(instruction, factory),
            element: if instruction.is_string_instruction() {
                instruction.memory_size().size() as u8
            } else {
                0
            },
            branch: Branch::of(instruction),
            effect: Effect::of(instruction, factory),
            cpuid: instruction.mnemonic() == Mnemonic::Cpuid,
            bus: is_bus_locked(instruction),
            syscall: instruction.mnemonic() == Mnemonic::Syscall,
        }
    }

    /// What decides how its block is left, for the instruction at `at`
    /// (see [`crate::flow::exit`]).
    pub fn end(&self, at: u64) -> End {
        End {
            addr: at,
            len: self.len,
            flow: self.flow,
            rep: self.rep.is_some(),
        }
    }
}

#[cfg(test)]
mod tests {
    use iced_x86::{Decoder, DecoderOptions};

    use super::*;

    fn bus(bytes: &[u8]) -> bool {
        Decoded::of(&Decoder::new(64, bytes, DecoderOptions::NONE).decode()).bus
    }

    #[test]
    fn atomic_read_modify_writes_lock_the_bus() {
        // lock add [rax], rbx; lock inc dword [rax]; lock cmpxchg [rax], rbx;
        // lock xadd [rax], rbx
        assert!(bus(&[0xf0, 0x48, 0x01, 0x18]));
        assert!(bus(&[0xf0, 0xff, 0x00]));
        assert!(bus(&[0xf0, 0x48, 0x0f, 0xb1, 0x18]));
        assert!(bus(&[0xf0, 0x48, 0x0f, 0xc1, 0x18]));
        // xchg [rax], rbx: locked without the prefix.
        assert!(bus(&[0x48, 0x87, 0x18]));
    }

    #[test]
    fn a_decoding_inside_a_use_of_the_threads_factory_gets_one_of_its_own() {
        // call [rax]: reads the target, writes the return address.
        let call = Decoder::new(64, &[0xff, 0x10], DecoderOptions::NONE).decode();
        let alone = Decoded::of(&call);
        let nested = with_info_factory(|factory| {
            let _ = factory.info(&call);
            Decoded::of(&call)
        });
        assert_eq!(nested, alone);
        assert_eq!(alone.accesses.operands().count(), 2);
    }

    #[test]
    fn the_same_without_lock_or_memory_do_not() {
        // add [rax], rbx; cmpxchg [rax], rbx; xchg rax, rbx; mov [rax], rbx
        assert!(!bus(&[0x48, 0x01, 0x18]));
        assert!(!bus(&[0x48, 0x0f, 0xb1, 0x18]));
        assert!(!bus(&[0x48, 0x87, 0xd8]));
        assert!(!bus(&[0x48, 0x89, 0x18]));
    }
}
