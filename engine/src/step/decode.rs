//! Decoding: what the step backend needs to know of an instruction (its length,
//! how it may transfer control, REP behaviour), decoded with iced-x86 (once
//! per address until its bytes change, see `code`), and Valgrind's counting
//! of REP string instructions.

use std::fs::File;
use std::os::unix::fs::FileExt;

use iced_x86::{
    Decoder, DecoderOptions, FlowControl, Instruction, InstructionInfoFactory, Mnemonic, OpKind,
};

use super::accesses::Accesses;
use super::branches::{Branch, Effect};

/// The client-request marker: `rol rdi,3; rol rdi,13; rol rdi,61; rol rdi,51;
/// xchg rbx,rbx`. Valgrind's VEX decodes it as one 19-byte instruction.
const CLIENT_REQUEST: [u8; 19] = [
    0x48, 0xC1, 0xC7, 0x03, 0x48, 0xC1, 0xC7, 0x0D, 0x48, 0xC1, 0xC7, 0x3D, 0x48, 0xC1, 0xC7, 0x33,
    0x48, 0x87, 0xDB,
];

/// Length of the client-request marker (one instruction for Valgrind).
pub(super) const CLIENT_REQUEST_LEN: u8 = CLIENT_REQUEST.len() as u8;

/// The longest x86 instruction.
const MAX_INSTRUCTION_LEN: u8 = 15;

/// How an instruction may transfer control, as VEX ends its blocks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Flow {
    /// Continues with the next instruction; the block goes on.
    Next,
    /// `jcc`: ends the block.
    ConditionalJump,
    /// `loop`, `loope`, `loopne`, `jrcxz`, `jecxz`: a side exit of the block
    /// when taken, the block goes on when not.
    SideExit,
    /// `jmp`: ends the block.
    Jump {
        /// A direct jump (target in the instruction).
        direct: bool,
    },
    /// `call`, direct or indirect.
    Call,
    /// `ret`, `iret`.
    Return,
    /// `syscall`/`sysenter`: ends the block, continues at the next instruction.
    SystemCall,
    /// Ends the block without a jump: `int`, `int3`, `ud2`, `hlt`, `pause`
    /// (VEX's yield), `clflush` (VEX's cache invalidation).
    Stop,
    /// The client-request marker (emulated, never stepped).
    ClientRequest,
}

/// The REP behaviour of a string instruction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Rep {
    /// `Some(true)`: repeat while ZF = 1 (REPE cmps/scas); `Some(false)`: while
    /// ZF = 0 (REPNE); `None`: only the count ends it.
    pub while_zero_flag: Option<bool>,
    /// The counter is `ecx` (address-size prefix), not `rcx`.
    counter_32: bool,
}

/// What the backend keeps of a decoded instruction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Decoded {
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
}

/// How a step of a REP string instruction went: the iterations it ran, and
/// whether it then ended the instruction by the count check (an execution of
/// its own for Valgrind).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Repetitions {
    /// Iterations run.
    pub iterations: u64,
    /// The final `rcx == 0` check ended the instruction.
    pub count_check: bool,
    /// The continue condition (REPE/REPNE) held after the last iteration.
    pub condition_held: bool,
}

impl Decoded {
    /// The decoded instruction at `addr` in the memory of `memory`, `None` when
    /// the bytes there do not decode; and how many bytes from `addr` the
    /// answer depends on (the instruction's, those the client-request check
    /// compared, 15 when the bytes do not decode).
    pub fn read(memory: &File, addr: u64) -> (Option<Decoded>, u8) {
        let mut bytes = [0u8; 24];
        let got = read_available(memory, addr, &mut bytes);
        let marker = bytes[..got]
            .iter()
            .zip(CLIENT_REQUEST.iter())
            .take_while(|(byte, want)| byte == want)
            .count();
        // The marker check compared one byte past the matching prefix.
        let compared = (marker + 1).min(CLIENT_REQUEST.len()) as u8;
        if marker == CLIENT_REQUEST.len() {
            let decoded = Decoded {
                len: CLIENT_REQUEST_LEN,
                flow: Flow::ClientRequest,
                rep: None,
                accesses: Accesses::none(),
                element: 0,
                branch: Branch::None,
                effect: Effect::unknown(),
            };
            return (Some(decoded), CLIENT_REQUEST_LEN);
        }
        let mut decoder = Decoder::with_ip(64, &bytes[..got], addr, DecoderOptions::NONE);
        let instruction = decoder.decode();
        if instruction.is_invalid() {
            return (None, MAX_INSTRUCTION_LEN.max(compared));
        }
        let decoded = Decoded::from_instruction(&instruction);
        (Some(decoded), decoded.len.max(compared))
    }

