//! Taking PROT_EXEC from the program's original code, so that any jump to
//! it that bypasses the code cache (a signal frame, an address the kernel
//! or a computed pointer leads to) faults into the tracer, which redirects
//! the thread to the translation.
//!
//! Mappings are protected when the tracer is about to translate code from
//! one it has not protected yet: it reads /proc/PID/maps and takes
//! PROT_EXEC from every executable mapping that is not a code-cache region
//! or `[vsyscall]` (which cannot be changed). Code mapped later (`dlopen`,
//! ld.so loading libraries) is protected the same way when execution first
//! reaches it. A block the translator refuses is stepped from its original
//! code, its pages made executable for the steps.
//!
//! The program's own `mmap`, `mprotect`, `munmap` and `mremap` are watched
//! (`invalidate`): the protection of the range they changed is forgotten
//! and the mappings are scanned again at once, so code made executable
//! again loses PROT_EXEC again.

use crate::error::Result;
use crate::symbols::Mapping;

use super::inject;
use super::layout::{Layout, PAGE};
use super::memory::Memory;
use crate::ptrace::Regs;

/// One executable mapping of the program, made non-executable.
#[derive(Clone, Copy, Debug)]
struct Range {
    start: u64,
    end: u64,
    /// Its protection without PROT_EXEC.
    prot: i32,
    /// Whether its bytes may change with no system call the tracer
    /// watches (see [`changes_unseen`]).
    changing: bool,
}

/// The program's code the tracer has made non-executable.
#[derive(Clone, Debug, Default)]
pub(super) struct Protection {
    ranges: Vec<Range>,
}

/// Where the injected system calls run and on which thread.
#[derive(Clone, Copy)]
pub(super) struct Injector<'a> {
    /// The stopped thread.
    pub tid: i32,
    /// Its memory.
    pub memory: &'a Memory,
    /// Its registers.
    pub regs: &'a Regs,
    /// A `syscall` gadget in the code cache.
    pub gadget: u64,
}

impl Protection {
    /// Whether `addr` is in code made non-executable.
    pub fn covers(&self, addr: u64) -> bool {
        self.ranges
            .iter()
            .any(|range| (range.start..range.end).contains(&addr))
    }

    /// Whether `addr` is in code made non-executable whose bytes may change
    /// with no system call the tracer watches (its translations check
    /// them at each entry, see `translator`).
    pub fn changing(&self, addr: u64) -> bool {
        self.ranges
            .iter()
            .any(|range| range.changing && (range.start..range.end).contains(&addr))
    }

    /// Forgets the protection of `start..end` (its mappings were changed):
    /// executable mappings there are protected again by the next
    /// [`Protection::scan`].
    pub fn forget(&mut self, start: u64, end: u64) {
        let mut kept = Vec::with_capacity(self.ranges.len());
        for range in self.ranges.drain(..) {
            if range.end <= start || end <= range.start {
                kept.push(range);
                continue;
            }
            if range.start < start {
                kept.push(Range {
                    end: start,
                    ..range
                });
            }
            if end < range.end {
                kept.push(Range {
                    start: end,
                    ..range
                });
            }
        }
        self.ranges = kept;
    }

    /// Takes PROT_EXEC from every executable mapping of `pid` that is not
    /// protected yet, outside `regions`; returns how many it protected.
    pub fn scan<'r>(
        &mut self,
        pid: i32,
        injector: Injector<'_>,
        regions: impl Iterator<Item = &'r Layout> + Clone,
    ) -> Result<usize> {
        let Ok(maps) = std::fs::read_to_string(format!("/proc/{pid}/maps")) else {
            return Ok(0);
        };
        let mut protected = 0;
        for line in maps.lines() {
            let Some(range) = executable(line) else {
                continue;
            };
            if line.ends_with("[vsyscall]")
                || self.covers(range.start)
                || regions
                    .clone()
                    .any(|region| range.start < region.end() && region.base < range.end)
            {
                continue;
            }
            let result = inject::protect(
                injector.tid,
                injector.memory,
                injector.regs,
                injector.gadget,
                range.start,
                range.end - range.start,
                range.prot,
            )?;
            if result == 0 {
                self.ranges.push(range);
                protected += 1;
                // Its symbols are needed when its code first runs: parse
                // them meanwhile.
                if let Some(file) = Mapping::parse_line(line).filter(Mapping::is_file) {
                    crate::symbols::prefetch(&file.path);
                }
            }
        }
        Ok(protected)
    }

    /// Sets the protection of the pages of `start..end` (in protected
    /// code) to executable (`executable`) or back.
    pub fn set_executable(
        &self,
        injector: Injector<'_>,
        start: u64,
        end: u64,
        executable: bool,
    ) -> Result<()> {
        let Some(range) = self
            .ranges
            .iter()
            .find(|r| (r.start..r.end).contains(&start))
        else {
            return Ok(());
        };
        let first = start & !(PAGE - 1);
        let last = (end.max(start + 1) + PAGE - 1) & !(PAGE - 1);
        let last = last.min(range.end);
        let prot = if executable {
            range.prot | libc::PROT_EXEC
        } else {
            range.prot
        };
        inject::protect(
            injector.tid,
            injector.memory,
            injector.regs,
            injector.gadget,
            first,
            last.saturating_sub(first),
            prot,
        )?;
        Ok(())
    }
}

