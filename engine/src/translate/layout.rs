//! A region the backend maps into the tracee: one mapping, placed within
//! ±2 GB of the code it translates, holding (in this order)
//!
//! - the indirect-branch table (`table`): pairs (original address,
//!   translated address) filled by the tracer, read by the lookup
//!   routines;
//! - the code cache: a `syscall; int3` gadget (the tracer runs its
//!   injected system calls there once the original code is not
//!   executable), the system call filter (data), the lookup routine, then
//!   the translations.
//!
//! Every region has this layout; the table of the first region is the one
//! all regions use (each thread's `table_base` slot points to it, see
//! `area`). The untouched table pages of the other regions cost no memory.
//! The scratch slots, the record cursor and the record buffer are per
//! thread (`area`).

/// Page size.
pub(super) const PAGE: u64 = 4096;
/// Bytes of a record without recorded words: translation id (u64), stack
/// pointer (u64).
pub(super) const RECORD_HEADER: u64 = 16;
/// Most bytes of one record (more words and the block is refused).
pub(super) const MAX_RECORD: u64 = 2048;
/// Bytes reserved for each half of a thread's record buffer: the most a
/// half holds (`Capture::buffer_half`).
pub(super) const BUFFER_SIZE: u64 = 4 << 20;
/// Translations that count their runs in a thread's area when the run
/// needs only counts (`RunOptions::counts_only`): one counter each (later
/// ones append records).
pub(super) const COUNTERS: u64 = 1 << 20;
/// Bytes of the code cache.
pub(super) const CODE_SIZE: u64 = 128 << 20;

/// The injection gadget, `syscall; int3`, and at offset 8 the landing pad
/// of signal handler returns, `int3`.
pub(super) const GADGET: [u8; 9] = [0x0f, 0x05, 0xcc, 0xcc, 0xcc, 0xcc, 0xcc, 0xcc, 0xcc];
/// Bytes reserved for the gadget at the start of the code area.
const GADGET_SPACE: u64 = 16;

/// Bytes of the system call filter: one per value of the low 16 bits of a
/// system call number, 1 where the translation of `syscall` traps before
/// it.
pub(super) const SYSCALL_FILTER_SIZE: u64 = 1 << 16;

/// Where the parts of the region are in the tracee.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Layout {
    /// First address of the region.
    pub base: u64,
}

impl Layout {
    /// Bytes of the whole region.
    pub const SIZE: u64 = super::table::BYTES + CODE_SIZE;

    /// The indirect-branch table.
    pub fn table(&self) -> u64 {
        self.base
    }
    /// The injection gadget ([`GADGET`]).
    pub fn gadget(&self) -> u64 {
        self.table() + super::table::BYTES
    }
    /// The landing pad of signal handler returns (an `int3` after the
    /// gadget).
    pub fn landing_pad(&self) -> u64 {
        self.gadget() + 8
    }
    /// The system call filter ([`SYSCALL_FILTER_SIZE`] bytes, after the
    /// gadget: 1 at each number the tracer watches, see `invalidate`).
    pub fn syscall_filter(&self) -> u64 {
        self.gadget() + GADGET_SPACE
    }
    /// The process's tables of the lines most recently used in I1's and
    /// D1's sets (`filter`), after the system call filter; the first
    /// region's are the process's (each thread's `FILTER_TABLES` slot).
    pub fn filter_tables(&self) -> u64 {
        self.syscall_filter() + SYSCALL_FILTER_SIZE
    }
    /// The code cache (after the filter's tables and the process's
    /// first-level caches, `filter::FirstLevel`).
    pub fn code(&self) -> u64 {
        self.filter_tables() + super::filter::TABLES_BYTES + super::filter::CACHES_BYTES
    }
    /// One past the code cache.
    pub fn end(&self) -> u64 {
        self.base + Self::SIZE
    }
}