    fn from_instruction(instruction: &Instruction) -> Decoded {
        let repeated = instruction.has_rep_prefix() || instruction.has_repne_prefix();
        let rep = (repeated && instruction.is_string_instruction()).then(|| {
            let conditional = matches!(
                instruction.mnemonic(),
                Mnemonic::Cmpsb
                    | Mnemonic::Cmpsw
                    | Mnemonic::Cmpsd
                    | Mnemonic::Cmpsq
                    | Mnemonic::Scasb
                    | Mnemonic::Scasw
                    | Mnemonic::Scasd
                    | Mnemonic::Scasq
            );
            let counter_32 = (0..instruction.op_count()).any(|operand| {
                matches!(
                    instruction.op_kind(operand),
                    OpKind::MemorySegESI | OpKind::MemoryESEDI
                )
            });
            Rep {
                while_zero_flag: conditional.then(|| instruction.has_rep_prefix()),
                counter_32,
            }
        });
        let mut factory = InstructionInfoFactory::new();
        Decoded {
            len: instruction.len() as u8,
            flow: flow(instruction),
            rep,
            accesses: Accesses::of(instruction, &mut factory),
            element: if instruction.is_string_instruction() {
                instruction.memory_size().size() as u8
            } else {
                0
            },
            branch: Branch::of(instruction),
            effect: Effect::of(instruction, &mut factory),
        }
    }

    /// How many times the instruction counts for a step that went from
    /// `before` to `after` (Valgrind's rules: a REP string instruction counts
    /// once per iteration plus once for the final `rcx == 0` check). `completed`
    /// says whether the step is known to have finished the instruction (a
    /// single-step trap); otherwise leaving the address is the evidence.
    pub fn executions(
        &self,
        at: u64,
        before: &libc::user_regs_struct,
        after: &libc::user_regs_struct,
        completed: bool,
    ) -> u64 {
        match self.repetitions(at, before, after) {
            Some(rep) => rep.iterations + u64::from(rep.count_check),
            None => u64::from(completed || after.rip != at),
        }
    }

    /// For a REP string instruction, what a step from `before` to `after`
    /// did; `None` for other instructions.
    pub fn repetitions(
        &self,
        at: u64,
        before: &libc::user_regs_struct,
        after: &libc::user_regs_struct,
    ) -> Option<Repetitions> {
        let rep = self.rep?;
        let left = after.rip != at;
        let mask = if rep.counter_32 {
            u64::from(u32::MAX)
        } else {
            u64::MAX
        };
        let (count_before, count_after) = (before.rcx & mask, after.rcx & mask);
        let iterations = count_before.wrapping_sub(count_after) & mask;
        let zero_flag = after.eflags & 0x40 != 0;
        let condition_held = match rep.while_zero_flag {
            Some(want) => want == zero_flag,
            None => true,
        };
        let count_check = left && (iterations == 0 || (count_after == 0 && condition_held));
        Some(Repetitions {
            iterations,
            count_check,
            condition_held,
        })
    }
}

fn flow(instruction: &Instruction) -> Flow {
    match instruction.mnemonic() {
        Mnemonic::Syscall | Mnemonic::Sysenter => return Flow::SystemCall,
        Mnemonic::Loop
        | Mnemonic::Loope
        | Mnemonic::Loopne
        | Mnemonic::Jrcxz
        | Mnemonic::Jecxz
        | Mnemonic::Jcxz => return Flow::SideExit,
        Mnemonic::Pause | Mnemonic::Hlt | Mnemonic::Clflush => return Flow::Stop,
        Mnemonic::Iret | Mnemonic::Iretd | Mnemonic::Iretq => return Flow::Return,
        _ => {}
    }
    match instruction.flow_control() {
        FlowControl::Next | FlowControl::XbeginXabortXend => Flow::Next,
        FlowControl::ConditionalBranch => Flow::ConditionalJump,
        FlowControl::UnconditionalBranch => Flow::Jump { direct: true },
        FlowControl::IndirectBranch => Flow::Jump { direct: false },
        FlowControl::Call | FlowControl::IndirectCall => Flow::Call,
        FlowControl::Return => Flow::Return,
        FlowControl::Interrupt | FlowControl::Exception => Flow::Stop,
    }
}

/// Reads as many bytes at `addr` as are mapped (code may end at a page before an
/// unmapped one); returns how many were read.
pub(super) fn read_available(memory: &File, addr: u64, buffer: &mut [u8]) -> usize {
    let mut got = 0;
    while got < buffer.len() {
        match memory.read_at(&mut buffer[got..], addr.wrapping_add(got as u64)) {
            Ok(0) | Err(_) => break,
            Ok(n) => got += n,
        }
    }
    got
}
