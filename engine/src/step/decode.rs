//! Decoding: reading an instruction from the tracee's memory into what
//! the backends know of it ([`Decoded`], shared), once per address until
//! its bytes change (see `code`), and Valgrind's counting of REP string
//! instructions in a step.

use std::fs::File;

use iced_x86::{Decoder, DecoderOptions};

use crate::flow::{client_request_prefix, Flow, CLIENT_REQUEST_LEN, MAX_INSTRUCTION_LEN};
use crate::semantics::{Accesses, Branch, Decoded, Effect};

/// The zero flag in `eflags`.
const ZERO_FLAG: u64 = 1 << 6;

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
                bus: false,
                syscall: false,
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
        // The flags are defined once the instruction is left. A step that
        // stops in its middle ran iterations whose condition held, and the
        // processor may not have updated ZF yet (seen with fast short REPE
        // CMPSB / REPNE SCASB): it is not read there.
        let condition_held = match rep.while_zero_flag {
            Some(want) if left => want == (after.eflags & ZERO_FLAG != 0),
            _ => true,
        };
        let count_check = left && (iterations == 0 || (count_after == 0 && condition_held));
        Some(Repetitions {
            iterations,
            count_check,
            condition_held,
        })
    }
}

pub(super) use crate::ptrace::read_available;

#[cfg(test)]
mod tests {
    use super::*;

    /// The instruction of `bytes` at 0x1000.
    fn instruction(bytes: &[u8]) -> Decoded {
        let mut decoder = Decoder::with_ip(64, bytes, 0x1000, DecoderOptions::NONE);
        Decoded::of(&decoder.decode())
    }

    /// Registers with `rcx`, `rip` and the zero flag.
    fn regs(rcx: u64, rip: u64, zero_flag: bool) -> libc::user_regs_struct {
        // SAFETY: a plain-data struct of integers; all zeros is valid.
        let mut regs: libc::user_regs_struct = unsafe { std::mem::zeroed() };
        regs.rcx = rcx;
        regs.rip = rip;
        regs.eflags = 0x202 | if zero_flag { ZERO_FLAG } else { 0 };
        regs
    }

    const REPE_CMPSB: &[u8] = &[0xf3, 0xa6];
    const REPNE_SCASB: &[u8] = &[0xf2, 0xae];
    const REP_MOVSB: &[u8] = &[0xf3, 0xa4];

    #[test]
    fn in_the_middle_the_condition_held_whatever_the_flags_say() {
        for (bytes, stale) in [(REPE_CMPSB, false), (REPNE_SCASB, true)] {
            let decoded = instruction(bytes);
            let before = regs(12, 0x1000, stale);
            let after = regs(11, 0x1000, stale);
            let rep = decoded.repetitions(0x1000, &before, &after);
            assert_eq!(
                rep,
                Some(Repetitions {
                    iterations: 1,
                    count_check: false,
                    condition_held: true,
                })
            );
            assert_eq!(decoded.executions(0x1000, &before, &after, true), 1);
        }
    }

    #[test]
    fn at_the_end_the_flags_tell_whether_the_condition_held() {
        let decoded = instruction(REPE_CMPSB);
        // The bytes differed: the instruction ends before the count does.
        let before = regs(12, 0x1000, true);
        let differed = regs(4, 0x1002, false);
        let rep = decoded.repetitions(0x1000, &before, &differed);
        assert_eq!(
            rep,
            Some(Repetitions {
                iterations: 8,
                count_check: false,
                condition_held: false,
            })
        );
        // Equal to the end: the count check ends it, an execution of its own.
        let equal = regs(0, 0x1002, true);
        let rep = decoded.repetitions(0x1000, &before, &equal);
        assert_eq!(
            rep,
            Some(Repetitions {
                iterations: 12,
                count_check: true,
                condition_held: true,
            })
        );
        assert_eq!(decoded.executions(0x1000, &before, &equal, true), 13);
        // The last bytes differed: no count check.
        let last_differed = regs(0, 0x1002, false);
        let rep = decoded.repetitions(0x1000, &before, &last_differed);
        assert_eq!(rep.map(|rep| rep.count_check), Some(false));
        // REPNE SCASB found the byte (ZF set) in its last step.
        let scasb = instruction(REPNE_SCASB);
        let found = regs(9, 0x1002, true);
        let rep = scasb.repetitions(0x1000, &regs(10, 0x1000, false), &found);
        assert_eq!(rep.map(|rep| rep.condition_held), Some(false));
    }

    #[test]
    fn a_zero_count_and_plain_rep() {
        let decoded = instruction(REPE_CMPSB);
        let rep = decoded.repetitions(0x1000, &regs(0, 0x1000, false), &regs(0, 0x1002, false));
        assert_eq!(
            rep.map(|rep| (rep.iterations, rep.count_check)),
            Some((0, true))
        );
        // Plain REP has no condition: the flags never matter.
        let movsb = instruction(REP_MOVSB);
        let rep = movsb.repetitions(0x1000, &regs(3, 0x1000, false), &regs(0, 0x1002, false));
        assert_eq!(
            rep,
            Some(Repetitions {
                iterations: 3,
                count_check: true,
                condition_held: true,
            })
        );
        assert_eq!(
            decoded
                .repetitions(0x1000, &regs(0, 0, false), &regs(0, 0, false))
                .map(|r| r.iterations),
            Some(0)
        );
        let plain = instruction(&[0x90]);
        assert_eq!(
            plain.repetitions(0x1000, &regs(0, 0x1000, false), &regs(0, 0x1001, false)),
            None
        );
    }
}
