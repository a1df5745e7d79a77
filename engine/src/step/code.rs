//! The decoded code of one address space: each instruction decoded once per
//! address, and dropped when the bytes it was decoded from may have changed.
//!
//! An entry depends on a span of bytes from its address: the instruction's
//! bytes, plus those the client-request check looked at (up to 19), or 15
//! for bytes that did not decode. An entry is dropped when
//!
//! - a store of the tracee (a `Write` or `Modify` access of `accesses`,
//!   every iteration of a REP string instruction) overlaps its span. To keep
//!   the check cheap, the cache counts its entries per 4 KiB page and a
//!   store is looked at only when it touches a page holding cached code;
//! - a system call that may change the mappings or the contents of a range
//!   completes: `mmap` (the range it mapped, which covers `MAP_FIXED` over
//!   existing code), `munmap`, `mprotect`, `pkey_mprotect`, `mremap` (the
//!   old and the new range), `madvise` with advice that discards contents
//!   (`MADV_DONTNEED`, `MADV_FREE`, `MADV_REMOVE`, `MADV_DONTNEED_LOCKED`:
//!   private pages go back to zeros or to the file's bytes), `brk` (the range
//!   between the old and the new break), `remap_file_pages`, `shmat` and
//!   `shmdt` (the segment's range, from `/proc/PID/maps`), and `read` or
//!   `pread64` (the bytes the kernel stored into the buffer);
//! - the process calls `execve` (everything).
//!
//! A cache belongs to a process (thread group): its threads share it, so a
//! store or `munmap` by one thread drops the code for all. A forked child
//! starts with a copy and goes its own way. Entries are dropped when the step
//! that changed the bytes completes, before any thread of the process is
//! resumed again.
//!
//! Nothing else is derived from the entries: blocks are cut as the
//! instructions are stepped (`blocks`), and a thread's open block keeps only
//! its instruction count and the registers its executed instructions made
//! constants (`branches`), so there is no block or constant state to drop.
//! A thread already stepping an instruction when another thread rewrites it
//! is reported with the decoding it started with (a race in the program).
//!
//! Not seen: other stores by the kernel (`readv`, `recvmsg`, `io_uring`,
//! `process_vm_writev`, ...), stores by other processes or through another
//! mapping of the same memory (shared memory, a memfd mapped twice: the
//! writable alias of a double-mapped JIT), stores by a `vfork` child or
//! other `CLONE_VM` process into its parent's code, and the 32-bit system
//! call ABI (`int 0x80`). Code that rewrites bytes of its own block is seen
//! as the CPU executes it; Valgrind, whose self-check runs at the start of
//! a block, may run the old translation for the rest of the block.

use std::collections::{BTreeMap, HashMap};
use std::fs::File;

use crate::flow::CLIENT_REQUEST_LEN;

use crate::ptrace::Regs;
use crate::semantics::Decoded;

/// log2 of the page size.
const PAGE_SHIFT: u32 = 12;
/// The page size.
const PAGE: u64 = 1 << PAGE_SHIFT;
/// The longest span of bytes an entry depends on (the client-request
/// marker).
const MAX_SPAN: u64 = CLIENT_REQUEST_LEN as u64;

/// System calls that change the mappings or the contents of memory.
const SYS_READ: u64 = 0;
const SYS_MMAP: u64 = 9;
const SYS_MPROTECT: u64 = 10;
const SYS_MUNMAP: u64 = 11;
const SYS_BRK: u64 = 12;
const SYS_PREAD64: u64 = 17;
const SYS_MREMAP: u64 = 25;
const SYS_MADVISE: u64 = 28;
const SYS_SHMAT: u64 = 30;
const SYS_SHMDT: u64 = 67;
const SYS_REMAP_FILE_PAGES: u64 = 216;
const SYS_PKEY_MPROTECT: u64 = 329;

/// `madvise` advice after which a private page's bytes may differ.
const MADV_DONTNEED: u64 = 4;
const MADV_FREE: u64 = 8;
const MADV_REMOVE: u64 = 9;
const MADV_DONTNEED_LOCKED: u64 = 24;

/// One decoded address.
#[derive(Clone, Copy, Debug)]
struct Entry {
    /// The instruction, `None` when the bytes do not decode.
    decoded: Option<Decoded>,
    /// How many bytes from its address the entry depends on.
    span: u8,
}

/// The decoded instructions of one address space.
#[derive(Debug, Default)]
pub(super) struct CodeCache {
    /// Entries by address.
    entries: BTreeMap<u64, Entry>,
    /// Entries whose span touches each page (page number → count).
    pages: HashMap<u64, u32>,
    /// The program break after the last `brk`, once known.
    brk: Option<u64>,
    /// Entries dropped because their bytes may have changed (not counting
    /// `execve`), since the cache was made.
    dropped: u64,
}

