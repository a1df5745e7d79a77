//! Where Valgrind's blocks end and how control arrived at the next one: the
//! rules both backends share (the step backend applies them as the
//! instructions are stepped, the translate backend ahead of execution when
//! it cuts a block and again when it replays the records).
//!
//! Block cutting (VEX as Callgrind runs it, without chasing):
//!
//! - A block ends after a `jmp`, `jcc`, `call`, `ret`, `syscall`,
//!   `int`/`int3`/`ud2`/`hlt`/`pause`/`clflush`, the client-request marker,
//!   a REP string instruction, a taken `loop`/`jrcxz` (VEX's side exit; when
//!   not taken the block goes on), or after [`MAX_BLOCK_INSTRUCTIONS`].
//! - The client-request marker (`rol rdi` ×4 + `xchg rbx,rbx`) is one
//!   19-byte instruction for Valgrind.
//!
//! Arrival (Callgrind's jump kinds, see `callgrind/main.c`, "Info for final
//! exit from BB", and `bbcc.c`, `setup_bbcc`), decided by [`exit`]:
//!
//! - A jump (or side exit) whose target is the next instruction counts as a
//!   fall-through (`jk_None`); an indirect jump is always a jump.
//! - A REP string instruction is a VEX block of its own kind: `if rcx == 0
//!   goto next; one iteration; goto self` (REPE/REPNE: `if cond goto self;
//!   goto next`). Callgrind's inversion heuristic (the last side exit goes
//!   to the next instruction) swaps the exits of plain `rep`, so in both
//!   cases a further iteration arrives as a conditional jump to the same
//!   address ([`Arrival::Jump`] `{ conditional: true }`) and leaving the
//!   instruction is a fall-through.

use iced_x86::{FlowControl, Instruction, Mnemonic, OpKind};

use crate::event::Arrival;

/// VEX's `guest_max_insns` default (60 in Valgrind 3.19; checked with
/// lackey: a straight run of 120 instructions is 2 blocks).
pub(crate) const MAX_BLOCK_INSTRUCTIONS: u32 = 60;

/// The longest x86 instruction.
pub(crate) const MAX_INSTRUCTION_LEN: u8 = 15;

/// The client-request marker: `rol rdi,3; rol rdi,13; rol rdi,61; rol
/// rdi,51; xchg rbx,rbx`. Valgrind's VEX decodes it as one 19-byte
/// instruction.
pub(crate) const CLIENT_REQUEST: [u8; 19] = [
    0x48, 0xC1, 0xC7, 0x03, 0x48, 0xC1, 0xC7, 0x0D, 0x48, 0xC1, 0xC7, 0x3D, 0x48, 0xC1, 0xC7, 0x33,
    0x48, 0x87, 0xDB,
];

/// Length of the client-request marker (one instruction for Valgrind).
pub(crate) const CLIENT_REQUEST_LEN: u8 = CLIENT_REQUEST.len() as u8;

/// How many leading bytes of `bytes` match the client-request marker (the
/// marker is there when this is [`CLIENT_REQUEST_LEN`]).
pub(crate) fn client_request_prefix(bytes: &[u8]) -> usize {
    bytes
        .iter()
        .zip(CLIENT_REQUEST.iter())
        .take_while(|(byte, want)| byte == want)
        .count()
}

/// How an instruction may transfer control, as VEX ends its blocks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Flow {
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
    /// The client-request marker (emulated, never run).
    ClientRequest,
}

impl Flow {
    /// How `instruction` may transfer control.
    pub(crate) fn of(instruction: &Instruction) -> Flow {
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

    /// Whether an instruction of this flow always ends its block (a side
    /// exit ends it only when taken, see [`exit`]).
    pub(crate) fn ends_block(self) -> bool {
        !matches!(self, Flow::Next | Flow::SideExit)
    }
}

/// Whether `instruction` is a REP-prefixed string instruction (a block of
/// its own for VEX).
pub(crate) fn is_rep_string(instruction: &Instruction) -> bool {
    (instruction.has_rep_prefix() || instruction.has_repne_prefix())
        && instruction.is_string_instruction()
}

/// For a REP string instruction, the flag condition that also ends it:
/// `Some(true)` repeat while ZF = 1 (REPE `cmps`/`scas`), `Some(false)`
/// while ZF = 0 (REPNE), `None` when only the count ends it.
pub(crate) fn rep_while_zero_flag(instruction: &Instruction) -> Option<bool> {
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
    conditional.then(|| instruction.has_rep_prefix())
}

/// Whether a REP string instruction counts in `ecx` (address-size prefix)
/// instead of `rcx`.
pub(crate) fn rep_counter_32(instruction: &Instruction) -> bool {
    (0..instruction.op_count()).any(|operand| {
        matches!(
            instruction.op_kind(operand),
            OpKind::MemorySegESI | OpKind::MemoryESEDI
        )
    })
}

/// What decides how a block is left after an instruction: its address,
/// length, flow and REP-ness.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct End {
    /// Its address.
    pub addr: u64,
    /// Its length in bytes.
    pub len: u8,
    /// How it may transfer control.
    pub flow: Flow,
    /// A REP string instruction.
    pub rep: bool,
}

