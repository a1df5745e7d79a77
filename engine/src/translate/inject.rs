//! Making the stopped tracee run a system call for the tracer: a `syscall`
//! instruction is written over the bytes at its instruction pointer, the
//! registers are set to the call's number and arguments, the thread is
//! stepped once, and bytes and registers are put back.
//!
//! Used once per process to map the backend's region ([`map_region`]).

use crate::error::{Error, Result};

use super::layout::{Layout, PAGE};
use super::ptrace::{self, Memory, Regs};

const SYS_MMAP: u64 = 9;
const SYS_MPROTECT: u64 = 10;
const SYSCALL: [u8; 2] = [0x0f, 0x05];

/// Runs system call `number` with `args` in stopped `tid` (registers
/// `regs`), returns its result (rax). The thread's registers and code are
/// restored.
pub(super) fn system_call(
    tid: i32,
    memory: &Memory,
    regs: &Regs,
    number: u64,
    args: [u64; 6],
) -> Result<u64> {
    let at = regs.rip;
    let mut saved = [0u8; 2];
    memory.read(at, &mut saved)?;
    memory.write(at, &SYSCALL)?;
    let mut call = *regs;
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
        ptrace::single_step(tid, 0)?;
        let status = ptrace::wait(tid)?;
        if !(libc::WIFSTOPPED(status) && libc::WSTOPSIG(status) == libc::SIGTRAP) {
            return Err(Error::Unexpected(format!(
                "injected system call: wait status {status:#x}"
            )));
        }
        Ok(ptrace::regs(tid)?.rax)
    })();
    memory.write(at, &saved)?;
    ptrace::set_regs(tid, regs)?;
    result
}

/// Whether a system call result is an error (-4095..-1).
fn failed(result: u64) -> bool {
    result > (-4096i64) as u64
}

/// Maps the backend's region ([`Layout`]) into stopped `tid` within ±2 GB
/// of `near` (the program's code), read-write-execute, with the guard page
/// `PROT_NONE`.
pub(super) fn map_region(tid: i32, memory: &Memory, regs: &Regs, near: u64) -> Result<Layout> {
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
        let layout = Layout { base: result };
        let protected = system_call(
            tid,
            memory,
            regs,
            SYS_MPROTECT,
            [layout.guard(), PAGE, libc::PROT_NONE as u64, 0, 0, 0],
        )?;
        if failed(protected) {
            return Err(Error::Unexpected(
                "translate: cannot protect the record buffer's guard page".into(),
            ));
        }
        return Ok(layout);
    }
    Err(Error::Unexpected(format!(
        "translate: cannot map a code cache within 2 GB of {near:#x}"
    )))
}
