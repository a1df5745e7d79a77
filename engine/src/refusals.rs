//! System calls the program is refused: they fail with `ENOSYS` without
//! reaching the kernel, as under Valgrind 3.19, which implements neither.
//!
//! - `rseq` (334), always: glibc registers a restartable-sequence area at
//!   every thread's start and, when that fails, reads the processor with
//!   `getcpu` instead of from the area. A registered area's critical
//!   sections cannot work under cgx: the kernel restarts one only while
//!   the thread's instruction pointer lies in the section's code, never in
//!   a translation of it, and a single-stepped section is restarted at
//!   every step. So a program sees no `rseq`, as under Valgrind.
//! - `clone3` (435), with Valgrind's machine: glibc then starts threads
//!   with `clone`, as under Valgrind (`clone3` runs natively otherwise).
//!
//! Both backends refuse them where the program's `syscall` would run:
//! the translate backend's system-call filter traps before them, the step
//! backend and the translate backend's stepper look at the number before
//! a step.

use crate::ptrace::Regs;

/// `rseq`.
const SYS_RSEQ: u64 = 334;
/// `clone3`.
const SYS_CLONE3: u64 = 435;

/// `ENOSYS`, the error a refused system call returns.
const ENOSYS: u64 = libc::ENOSYS as u64;

/// Which system calls a run refuses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Refusals {
    /// The program sees Valgrind's machine (`RunOptions::valgrind_machine`).
    valgrind_machine: bool,
}

impl Refusals {
    /// The refusals of a run whose program sees Valgrind's machine when
    /// `valgrind_machine`.
    pub fn new(valgrind_machine: bool) -> Refusals {
        Refusals { valgrind_machine }
    }

    /// The numbers of the system calls refused.
    pub fn numbers(self) -> &'static [u64] {
        match self.valgrind_machine {
            true => &[SYS_RSEQ, SYS_CLONE3],
            false => &[SYS_RSEQ],
        }
    }

    /// Whether a `syscall` with `number` in rax is refused.
    pub fn refuses(self, number: u64) -> bool {
        self.numbers().contains(&number)
    }
}

/// The registers after a refused `syscall` that the program goes on from
/// at `resume` with rcx `next`: rax `-ENOSYS`, r11 the flags, as the
/// kernel leaves them after a system call.
pub(crate) fn refuse(regs: &mut Regs, resume: u64, next: u64) {
    regs.rax = ENOSYS.wrapping_neg();
    regs.r11 = regs.eflags;
    regs.rcx = next;
    regs.rip = resume;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rseq_is_refused_on_every_machine_and_clone3_on_valgrinds() {
        let valgrind = Refusals::new(true);
        let host = Refusals::new(false);
        assert!(valgrind.refuses(SYS_RSEQ) && host.refuses(SYS_RSEQ));
        assert!(valgrind.refuses(SYS_CLONE3) && !host.refuses(SYS_CLONE3));
        // clone, read, exit: never.
        for number in [56, 0, 60] {
            assert!(!valgrind.refuses(number) && !host.refuses(number));
        }
    }

    #[test]
    fn a_refused_call_returns_enosys_where_the_program_goes_on() {
        // SAFETY: the registers are plain integers, all-zero valid.
        let mut regs: Regs = unsafe { std::mem::zeroed() };
        regs.rax = SYS_RSEQ;
        regs.eflags = 0x246;
        refuse(&mut regs, 0x1000, 0x2000);
        assert_eq!(regs.rax as i64, -38);
        assert_eq!((regs.rip, regs.rcx, regs.r11), (0x1000, 0x2000, 0x246));
    }
}