impl CodeCache {
    /// The decoded instruction at `at`, decoding it from `memory` if it is not
    /// cached; `None` when the bytes there do not decode.
    pub fn get(&mut self, at: u64, memory: &File) -> Option<Decoded> {
        if let Some(entry) = self.entries.get(&at) {
            return entry.decoded;
        }
        let (decoded, span) = Decoded::read(memory, at);
        self.entries.insert(at, Entry { decoded, span });
        for page in pages(at, u64::from(span)) {
            *self.pages.entry(page).or_default() += 1;
        }
        decoded
    }

    /// The cache of a forked child: a copy (its memory is a copy), with no
    /// entries dropped yet.
    pub fn fork(&self) -> CodeCache {
        CodeCache {
            entries: self.entries.clone(),
            pages: self.pages.clone(),
            brk: self.brk,
            dropped: 0,
        }
    }

    /// Drops everything (the process called `execve`).
    pub fn clear(&mut self) {
        self.entries.clear();
        self.pages.clear();
        self.brk = None;
    }

    /// The tracee stored `size` bytes at `addr`: drops the entries whose bytes
    /// these were. Cheap unless the store touches a page holding cached code.
    #[inline]
    pub fn stored(&mut self, addr: u64, size: u32) {
        if self.pages.is_empty() || size == 0 {
            return;
        }
        let first = addr >> PAGE_SHIFT;
        let last = addr.saturating_add(u64::from(size) - 1) >> PAGE_SHIFT;
        if (first..=last).any(|page| self.pages.contains_key(&page)) {
            self.drop_range(addr, addr.saturating_add(u64::from(size)));
        }
    }

    /// A system call completed: `before` holds its number and arguments,
    /// `after` its result. Drops the entries of any range whose mapping or
    /// contents it may have changed; `pid` is the process, for the calls
    /// whose range only `/proc/PID/maps` tells.
    pub fn system_call(&mut self, pid: i32, before: &Regs, after: &Regs) {
        let result = after.rax;
        // -4095..-1: an error; nothing changed.
        let failed = result > (-4096i64) as u64;
        let (first, second) = (before.rdi, before.rsi);
        match before.rax {
            SYS_MUNMAP | SYS_MPROTECT | SYS_PKEY_MPROTECT | SYS_REMAP_FILE_PAGES => {
                self.drop_pages(first, second);
            }
            SYS_MMAP if !failed => self.drop_pages(result, second),
            SYS_MREMAP => {
                self.drop_pages(first, second);
                if !failed {
                    self.drop_pages(result, before.rdx);
                }
            }
            SYS_MADVISE
                if matches!(
                    before.rdx,
                    MADV_DONTNEED | MADV_FREE | MADV_REMOVE | MADV_DONTNEED_LOCKED
                ) =>
            {
                self.drop_pages(first, second);
            }
            SYS_BRK => {
                if let Some(old) = self.brk {
                    self.drop_pages(old.min(result), old.abs_diff(result));
                }
                self.brk = Some(result);
            }
            SYS_READ | SYS_PREAD64 if !failed => {
                self.drop_range(second, second.saturating_add(result));
            }
            SYS_SHMAT if !failed => {
                let end = mapping_end(pid, result).unwrap_or(u64::MAX);
                self.drop_range(result, end);
            }
            SYS_SHMDT if !failed => {
                // The segment is gone: drop up to the next mapping.
                let end = next_mapping(pid, first).unwrap_or(u64::MAX);
                self.drop_range(first, end);
            }
            _ => {}
        }
    }

    /// Entries dropped because their bytes may have changed (stores, system
    /// calls; not `execve`) since the cache was made.
    pub fn dropped(&self) -> u64 {
        self.dropped
    }

    /// Drops the entries of the pages of `len` bytes at `addr`.
    fn drop_pages(&mut self, addr: u64, len: u64) {
        let start = addr & !(PAGE - 1);
        let end = addr.saturating_add(len).saturating_add(PAGE - 1) & !(PAGE - 1);
        let end = if end < start { u64::MAX } else { end };
        self.drop_range(start, end);
    }

