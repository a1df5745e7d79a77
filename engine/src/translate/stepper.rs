//! The fallback for blocks the translator refuses: the thread runs the
//! block's original code one `PTRACE_SINGLESTEP` at a time, and its block
//! and instructions are reported as they complete, with their data
//! accesses and branches from the registers around each step when the run
//! feeds simulations (the client-request marker is served without a step,
//! as the step backend does).

use crate::cpuid::{self, ValgrindCpu};
use crate::error::{Error, Result};
use crate::event::EventSink;

use crate::flow::{exit, Flow, CLIENT_REQUEST_LEN};
use crate::refusals::{self, Refusals};
use crate::semantics::{Decoded, InstructionAt};

use super::blocks::DecodedBlock;
use super::buffer::Replaying;
use super::memory::Memory;
use crate::ptrace::{self, Regs};

/// How a stepped block ended.
pub(super) enum Stepped {
    /// The thread left the block and is stopped at `regs.rip`.
    Left,
    /// The thread stopped with this wait status, in its exit (a
    /// `PTRACE_EVENT_EXIT` stop).
    Stopped(i32),
    /// A signal stopped the thread (this wait status) at `regs.rip`: a
    /// fault of the instruction there, or a signal from elsewhere. The
    /// instructions that completed are reported.
    Signalled(i32),
}

/// Steps `block` (`None`: bytes that do not decode) from `regs` (at its
/// first instruction), its events replayed as `replaying` says; counts
/// each stop in `steps`. A `cpuid` is answered
/// as `cpu` (when given) instead of stepped, and a `syscall` that
/// `refusals` refuses fails without a step.
pub(super) fn step_block<S: EventSink + ?Sized>(
    replaying: Replaying<'_, S>,
    memory: &Memory,
    block: Option<&DecodedBlock>,
    regs: &mut Regs,
    steps: &mut u64,
    cpu: Option<&ValgrindCpu>,
    refusals: Refusals,
) -> Result<Stepped> {
    let Replaying {
        replay,
        sink,
        thread,
    } = replaying;
    let addr = regs.rip;
    replay.block(sink, thread, addr, regs.rsp);
    let Some(block) = block else {
        // Undecodable bytes: let the CPU raise its fault.
        return Err(Error::Unexpected(format!(
            "translate: undecodable code at {addr:#x} (not supported yet)"
        )));
    };
    for (index, insn) in block.insns.iter().enumerate() {
        if regs.rip != insn.addr {
            break;
        }
        let count = index as u32 + 1;
        if insn.flow == Flow::ClientRequest {
            let mut bytes = [0u8; 48];
            if memory.read_available(regs.rax, &mut bytes) == bytes.len() {
                let mut args = [0u64; 6];
                for (arg, word) in args.iter_mut().zip(bytes.chunks_exact(8)) {
                    let mut raw = [0u8; 8];
                    raw.copy_from_slice(word);
                    *arg = u64::from_le_bytes(raw);
                }
                replay.instruction(sink, thread, insn.end(), count);
                regs.rdx = sink.client_request(thread, args, regs.rdx);
                if sink.caches_emptied(thread) {
                    if let Some(caches) = replay.first_level.as_mut() {
                        caches.empty();
                    }
                }
            } else {
                replay.instruction(sink, thread, insn.end(), count);
            }
            regs.rip = insn.addr + u64::from(CLIENT_REQUEST_LEN);
            ptrace::set_regs(thread.tid, regs)?;
            replay.client_request();
        } else if let Some(instruction) = insn.instruction.as_ref().filter(|_| {
            (insn.is_cpuid() && cpu.is_some()) || (insn.is_syscall() && refusals.refuses(regs.rax))
        }) {
            // Answered by the tracer, without a step.
            let before = *regs;
            match cpu.filter(|_| insn.is_cpuid()) {
                Some(cpu) => cpuid::execute(cpu, regs, insn.len),
                None => refusals::refuse(regs, insn.next(), insn.next()),
            }
            ptrace::set_regs(thread.tid, regs)?;
            replay.instruction(sink, thread, insn.end(), count);
            let decoded = Decoded::of(instruction);
            let instruction = InstructionAt {
                at: insn.addr,
                decoded: &decoded,
            };
            replay.stepped(sink, thread, instruction, &before, regs);
        } else {
            if insn.rep {
                return Err(Error::Unexpected(format!(
                    "translate: stepping a REP instruction at {:#x} (not supported yet)",
                    insn.addr
                )));
            }
            let before = *regs;
            ptrace::single_step(thread.tid, 0)?;
            *steps += 1;
            let status = ptrace::wait(thread.tid)?;
            if libc::WIFSTOPPED(status) && status >> 16 == libc::PTRACE_EVENT_EXIT {
                replay.instruction(sink, thread, insn.end(), count);
                return Ok(Stepped::Stopped(status));
            }
            let signalled = !(libc::WIFSTOPPED(status) && libc::WSTOPSIG(status) == libc::SIGTRAP);
            *regs = ptrace::regs(thread.tid)?;
            if signalled && regs.rip == insn.addr {
                // A fault (the instruction did not complete) or a signal
                // that came first: the tracer delivers it.
                return Ok(Stepped::Signalled(status));
            }
            replay.instruction(sink, thread, insn.end(), count);
            if let Some(instruction) = &insn.instruction {
                let decoded = Decoded::of(instruction);
                let instruction = InstructionAt {
                    at: insn.addr,
                    decoded: &decoded,
                };
                replay.stepped(sink, thread, instruction, &before, regs);
            }
            if signalled {
                return Ok(Stepped::Signalled(status));
            }
        }
        if exit(insn.end(), regs.rip, count).is_some() || regs.rip != insn.next() {
            break;
        }
    }
    Ok(Stepped::Left)
}
