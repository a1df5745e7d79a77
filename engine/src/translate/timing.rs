//! Timing a translated `syscall` (`RunOptions::system_calls`): the words
//! of the block's record that hold the call's number and the clocks read
//! right before and right after it, the code that fills them in the
//! tracee, and how the replay and the tracer read and write them.
//!
//! The record of a block ending in `syscall` then holds, after the words
//! `capture` records, [`SystemCallWords::len`] words:
//!
//! ```text
//! number                      rax at the `syscall`
//! wall before: sec, nsec      CLOCK_MONOTONIC, a `struct timespec`
//! [cpu before: sec, nsec]     CLOCK_THREAD_CPUTIME_ID (with the CPU clock)
//! wall after: sec, nsec       (zeroed before the call: zero until it returns)
//! [cpu after: sec, nsec]
//! ```
//!
//! The kernel writes the `timespec`s straight into the record: the code
//! before the program's `syscall` ([`before`]) and after it ([`after`])
//! issues raw `clock_gettime` system calls with the record's words as
//! their buffers. It uses rax, rdi and rsi (and the `syscall`'s rcx and
//! r11), saved in the thread's slots and restored; `mov`, `lea` and
//! `syscall` change no flag (the kernel returns with the flags it was
//! entered with). Before the program's call rcx and r11 are free (the call
//! overwrites them); after it, rax (the result) and r11 (the flags) are
//! restored, and rcx is set by the translation's `lea` that follows. The
//! program's stack is never touched. Neither piece holds a safe point:
//! no signal is delivered between them and the slots are dead at every
//! safe point, so they need not be kept across a handler.
//!
//! A call the tracer runs itself (`invalidate`'s watched calls) skips
//! both pieces: the tracer fills the words ([`SystemCallWords::write`]).
//! A call that does not return to its block (`exit`, `rt_sigreturn`, a
//! successful `execve`) or whose record is replayed before it returns
//! (`fork`, `vfork`, `clone`, replayed at their event stop) leaves the
//! words after it zero: the replay reports it untimed.

use iced_x86::{Code, Instruction, MemoryOperand, Register};

use crate::event::SystemCall;
use crate::system_time::{ns_timespec, timespec_ns, Reading, SystemCallClocks};

use super::area::{RECORD, TIMING_R11, TIMING_RAX, TIMING_RDI, TIMING_RSI};
use super::emit::Emit;
use super::translator::Refusal;

/// `clock_gettime`'s number.
const SYS_CLOCK_GETTIME: i32 = 228;
/// `CLOCK_MONOTONIC`.
const CLOCK_MONOTONIC: i32 = 1;
/// `CLOCK_THREAD_CPUTIME_ID`.
const CLOCK_THREAD_CPUTIME_ID: i32 = 3;

/// Where a record holds the number and times of its block's system call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct SystemCallWords {
    /// The first word (the number), counted from the record's first word
    /// after the translation id (small: it stays within the padding of the
    /// replay's data of a translation, read for every record).
    pub first: u16,
    /// Whether the thread's CPU time is read too.
    pub cpu: bool,
}

impl SystemCallWords {
    /// Words a record needs for a system call timed with the CPU clock
    /// (`cpu`) or not.
    pub fn len(cpu: bool) -> usize {
        1 + 4 * (1 + usize::from(cpu))
    }

    /// The word of the `timespec` read before (`after` false) or after
    /// the call, of the CPU clock (`cpu`) or the wall clock.
    fn timespec(&self, after: bool, cpu: bool) -> usize {
        let per_end = 2 * (1 + usize::from(self.cpu));
        usize::from(self.first) + 1 + usize::from(after) * per_end + 2 * usize::from(cpu)
    }

