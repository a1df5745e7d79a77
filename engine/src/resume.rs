//! Running a stopped tracee thread until it traps, for the tracer's own
//! purposes (an injected system call, leaving a system call it is stopped
//! in): signals for the program and group-stops that come first are held
//! back and made again afterwards, so the program still gets them.

use std::fs::File;
use std::os::unix::fs::FileExt;

use crate::error::{Error, Result};
use crate::ptrace::{self, Regs};

/// The `int3` instruction.
const INT3: u8 = 0xcc;

/// Resumes stopped `tid` for one step (`step`) or until its next stop,
/// as often as signals for the program stop it first (other threads' and
/// processes' doings, a `SIGCHLD`...) or a group-stop does; those signals
/// (and the group-stop's) are sent to the thread again afterwards. Returns
/// the wait status of the stop that ended it.
pub(crate) fn until_trap(tid: i32, step: bool) -> Result<i32> {
    let mut pending = Vec::new();
    let status = loop {
        if step {
            ptrace::single_step(tid, 0)?;
        } else {
            ptrace::cont(tid, 0)?;
        }
        let status = ptrace::wait(tid)?;
        let signal = libc::WSTOPSIG(status);
        if libc::WIFSTOPPED(status) && status >> 16 == libc::PTRACE_EVENT_STOP {
            // A group-stop (or its end) on the way: the thread finishes
            // first, and is stopped again afterwards (see `jobs`).
            if let Some(stop) = crate::jobs::group_stop_signal(status) {
                pending.push(stop);
            }
            continue;
        }
        if libc::WIFSTOPPED(status) && status >> 16 == 0 && signal != libc::SIGTRAP {
            if ptrace::signal_info(tid)?.is_some() {
                pending.push(signal);
            }
            continue;
        }
        break status;
    };
    for signal in pending {
        // SAFETY: a plain system call; no pointers.
        unsafe {
            libc::syscall(libc::SYS_tkill, tid, signal);
        }
    }
    Ok(status)
}

/// Lets stopped `tid`, at an event stop inside a system call (an exec
/// event), finish the call: an `int3` written at its return address (in
/// `memory`, its `/proc/PID/mem`) stops it there, out of the kernel, where
/// it can be stepped or made to run system calls; the byte and the
/// instruction pointer are put back, the call's result is in rax. Returns
/// its registers then. (A single step from inside the call would trap
/// before or after the next instruction, depending on the kernel.)
pub(crate) fn leave_syscall(tid: i32, memory: &File) -> Result<Regs> {
    let os = |operation: &'static str| move |source| Error::Os { operation, source };
    let mut regs = ptrace::regs(tid)?;
    let mut saved = [0u8; 1];
    memory
        .read_exact_at(&mut saved, regs.rip)
        .map_err(os("read tracee memory"))?;
    memory
        .write_all_at(&[INT3], regs.rip)
        .map_err(os("write tracee memory"))?;
    let stopped = (|| {
        let status = until_trap(tid, false)?;
        if !(libc::WIFSTOPPED(status) && libc::WSTOPSIG(status) == libc::SIGTRAP) {
            return Err(Error::Unexpected(format!(
                "leaving a system call: wait status {status:#x}"
            )));
        }
        ptrace::regs(tid)
    })();
    memory
        .write_all_at(&saved, regs.rip)
        .map_err(os("write tracee memory"))?;
    let after = stopped?;
    regs.rax = after.rax;
    ptrace::set_regs(tid, &regs)?;
    Ok(regs)
}
