//! Invalidation: the system calls after which translated code may be stale.
//!
//! The translation of a `syscall` looks the low 16 bits of rax up in a
//! 64 KiB filter of its region (`movzx`, `lea`, `jrcxz`: rcx and r11,
//! which the kernel overwrites, as scratch; no flag changed) and traps
//! before the system call when it is 1, for the numbers in [`WATCHED`]
//! (an x32 number, bit 30 set, finds its 64-bit twin). The tracer runs the
//! system call from the
//! gadget with a single step, then drops the translations of the ranges
//! [`affected`] returns (with their links and lookup-table entries,
//! `Cache::invalidate`), forgets the protection of the changed mappings
//! and protects the executable ones again (so a program's own
//! `mprotect(PROT_EXEC)` is undone), and resumes after the `syscall`.

use super::layout::PAGE;
use crate::ptrace::Regs;

const SYS_MMAP: u64 = 9;
const SYS_MPROTECT: u64 = 10;
const SYS_MUNMAP: u64 = 11;
const SYS_MREMAP: u64 = 25;
const SYS_MADVISE: u64 = 28;
const SYS_REMAP_FILE_PAGES: u64 = 216;
const SYS_PKEY_MPROTECT: u64 = 329;
/// `execve` and `execveat`: the thread's records are replayed before the
/// old program goes (`stops`).
pub(super) const SYS_EXECVE: u64 = 59;
pub(super) const SYS_EXECVEAT: u64 = 322;
/// `arch_prctl`: setting the GS base, the backend's, is refused (`stops`).
pub(super) const SYS_ARCH_PRCTL: u64 = 158;
/// `sched_setaffinity` and `sched_getaffinity`: the thread's own
/// processors, not the tracer's it may run on (`placement`).
pub(super) const SYS_SCHED_SETAFFINITY: u64 = 203;
pub(super) const SYS_SCHED_GETAFFINITY: u64 = 204;

/// `madvise` advice after which a private page's bytes may differ.
const DISCARDING_ADVICE: [u64; 4] = [
    4,  // MADV_DONTNEED
    8,  // MADV_FREE
    9,  // MADV_REMOVE
    24, // MADV_DONTNEED_LOCKED
];

/// The system calls the translation of `syscall` traps before: those that
/// may change code mappings, then `execve`, `execveat`, `arch_prctl` and
/// the thread's processors.
pub(super) const WATCHED: &[u64] = &[
    SYS_MMAP,
    SYS_MPROTECT,
    SYS_MUNMAP,
    SYS_MREMAP,
    SYS_MADVISE,
    SYS_REMAP_FILE_PAGES,
    SYS_PKEY_MPROTECT,
    SYS_EXECVE,
    SYS_EXECVEAT,
    SYS_ARCH_PRCTL,
    SYS_SCHED_SETAFFINITY,
    SYS_SCHED_GETAFFINITY,
];

/// A range whose code may have changed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Affected {
    pub start: u64,
    pub end: u64,
    /// Its mappings (or their protection) changed, not only their bytes.
    pub remapped: bool,
}

/// The ranges system call `call` (its registers before it) with result
/// `result` changed.
pub(super) fn affected(call: &Regs, result: u64) -> Vec<Affected> {
    if (result as i64) < 0 && (result as i64) > -4096 {
        return Vec::new();
    }
    let range = |start: u64, len: u64, remapped: bool| Affected {
        start: start & !(PAGE - 1),
        end: start.saturating_add(len).saturating_add(PAGE - 1) & !(PAGE - 1),
        remapped,
    };
    match call.rax {
        SYS_MMAP => vec![range(result, call.rsi, true)],
        SYS_MPROTECT | SYS_PKEY_MPROTECT | SYS_MUNMAP | SYS_REMAP_FILE_PAGES => {
            vec![range(call.rdi, call.rsi, true)]
        }
        SYS_MREMAP => vec![
            range(call.rdi, call.rsi, true),
            range(result, call.rdx, true),
        ],
        SYS_MADVISE if DISCARDING_ADVICE.contains(&call.rdx) => {
            vec![range(call.rdi, call.rsi, false)]
        }
        _ => Vec::new(),
    }
}
