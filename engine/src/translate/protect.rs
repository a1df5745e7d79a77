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
    Some(Range {
        start: u64::from_str_radix(start, 16).ok()?,
        end: u64::from_str_radix(end, 16).ok()?,
        prot,
    })
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
}