impl End {
    /// The address after the instruction.
    pub(crate) fn next(&self) -> u64 {
        self.addr.wrapping_add(u64::from(self.len))
    }

    /// Whether the block always ends after it (whatever the thread did).
    pub(crate) fn ends_block(&self) -> bool {
        self.rep || self.flow.ends_block()
    }
}

/// How the block is left after `insn`, its `count`th instruction, executed
/// and the thread went to `now`: `None` when the block goes on, else how
/// the next block is arrived at.
#[inline]
pub(crate) fn exit(insn: End, now: u64, count: u32) -> Option<Arrival> {
    let next = insn.next();
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

/// [`exit`] worked out once for the last instruction of a block: the
/// arrival of the next block, which depends on where the thread went only
/// through whether that is one address (the instruction's next, or a REP
/// instruction's own).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ExitRule {
    /// The address that decides.
    to: u64,
    /// The arrival there.
    there: Arrival,
    /// The arrival anywhere else.
    elsewhere: Arrival,
}

impl ExitRule {
    /// The rule of leaving a block after `insn`, its `count`th instruction
    /// (a block that goes on after it is left by falling through).
    pub(crate) fn of(insn: End, count: u32) -> ExitRule {
        let arrival = |now| exit(insn, now, count).unwrap_or(Arrival::FallThrough);
        let to = if insn.rep { insn.addr } else { insn.next() };
        ExitRule {
            to,
            there: arrival(to),
            elsewhere: arrival(!to),
        }
    }

    /// The arrival of the next block, at `now`.
    #[inline]
    pub(crate) fn arrival(&self, now: u64) -> Arrival {
        if now == self.to {
            self.there
        } else {
            self.elsewhere
        }
    }
}

#[cfg(test)]
mod tests {
    use iced_x86::{Decoder, DecoderOptions};

    use super::*;

    fn decode(bytes: &[u8]) -> Instruction {
        Decoder::with_ip(64, bytes, 0x1000, DecoderOptions::NONE).decode()
    }

    fn end(bytes: &[u8]) -> End {
        let instruction = decode(bytes);
        End {
            addr: 0x1000,
            len: instruction.len() as u8,
            flow: Flow::of(&instruction),
            rep: is_rep_string(&instruction),
        }
    }

    const JUMP: Option<Arrival> = Some(Arrival::Jump { conditional: false });
    const TAKEN: Option<Arrival> = Some(Arrival::Jump { conditional: true });
    const FALL: Option<Arrival> = Some(Arrival::FallThrough);

    #[test]
    fn an_exit_rule_gives_what_exit_gives() {
        let ends: [&[u8]; 8] = [
            &[0x90],
            &[0x74, 0x05],
            &[0xE2, 0xFE],
            &[0xEB, 0x00],
            &[0xFF, 0xE0],
            &[0xE8, 0, 0, 0, 0],
            &[0xC3],
            &[0xF3, 0xA4],
        ];
        for bytes in ends {
            let insn = end(bytes);
            for count in [1, MAX_BLOCK_INSTRUCTIONS] {
                let rule = ExitRule::of(insn, count);
                for now in [0x1000, insn.next(), 0x1007, 0x2000] {
                    let expected = exit(insn, now, count).unwrap_or(Arrival::FallThrough);
                    assert_eq!(
                        rule.arrival(now),
                        expected,
                        "{bytes:x?} count {count} to {now:#x}"
                    );
                }
            }
        }
    }