    /// The call recorded in `words` (a record's words after its id); its
    /// times zero when it did not return to its block.
    pub fn read(&self, words: &[u64]) -> SystemCall {
        let word = |index: usize| words.get(index).copied().unwrap_or(0);
        let clock = |after: bool, cpu: bool| {
            let at = self.timespec(after, cpu);
            (word(at), word(at + 1))
        };
        let number = word(usize::from(self.first));
        let returned = clock(true, false) != (0, 0);
        if !returned {
            return SystemCall {
                number,
                ..SystemCall::default()
            };
        }
        let ns = |(seconds, nanoseconds): (u64, u64)| timespec_ns(seconds, nanoseconds);
        let start = ns(clock(false, false));
        let end = ns(clock(true, false)).max(start);
        let cpu_ns = match self.cpu {
            true => ns(clock(true, true)).saturating_sub(ns(clock(false, true))),
            false => 0,
        };
        SystemCall {
            number,
            wall_start_ns: start,
            wall_end_ns: end,
            cpu_ns,
        }
    }

    /// The words (index, value) of the call `number` the tracer ran
    /// between the readings `start` and `end`.
    pub fn write(&self, number: u64, start: Reading, end: Reading) -> Vec<(usize, u64)> {
        let mut words = vec![(usize::from(self.first), number)];
        for (after, reading) in [(false, start), (true, end)] {
            let mut clocks = vec![(false, reading.wall_ns)];
            if self.cpu {
                clocks.push((true, reading.cpu_ns));
            }
            for (cpu, ns) in clocks {
                let at = self.timespec(after, cpu);
                let [seconds, nanoseconds] = ns_timespec(ns);
                words.push((at, seconds));
                words.push((at + 1, nanoseconds));
            }
        }
        words
    }

    /// The clocks the words hold.
    pub fn clocks(&self) -> SystemCallClocks {
        match self.cpu {
            true => SystemCallClocks::WallAndCpu,
            false => SystemCallClocks::Wall,
        }
    }
}

/// The displacement from the record's start of word `word` (after the
/// translation id).
fn displacement(word: usize) -> i64 {
    8 * (1 + word as i64)
}

/// rsi = the address of `word` of the open record.
fn word_address(code: &mut Emit, word: usize) -> Result<(), Refusal> {
    code.load(Register::RSI, RECORD)?;
    code.lea(Register::RSI, Register::RSI, displacement(word))
}

/// `clock_gettime(clock, rsi)` (rax, rdi, rcx and r11 overwritten).
fn clock_gettime(code: &mut Emit, clock: i32) -> Result<(), Refusal> {
    code.push(Instruction::with2(
        Code::Mov_r32_imm32,
        Register::EDI,
        clock,
    ))?;
    code.push(Instruction::with2(
        Code::Mov_r32_imm32,
        Register::EAX,
        SYS_CLOCK_GETTIME,
    ))?;
    code.push(Ok(Instruction::with(Code::Syscall)))
}

/// Reads the clocks of `words` into the `timespec`s of one end of the
/// call.
fn read_clocks(code: &mut Emit, words: &SystemCallWords, after: bool) -> Result<(), Refusal> {
    word_address(code, words.timespec(after, false))?;
    clock_gettime(code, CLOCK_MONOTONIC)?;
    if words.cpu {
        word_address(code, words.timespec(after, true))?;
        clock_gettime(code, CLOCK_THREAD_CPUTIME_ID)?;
    }
    Ok(())
}

/// The code right before the program's `syscall`: records the number and
/// the clocks, zeroes the wall clock's `timespec` after the call; rax,
/// rdi and rsi as they were (rcx and r11 overwritten).
pub(super) fn before(words: &SystemCallWords) -> Result<Vec<Instruction>, Refusal> {
    let mut code = Emit::default();
    code.save(TIMING_RAX, Register::RAX)?;
    code.save(TIMING_RDI, Register::RDI)?;
    code.save(TIMING_RSI, Register::RSI)?;
    code.load(Register::RSI, RECORD)?;
    code.push(Instruction::with2(
        Code::Mov_rm64_r64,
        MemoryOperand::with_base_displ(Register::RSI, displacement(usize::from(words.first))),
        Register::RAX,
    ))?;
    let after = words.timespec(true, false);
    for word in [after, after + 1] {
        code.push(Instruction::with2(
            Code::Mov_rm64_imm32,
            MemoryOperand::with_base_displ(Register::RSI, displacement(word)),
            0,
        ))?;
    }
    read_clocks(&mut code, words, false)?;
    code.load(Register::RSI, TIMING_RSI)?;
    code.load(Register::RDI, TIMING_RDI)?;
    code.load(Register::RAX, TIMING_RAX)?;
    Ok(code.list)
}

