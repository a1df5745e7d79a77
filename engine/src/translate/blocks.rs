//! Decoding a block ahead of execution, cut where VEX cuts it for
//! Callgrind (the shared rules of [`crate::flow`]).
//!
//! A block starts at an address control arrives at and takes instructions
//! until one that always ends a block ([`End::ends_block`]) or 60
//! instructions. `loop`/`jrcxz` end the block only when taken (a side
//! exit): such blocks are decoded in full and marked for stepping in this
//! slice.

use iced_x86::{
    Decoder, DecoderOptions, Instruction, InstructionInfoFactory, Mnemonic, OpAccess, OpKind,
    Register,
};

use crate::flow::{
    client_request_prefix, is_rep_string, End, Flow, CLIENT_REQUEST_LEN, MAX_BLOCK_INSTRUCTIONS,
    MAX_INSTRUCTION_LEN,
};

use super::memory::Memory;

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

    /// Whether it is `cpuid` (stepped: the tracer answers it, see
    /// [`crate::cpuid`]).
    pub fn is_cpuid(&self) -> bool {
        self.instruction
            .as_ref()
            .is_some_and(|instruction| instruction.mnemonic() == iced_x86::Mnemonic::Cpuid)
    }

    /// What [`crate::flow::exit`] needs of it.
    pub fn end(&self) -> End {
        End {
            addr: self.addr,
            len: self.len,
            flow: self.flow,
            rep: self.rep,
        }
    }
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

    /// Whether no instruction writes the stack pointer (no push, pop, call,
    /// `enter`/`leave`, nor rsp as a destination): every run of the block
    /// starts with the stack pointer of the run before when it jumps back
    /// to its own start.
    pub fn keeps_stack_pointer(&self) -> bool {
        let mut factory = InstructionInfoFactory::new();
        self.insns.iter().all(|insn| {
            insn.instruction.as_ref().is_some_and(|instruction| {
                factory
                    .info(instruction)
                    .used_registers()
                    .iter()
                    .all(|used| {
                        used.register().full_register() != Register::RSP
                            || matches!(used.access(), OpAccess::Read | OpAccess::CondRead)
                    })
            })
        })
    }

    /// Whether an instruction uses the `gs` segment: a `gs:` operand, the
    /// `gs` selector, or `rdgsbase`/`wrgsbase`/`swapgs`.
    pub fn uses_gs(&self) -> bool {
        self.insns
            .iter()
            .filter_map(|insn| insn.instruction.as_ref())
            .any(|instruction| {
                instruction.segment_prefix() == Register::GS
                    || matches!(
                        instruction.mnemonic(),
                        Mnemonic::Rdgsbase | Mnemonic::Wrgsbase | Mnemonic::Swapgs
                    )
                    || (0..instruction.op_count()).any(|operand| {
                        instruction.op_kind(operand) == OpKind::Register
                            && instruction.op_register(operand) == Register::GS
                    })
            })
    }
}

/// Decodes the block at `addr`; `None` when its first bytes do not decode.
/// A block ends early (before 60 instructions and without a transfer) only
/// where the next bytes do not decode or are not mapped.
pub(super) fn decode(memory: &Memory, addr: u64) -> Option<DecodedBlock> {
    let limit = MAX_BLOCK_INSTRUCTIONS as usize;
    let mut bytes =
        vec![0u8; limit * usize::from(MAX_INSTRUCTION_LEN) + usize::from(CLIENT_REQUEST_LEN)];
    let got = memory.read_available(addr, &mut bytes);
    bytes.truncate(got);
    let mut insns = Vec::new();
    let mut offset = 0usize;
    while insns.len() < limit && offset < bytes.len() {
        let at = addr.wrapping_add(offset as u64);
        let rest = &bytes[offset..];
        let insn = if client_request_prefix(rest) == usize::from(CLIENT_REQUEST_LEN) {
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
                flow: Flow::of(&instruction),
                rep: is_rep_string(&instruction),
                instruction: Some(instruction),
            }
        };
        offset += usize::from(insn.len);
        let ends = insn.end().ends_block();
        insns.push(insn);
        if ends {
            break;
        }
    }
    (!insns.is_empty()).then_some(DecodedBlock { addr, insns })
}
