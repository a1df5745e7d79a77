//! Decoding a block as VEX cuts it for Callgrind (the same rules as the step
//! backend's `step::blocks`, applied ahead of execution instead of as the
//! instructions are stepped), and the arrival kind of the block that
//! follows.
//!
//! A block starts at an address control arrives at and takes instructions
//! until one that may transfer control (jump, conditional jump, call,
//! return, system call, `int`/`int3`/`ud2`/`hlt`/`pause`/`clflush`, the
//! client-request marker), a REP string instruction, or 60 instructions.
//! `loop`/`jrcxz` end the block only when taken (a side exit): such blocks
//! are decoded in full and marked for stepping in this slice.

use iced_x86::{Decoder, DecoderOptions, FlowControl, Instruction, Mnemonic, OpKind};

use crate::event::Arrival;

use super::ptrace::Memory;

/// VEX's `guest_max_insns` (Valgrind 3.19).
pub(super) const MAX_BLOCK_INSTRUCTIONS: usize = 60;

/// The client-request marker: one 19-byte instruction for Valgrind.
const CLIENT_REQUEST: [u8; 19] = [
    0x48, 0xC1, 0xC7, 0x03, 0x48, 0xC1, 0xC7, 0x0D, 0x48, 0xC1, 0xC7, 0x3D, 0x48, 0xC1, 0xC7, 0x33,
    0x48, 0x87, 0xDB,
];

/// Length of the client-request marker.
pub(super) const CLIENT_REQUEST_LEN: u8 = CLIENT_REQUEST.len() as u8;

/// How an instruction may transfer control, as VEX ends its blocks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Flow {
    /// Continues with the next instruction.
    Next,
    /// `jcc`.
    ConditionalJump,
    /// `loop*`, `jrcxz`, `jecxz`: ends the block only when taken.
    SideExit,
    /// `jmp`.
    Jump {
        /// The target is in the instruction.
        direct: bool,
    },
    /// `call`.
    Call,
    /// `ret`, `iret`.
    Return,
    /// `syscall`/`sysenter`.
    SystemCall,
    /// `int`, `int3`, `ud2`, `hlt`, `pause`, `clflush`.
    Stop,
    /// The client-request marker.
    ClientRequest,
}

/// One instruction of a block.
#[derive(Clone, Debug)]
pub(super) struct Insn {
    /// Its address.
    pub addr: u64,
    /// Its length in bytes.
    pub len: u8,
    /// How it may transfer control.
    pub flow: Flow,
    /// A REP-prefixed string instruction (ends its block).
    pub rep: bool,
    /// The decoded instruction (`None` for the client-request marker).
    pub instruction: Option<Instruction>,
}

impl Insn {
    /// The address after it.
    pub fn next(&self) -> u64 {
        self.addr.wrapping_add(u64::from(self.len))
    }

    /// What [`exit`] needs of it.
    pub fn end(&self) -> End {
        End {
            addr: self.addr,
            len: self.len,
            flow: self.flow,
            rep: self.rep,
        }
    }
}

/// What decides how a block is left after an instruction: its address,
/// length, flow and REP-ness.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct End {
    /// Its address.
    pub addr: u64,
    /// Its length.
    pub len: u8,
    /// How it may transfer control.
    pub flow: Flow,
    /// A REP string instruction.
    pub rep: bool,
}

/// A decoded block.
#[derive(Clone, Debug)]
pub(super) struct DecodedBlock {
    /// Its first address.
    pub addr: u64,
    /// Its instructions, at least one.
    pub insns: Vec<Insn>,
}

impl DecodedBlock {
    /// The last instruction.
    pub fn last(&self) -> &Insn {
        // A block has at least one instruction (see `decode`).
        &self.insns[self.insns.len() - 1]
    }
}

/// Decodes the block at `addr`; `None` when its first bytes do not decode.
/// A block ends early (before 60 instructions and without a transfer) only
/// where the next bytes do not decode or are not mapped.
pub(super) fn decode(memory: &Memory, addr: u64) -> Option<DecodedBlock> {
    let mut bytes = vec![0u8; MAX_BLOCK_INSTRUCTIONS * 15 + CLIENT_REQUEST.len()];
    let got = memory.read_available(addr, &mut bytes);
    bytes.truncate(got);
    let mut insns = Vec::new();
    let mut offset = 0usize;
    while insns.len() < MAX_BLOCK_INSTRUCTIONS && offset < bytes.len() {
        let at = addr.wrapping_add(offset as u64);
        let rest = &bytes[offset..];
        let insn = if rest.starts_with(&CLIENT_REQUEST) {
            Insn {
                addr: at,
                len: CLIENT_REQUEST_LEN,
                flow: Flow::ClientRequest,
                rep: false,
                instruction: None,
            }
        } else {
            let mut decoder = Decoder::with_ip(64, rest, at, DecoderOptions::NONE);
            let instruction = decoder.decode();
            if instruction.is_invalid() {
                break;
            }
            Insn {
                addr: at,
                len: instruction.len() as u8,
                flow: flow(&instruction),
                rep: (instruction.has_rep_prefix() || instruction.has_repne_prefix())
                    && instruction.is_string_instruction(),
                instruction: Some(instruction),
            }
        };
        offset += usize::from(insn.len);
        let ends = insn.rep || !matches!(insn.flow, Flow::Next | Flow::SideExit);
        insns.push(insn);
        if ends {
            break;
        }
    }
    (!insns.is_empty()).then_some(DecodedBlock { addr, insns })
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

/// Whether a REP string instruction counts in ecx (address-size prefix).
pub(super) fn counter_32(instruction: &Instruction) -> bool {
    (0..instruction.op_count()).any(|operand| {
        matches!(
            instruction.op_kind(operand),
            OpKind::MemorySegESI | OpKind::MemoryESEDI
        )
    })
}

/// How the block is left after `insn` (its `count`th instruction) executed
/// and the thread went to `now`; `None` when the block goes on. The rules of
/// the step backend (`step::blocks::exit`).
pub(super) fn exit(insn: End, now: u64, count: usize) -> Option<Arrival> {
    let next = insn.addr.wrapping_add(u64::from(insn.len));
    if insn.rep {
        return Some(if now == insn.addr {
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
    let arrival = match insn.flow {
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
