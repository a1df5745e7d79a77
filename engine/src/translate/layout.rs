//! A region the backend maps into the tracee: one mapping, placed within
//! ±2 GB of the code it translates, holding (in this order)
//!
//! - a data page of slots the instrumentation uses as scratch memory (it
//!   never touches the tracee's stack, so red zones stay intact), the
//!   record cursor, the address of the record being written (for the
//!   recorded words, `capture`) and a spare record;
//! - the record buffer: one record per executed block: its translation id,
//!   the words the translation records when the run feeds simulations
//!   (`capture`; none otherwise), then the stack pointer at its start;
//! - a guard page (`PROT_NONE`): the record store that would overflow the
//!   buffer faults there, the tracer drains the buffer and restarts the
//!   block's prologue (no bounds check, so no flags changed, in the fast
//!   path);
//! - the indirect-branch table: [`TABLE_ENTRIES`] pairs (original address,
//!   translated address), direct-mapped by the low bits of the original
//!   address, filled by the tracer, read by the lookup routine;
//! - the code cache: a `syscall; int3` gadget (the tracer runs its
//!   injected system calls there once the original code is not
//!   executable), the system call filter (data), the lookup routine, then
//!   the translations.
//!
//! Every region has this layout; the record buffer, the cursor and the
//! table of the first region are the ones all regions use (translations
//! address the cursor absolutely; each region's `table_base` slot points
//! to the first region's table). Untouched pages of the other regions'
//! buffers cost no memory.

/// Page size.
pub(super) const PAGE: u64 = 4096;
/// Bytes of a record without recorded words: translation id (u64), stack
/// pointer (u64).
pub(super) const RECORD_HEADER: u64 = 16;
/// Most bytes of one record (more words and the block is refused).
pub(super) const MAX_RECORD: u64 = 2048;
/// Bytes of the record buffer.
pub(super) const BUFFER_SIZE: u64 = 4 << 20;
/// Entries of the indirect-branch table (a power of two).
pub(super) const TABLE_ENTRIES: u64 = 1 << 16;
/// Bytes of the code cache.
pub(super) const CODE_SIZE: u64 = 24 << 20;

/// The injection gadget, `syscall; int3`, and at offset 8 the landing pad
/// of signal handler returns, `int3`.
pub(super) const GADGET: [u8; 9] = [0x0f, 0x05, 0xcc, 0xcc, 0xcc, 0xcc, 0xcc, 0xcc, 0xcc];
/// Bytes reserved for the gadget at the start of the code area.
const GADGET_SPACE: u64 = 16;

/// Offsets of the slots in the data page.
const SAVE_RAX: u64 = 0;
const SAVE_RBX: u64 = 8;
const SAVE_FLAGS: u64 = 16;
const TARGET: u64 = 24;
const JUMP: u64 = 32;
const CURSOR: u64 = 40;
const TABLE_BASE: u64 = 48;
const TEMP: u64 = 56;
const CAPTURE_RAX: u64 = 64;
const CAPTURE_RBX: u64 = 72;
const RECORD: u64 = 80;
/// Where recorded words go when no record is open: the rest of the data
/// page, [`MAX_RECORD`] bytes.
const SPARE_RECORD: u64 = PAGE - MAX_RECORD;
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
    pub const SIZE: u64 = PAGE + BUFFER_SIZE + PAGE + TABLE_ENTRIES * 16 + CODE_SIZE;

    /// Scratch slot for the tracee's rax.
    pub fn save_rax(&self) -> u64 {
        self.base + SAVE_RAX
    }
    /// Scratch slot for the tracee's rbx (lookup routine).
    pub fn save_rbx(&self) -> u64 {
        self.base + SAVE_RBX
    }
    /// Scratch slot for the tracee's flags (lookup routine, `lahf`/`seto`).
    pub fn save_flags(&self) -> u64 {
        self.base + SAVE_FLAGS
    }
    /// The original target of the indirect transfer being looked up (read
    /// by the tracer on a miss).
    pub fn target(&self) -> u64 {
        self.base + TARGET
    }
    /// The translated target the lookup routine jumps through.
    pub fn jump(&self) -> u64 {
        self.base + JUMP
    }
    /// The address of the next free record.
    pub fn cursor(&self) -> u64 {
        self.base + CURSOR
    }
    /// Holds the table's address (for the lookup routine).
    pub fn table_base(&self) -> u64 {
        self.base + TABLE_BASE
    }
    /// One more scratch slot.
    pub fn temp(&self) -> u64 {
        self.base + TEMP
    }
    /// Scratch slot for the tracee's rax while a word is recorded.
    pub fn capture_rax(&self) -> u64 {
        self.base + CAPTURE_RAX
    }
    /// Scratch slot for the tracee's rbx while a word is recorded.
    pub fn capture_rbx(&self) -> u64 {
        self.base + CAPTURE_RBX
    }
    /// The address of the record of the block running in this region
    /// (set by each translation's prologue, read when it records a word).
    pub fn record(&self) -> u64 {
        self.base + RECORD
    }
    /// A record-sized area the tracer points [`Layout::record`] at after a
    /// drain: a block interrupted mid-way then records its remaining words
    /// there, not into the emptied buffer.
    pub fn spare_record(&self) -> u64 {
        self.base + SPARE_RECORD
    }
    /// First record.
    pub fn buffer(&self) -> u64 {
        self.base + PAGE
    }
    /// The guard page after the buffer.
    pub fn guard(&self) -> u64 {
        self.buffer() + BUFFER_SIZE
    }
    /// The indirect-branch table.
    pub fn table(&self) -> u64 {
        self.guard() + PAGE
    }
    /// The table entry for original address `target`.
    pub fn table_entry(&self, target: u64) -> u64 {
        self.table() + (target & (TABLE_ENTRIES - 1)) * 16
    }
    /// The injection gadget ([`GADGET`]).
    pub fn gadget(&self) -> u64 {
        self.table() + TABLE_ENTRIES * 16
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
    /// The code cache (after the system call filter).
    pub fn code(&self) -> u64 {
        self.syscall_filter() + SYSCALL_FILTER_SIZE
    }
    /// One past the code cache.
    pub fn end(&self) -> u64 {
        self.base + Self::SIZE
    }
}
