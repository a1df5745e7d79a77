//! Decoding: what the step backend needs to know of an instruction (its length,
//! how it may transfer control and REP behaviour, classified by the shared
//! rules of [`crate::flow`]), decoded with iced-x86 (once per address until
//! its bytes change, see `code`), and Valgrind's counting of REP string
//! instructions.

use std::fs::File;
use std::os::unix::fs::FileExt;

use iced_x86::{Decoder, DecoderOptions, Instruction, InstructionInfoFactory, Mnemonic};

use crate::flow::{
    client_request_prefix, is_rep_string, rep_counter_32, rep_while_zero_flag, End, Flow,
    CLIENT_REQUEST_LEN, MAX_INSTRUCTION_LEN,
};

use super::accesses::Accesses;
use super::branches::{Branch, Effect};

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
    /// It is `cpuid` (answered by the tracer, see [`crate::cpuid`]).
    pub cpuid: bool,
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
        let marker = client_request_prefix(&bytes[..got]);
        // The marker check compared one byte past the matching prefix.
        let compared = (marker + 1).min(usize::from(CLIENT_REQUEST_LEN)) as u8;
        if marker == usize::from(CLIENT_REQUEST_LEN) {
            let decoded = Decoded {
                len: CLIENT_REQUEST_LEN,
                flow: Flow::ClientRequest,
                rep: None,
                accesses: Accesses::none(),
                element: 0,
                branch: Branch::None,
                effect: Effect::unknown(),
                cpuid: false,
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
        let rep = is_rep_string(instruction).then(|| Rep {
            while_zero_flag: rep_while_zero_flag(instruction),
            counter_32: rep_counter_32(instruction),
        });
        let mut factory = InstructionInfoFactory::new();
        Decoded {
            len: instruction.len() as u8,
            flow: Flow::of(instruction),
            rep,
            accesses: Accesses::of(instruction, &mut factory),
            element: if instruction.is_string_instruction() {
                instruction.memory_size().size() as u8
            } else {
                0
            },
            branch: Branch::of(instruction),
            effect: Effect::of(instruction, &mut factory),
            cpuid: instruction.mnemonic() == Mnemonic::Cpuid,
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