    #[test]
    fn classifies_control_transfers() {
        let flow = |bytes: &[u8]| Flow::of(&decode(bytes));
        assert_eq!(flow(&[0x90]), Flow::Next); // nop
        assert_eq!(flow(&[0x74, 0x05]), Flow::ConditionalJump); // je
        assert_eq!(flow(&[0xE2, 0xFE]), Flow::SideExit); // loop
        assert_eq!(flow(&[0xE3, 0x02]), Flow::SideExit); // jrcxz
        assert_eq!(flow(&[0xEB, 0x00]), Flow::Jump { direct: true });
        assert_eq!(flow(&[0xFF, 0xE0]), Flow::Jump { direct: false }); // jmp rax
        assert_eq!(flow(&[0xE8, 0, 0, 0, 0]), Flow::Call);
        assert_eq!(flow(&[0xFF, 0xD0]), Flow::Call); // call rax
        assert_eq!(flow(&[0xC3]), Flow::Return);
        assert_eq!(flow(&[0x48, 0xCF]), Flow::Return); // iretq
        assert_eq!(flow(&[0x0F, 0x05]), Flow::SystemCall);
        for stop in [
            &[0xCC][..],
            &[0xCD, 0x80],
            &[0x0F, 0x0B],
            &[0xF4],
            &[0xF3, 0x90],
        ] {
            assert_eq!(flow(stop), Flow::Stop, "{stop:x?}");
        }
        assert_eq!(flow(&[0x0F, 0xAE, 0x38]), Flow::Stop); // clflush [rax]
    }

    #[test]
    fn blocks_end_at_transfers_and_rep_strings() {
        assert!(!end(&[0x90]).ends_block());
        assert!(!end(&[0xE2, 0xFE]).ends_block());
        assert!(end(&[0xC3]).ends_block());
        assert!(end(&[0xF3, 0xA4]).ends_block()); // rep movsb
        assert!(!end(&[0xA4]).ends_block()); // movsb
    }

    #[test]
    fn rep_conditions_and_counters() {
        assert_eq!(rep_while_zero_flag(&decode(&[0xF3, 0xA6])), Some(true)); // repe cmpsb
        assert_eq!(rep_while_zero_flag(&decode(&[0xF2, 0xAE])), Some(false)); // repne scasb
        assert_eq!(rep_while_zero_flag(&decode(&[0xF3, 0xAA])), None); // rep stosb
        assert!(rep_counter_32(&decode(&[0x67, 0xF3, 0xA4]))); // addr32 rep movsb
        assert!(!rep_counter_32(&decode(&[0xF3, 0xA4])));
    }

    #[test]
    fn arrivals() {
        let next = 0x1002;
        // A jcc: taken is a conditional jump, to the next instruction a
        // fall-through either way.
        assert_eq!(exit(end(&[0x74, 0x05]), 0x1007, 1), TAKEN);
        assert_eq!(exit(end(&[0x74, 0x05]), next, 1), FALL);
        assert_eq!(exit(end(&[0x74, 0x00]), next, 1), FALL);
        // A direct jmp to the next instruction is a fall-through.
        assert_eq!(exit(end(&[0xEB, 0x00]), next, 1), FALL);
        assert_eq!(exit(end(&[0xEB, 0x10]), 0x1012, 1), JUMP);
        // An indirect jump is always a jump.
        assert_eq!(exit(end(&[0xFF, 0xE0]), next, 1), JUMP);
        assert_eq!(exit(end(&[0xFF, 0xD0]), 0x5000, 1), Some(Arrival::Call));
        assert_eq!(exit(end(&[0xC3]), 0x5000, 1), Some(Arrival::Return));
        assert_eq!(exit(end(&[0x0F, 0x05]), next, 1), FALL);
        // Side exits end the block only when taken.
        assert_eq!(exit(end(&[0xE2, 0xFE]), 0x1000, 1), TAKEN);
        assert_eq!(exit(end(&[0xE2, 0xFE]), next, 1), None);
        // A REP string instruction: a further iteration is a conditional
        // jump to itself, leaving it a fall-through.
        assert_eq!(exit(end(&[0xF3, 0xA4]), 0x1000, 1), TAKEN);
        assert_eq!(exit(end(&[0xF3, 0xA4]), next, 1), FALL);
        // The instruction limit.
        assert_eq!(exit(end(&[0x90]), 0x1001, 59), None);
        assert_eq!(exit(end(&[0x90]), 0x1001, MAX_BLOCK_INSTRUCTIONS), FALL);
    }

    #[test]
    fn client_request_marker() {
        assert_eq!(client_request_prefix(&CLIENT_REQUEST), CLIENT_REQUEST.len());
        assert_eq!(client_request_prefix(&CLIENT_REQUEST[..5]), 5);
        assert_eq!(client_request_prefix(&[0x48, 0xC1, 0xC7, 0x04]), 3);
    }
}