/// The code right after the program's `syscall`: records the clocks;
/// every register but rcx as the call left it (rcx overwritten: the
/// translation sets it next).
pub(super) fn after(words: &SystemCallWords) -> Result<Vec<Instruction>, Refusal> {
    let mut code = Emit::default();
    code.save(TIMING_RAX, Register::RAX)?;
    code.save(TIMING_RDI, Register::RDI)?;
    code.save(TIMING_RSI, Register::RSI)?;
    code.save(TIMING_R11, Register::R11)?;
    read_clocks(&mut code, words, true)?;
    code.load(Register::R11, TIMING_R11)?;
    code.load(Register::RSI, TIMING_RSI)?;
    code.load(Register::RDI, TIMING_RDI)?;
    code.load(Register::RAX, TIMING_RAX)?;
    Ok(code.list)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reading(wall_ns: u64, cpu_ns: u64) -> Reading {
        Reading {
            clocks: SystemCallClocks::WallAndCpu,
            wall_ns,
            cpu_ns,
        }
    }

    /// The words of a record with `len` words where `written` put them.
    fn words_of(len: usize, written: &[(usize, u64)]) -> Vec<u64> {
        let mut words = vec![0; len];
        for &(at, value) in written {
            words[at] = value;
        }
        words
    }

    #[test]
    fn what_the_tracer_writes_the_replay_reads() {
        for cpu in [false, true] {
            let layout = SystemCallWords { first: 3, cpu };
            let len = 3 + SystemCallWords::len(cpu);
            let written = layout.write(35, reading(5_000_000_123, 40), reading(5_020_000_456, 90));
            assert_eq!(written.len(), SystemCallWords::len(cpu));
            assert!(written.iter().all(|&(at, _)| (3..len).contains(&at)));
            let call = layout.read(&words_of(len, &written));
            assert_eq!(call.number, 35);
            assert_eq!(call.wall_start_ns, 5_000_000_123);
            assert_eq!(call.wall_end_ns, 5_020_000_456);
            assert_eq!(call.cpu_ns, if cpu { 50 } else { 0 });
        }
    }

    #[test]
    fn a_call_that_did_not_return_is_untimed() {
        let layout = SystemCallWords {
            first: 0,
            cpu: true,
        };
        // Number and the clocks before; the clocks after still zero.
        let words = [60, 7, 8, 0, 9, 0, 0, 0, 0];
        let call = layout.read(&words);
        assert_eq!(
            call,
            SystemCall {
                number: 60,
                ..SystemCall::default()
            }
        );
    }

    #[test]
    fn the_code_uses_no_flags_and_no_stack() {
        let layout = SystemCallWords {
            first: 2,
            cpu: true,
        };
        for code in [before(&layout), after(&layout)] {
            let code = code.expect("encodable");
            for instruction in &code {
                let mnemonic = instruction.mnemonic();
                assert!(
                    matches!(
                        mnemonic,
                        iced_x86::Mnemonic::Mov
                            | iced_x86::Mnemonic::Lea
                            | iced_x86::Mnemonic::Syscall
                    ),
                    "{instruction:?}"
                );
                assert_ne!(instruction.memory_base(), Register::RSP, "{instruction:?}");
            }
            // Two clocks read.
            let calls = code
                .iter()
                .filter(|i| i.mnemonic() == iced_x86::Mnemonic::Syscall)
                .count();
            assert_eq!(calls, 2);
        }
    }
}