    /// Drops the entries whose span overlaps `start..end`.
    fn drop_range(&mut self, start: u64, end: u64) {
        if start >= end || self.entries.is_empty() {
            return;
        }
        let doomed: Vec<(u64, u8)> = self
            .entries
            .range(start.saturating_sub(MAX_SPAN - 1)..end)
            .filter(|(&at, entry)| at.saturating_add(u64::from(entry.span)) > start)
            .map(|(&at, entry)| (at, entry.span))
            .collect();
        for (at, span) in doomed {
            self.entries.remove(&at);
            self.dropped += 1;
            for page in pages(at, u64::from(span)) {
                if let Some(count) = self.pages.get_mut(&page) {
                    *count -= 1;
                    if *count == 0 {
                        self.pages.remove(&page);
                    }
                }
            }
        }
    }
}

/// The pages `len` bytes (at least one) at `addr` touch.
fn pages(addr: u64, len: u64) -> std::ops::RangeInclusive<u64> {
    let last = addr.saturating_add(len.max(1) - 1);
    (addr >> PAGE_SHIFT)..=(last >> PAGE_SHIFT)
}

/// The end of the mapping of process `pid` that contains `addr`.
fn mapping_end(pid: i32, addr: u64) -> Option<u64> {
    let maps = crate::symbols::read_maps(u32::try_from(pid).ok()?).ok()?;
    maps.iter()
        .find(|mapping| mapping.start <= addr && addr < mapping.end)
        .map(|mapping| mapping.end)
}

/// The start of the first mapping of process `pid` at or above `addr`.
fn next_mapping(pid: i32, addr: u64) -> Option<u64> {
    let maps = crate::symbols::read_maps(u32::try_from(pid).ok()?).ok()?;
    maps.iter()
        .map(|mapping| mapping.start)
        .filter(|&start| start >= addr)
        .min()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cache_with(entries: &[(u64, u8)]) -> CodeCache {
        let mut cache = CodeCache::default();
        for &(at, span) in entries {
            cache.entries.insert(
                at,
                Entry {
                    decoded: None,
                    span,
                },
            );
            for page in pages(at, u64::from(span)) {
                *cache.pages.entry(page).or_default() += 1;
            }
        }
        cache
    }

    fn addresses(cache: &CodeCache) -> Vec<u64> {
        cache.entries.keys().copied().collect()
    }

    #[test]
    fn a_store_drops_the_instructions_it_overlaps() {
        // mov eax, 1 (5 bytes) at 0x1000; ret at 0x1005; nop at 0x1006.
        let mut cache = cache_with(&[(0x1000, 5), (0x1005, 1), (0x1006, 1)]);
        // A store elsewhere drops nothing.
        cache.stored(0x5000, 8);
        cache.stored(0x0ff8, 8);
        assert_eq!(addresses(&cache), [0x1000, 0x1005, 0x1006]);
        // One byte into the immediate of the mov.
        cache.stored(0x1004, 1);
        assert_eq!(addresses(&cache), [0x1005, 0x1006]);
        // Eight bytes ending on the ret.
        cache.stored(0x0ffe, 8);
        assert_eq!(addresses(&cache), [0x1006]);
        assert_eq!(cache.dropped(), 2);
        assert_eq!(cache.pages.len(), 1);
    }

    #[test]
    fn entries_across_a_page_boundary_count_in_both_pages() {
        let mut cache = cache_with(&[(0x1ffe, 4)]);
        assert_eq!(cache.pages.len(), 2);
        cache.stored(0x2001, 1);
        assert!(addresses(&cache).is_empty());
        assert!(cache.pages.is_empty());
    }

    #[test]
    fn unmapping_drops_whole_pages() {
        let mut cache = cache_with(&[
            (0x1000, 5),
            (0x1ffc, 4),
            (0x1ffd, 4),
            (0x2000, 3),
            (0x3000, 1),
        ]);
        // SAFETY: user_regs_struct is plain data; all zeros is valid.
        let mut before: Regs = unsafe { std::mem::zeroed() };
        before.rax = SYS_MUNMAP;
        before.rdi = 0x2000;
        before.rsi = 1;
        let after = before;
        cache.system_call(0, &before, &after);
        // 0x1ffc..0x2000 stays; 0x1ffd..0x2001 reaches into the page.
        assert_eq!(addresses(&cache), [0x1000, 0x1ffc, 0x3000]);
        // A failed mmap changes nothing; a successful one drops its range.
        before.rax = SYS_MMAP;
        before.rdi = 0;
        before.rsi = 0x1000;
        let mut after = before;
        after.rax = (-12i64) as u64;
        cache.system_call(0, &before, &after);
        assert_eq!(addresses(&cache), [0x1000, 0x1ffc, 0x3000]);
        after.rax = 0x3000;
        cache.system_call(0, &before, &after);
        assert_eq!(addresses(&cache), [0x1000, 0x1ffc]);
    }
}
