//! Making the stopped tracee run a system call for the tracer: the thread
//! runs a `syscall` instruction (the gadget of a region once one exists,
//! else one written over the bytes at its instruction pointer, put back
//! afterwards) with the call's number and arguments in its registers, for
//! one step; its registers are put back.
//!
//! Used to map the backend's regions ([`map_region`]) and to change the
//! protection of the program's code ([`protect`]).

use crate::error::{Error, Result};

use super::layout::{Layout, PAGE};
use super::memory::Memory;
use crate::ptrace::{self, Regs};

const SYS_MMAP: u64 = 9;
const SYS_MPROTECT: u64 = 10;
const SYSCALL: [u8; 2] = [0x0f, 0x05];

/// Runs system call `number` with `args` in stopped `tid` (registers
/// `regs`) at `gadget` (a `syscall` instruction; `None`: at the thread's
/// instruction pointer, which must be executable), returns its result
/// (rax). The thread's registers and code are restored.
pub(super) fn system_call(
    tid: i32,
    memory: &Memory,
    regs: &Regs,
    gadget: Option<u64>,
    number: u64,
    args: [u64; 6],
) -> Result<u64> {
    let at = gadget.unwrap_or(regs.rip);
    let mut saved = [0u8; 2];
    if gadget.is_none() {
        memory.read(at, &mut saved)?;
        memory.write(at, &SYSCALL)?;
    }
    let mut call = *regs;
    call.rip = at;
    call.rax = number;
    call.orig_rax = u64::MAX;
    call.rdi = args[0];
    call.rsi = args[1];
    call.rdx = args[2];
    call.r10 = args[3];
    call.r8 = args[4];
    call.r9 = args[5];
    let result = (|| {
        ptrace::set_regs(tid, &call)?;
        let status = crate::resume::until_trap(tid, true)?;
        if !(libc::WIFSTOPPED(status) && libc::WSTOPSIG(status) == libc::SIGTRAP) {
            return Err(Error::Unexpected(format!(
                "injected system call: wait status {status:#x}"
            )));
        }
        Ok(ptrace::regs(tid)?.rax)
    })();
    if gadget.is_none() {
        memory.write(at, &saved)?;
    }
    ptrace::set_regs(tid, regs)?;
    result
}

/// Sets the protection of `len` bytes at `addr` in stopped `tid` to
/// `prot`; returns the system call's result (negative errno on failure).
pub(super) fn protect(
    tid: i32,
    memory: &Memory,
    regs: &Regs,
    gadget: u64,
    addr: u64,
    len: u64,
    prot: i32,
) -> Result<i64> {
    let result = system_call(
        tid,
        memory,
        regs,
        Some(gadget),
        SYS_MPROTECT,
        [addr, len, prot as u64, 0, 0, 0],
    )?;
    Ok(result as i64)
}

/// Whether a system call result is an error (-4095..-1).
fn failed(result: u64) -> bool {
    result > (-4096i64) as u64
}

/// Maps `len` bytes read-write into stopped `tid` (registers `regs`) at
/// the first free address from `hint` on (in steps of `len`, a few tries;
/// then anywhere), running the system calls at `gadget`; returns the
/// address. Mapping near the code cache, away from where the kernel puts
/// the program's own mappings, keeps their addresses as they are without
/// the tracer.
pub(super) fn map_data(
    tid: i32,
    memory: &Memory,
    regs: &Regs,
    gadget: u64,
    hint: u64,
    len: u64,
) -> Result<u64> {
    const TRIES: u64 = 16;
    let prot = (libc::PROT_READ | libc::PROT_WRITE) as u64;
    let private = (libc::MAP_PRIVATE | libc::MAP_ANONYMOUS) as u64;
    for attempt in 0..=TRIES {
        let (at, flags) = if attempt < TRIES {
            let at = hint.wrapping_add(attempt * len);
            (at, private | libc::MAP_FIXED_NOREPLACE as u64)
        } else {
            (0, private)
        };
        let result = system_call(
            tid,
            memory,
            regs,
            Some(gadget),
            SYS_MMAP,
            [at, len, prot, flags, u64::MAX, 0],
        )?;
        if !failed(result) && (attempt == TRIES || result == at) {
            return Ok(result);
        }
    }
    Err(Error::Unexpected(
        "translate: cannot map a thread's data area".into(),
    ))
}

/// Maps a region ([`Layout`]) into stopped `tid` within ±2 GB of `near`
/// (code to translate), read-write-execute; the system calls run at `gadget` (see [`system_call`]).
pub(super) fn map_region(
    tid: i32,
    memory: &Memory,
    regs: &Regs,
    gadget: Option<u64>,
    near: u64,
) -> Result<Layout> {
    let near = near & !(PAGE - 1);
    // Above the code (beyond a growing heap) first, then below it.
    let candidates = [
        near.checked_add(0x4000_0000),
        near.checked_add(0x2000_0000),
        near.checked_sub(0x4000_0000),
        near.checked_add(0x6000_0000),
        near.checked_sub(0x2000_0000),
    ];
    for hint in candidates.into_iter().flatten() {
        if hint < 0x1_0000 {
            continue;
        }
        let result = system_call(
            tid,
            memory,
            regs,
            gadget,
            SYS_MMAP,
            [
                hint,
                Layout::SIZE,
                (libc::PROT_READ | libc::PROT_WRITE | libc::PROT_EXEC) as u64,
                (libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED_NOREPLACE) as u64,
                u64::MAX,
                0,
            ],
        )?;
        if failed(result) {
            continue;
        }
        if result != hint {
            // An old kernel that took the flag as a mere hint.
            continue;
        }
        return Ok(Layout { base: result });
    }
    Err(Error::Unexpected(format!(
        "translate: cannot map a code cache within 2 GB of {near:#x}"
    )))
}
