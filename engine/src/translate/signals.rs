//! Signal handlers under the translate backend.
//!
//! When a signal the program catches is to be delivered, the tracer drains
//! the record buffer and delivers it with a single step, which stops the
//! thread at the handler's first instruction: `signal_handler_entered` is
//! reported, the handler's first block arrives with `Arrival::Start` and
//! runs from its translation. The interrupted (translated) address saved in
//! the signal frame is replaced by the landing pad, an `int3` of the first
//! region: `rt_sigreturn` lands there, the tracer drains the buffer,
//! reports `signal_handler_returned`, restores the block sequence as it was
//! at delivery (the next block arrives as it would have without the signal,
//! as the step backend and Callgrind do) and resumes the thread at the
//! saved address.
//!
//! A signal that interrupts a translated block after its record was
//! written (between two of its instructions, or a fault of one of them)
//! has the instructions that ran reported before the handler, with what
//! they recorded (`buffer::drain_interrupted`); the handler returns to the
//! original address of the next instruction, whose block (the rest) is
//! translated and recorded as any other, as the step backend reports it.
//! Blocks that count their runs instead (`translator`) are reported whole
//! before the handler.
//!
//! A signal never interrupts the instrumentation: a thread stopped for
//! one where it holds instrumentation state (in a prologue, a repeat
//! path, recording code, the lookup routine: `Cache::safe_point`) is
//! single-stepped to the next safe point first; the scratch slots are
//! kept across the handler (its translations use them too) and a block
//! that counts its runs gets a new record on return (`Area::open_record`).
//!
//! Limits: the handler sees the landing pad (or, in an interrupted block,
//! the original address of the next instruction), not the interrupted
//! address, in its `ucontext`; with the filter of first-level caches, not
//! the values of rax, rcx and rdx that the next instructions overwrite
//! before reading (the filter's checks use them, `dead`).

use crate::error::Result;

use super::area::Scratch;

use super::memory::Memory;

/// Offset of the saved instruction pointer in the x86-64 `rt_sigframe`
/// (at the stack pointer on handler entry): `pretcode` (8), `uc_flags` (8),
/// `uc_link` (8), `uc_stack` (24), then `sigcontext`'s r8..rcx, rsp (16
/// registers of 8 bytes) before `rip`.
const FRAME_RIP: u64 = 8 + 8 + 8 + 24 + 16 * 8;

/// A handler frame the tracer redirected.
#[derive(Clone, Copy, Debug)]
pub(super) struct Frame<T> {
    /// Where the thread resumes after the handler (a code-cache address).
    pub resume: u64,
    /// The block sequence at delivery.
    pub saved: T,
    /// The thread's scratch slots at delivery.
    pub scratch: Scratch,
}

/// Whether process `pid` catches `signal` (its `SigCgt` mask in
/// /proc/PID/status); `false` when that cannot be read.
pub(super) fn caught(pid: i32, signal: i32) -> bool {
    let Ok(status) = std::fs::read_to_string(format!("/proc/{pid}/status")) else {
        return false;
    };
    let mask = status
        .lines()
        .find_map(|line| line.strip_prefix("SigCgt:"))
        .and_then(|hex| u64::from_str_radix(hex.trim(), 16).ok())
        .unwrap_or(0);
    (1..=64).contains(&signal) && mask & (1u64 << (signal - 1)) != 0
}

/// Replaces the interrupted address in the frame at `sp` (the stack
/// pointer on handler entry) by `pad`; returns the address it held.
pub(super) fn redirect_frame(memory: &Memory, sp: u64, pad: u64) -> Result<u64> {
    let slot = sp.wrapping_add(FRAME_RIP);
    let resume = memory.read_u64(slot)?;
    memory.write_u64(slot, pad)?;
    Ok(resume)
}
