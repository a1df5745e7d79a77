//! Decoding: reading an instruction from the tracee's memory into what
//! the backends know of it ([`Decoded`], shared), once per address until
//! its bytes change (see `code`), and Valgrind's counting of REP string
//! instructions in a step.

use std::fs::File;
use std::os::unix::fs::FileExt;

use iced_x86::{Decoder, DecoderOptions};

use crate::flow::{client_request_prefix, Flow, CLIENT_REQUEST_LEN, MAX_INSTRUCTION_LEN};
use crate::semantics::{Accesses, Branch, Decoded, Effect};

/// How a step of a REP string instruction went: the iterations it ran, and
/// whether it then ended the instruction by the count check (an execution of
/// its own for Valgrind).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Repetitions {
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
        let decoded = Decoded::of(&instruction);
        (Some(decoded), decoded.len.max(compared))
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