/// The executable mapping a /proc/PID/maps line describes, with its
/// protection without PROT_EXEC.
fn executable(line: &str) -> Option<Range> {
    let mut fields = line.split_whitespace();
    let (start, end) = fields.next()?.split_once('-')?;
    let perms = fields.next()?.as_bytes();
    if perms.get(2) != Some(&b'x') {
        return None;
    }
    let mut prot = 0;
    if perms.first() == Some(&b'r') {
        prot |= libc::PROT_READ;
    }
    if perms.get(1) == Some(&b'w') {
        prot |= libc::PROT_WRITE;
    }
    let path = Mapping::parse_line(line).map(|mapping| mapping.path);
    let path = path.as_deref().unwrap_or("");
    Some(Range {
        start: u64::from_str_radix(start, 16).ok()?,
        end: u64::from_str_radix(end, 16).ok()?,
        prot,
        changing: changes_unseen(perms, path),
    })
}

/// Whether the bytes of a mapping with permissions `perms` (as
/// /proc/PID/maps writes them) backed by `path` may change with no system
/// call that changes mappings: the program can write them (writable), or
/// another mapping can (shared, or a file that is not on disk: a memfd or
/// a deleted file, as JITs map code twice). Such code is only checked
/// when it is readable. Valgrind's `--smc-check=all-non-file` checks the
/// code of anonymous and writable mappings; private read-only mappings of
/// anonymous memory change only through `mprotect`, which is watched.
fn changes_unseen(perms: &[u8], path: &str) -> bool {
    let readable = perms.first() == Some(&b'r');
    let writable = perms.get(1) == Some(&b'w');
    let shared = perms.get(3) == Some(&b's');
    let not_on_disk = path.starts_with("/memfd:") || path.ends_with("(deleted)");
    readable && (writable || shared || not_on_disk)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_executable_mappings() {
        let line = "7ffff7df9000-7ffff7f4f000 r-xp 00026000 fe:00 326279   /usr/lib/libc.so.6";
        let range = executable(line).expect("an executable mapping");
        assert_eq!(
            (range.start, range.end),
            (0x7fff_f7df_9000, 0x7fff_f7f4_f000)
        );
        assert_eq!(range.prot, libc::PROT_READ);
        assert!(executable("7ffff7fa6000-7ffff7fa8000 rw-p 001d3000 fe:00 1 /x").is_none());
    }

    #[test]
    fn code_that_may_change_unseen_is_writable_shared_or_not_on_disk() {
        let changing = |line: &str| executable(line).expect("executable").changing;
        // A library: read-only, private, on disk.
        assert!(!changing(
            "7ffff7df9000-7ffff7f4f000 r-xp 00026000 fe:00 326279   /usr/lib/libc.so.6"
        ));
        // Anonymous memory made executable once (only `mprotect` changes it).
        assert!(!changing("7ffff7fa6000-7ffff7fa8000 r-xp 00000000 00:00 0"));
        // A JIT's writable and executable memory.
        assert!(changing("7ffff7fa6000-7ffff7fa8000 rwxp 00000000 00:00 0"));
        assert!(changing(
            "7ffffffde000-7ffffffff000 rwxp 00000000 00:00 0                          [stack]"
        ));
        // The executable view of code written through another mapping.
        assert!(changing(
            "7f0000000000-7f0000010000 r-xs 00000000 00:01 12 /memfd:jit (deleted)"
        ));
        assert!(changing(
            "7f0000000000-7f0000010000 r-xp 00000000 00:01 12 /memfd:sljit"
        ));
        assert!(changing(
            "7f0000000000-7f0000010000 r-xs 00000000 00:1a 7 /dev/shm/code"
        ));
        assert!(changing(
            "7f0000000000-7f0000010000 r-xp 00001000 fe:00 9 /tmp/a.so (deleted)"
        ));
        // Not readable: cannot be checked (and cannot be written).
        assert!(!changing(
            "7f0000000000-7f0000010000 --xs 00000000 00:01 12 /memfd:x"
        ));
    }
}
